#include "csdkit/platform/update_launch.h"

#include "csd_update.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/aligned_buffer.h"

namespace csdkit {

namespace {

// Calls the kernel top with the launch's fields in table order (the leading tag absorbs the
// comma the X-macro puts before each field).
template <typename... A>
void CallTop(HostDatapath dp, detail::FirstArg, A... a) {
  if (dp == HostDatapath::kGeneral) {
    csd_update_general(a...);
  } else {
    csd_update(a...);
  }
}

}  // namespace

uint64_t UpdateFootprint::total() const {
  uint64_t t = 0;
  for (uint64_t b : bytes) t += b;
  return t;
}

UpdateFootprint LaunchFootprint(uint32_t mode, uint32_t n, uint32_t nnz) {
  hls::Mode md{};
  const bool ok = hls::DecodeMode(mode, &md);
  const bool sparse = ok && md.sparse;
  const uint64_t eb = ok ? DTypeBytes(md.grad) : 4;
  auto words = [](uint64_t count, unsigned elem_bytes) {
    return hls::WordsFor(count, elem_bytes) * hls::kWordBytes;
  };
  // q8: theta binary32 or bf16, a moment one code per element and one absmax per block.
  const bool q8 = ok && hls::IsQ8(md.state);
  const unsigned theta_bytes = ok && md.state == hls::StateFmt::kQ8Bf16 ? 2 : 4;
  const uint64_t blocks = (static_cast<uint64_t>(n) + hls::kQ8Block - 1) / hls::kQ8Block;
  UpdateLaunch<uint64_t> f;
  f.theta = words(n, theta_bytes);
  f.m = ok && hls::UsesM(md) ? (q8 ? words(n, 1) : words(n, 4)) : 0;
  f.v = ok && hls::UsesV(md) ? (q8 ? words(n, 1) : words(n, 4)) : 0;
  f.m_absmax = q8 && hls::UsesM(md) ? words(blocks, 4) : 0;
  f.v_absmax = q8 && hls::UsesV(md) ? words(blocks, 4) : 0;
  f.grad = sparse ? hls::WordsFor(nnz, static_cast<unsigned>(eb)) * hls::kWordBytes
                  : hls::WordsFor(n, static_cast<unsigned>(eb)) * hls::kWordBytes;
  f.sp_idx = sparse ? words(nnz, 2) : 0;
  f.sp_blk = sparse ? words(hls::NumBlocks(n) + 1ull, 4) : 0;
  f.out16 = ok && md.out != DType::kFp32 ? words(n, 2) : 0;
  f.status = hls::kWordBytes;
  UpdateFootprint r;
  f.ForEachBuffer([&](const hls::ArgInfo& a, uint64_t b) { r.bytes[a.index] = b; });
  return r;
}

uint64_t LaunchMemoryTraffic(uint32_t mode, uint32_t n, uint32_t nnz) {
  hls::Mode md{};
  const bool ok = hls::DecodeMode(mode, &md);
  const uint64_t eb = ok ? DTypeBytes(md.grad) : 4;
  // State read and written: binary32 (8 bytes per element and array), bf16 theta (4), a q8
  // moment's codes (2) and absmax (8 per block).
  const bool q8 = ok && hls::IsQ8(md.state);
  const uint64_t moment = q8 ? 2ull * n + 8ull * ((n + hls::kQ8Block - 1) / hls::kQ8Block)
                             : 8ull * n;
  uint64_t bytes = (ok && md.state == hls::StateFmt::kQ8Bf16 ? 4ull : 8ull) * n;
  if (ok && hls::UsesM(md)) bytes += moment;
  if (ok && hls::UsesV(md)) bytes += moment;
  bytes += ok && md.sparse ? (2 + eb) * static_cast<uint64_t>(nnz) : eb * n;
  if (ok && md.out != DType::kFp32) bytes += 2ull * n;
  return bytes;
}

uint32_t InvokeUpdate(const UpdateLaunch<hls::Word*>& l, HostDatapath datapath) {
#define CSDKIT_LAUNCH_ARG(i, nm, ty, kd, dr, bd, off, doc) , l.nm
  CallTop(datapath, detail::FirstArg{} CSDKIT_UPDATE_ARGS(CSDKIT_LAUNCH_ARG));
#undef CSDKIT_LAUNCH_ARG
  return reinterpret_cast<const uint32_t*>(l.status)[hls::kStatusError];
}

UpdateLaunch<hls::Word*> WordsOf(UpdateLaunch<AlignedBuffer>& l) {
  return l.Map<hls::Word*>([](const hls::ArgInfo&, const AlignedBuffer& b) {
    return const_cast<hls::Word*>(b.words());
  });
}

}  // namespace csdkit
