// Writes fuzz_sparse's seed corpus (tests/fuzz/corpus/sparse): streams made by the kit's own
// encoders — CompressTopK on seeded dense gradients, EncodeSparse on hand-picked indices at the
// block boundaries — in the harness's input layout (sparse_input.h), plus a few copies broken in
// one place each so every error the validator reports starts out covered.
//
//   make_sparse_seeds DIR      (DIR must exist; files are overwritten)
//
// Deterministic: the same build writes the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "csdkit/hls/fp16.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/platform/splitmix.h"
#include "sparse_input.h"

namespace {

using csdkit::DType;
using csdkit::SparseGrad;

std::string g_dir;
int g_written = 0;

void Write(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = g_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "make_sparse_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  ++g_written;
}

/// A dense gradient of n elements: uniform in [-1, 1), with a NaN, an infinity and a subnormal
/// when n allows, so Top-K's ranking of special values shows in the stream.
std::vector<uint8_t> Dense(uint32_t n, DType t, uint64_t seed) {
  csdkit::SplitMix64 rng{seed};
  const unsigned eb = csdkit::DTypeBytes(t);
  std::vector<uint8_t> d(size_t{n} * eb);
  for (uint32_t i = 0; i < n; ++i) {
    const float f = rng.Uniform(-1.0, 1.0);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (t == DType::kFp32) {
      std::memcpy(&d[size_t{i} * 4], &bits, 4);
    } else {
      const uint16_t h =
          t == DType::kFp16 ? csdkit::hls::F32ToF16(bits) : static_cast<uint16_t>(bits >> 16);
      std::memcpy(&d[size_t{i} * 2], &h, 2);
    }
  }
  if (n >= 3) {
    const uint32_t specials[3][2] = {{0x7fc00000u, t == DType::kFp16 ? 0x7e00u : 0x7fc0u},  // NaN
                                     {0xff800000u, t == DType::kFp16 ? 0xfc00u : 0xff80u},  // -inf
                                     {0x00000001u, 0x0001u}};  // smallest subnormal
    for (int j = 0; j < 3; ++j) {
      const uint32_t at = static_cast<uint32_t>(rng.Next() % n);
      if (t == DType::kFp32) {
        std::memcpy(&d[size_t{at} * 4], &specials[j][0], 4);
      } else {
        const uint16_t h = static_cast<uint16_t>(specials[j][1]);
        std::memcpy(&d[size_t{at} * 2], &h, 2);
      }
    }
  }
  return d;
}

const char* Name(DType t) { return csdkit::DTypeName(t); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_sparse_seeds DIR\n");
    return 2;
  }
  g_dir = argv[1];
  using csdkit::fuzz::ToInput;
  constexpr uint32_t kB = csdkit::hls::kBlockElems;

  // Top-K streams: one block, a partial second block, several blocks, the harness's largest n.
  struct TopK {
    uint32_t n;
    DType t;
    double ratio;
  };
  const TopK topk[] = {
      {1, DType::kFp32, 1.0},        {1000, DType::kFp32, 0.05},
      {4097, DType::kBf16, 0.01},    {kB, DType::kFp16, 0.01},
      {kB + 1, DType::kBf16, 0.002}, {3 * kB + 4711, DType::kFp32, 0.004},
      {4 * kB, DType::kFp16, 0.002}, {2 * kB, DType::kBf16, 0.0001},
  };
  uint64_t seed = 1;
  std::vector<uint8_t> keep;        // a multi-block stream, broken below
  std::vector<uint8_t> keep_small;  // one the harness also launches on the kernel (n <= 69632)
  unsigned launch = 0;              // the optimizer the harness launches the kernel with, in turn
  for (const TopK& c : topk) {
    const std::vector<uint8_t> dense = Dense(c.n, c.t, seed++);
    const SparseGrad s = csdkit::CompressTopK(dense.data(), c.t, c.n, c.ratio);
    const auto opt = static_cast<csdkit::Optimizer>(launch++ % csdkit::hls::kNumOptimizers);
    const std::vector<uint8_t> in = ToInput(s, opt);
    Write("topk_" + std::string(Name(c.t)) + "_n" + std::to_string(c.n) + "_nnz" +
              std::to_string(s.nnz) + "_" + csdkit::OptimizerName(opt),
          in);
    if (c.n == 3 * kB + 4711) keep = in;
    if (c.n == kB + 1) keep_small = in;
  }

  // Hand-picked indices at the edges of every block, and the empty stream.
  {
    const uint32_t n = 3 * kB + 5;
    const std::vector<uint32_t> idx = {0, 1, kB - 1, kB, 2 * kB - 1, 2 * kB, 3 * kB, n - 1};
    std::vector<uint32_t> vals(idx.size());
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = 0x3f800000u + static_cast<uint32_t>(i);
    Write("edges_fp32_n" + std::to_string(n) + "_sgd",
          ToInput(csdkit::EncodeSparse(n, DType::kFp32, idx.data(), vals.data(),
                                       static_cast<uint32_t>(idx.size())),
                  csdkit::Optimizer::kSgd));
    // A block with no entries between two that have some.
    const std::vector<uint32_t> gap = {5, 2 * kB + 7};
    const uint16_t hv[2] = {0x3c00u, 0xbc00u};
    Write("gap_fp16_n" + std::to_string(n) + "_lion",
          ToInput(csdkit::EncodeSparse(n, DType::kFp16, gap.data(), hv, 2),
                  csdkit::Optimizer::kLion));
    Write("empty_n0", ToInput(csdkit::EncodeSparse(0, DType::kFp32, nullptr, nullptr, 0)));
    Write("zero_nnz_bf16_n" + std::to_string(kB + 3),
          ToInput(csdkit::EncodeSparse(kB + 3, DType::kBf16, nullptr, nullptr, 0)));
  }

  // Broken copies of one multi-block stream, one rule each. Offsets into the input: 7 header
  // bytes, then blk[0..nb], then the indices.
  {
    const size_t blk0 = csdkit::fuzz::kHeaderBytes;
    const uint32_t nb = csdkit::hls::NumBlocks(3 * kB + 4711);
    const size_t idx0 = blk0 + (size_t{nb} + 1) * 4;
    auto u32 = [](std::vector<uint8_t>& v, size_t at, uint32_t x) { std::memcpy(&v[at], &x, 4); };
    auto u16 = [](std::vector<uint8_t>& v, size_t at, uint16_t x) { std::memcpy(&v[at], &x, 2); };
    uint16_t first = 0, second = 0;
    std::memcpy(&first, &keep[idx0], 2);
    std::memcpy(&second, &keep[idx0 + 2], 2);
    std::vector<uint8_t> v;
    v = keep;
    u32(v, blk0, 1);  // blk[0] != 0
    Write("bad_blk0", v);
    v = keep;
    u32(v, blk0 + 4 * 2, 0);  // blk[2] below blk[1]
    Write("bad_blk_decreasing", v);
    v = keep;
    u32(v, blk0 + 4 * nb, 0x7fffffffu);  // blk[nb] != nnz
    Write("bad_count", v);
    v = keep;
    u16(v, idx0 + 2, first);  // entry 1 repeats entry 0
    Write("bad_duplicate", v);
    v = keep;
    u16(v, idx0, second);  // entry 0 above entry 1
    u16(v, idx0 + 2, first);
    Write("bad_unsorted", v);
    v = keep;
    {
      // An offset equal to the size of the last, partial block (4711 elements); only full
      // blocks exist before it, where every uint16 offset is in range.
      uint32_t last_start = 0, total = 0;
      std::memcpy(&last_start, &keep[blk0 + 4 * (nb - 1)], 4);
      std::memcpy(&total, &keep[blk0 + 4 * nb], 4);
      if (total == last_start) {
        std::fprintf(stderr, "make_sparse_seeds: the last block has no entry to break\n");
        return 1;
      }
      u16(v, idx0 + 2 * size_t{last_start}, 4711);
    }
    Write("bad_out_of_range", v);
  }
  // A repeated offset in a stream short enough for the harness's kernel launches: the kernel
  // must refuse it and write nothing but its status word.
  {
    std::vector<uint8_t> v = keep_small;
    const size_t idx0 =
        csdkit::fuzz::kHeaderBytes + (size_t{csdkit::hls::NumBlocks(kB + 1)} + 1) * 4;
    std::memcpy(&v[idx0 + 2], &v[idx0], 2);
    Write("bad_duplicate_n" + std::to_string(kB + 1) + "_lion", v);
  }
  // A value buffer half as long as nnz needs. Buffers are whole 4 KiB pages, so the shortage
  // shows only past one page: 1311 fp32 values need 5244 bytes and get 4096.
  {
    const std::vector<uint8_t> dense = Dense(kB, DType::kFp32, 99);
    std::vector<uint8_t> v = ToInput(csdkit::CompressTopK(dense.data(), DType::kFp32, kB, 0.02));
    v[0] |= 3u << 2;
    Write("bad_short_val", v);
  }
  std::printf("make_sparse_seeds: %d files in %s\n", g_written, g_dir.c_str());
  return 0;
}
