// The argument table of the test kernel `csd_axi_copy` (rtl/axi/tb/csd_axi_copy_kernel.sv): copies
// n_words 512-bit words from src (gmem0) to dst (gmem1). Same X-macro format and Vitis layout
// as the table of csd_update (hls/include/csdkit/hls/update_args.h); the RTL offsets and the
// kernel's top csd_axi_copy_top (its m_axi bundles) are generated from it
// (rtl/gen/gen_args_pkg.cpp) and the bench sets arguments by name through it.
//
// X(index, name, C type, kind, direction, m_axi bundle, offset, description)
#ifndef CSDKIT_RTL_AXI_TB_CSD_AXI_COPY_ARGS_H_
#define CSDKIT_RTL_AXI_TB_CSD_AXI_COPY_ARGS_H_

#include "csdkit/hls/update_args.h"

#define CSDKIT_COPY_ARGS(X)                                                     \
  X(0, src, const Word*, kPtr, kIn, "gmem0", 0x10, "words to read")             \
  X(1, dst, Word*, kPtr, kOut, "gmem1", 0x1c, "words to write")                 \
  X(2, n_words, uint32_t, kScalar, kIn, "", 0x28, "512-bit words to copy")

namespace csdkit {
namespace axi_tb {

constexpr const char* kCopyKernelName = "csd_axi_copy";

#define CSDKIT_COPY_ARG_INFO(i, nm, ty, kd, dr, bd, off, doc)                            \
  ::csdkit::hls::ArgInfo{i,   #nm, ::csdkit::hls::ArgKind::kd, ::csdkit::hls::ArgDir::dr, \
                         bd,  off,                                                        \
                         ::csdkit::hls::ArgKind::kd == ::csdkit::hls::ArgKind::kPtr ? 8u : 4u, doc},
constexpr ::csdkit::hls::ArgInfo kCopyArgs[] = {CSDKIT_COPY_ARGS(CSDKIT_COPY_ARG_INFO)};
#undef CSDKIT_COPY_ARG_INFO
constexpr unsigned kNumCopyArgs = sizeof(kCopyArgs) / sizeof(kCopyArgs[0]);

}  // namespace axi_tb
}  // namespace csdkit

#endif  // CSDKIT_RTL_AXI_TB_CSD_AXI_COPY_ARGS_H_
