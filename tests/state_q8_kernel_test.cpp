// The kernel top on the compressed state formats (q8, q8-bf16; docs/state-formats.md) against a
// plain composition: dequantize every element (state_q8.h, itself checked against the numpy
// reference's golden vectors), the textbook binary32 reference loop of reference.h, then
// quantize block by block, round theta stochastically with the element's Philox bits, and
// recompute every status lane from the bytes (zlib's crc32 over the codes and then the absmax
// values of a moment, a plain count). Bit for bit on every
// buffer over every optimizer variant x gradient dtype x low-precision copy x dense/sparse x
// IEEE/FTZ, on both host datapaths (the specialised one on each instruction set the processor
// has), sizes of one block to more than a sparse block (below, at and past the specialised
// datapath's chunk), with and without special values; then non-finite values placed at the
// chunk and block boundaries, and a stochastic-rounding counter whose low word wraps. Then the
// refusals: n or the element index not whole blocks, an fp16 copy of bf16 weights.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/update_launch.h"
#include "datapath.h"
#include "reference.h"
#include "test_util.h"

namespace csdkit::testing {
namespace {

using hls::F2U;
using hls::U2F;
constexpr uint32_t kBlock = hls::kQ8Block;

// zlib's CRC-32 continued over `bytes` bytes.
uint32_t Crc(uint32_t crc, const void* p, size_t bytes) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(p), bytes));
}

// The plain q8 step: `b` holds the launch's buffers in its format; they become the expected
// outputs (status word included).
void ReferenceUpdateQ8(const Problem& p, UpdateBuffers& b) {
  hls::Mode md{};
  ASSERT_TRUE(hls::DecodeMode(p.launch.mode, &md));
  const uint32_t n = p.spec.n;
  const uint32_t blocks = n / kBlock;
  const bool bf16 = md.state == hls::StateFmt::kQ8Bf16;
  const bool has_m = hls::UsesM(md), has_v = hls::UsesV(md);
  const hls::Fp32 f(md.ftz);

  // CRCs as read: theta's bytes; a moment's codes followed by its absmax values.
  auto moment_crc = [&](const AlignedBuffer& codes, const AlignedBuffer& amax) {
    return Crc(Crc(Crc(0, nullptr, 0), codes.data(), n), amax.data(), size_t{blocks} * 4);
  };
  const size_t theta_bytes = size_t{n} * (bf16 ? 2 : 4);
  const uint32_t crc_in[3] = {Crc(Crc(0, nullptr, 0), b.theta.data(), theta_bytes),
                              has_m ? moment_crc(b.m, b.m_absmax) : 0u,
                              has_v ? moment_crc(b.v, b.v_absmax) : 0u};

  // Dequantize into a binary32 launch of the same optimizer and run the textbook loop on it.
  Problem p32;
  p32.spec = p.spec;
  p32.launch = p.launch;
  p32.nnz = p.nnz;
  hls::Mode m32 = md;
  m32.state = hls::StateFmt::kFp32;
  m32.out = DType::kFp32;
  p32.launch.mode = hls::EncodeMode(m32);
  UpdateBuffers w;
  w.theta = AlignedBuffer(size_t{n} * 4 + hls::kWordBytes);
  w.m = AlignedBuffer(size_t{n} * 4 + hls::kWordBytes);
  w.v = AlignedBuffer(size_t{n} * 4 + hls::kWordBytes);
  w.grad = b.grad.Clone();
  w.sp_idx = b.sp_idx.Clone();
  w.sp_blk = b.sp_blk.Clone();
  w.out16 = AlignedBuffer(hls::kWordBytes);
  w.status = AlignedBuffer(hls::kWordBytes);
  for (uint32_t i = 0; i < n; ++i) {
    w.theta.as<uint32_t>()[i] =
        bf16 ? static_cast<uint32_t>(b.theta.as<uint16_t>()[i]) << 16 : b.theta.as<uint32_t>()[i];
    const uint32_t k = i / kBlock;
    if (has_m) {
      w.m.as<float>()[i] =
          hls::DequantQ8(b.m.as<uint8_t>()[i], b.m_absmax.as<float>()[k], true, f);
    }
    if (has_v) {
      w.v.as<float>()[i] =
          hls::DequantQ8(b.v.as<uint8_t>()[i], b.v_absmax.as<float>()[k], false, f);
    }
  }
  ReferenceUpdate(p32, w);

  // Store: theta, the moments block by block, the copy; count what reads back non-finite.
  const uint64_t seed = (static_cast<uint64_t>(b.seed_hi) << 32) | b.seed_lo;
  const uint64_t step = (static_cast<uint64_t>(b.step_hi) << 32) | b.step_lo;
  const uint64_t index0 = (static_cast<uint64_t>(b.index_hi) << 32) | b.index_lo;
  std::vector<bool> bad(n, false);
  uint64_t nonfinite = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const float t = w.theta.as<float>()[i];
    uint32_t stored = F2U(t);
    if (bf16) {
      const uint16_t h = hls::RoundBf16Stochastic(t, hls::Random16(seed, step, index0 + i));
      b.theta.as<uint16_t>()[i] = h;
      stored = static_cast<uint32_t>(h) << 16;
    } else {
      b.theta.as<uint32_t>()[i] = stored;
    }
    if (hls::IsNonFinite(stored)) {
      bad[i] = true;
      ++nonfinite;
    }
    if (md.out == DType::kBf16) {
      b.out16.as<uint16_t>()[i] = bf16 ? static_cast<uint16_t>(stored >> 16) : hls::F32ToBf16(stored);
    }
    if (md.out == DType::kFp16) b.out16.as<uint16_t>()[i] = hls::F32ToF16(stored);
  }
  for (unsigned a = 0; a < 2; ++a) {
    if (!(a == 0 ? has_m : has_v)) continue;
    const float* x = (a == 0 ? w.m : w.v).as<float>();
    uint8_t* codes = (a == 0 ? b.m : b.v).as<uint8_t>();
    float* amax = (a == 0 ? b.m_absmax : b.v_absmax).as<float>();
    for (uint32_t k = 0; k < blocks; ++k) {
      hls::QuantizeBlockQ8(x + size_t{k} * kBlock, kBlock, a == 0, f, codes + size_t{k} * kBlock,
                           &amax[k]);
      if (hls::IsNonFinite(F2U(amax[k]))) {
        nonfinite += kBlock;
        for (uint32_t i = 0; i < kBlock; ++i) bad[size_t{k} * kBlock + i] = true;
      }
    }
  }
  uint32_t first = hls::kStatusNoPosition;
  for (uint32_t i = 0; i < n && first == hls::kStatusNoPosition; ++i) {
    if (bad[i]) first = i;
  }
  uint32_t* st = b.status.as<uint32_t>();
  std::memset(st, 0, hls::kWordBytes);
  st[hls::kStatusElems] = n;
  st[hls::kStatusNnz] = md.sparse ? p.nnz : 0u;
  st[hls::kStatusCrcThetaIn] = crc_in[0];
  st[hls::kStatusCrcMIn] = crc_in[1];
  st[hls::kStatusCrcVIn] = crc_in[2];
  st[hls::kStatusCrcThetaOut] = Crc(Crc(0, nullptr, 0), b.theta.data(), theta_bytes);
  st[hls::kStatusCrcMOut] = has_m ? moment_crc(b.m, b.m_absmax) : 0u;
  st[hls::kStatusCrcVOut] = has_v ? moment_crc(b.v, b.v_absmax) : 0u;
  st[hls::kStatusNonFinite] =
      nonfinite > 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(nonfinite);
  st[hls::kStatusNonFinitePos] = first;
  st[hls::kStatusMagic] = hls::kStatusMagicValue;
}

// Sizes: one block, a tile and a block, 65 blocks (a partial absmax word; for the specialised
// datapath, eight chunks of kQ8Chunk and one block); and, for the sparse launches with no copy
// under IEEE (an eighth of the configurations, for time), past a sparse block (65536) with a
// partial absmax word.
constexpr uint32_t kSizes[] = {256, 1280, 16640};
constexpr uint32_t kLargeSize = 66304;
static_assert(16640 % hls::host::kQ8Chunk == kBlock, "a size of whole chunks and one block");

// The datapaths to run: the specialised one on each instruction set the processor has (AVX2,
// AVX-512), then the general one.
struct Path {
  HostDatapath dp;
  hls::host::Isa isa;
  bool vbmi;  // the 512-bit build's VBMI dequantization
  const char* name;
};
std::vector<Path> Paths() {
  std::vector<Path> r;
  if (hls::host::HasVbmi()) {
    r.push_back({HostDatapath::kSpecialised, hls::host::Isa::kAvx512, true,
                 "specialised avx512 vbmi"});
  }
  if (hls::host::HasAvx512()) {
    r.push_back({HostDatapath::kSpecialised, hls::host::Isa::kAvx512, false, "specialised avx512"});
  }
  r.push_back({HostDatapath::kSpecialised, hls::host::Isa::kAvx2, false, "specialised avx2"});
  r.push_back({HostDatapath::kGeneral, hls::host::Isa::kAvx2, false, "general"});
  return r;
}

// Runs the launch `in` on every path and compares every buffer with `exp`; ctx names the case.
void CheckPaths(const Problem& p, const UpdateBuffers& in, const UpdateBuffers& exp,
                const std::string& ctx0) {
  const uint32_t n = p.spec.n;
  const bool bf16 = p.spec.grad.state == hls::StateFmt::kQ8Bf16;
  for (const Path& path : Paths()) {
    ASSERT_TRUE(hls::host::SetIsa(path.isa));
    ASSERT_TRUE(hls::host::SetVbmi(path.vbmi));
    UpdateBuffers got = in.Clone();
    got.SetScalars(n, p.nnz, p.launch);
    const uint32_t err = InvokeUpdate(WordsOf(got), path.dp);
    hls::host::SetIsa(hls::host::HasAvx512() ? hls::host::Isa::kAvx512 : hls::host::Isa::kAvx2);
    hls::host::SetVbmi(hls::host::HasVbmi());
    ASSERT_EQ(err, 0u) << "kernel reported error 0x" << std::hex << err;
    const std::string ctx = ctx0 + " " + path.name;
    const struct {
      const char* name;
      const AlignedBuffer* e;
      const AlignedBuffer* a;
      unsigned eb;
    } bufs[] = {{"theta", &exp.theta, &got.theta, bf16 ? 2u : 4u},
                {"m", &exp.m, &got.m, 1},
                {"m_absmax", &exp.m_absmax, &got.m_absmax, 4},
                {"v", &exp.v, &got.v, 1},
                {"v_absmax", &exp.v_absmax, &got.v_absmax, 4},
                {"out16", &exp.out16, &got.out16, 2},
                {"status", &exp.status, &got.status, 4}};
    for (const auto& c : bufs) {
      const std::string r = CompareBuffers(c.name, *c.e, *c.a, c.eb, ctx);
      if (!r.empty()) {
        uint64_t i = 0;  // the first differing element, and its inputs
        while (std::memcmp(c.e->data() + i * c.eb, c.a->data() + i * c.eb, c.eb) == 0) ++i;
        const uint64_t elem =
            std::string(c.name).find("absmax") != std::string::npos ? i * kBlock : i;
        ADD_FAILURE() << r << "\n  element " << std::dec << elem << ": "
                      << DescribeInputs(p, in, elem);
      }
    }
    EXPECT_TRUE(in.grad.SameBytes(got.grad)) << ctx;
    if (::testing::Test::HasFailure()) return;
  }
}

// The problem's expected outputs, with canaries: the copy's lanes past n are zero, the absmax
// words' lanes past the last block are left as they were.
void Expect(Problem& p, UpdateBuffers* in, UpdateBuffers* exp) {
  const uint32_t n = p.spec.n;
  std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());
  for (AlignedBuffer* a : {&p.buf.m_absmax, &p.buf.v_absmax}) {
    for (uint64_t i = n / kBlock; i < a->size() / 4; ++i) a->as<uint32_t>()[i] = 0x7f81c0deu;
  }
  *in = p.buf.Clone();
  *exp = p.buf.Clone();
  ReferenceUpdateQ8(p, *exp);
  if (p.spec.grad.out != DType::kFp32) {
    const uint64_t end = hls::WordsFor(n, 2) * hls::kHalfLanes;
    for (uint64_t i = n; i < end; ++i) exp->out16.as<uint16_t>()[i] = 0;
  }
}

// variant, grad, out, state, sparse, ftz
using Param = std::tuple<int, DType, DType, hls::StateFmt, bool, bool>;

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [vi, g, o, st, sp, ftz] = info.param;
  std::string s = StateFmtName(st);
  for (char& c : s) c = c == '-' ? '_' : c;
  return std::string(AllVariants()[vi].name) + "_" + s + "_" + DTypeName(g) + "_" +
         OutDTypeName(o) + (sp ? "_sparse" : "_dense") + (ftz ? "_ftz" : "_ieee");
}

class Q8KernelVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(Q8KernelVsReference, BitExactOnEveryBuffer) {
  const auto& [vi, g, o, st, sp, ftz] = GetParam();
  if (st == hls::StateFmt::kQ8Bf16 && o == DType::kFp16) GTEST_SKIP() << "refused (below)";
  const Variant var = AllVariants()[vi];
  std::vector<uint32_t> sizes(std::begin(kSizes), std::end(kSizes));
  if (sp && !ftz && o == DType::kFp32) sizes.push_back(kLargeSize);
  for (uint32_t n : sizes) {
    for (int special = 0; special < 2; ++special) {
      const uint64_t seed = 0x9800000u + static_cast<uint64_t>(vi) * 7919u + n + special;
      ProblemSpec spec;
      spec.hyper = var.cfg;
      spec.step = var.step;
      spec.grad.grad = g;
      spec.grad.out = o;
      spec.grad.ftz = ftz;
      spec.grad.state = st;
      spec.grad.loss_scale = g == DType::kFp16 ? 1024.0 : 1.0;
      spec.grad.clip_coef = 0.75;
      spec.n = n;
      spec.topk = sp ? 0.1 : 0.0;
      spec.seed = seed;
      spec.index = 256ull * (seed % 4096) + (static_cast<uint64_t>(special) << 33);
      spec.data = special ? ProblemData::kSpecial : ProblemData::kRandom;
      Problem p = Problem::Generate(spec);
      UpdateBuffers in, exp;
      Expect(p, &in, &exp);
      if (HasFatalFailure()) return;
      std::ostringstream ctx;
      ctx << "variant=" << var.name << " state=" << StateFmtName(st) << " grad=" << DTypeName(g)
          << " out=" << OutDTypeName(o) << (sp ? " sparse" : " dense")
          << (ftz ? " ftz" : " ieee") << " n=" << n << " seed=0x" << std::hex << seed
          << " index=0x" << spec.index << (special ? " special" : "");
      CheckPaths(p, in, exp, ctx.str());
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllConfigs, Q8KernelVsReference,
    ::testing::Combine(::testing::Range(0, static_cast<int>(AllVariants().size())),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Values(DType::kFp32, DType::kFp16, DType::kBf16),
                       ::testing::Values(hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16),
                       ::testing::Bool(), ::testing::Bool()),
    Name);

// Non-finite values where the specialised datapath's chunks and blocks begin and end: a NaN
// first gradient value (dense: element 0's; theta', m', v' NaN, the first block's absmax), an
// infinite absmax of the last block of one moment and of the first block of the second chunk
// of the other, a theta that rounds to infinity (q8-bf16) or is infinite (q8) in a chunk's last
// element; dense and sparse, IEEE and FTZ. The element index puts the low word of the random
// bits' counter 64 groups before it wraps, so the rounding's counters carry within the launch.
TEST(Q8KernelBoundaries, NonFiniteAtChunkEdgesAndACounterThatWraps) {
  constexpr uint32_t kChunk = hls::host::kQ8Chunk;
  const uint32_t n = 2 * kChunk + 2 * kBlock;  // two chunks and two blocks
  for (hls::StateFmt st : {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16}) {
    for (int sparse = 0; sparse < 2; ++sparse) {
      for (int ftz = 0; ftz < 2; ++ftz) {
        ProblemSpec spec;
        spec.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
        spec.grad.grad = DType::kFp32;
        spec.grad.out = DType::kBf16;
        spec.grad.ftz = ftz != 0;
        spec.grad.state = st;
        spec.n = n;
        spec.topk = sparse ? 0.25 : 0.0;
        spec.seed = 0x5eed0000u + static_cast<uint64_t>(sparse * 2 + ftz);
        spec.index = (uint64_t{1} << 35) - 512;  // counter (index >> 3) = 2^32 - 64
        Problem p = Problem::Generate(spec);
        // The first gradient value: element 0's, or the first sparse entry's.
        ASSERT_TRUE(!sparse || p.nnz > 0u);
        p.buf.grad.as<uint32_t>()[0] = 0x7fc00000u;
        p.buf.m_absmax.as<uint32_t>()[n / kBlock - 1] = 0x7f800000u;
        p.buf.v_absmax.as<uint32_t>()[kChunk / kBlock] = 0x7f800000u;
        const uint32_t last = kChunk - 1;
        if (st == hls::StateFmt::kQ8Bf16) {
          p.buf.theta.as<uint16_t>()[last] = 0x7f7fu;  // the largest finite bf16
        } else {
          p.buf.theta.as<uint32_t>()[last] = 0xff800000u;
        }
        UpdateBuffers in, exp;
        Expect(p, &in, &exp);
        if (HasFatalFailure()) return;
        std::ostringstream ctx;
        ctx << "state=" << StateFmtName(st) << (sparse ? " sparse" : " dense")
            << (ftz ? " ftz" : " ieee") << " n=" << n;
        CheckPaths(p, in, exp, ctx.str());
        if (HasFailure()) return;
      }
    }
  }
}

// A dense launch long enough that the copy is written with streaming stores (datapath.h,
// kStreamCopyMin: q8's by the update's loop, q8-bf16's by the rounding), its length not a whole
// number of chunks.
TEST(Q8KernelLongPass, StreamedCopy) {
  const uint32_t n = hls::host::kStreamCopyMin + 3 * kBlock;
  for (hls::StateFmt st : {hls::StateFmt::kQ8, hls::StateFmt::kQ8Bf16}) {
    ProblemSpec spec;
    spec.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
    spec.grad.grad = DType::kFp16;
    spec.grad.out = st == hls::StateFmt::kQ8Bf16 ? DType::kBf16 : DType::kFp16;
    spec.grad.state = st;
    spec.grad.loss_scale = 1024.0;
    spec.n = n;
    spec.seed = 0x10a6u;
    spec.index = 256ull * 77;
    Problem p = Problem::Generate(spec);
    UpdateBuffers in, exp;
    Expect(p, &in, &exp);
    if (HasFatalFailure()) return;
    CheckPaths(p, in, exp, "state=" + std::string(StateFmtName(st)) + " n=" + std::to_string(n));
    if (HasFailure()) return;
  }
}

// A launch the kernel refuses writes the status word only, with the error bit.
void ExpectRefused(uint32_t mode, uint32_t n, uint32_t index_lo, uint32_t want_err) {
  ProblemSpec spec;
  spec.grad.grad = DType::kFp32;
  spec.grad.state = hls::StateFmt::kQ8;
  spec.n = 512;
  Problem p = Problem::Generate(spec);
  p.buf.SetScalars(n, 0, p.launch);
  p.buf.mode = mode;
  p.buf.index_lo = index_lo;
  const UpdateBuffers in = p.buf.Clone();
  for (HostDatapath dp : {HostDatapath::kSpecialised, HostDatapath::kGeneral}) {
    UpdateBuffers got = in.Clone();
    EXPECT_EQ(InvokeUpdate(WordsOf(got), dp), want_err)
        << "mode 0x" << std::hex << mode << " n " << std::dec << n << " index " << index_lo;
    EXPECT_EQ(CheckNothingWrittenLanes(got.status), "");
    for (auto [a, b] : {std::pair{&in.theta, &got.theta}, {&in.m, &got.m}, {&in.v, &got.v},
                        {&in.m_absmax, &got.m_absmax}, {&in.v_absmax, &got.v_absmax}}) {
      EXPECT_TRUE(a->SameBytes(*b)) << "a refused launch wrote its state";
    }
  }
}

TEST(Q8KernelRefuses, PartialBlocksAndAnFp16CopyOfBf16Weights) {
  hls::Mode md{};
  md.opt = Optimizer::kAdamW;
  md.state = hls::StateFmt::kQ8;
  const uint32_t q8 = hls::EncodeMode(md);
  ExpectRefused(q8, 300, 0, hls::kErrBlockLen);  // n not whole blocks
  ExpectRefused(q8, 256, 8, hls::kErrBlockLen);  // element 0 not on a block boundary
  md.state = hls::StateFmt::kQ8Bf16;
  md.out = DType::kFp16;
  hls::Mode back{};
  EXPECT_FALSE(hls::DecodeMode(hls::EncodeMode(md), &back));
  ExpectRefused(hls::EncodeMode(md), 256, 0, hls::kErrBadMode);
  ExpectRefused(q8 | (3u << hls::kModeStateShift), 256, 0, hls::kErrBadMode);  // format 3
  GradSpec gs;
  gs.state = hls::StateFmt::kQ8Bf16;
  gs.out = DType::kFp16;
  EXPECT_THROW(MakeLaunch(OptimizerConfig::Defaults(Optimizer::kAdamW), gs, 1),
               std::invalid_argument);
}

}  // namespace
}  // namespace csdkit::testing
