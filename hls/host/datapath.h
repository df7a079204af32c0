// The host model's specialised datapath (host builds only; never part of the HLS, OpenCL or RTL
// kernels).
//
// The kernel (csd_update.cpp) has one datapath for every optimizer and policy, selected per
// launch by masks, as the hardware has it (rules.h). The host model runs the same graph
// specialised at compile time: one loop per (optimizer, L2, policy, gradient dtype, copy dtype,
// and for SGD its first-step and Nesterov selects) that evaluates only the operations the
// launch's rule selects, in the same order, each the same binary32 operation, and streams every
// element from its load to its store in registers (gradient widened and copy narrowed in the
// same pass). Unselected operations cannot influence a selected result (selects only route
// values), so the two datapaths give the same bits; tests/datapath_test.cpp
// (SpecialisedDatapath.*) proves it on every configuration and special value, on each
// instruction set below.
//
// Instruction sets: the loops are compiled twice, for x86-64-v3 (AVX2, 256-bit vectors) and for
// x86-64-v4 (AVX-512, 512-bit vectors); the widest one the processor has is used. IEEE binary32
// +, -, *, /, sqrt are correctly rounded on every x86 vector unit, the fp16 conversions are the
// F16C instructions that define them, and the contract's NaN and subnormal handling is exact
// (compares, selects, bit masks), so the bits do not depend on the choice (the tests run both).
#ifndef CSDKIT_HLS_HOST_DATAPATH_H_
#define CSDKIT_HLS_HOST_DATAPATH_H_

#include <cstdint>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/rules.h"

namespace csdkit {
namespace hls {
namespace host {

/// Elements [0, len) of one launch (or of one tile of it), as the kernel's buffers hold them.
struct Span {
  uint32_t* theta = nullptr;
  uint32_t* m = nullptr;         // when the optimizer keeps m
  uint32_t* v = nullptr;         // when the optimizer keeps v
  const void* grad = nullptr;    // binary32 words (grad_type kFp32) or fp16/bf16 halves
  DType grad_type = DType::kFp32;
  uint16_t* out = nullptr;       // the low-precision copy (md.out), else unused
  uint32_t len = 0;
};

/// Updates the span with the datapath specialised for `md` (a mode DecodeMode accepted; its
/// sparse bit is ignored: the span's gradient is dense) and the launch's controls `c`, which
/// MakeRuleCtl built from `md` (the loop is chosen by md and by c's select signals: for SGD,
/// mom_pass and nesterov; s.m is present exactly when UsesM(md)).
void Update(const Mode& md, const RuleCtl& c, const Span& s);

/// The instruction sets the specialised loops are built for.
enum class Isa : uint32_t { kAvx2 = 0, kAvx512 = 1 };

/// Whether this processor runs the AVX-512 build (AVX-512 F, BW, DQ, VL).
bool HasAvx512();
/// The instruction set Update uses: the widest available unless SetIsa chose one.
Isa ActiveIsa();
/// Chooses the instruction set (tests, benchmarks). Returns false, changing nothing, when the
/// processor lacks it.
bool SetIsa(Isa isa);
const char* IsaName(Isa isa);

}  // namespace host
}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_HOST_DATAPATH_H_
