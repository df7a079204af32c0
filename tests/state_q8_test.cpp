// Tests of the compressed state formats' numeric core in csdkit/hls/state_q8.h (issue 28)
// against the independent numpy reference of docs/state-formats.md
// (tests/reference/state_formats.py), whose golden vectors the build writes with
// `state_formats.py --vectors` (tests/numeric.cmake): blockwise quantization and dequantization
// of both maps under the IEEE and the FTZ/DAZ policy (corner blocks first: zeros of both signs,
// subnormals only, NaN, infinity, values exactly on the thresholds, a huge and a tiny absmax;
// then random blocks over 16 decades), the random bits of 4096 elements, the stochastic bf16
// rounding of 4096 θ'. Philox4x32-10 is also checked against the Random123 library itself where
// its header is installed (Debian: librandom123-dev, which scripts/setup installs).
//
// Failures print the case, the index, the input, the expected and the actual value in hex (at
// most kMaxReports per check, then the count). The vectors come from the reference's fixed
// seed (28), so there is no seed here.
#include "csdkit/hls/state_q8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp32.h"

#if __has_include(<Random123/philox.h>)
#include <Random123/philox.h>
#define CSDKIT_HAVE_RANDOM123 1
#endif

namespace csdkit {
namespace hls {
namespace {

constexpr int kMaxReports = 10;
// The reference's sizes (state_formats.py: VECTOR_*).
constexpr size_t kBlocks = 64;
constexpr size_t kRandom = 4096;
constexpr size_t kTheta = 4096;
constexpr uint64_t kSeed = 0x0123456789ABCDEFull;
constexpr uint64_t kStep = 0x100000007ull;

// The golden vectors file, read in the order state_formats.py writes it.
class Vectors {
 public:
  Vectors() {
    std::ifstream f(CSDKIT_Q8_VECTORS, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  bool ok() const { return !bytes_.empty(); }
  template <typename T>
  std::vector<T> Take(size_t n) {
    std::vector<T> v(n);
    if (at_ + n * sizeof(T) > bytes_.size()) {
      ADD_FAILURE() << "golden vectors '" << CSDKIT_Q8_VECTORS << "': expected at least "
                    << at_ + n * sizeof(T) << " bytes, found " << bytes_.size();
      return v;
    }
    std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  size_t left() const { return bytes_.size() - at_; }

 private:
  std::vector<char> bytes_;
  size_t at_ = 0;
};

std::string Hex(uint32_t v, int digits = 8) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, v);
  return b;
}

TEST(StateQ8, TablesAreOrderedAndThresholdsLieBetween) {
  EXPECT_EQ(kQ8SignedMag[0], 0u);
  EXPECT_EQ(kQ8SignedMag[127], 0x3f800000u);
  EXPECT_EQ(kQ8Unsigned[0], 0u);
  EXPECT_EQ(kQ8Unsigned[255], 0x3f800000u);
  for (int i = 0; i < 127; ++i) {
    EXPECT_LT(kQ8SignedMag[i], kQ8SignedThr[i]) << i;
    EXPECT_LT(kQ8SignedThr[i], kQ8SignedMag[i + 1]) << i;
  }
  for (int i = 0; i < 255; ++i) {
    EXPECT_LT(kQ8Unsigned[i], kQ8UnsignedThr[i]) << i;
    EXPECT_LT(kQ8UnsignedThr[i], kQ8Unsigned[i + 1]) << i;
  }
}

TEST(StateQ8, QuantizeAndDequantizeEqualTheReferenceBitForBit) {
  Vectors v;
  ASSERT_TRUE(v.ok()) << "golden vectors '" << CSDKIT_Q8_VECTORS << "' not found";
  const size_t n = kBlocks * kQ8Block;
  for (const bool is_signed : {true, false}) {
    for (const bool ftz : {false, true}) {
      const std::string what =
          std::string(is_signed ? "signed" : "unsigned") + (ftz ? ", FTZ" : ", IEEE");
      const auto x = v.Take<float>(n);
      const auto codes = v.Take<uint8_t>(n);
      const auto absmax = v.Take<float>(kBlocks);
      const auto deq = v.Take<float>(n);
      const Fp32 f(ftz);
      int bad = 0;
      for (size_t b = 0; b < kBlocks; ++b) {
        uint8_t c[kQ8Block];
        float a = 0;
        QuantizeBlockQ8(&x[b * kQ8Block], kQ8Block, is_signed, f, c, &a);
        if (F2U(a) != F2U(absmax[b]) && bad++ < kMaxReports) {
          ADD_FAILURE() << what << " block " << b << ": absmax expected "
                        << Hex(F2U(absmax[b])) << ", found " << Hex(F2U(a));
        }
        for (int i = 0; i < kQ8Block; ++i) {
          const size_t e = b * kQ8Block + i;
          if (c[i] != codes[e] && bad++ < kMaxReports) {
            ADD_FAILURE() << what << " block " << b << " element " << i << ": x "
                          << Hex(F2U(x[e])) << " (absmax " << Hex(F2U(absmax[b]))
                          << "): code expected " << Hex(codes[e], 2) << ", found "
                          << Hex(c[i], 2);
          }
          const float d = DequantQ8(codes[e], absmax[b], is_signed, f);
          if (F2U(d) != F2U(deq[e]) && bad++ < kMaxReports) {
            ADD_FAILURE() << what << " block " << b << " element " << i << ": code "
                          << Hex(codes[e], 2) << " absmax " << Hex(F2U(absmax[b]))
                          << ": dequantized expected " << Hex(F2U(deq[e])) << ", found "
                          << Hex(F2U(d));
          }
        }
      }
      EXPECT_EQ(bad, 0) << what << ": mismatches (first " << kMaxReports << " printed)";
    }
  }
  const auto idx = v.Take<uint64_t>(kRandom);
  const auto r16 = v.Take<uint32_t>(kRandom);
  int bad = 0;
  for (size_t i = 0; i < kRandom; ++i) {
    const uint32_t r = Random16(kSeed, kStep, idx[i]);
    if (r != r16[i] && bad++ < kMaxReports) {
      ADD_FAILURE() << "random16(seed " << Hex(static_cast<uint32_t>(kSeed >> 32))
                    << Hex(static_cast<uint32_t>(kSeed)).substr(2) << ", step " << kStep
                    << ", element " << idx[i] << "): expected " << Hex(r16[i], 4)
                    << ", found " << Hex(r, 4);
    }
  }
  EXPECT_EQ(bad, 0) << "random16 mismatches";
  const auto theta = v.Take<float>(kTheta);
  const auto r = v.Take<uint32_t>(kTheta);
  const auto bf = v.Take<uint16_t>(kTheta);
  bad = 0;
  for (size_t i = 0; i < kTheta; ++i) {
    const uint16_t got = RoundBf16Stochastic(theta[i], r[i]);
    if (got != bf[i] && bad++ < kMaxReports) {
      ADD_FAILURE() << "theta " << i << " " << Hex(F2U(theta[i])) << " R " << Hex(r[i], 4)
                    << ": bf16 expected " << Hex(bf[i], 4) << ", found " << Hex(got, 4);
    }
  }
  EXPECT_EQ(bad, 0) << "stochastic rounding mismatches";
  EXPECT_EQ(v.left(), 0u) << "golden vectors: bytes left over (the reference's sizes changed?)";
}

TEST(StateQ8, CornerRulesHoldByConstruction) {
  const Fp32 ieee(false);
  float x[kQ8Block] = {};
  uint8_t c[kQ8Block];
  float a = 1;
  // ±0 and the tiny block: absmax +0, the sign kept in signed codes.
  x[1] = -0.0f;
  x[2] = U2F(0x80000001u);  // a negative subnormal: below 2^-126
  QuantizeBlockQ8(x, kQ8Block, true, ieee, c, &a);
  EXPECT_EQ(F2U(a), 0u);
  EXPECT_EQ(c[0], 0x00);
  EXPECT_EQ(c[1], 0x80);
  EXPECT_EQ(c[2], 0x80);
  // ±1 of the absmax are codes 0x7F / 0xFF; a value far below the smallest magnitude keeps
  // index 1 (a non-zero value never becomes zero) and its sign.
  x[0] = 4.0f;
  x[1] = -4.0f;
  x[2] = -1e-20f;
  QuantizeBlockQ8(x, kQ8Block, true, ieee, c, &a);
  EXPECT_EQ(a, 4.0f);
  EXPECT_EQ(c[0], 0x7F);
  EXPECT_EQ(c[1], 0xFF);
  EXPECT_EQ(c[2], 0x81);
  EXPECT_EQ(F2U(DequantQ8(0x80, 4.0f, true, ieee)), kSignMask);  // −0 reads back as −0
  EXPECT_EQ(DequantQ8(0xFF, 4.0f, true, ieee), -4.0f);
  // An infinity: the canonical NaN absmax, codes 0, the block reads back as NaN.
  x[3] = U2F(kExpMask);
  QuantizeBlockQ8(x, kQ8Block, false, ieee, c, &a);
  EXPECT_EQ(F2U(a), kCanonicalNan);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(F2U(DequantQ8(c[0], a, false, ieee)), kCanonicalNan);
  // Stochastic rounding: a bf16 value is kept whatever R; the NaN is 0x7fc0.
  EXPECT_EQ(RoundBf16Stochastic(1.5f, 0xFFFF), 0x3fc0);
  EXPECT_EQ(RoundBf16Stochastic(U2F(0x3fc00001u), 0xFFFF), 0x3fc1);
  EXPECT_EQ(RoundBf16Stochastic(U2F(0x3fc00001u), 0xFFFE), 0x3fc0);
  EXPECT_EQ(RoundBf16Stochastic(U2F(kCanonicalNan), 0), 0x7fc0);
}

TEST(StateQ8, PhiloxEqualsRandom123) {
#ifndef CSDKIT_HAVE_RANDOM123
  GTEST_SKIP() << "Random123's philox.h is not installed (Debian: librandom123-dev; "
                  "scripts/setup installs it)";
#else
  r123::Philox4x32_R<10> g;
  uint64_t s = 0x9E3779B97F4A7C15ull;  // a fixed splitmix64 stream of counters and keys
  auto next = [&s] {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>(z ^ (z >> 31));
  };
  int bad = 0;
  for (int i = 0; i < 10000; ++i) {
    const uint32_t ctr[4] = {i == 1 ? 0xFFFFFFFFu : (i == 0 ? 0u : next()),
                             i == 1 ? 0xFFFFFFFFu : (i == 0 ? 0u : next()),
                             i == 1 ? 0xFFFFFFFFu : (i == 0 ? 0u : next()),
                             i == 1 ? 0xFFFFFFFFu : (i == 0 ? 0u : next())};
    const uint32_t key[2] = {i < 2 ? 0u : next(), i < 2 ? 0u : next()};
    uint32_t mine[4];
    Philox4x32x10(ctr, key, mine);
    const r123::Philox4x32_R<10>::ctr_type c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    const r123::Philox4x32_R<10>::key_type k = {{key[0], key[1]}};
    const auto lib = g(c, k);
    for (int w = 0; w < 4; ++w) {
      if (lib[w] != mine[w] && bad++ < kMaxReports) {
        ADD_FAILURE() << "counter " << Hex(ctr[0]) << " " << Hex(ctr[1]) << " " << Hex(ctr[2])
                      << " " << Hex(ctr[3]) << " key " << Hex(key[0]) << " " << Hex(key[1])
                      << " word " << w << ": Random123 " << Hex(lib[w]) << ", found "
                      << Hex(mine[w]);
      }
    }
  }
  EXPECT_EQ(bad, 0);
#endif
}

}  // namespace
}  // namespace hls
}  // namespace csdkit
