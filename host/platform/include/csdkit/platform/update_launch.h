// One launch of the updater kernel csd_update as a type, derived from THE ARGUMENT TABLE
// (hls/include/csdkit/hls/update_args.h): the 10 buffers and 19 scalars of the table, in its
// order, with the buffer kind as a parameter —
//
//   UpdateLaunch<AlignedBuffer>    host arrays (generated problems, the baseline's buffers)
//   UpdateLaunch<DeviceBufferPtr>  device buffers (what Device::LaunchUpdate takes)
//   UpdateLaunch<hls::Word*>       raw word pointers (what the kernel top takes)
//   UpdateLaunch<uint64_t>         device addresses (what the RTL's control registers take)
//
// plus a for-each over the arguments, the one buffer-footprint function of (mode, n, nnz) and the
// one way to call the kernel top with a launch. Nothing here restates the table.
#ifndef CSDKIT_PLATFORM_UPDATE_LAUNCH_H_
#define CSDKIT_PLATFORM_UPDATE_LAUNCH_H_

#include <array>
#include <cstdint>
#include <type_traits>

#include "csdkit/hls/update_args.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"

namespace csdkit {

/// Number of buffer (pointer) arguments of the table, and their position among the buffers.
#define CSDKIT_COUNT_PTR_kPtr 1u +
#define CSDKIT_COUNT_PTR_kScalar
#define CSDKIT_COUNT_PTR(i, nm, ty, kd, dr, bd, off, doc) CSDKIT_COUNT_PTR_##kd
constexpr unsigned kNumUpdateBuffers = CSDKIT_UPDATE_ARGS(CSDKIT_COUNT_PTR) 0u;
#undef CSDKIT_COUNT_PTR
constexpr unsigned kNumUpdateScalars = hls::kNumUpdateArgs - kNumUpdateBuffers;
// Buffers come first in the table; the for-each below relies on it only for BufferIndex().
constexpr bool BuffersFirst() {
  for (unsigned i = 0; i < hls::kNumUpdateArgs; ++i)
    if ((hls::kUpdateArgs[i].kind == hls::ArgKind::kPtr) != (i < kNumUpdateBuffers)) return false;
  return true;
}
static_assert(BuffersFirst(), "the argument table lists its buffers before its scalars");

/// The table index of each argument by name: update_arg::theta ... update_arg::index_hi.
namespace update_arg {
#define CSDKIT_ARG_INDEX(i, nm, ty, kd, dr, bd, off, doc) nm = i,
enum : unsigned { CSDKIT_UPDATE_ARGS(CSDKIT_ARG_INDEX) };
#undef CSDKIT_ARG_INDEX
}  // namespace update_arg

namespace detail {
template <hls::ArgKind K, typename B>
struct ArgField {
  using type = B;
};
template <typename B>
struct ArgField<hls::ArgKind::kScalar, B> {
  using type = uint32_t;
};
struct FirstArg {};
}  // namespace detail

/// The arguments of one csd_update launch: a field per row of the table, named as the table
/// names it (theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax: type B; n,
/// nnz, mode, unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo, seed_hi,
/// step_lo, step_hi, index_lo, index_hi: uint32_t). Scalars start at 0.
template <typename B>
struct UpdateLaunch {
#define CSDKIT_LAUNCH_FIELD(i, nm, ty, kd, dr, bd, off, doc) \
  typename detail::ArgField<hls::ArgKind::kd, B>::type nm{};
  CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_FIELD)
#undef CSDKIT_LAUNCH_FIELD

  /// Calls f(const hls::ArgInfo&, field&) for every argument in table order (buffers as B&,
  /// scalars as uint32_t&).
  template <typename F>
  void ForEachArg(F&& f) {
#define CSDKIT_LAUNCH_VISIT(i, nm, ty, kd, dr, bd, off, doc) f(hls::kUpdateArgs[i], nm);
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT)
  }
  template <typename F>
  void ForEachArg(F&& f) const {
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT)
#undef CSDKIT_LAUNCH_VISIT
  }

  /// Calls f(const hls::ArgInfo&, B&) for every buffer argument in table order.
#define CSDKIT_LAUNCH_VISIT_kPtr(i, nm) f(hls::kUpdateArgs[i], nm);
#define CSDKIT_LAUNCH_VISIT_kScalar(i, nm)
#define CSDKIT_LAUNCH_VISIT_BUF(i, nm, ty, kd, dr, bd, off, doc) CSDKIT_LAUNCH_VISIT_##kd(i, nm)
  template <typename F>
  void ForEachBuffer(F&& f) {
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT_BUF)
  }
  template <typename F>
  void ForEachBuffer(F&& f) const {
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT_BUF)
  }
#undef CSDKIT_LAUNCH_VISIT_BUF
#undef CSDKIT_LAUNCH_VISIT_kPtr
#undef CSDKIT_LAUNCH_VISIT_kScalar

  /// Calls f(const hls::ArgInfo&, uint32_t&) for every scalar argument in table order.
#define CSDKIT_LAUNCH_VISIT_kPtr(i, nm)
#define CSDKIT_LAUNCH_VISIT_kScalar(i, nm) f(hls::kUpdateArgs[i], nm);
#define CSDKIT_LAUNCH_VISIT_SC(i, nm, ty, kd, dr, bd, off, doc) CSDKIT_LAUNCH_VISIT_##kd(i, nm)
  template <typename F>
  void ForEachScalar(F&& f) {
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT_SC)
  }
  template <typename F>
  void ForEachScalar(F&& f) const {
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_VISIT_SC)
  }
#undef CSDKIT_LAUNCH_VISIT_SC
#undef CSDKIT_LAUNCH_VISIT_kPtr
#undef CSDKIT_LAUNCH_VISIT_kScalar

  /// The same launch over another buffer kind: scalars copied, buffer i = f(info, this buffer).
  template <typename B2, typename F>
  UpdateLaunch<B2> Map(F&& f) const {
    UpdateLaunch<B2> r;
#define CSDKIT_LAUNCH_MAP_kPtr(i, nm) r.nm = f(hls::kUpdateArgs[i], nm);
#define CSDKIT_LAUNCH_MAP_kScalar(i, nm) r.nm = nm;
#define CSDKIT_LAUNCH_MAP(i, nm, ty, kd, dr, bd, off, doc) CSDKIT_LAUNCH_MAP_##kd(i, nm)
    CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_MAP)
#undef CSDKIT_LAUNCH_MAP
#undef CSDKIT_LAUNCH_MAP_kPtr
#undef CSDKIT_LAUNCH_MAP_kScalar
    return r;
  }

  /// A deep copy (for buffer kinds with Clone(), e.g. AlignedBuffer).
  UpdateLaunch Clone() const {
    return Map<B>([](const hls::ArgInfo&, const B& b) { return b.Clone(); });
  }

  /// Sets the sizes, the mode word and the operands.
  void SetScalars(uint32_t elems, uint32_t entries, const KernelLaunch& k) {
    n = elems;
    nnz = entries;
    mode = k.mode;
    unscale = k.scalars.unscale;
    lr = k.scalars.lr;
    beta1 = k.scalars.beta1;
    omb1 = k.scalars.omb1;
    beta2 = k.scalars.beta2;
    omb2 = k.scalars.omb2;
    eps = k.scalars.eps;
    wd = k.scalars.wd;
    c1 = k.scalars.c1;
    c2 = k.scalars.c2;
  }

  /// Sets the stochastic rounding's operands of a q8-bf16 launch (docs/state-formats.md): the
  /// store's seed, the step being committed and the store index of the launch's element 0.
  void SetRandomKey(uint64_t seed, uint64_t step, uint64_t index) {
    seed_lo = static_cast<uint32_t>(seed);
    seed_hi = static_cast<uint32_t>(seed >> 32);
    step_lo = static_cast<uint32_t>(step);
    step_hi = static_cast<uint32_t>(step >> 32);
    index_lo = static_cast<uint32_t>(index);
    index_hi = static_cast<uint32_t>(index >> 32);
  }
};

/// Bytes of each buffer a launch reads or writes, in table order (whole 512-bit words; 0 for a
/// buffer the launch does not touch). A buffer given to a launch must be at least this large.
struct UpdateFootprint {
  std::array<uint64_t, kNumUpdateBuffers> bytes{};
  uint64_t operator[](unsigned buffer) const { return bytes[buffer]; }
  uint64_t total() const;
};

/// The footprint of a launch with this mode word, element count and sparse entry count. An
/// invalid mode word touches theta, a 4-byte-per-element gradient and the status word (the
/// kernel then writes only the status word). THE one place buffer sizes are computed.
UpdateFootprint LaunchFootprint(uint32_t mode, uint32_t n, uint32_t nnz);

/// Bytes the launch streams through device memory (state read and written, the gradient or
/// the sparse stream read, the low-precision copy written), unrounded: what the link model
/// books for a kernel.
uint64_t LaunchMemoryTraffic(uint32_t mode, uint32_t n, uint32_t nnz);

/// Which datapath of the host model runs a launch: the one specialised per launch
/// configuration (csd_update, the default) or the one runtime-selected datapath the HLS, RTL and
/// OpenCL builds have (csd_update_general). Both give the same bits.
enum class HostDatapath { kSpecialised, kGeneral };

/// Runs the kernel top (the host model) on a launch; returns the status word's error bits.
uint32_t InvokeUpdate(const UpdateLaunch<hls::Word*>& l,
                      HostDatapath datapath = HostDatapath::kSpecialised);

/// Word pointers of host arrays (a launch over AlignedBuffer -> one over hls::Word*).
UpdateLaunch<hls::Word*> WordsOf(UpdateLaunch<AlignedBuffer>& l);

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_UPDATE_LAUNCH_H_
