#include "csdkit/platform/update_launch.h"

#include "csd_update.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
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
  UpdateLaunch<uint64_t> f;
  f.theta = words(n, 4);
  f.m = ok && hls::UsesM(md) ? words(n, 4) : 0;
  f.v = ok && hls::UsesV(md) ? words(n, 4) : 0;
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
  uint64_t bytes = 8ull * n;  // theta read and written
  if (ok && hls::UsesM(md)) bytes += 8ull * n;
  if (ok && hls::UsesV(md)) bytes += 8ull * n;
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
