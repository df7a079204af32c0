// Tests of the binary32 operations in csdkit/hls/fp32.h (Canon, Flush, Fp32).
//
// Reference: the host's own binary32 operation (SSE, round to nearest even, FTZ/DAZ off: checked
// below), followed by the contract's documented normalisations written independently of the code
// under test with <cmath> classification instead of bit masks:
//   IEEE policy:    r = a op b; NaN -> 0x7fc00000.
//   FTZ/DAZ policy: subnormal operands -> zero of the same sign; r = a op b; NaN -> 0x7fc00000;
//                   subnormal r -> zero of the same sign (flush after IEEE rounding).
// Random operands are biased towards the interesting classes (zeros, subnormals, tiny normals,
// values near 1, huge values, infinities, quiet and signalling NaNs, cancellation pairs, exact
// rounding ties, results around 2^-126). The generator uses only raw std::mt19937_64 output (no
// <random> distributions, whose results differ between standard libraries), so a seed gives the
// same operands everywhere. The seed is fixed; set CSDKIT_TEST_SEED to try another (each
// (operation, policy) test derives its own stream from it, so one test reruns alone). Failures
// print the seed, the index, the operands, expected and actual in hex (at most kMaxReports per
// test, then the total). Each random test also asserts that its operands reached NaNs,
// subnormals, exact ties and results that round up to 2^-126; CSDKIT_TEST_COVERAGE=1 prints
// those counts.
#include "csdkit/hls/fp32.h"

#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/platform/problem.h"

namespace csdkit {
namespace hls {
namespace {

constexpr int kMaxReports = 10;
constexpr uint64_t kDefaultSeed = 0xc5d0f32a11ce5eedull;
constexpr int kRandomPairs = 1 << 20;  // per operation and policy (>= 10^6)

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[320];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

uint64_t Seed() {
  const char* s = std::getenv("CSDKIT_TEST_SEED");
  return s != nullptr && *s != '\0' ? std::strtoull(s, nullptr, 0) : kDefaultSeed;
}

/// Counts mismatches; the first kMaxReports become gtest failures, the total is reported by
/// Finish(). Prints nothing when everything matches.
class MismatchLog {
 public:
  explicit MismatchLog(std::string what) : what_(std::move(what)) {}

  void Add(const std::string& detail) {
    if (count_++ < kMaxReports) ADD_FAILURE() << what_ << ": " << detail;
  }
  void Finish() const {
    if (count_ > kMaxReports) {
      ADD_FAILURE() << what_ << ": " << count_ << " mismatches in total (first " << kMaxReports
                    << " shown)";
    }
  }

 private:
  std::string what_;
  uint64_t count_ = 0;
};

// ---- Reference ------------------------------------------------------------------------------

enum class Op { kAdd, kSub, kMul, kDiv, kSqrt };

const char* OpName(Op op) {
  switch (op) {
    case Op::kAdd:
      return "Add";
    case Op::kSub:
      return "Sub";
    case Op::kMul:
      return "Mul";
    case Op::kDiv:
      return "Div";
    case Op::kSqrt:
      return "Sqrt";
  }
  return "?";
}

/// Zero of the same sign for a subnormal, x otherwise.
float RefFlush(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

/// The contract's result of `a op b` (b unused for Sqrt), as a bit pattern.
uint32_t RefOp(Op op, bool ftz, uint32_t a_bits, uint32_t b_bits) {
  float a = U2F(a_bits);
  float b = U2F(b_bits);
  if (ftz) {
    a = RefFlush(a);
    b = RefFlush(b);
  }
  float r = 0.0f;
  switch (op) {
    case Op::kAdd:
      r = a + b;
      break;
    case Op::kSub:
      r = a - b;
      break;
    case Op::kMul:
      r = a * b;
      break;
    case Op::kDiv:
      r = a / b;
      break;
    case Op::kSqrt:
      r = std::sqrt(a);
      break;
  }
  if (std::isnan(r)) return 0x7fc00000u;
  if (ftz) r = RefFlush(r);
  return F2U(r);
}

/// The code under test.
uint32_t RunOp(const Fp32& fp, Op op, uint32_t a_bits, uint32_t b_bits) {
  const float a = U2F(a_bits);
  const float b = U2F(b_bits);
  switch (op) {
    case Op::kAdd:
      return F2U(fp.Add(a, b));
    case Op::kSub:
      return F2U(fp.Sub(a, b));
    case Op::kMul:
      return F2U(fp.Mul(a, b));
    case Op::kDiv:
      return F2U(fp.Div(a, b));
    case Op::kSqrt:
      return F2U(fp.Sqrt(a));
  }
  return 0u;
}

// ---- Operand generation ---------------------------------------------------------------------

/// Hand-picked binary32 values, used as a full cross product and as one random class.
const std::vector<uint32_t>& SpecialValues() {
  static const std::vector<uint32_t> v = [] {
    const uint32_t pos[] = {
        0x00000000u,  // +0
        0x00000001u,  // smallest subnormal
        0x00000002u,  // 2^-148
        0x00000003u,
        0x00400000u,  // 2^-127
        0x007ffffeu,  // largest subnormal - ulp
        0x007fffffu,  // largest subnormal
        0x00800000u,  // 2^-126, smallest normal
        0x00800001u,  // 2^-126 + 2^-149
        0x00800002u,
        0x00ffffffu,  // 2^-125 - 2^-149
        0x01000000u,  // 2^-125
        0x0c000000u,  // 2^-103
        0x1f800000u,  // 2^-64
        0x33800000u,  // 2^-24
        0x3effffffu,  // 0.5 - ulp
        0x3f000000u,  // 0.5
        0x3f7ffffeu,  // 1 - 2^-23
        0x3f7fffffu,  // 1 - 2^-24
        0x3f800000u,  // 1
        0x3f800001u,  // 1 + 2^-23
        0x3f801000u,  // 1 + 2^-11
        0x3fb504f3u,  // ~sqrt(2)
        0x3fc00000u,  // 1.5
        0x40000000u,  // 2
        0x40400000u,  // 3
        0x4b000000u,  // 2^23
        0x4b800000u,  // 2^24
        0x5f800000u,  // 2^64
        0x7e800000u,  // 2^126
        0x7f000000u,  // 2^127
        0x7f7ffffeu,  // largest finite - ulp
        0x7f7fffffu,  // largest finite
        0x7f800000u,  // inf
        0x7f800001u,  // sNaN, smallest payload
        0x7fa00000u,  // sNaN
        0x7fbfffffu,  // sNaN, largest payload
        0x7fc00000u,  // canonical qNaN
        0x7fc00001u,  // qNaN, payload 1
        0x7fd23456u,  // qNaN
        0x7fffffffu,  // qNaN, largest payload
    };
    std::vector<uint32_t> all;
    for (uint32_t u : pos) {
      all.push_back(u);
      all.push_back(u | 0x80000000u);
    }
    return all;
  }();
  return v;
}

/// Biased random operands and operand pairs from a seed. Only raw engine output is used.
class OperandGen {
 public:
  explicit OperandGen(uint64_t seed) : rng_(seed) {}

  uint64_t Next() { return rng_(); }
  /// Uniform in [0, n) (n small; the modulo bias is irrelevant for test coverage).
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  /// One operand from a weighted class mix.
  uint32_t Operand() {
    const uint64_t x = rng_();
    const uint32_t sign = static_cast<uint32_t>(x >> 63) << 31;
    const uint32_t man = static_cast<uint32_t>(x) & kManMask;
    const uint32_t cls = static_cast<uint32_t>(x >> 32) % 20;
    const uint32_t r = static_cast<uint32_t>(x >> 40);  // 24 more bits for class-local picks
    switch (cls) {
      case 0:  // zero
        return sign;
      case 1:  // subnormal, full range
        return sign | (man != 0u ? man : 1u);
      case 2:  // small subnormal (few significant bits)
        return sign | ((man >> (r % 23)) | 1u);
      case 3:  // tiny normal, exponent 1..8
        return sign | ((1u + r % 8) << 23) | man;
      case 4:
      case 5:
      case 6:  // near 1: exponent 120..134
        return sign | ((120u + r % 15) << 23) | man;
      case 7:  // near 1 with a mantissa close to 0 or to all ones
        return sign | ((126u + r % 2) << 23) |
               ((r & 1u) ? (man & 0xffu) : (kManMask - (man & 0xffu)));
      case 8:  // huge: exponent 240..254
        return sign | ((240u + r % 15) << 23) | man;
      case 9:  // infinity
        return sign | kExpMask;
      case 10:  // quiet NaN, random payload
        return sign | 0x7fc00000u | (man & 0x003fffffu);
      case 11:  // signalling NaN, random non-zero payload
        return sign | kExpMask | ((man & 0x003fffffu) != 0u ? (man & 0x003fffffu) : 1u);
      case 12:
      case 13:  // a special value
        return SpecialValues()[r % SpecialValues().size()];
      case 14:
      case 15:
      case 16:  // any finite value, uniform exponent
        return sign | ((r % 255u) << 23) | man;
      default:  // any bit pattern
        return static_cast<uint32_t>(x);
    }
  }

  /// A finite normal value with exponent field in [lo_exp, hi_exp].
  uint32_t Normal(uint32_t lo_exp, uint32_t hi_exp) {
    const uint64_t x = rng_();
    const uint32_t sign = static_cast<uint32_t>(x >> 63) << 31;
    const uint32_t e = lo_exp + static_cast<uint32_t>(x >> 32) % (hi_exp - lo_exp + 1u);
    return sign | (e << 23) | (static_cast<uint32_t>(x) & kManMask);
  }

  /// An operand pair for `op`, from a mix of independent operands and structured pairs.
  void Pair(Op op, uint32_t* a, uint32_t* b) {
    switch (Below(11)) {
      case 0: {  // cancellation: b = -a*(1+tiny) for Add, b = a*(1+tiny) for Sub (a few ulps)
        *a = Normal(1, 254);
        const uint32_t delta = Below(4);
        const uint32_t near = (Below(2) != 0u) ? *a + delta : *a - delta;
        *b = op == Op::kSub ? near : near ^ kSignMask;
        return;
      }
      case 1: {  // addition tie: b = (1, 3 or 5) half-ulps of a, either sign
        *a = Normal(2, 254);
        const int e = static_cast<int>((*a >> 23) & 0xffu) - 151;  // half ulp of a = 2^e
        const float h = static_cast<float>(std::ldexp(1.0 + 2.0 * Below(3), e));
        *b = F2U(h) | (Below(2) << 31);
        return;
      }
      case 2: {  // multiplication tie: 13-bit odd significands; a 25-bit product drops one 1
        const uint32_t ea = Below(254) + 1u;
        const uint32_t eb = op == Op::kMul ? Below(254) + 1u : ea;
        *a = (Below(2) << 31) | (ea << 23) | ((Below(4096) | 1u) << 11);
        *b = (Below(2) << 31) | (eb << 23) | ((Below(4096) | 1u) << 11);
        return;
      }
      case 3: {  // near 1 and near the smallest normal (exponent field 0..2), either order
        *a = Normal(125, 128);
        *b = (Below(2) << 31) | (Below(3) << 23) | static_cast<uint32_t>(Next() & kManMask);
        if (Below(2) != 0u) std::swap(*a, *b);
        return;
      }
      case 4: {  // results within a few ulps of 2^-126, where flushing starts
        // Near(e): a few ulps above 2^(e-127), or (exponent field e-1, mantissa nearly all
        // ones) a few ulps below it; random sign.
        auto near = [this](uint32_t e) {
          const uint32_t sign = Below(2) << 31;
          return Below(2) != 0u ? sign | (e << 23) | Below(4)
                                : sign | ((e - 1u) << 23) | (kManMask - Below(4));
        };
        const uint32_t k = Below(100);
        if (op == Op::kMul) {  // ~2^-k * ~2^(k-126)
          *a = near(127u - k);
          *b = near(1u + k);
        } else if (op == Op::kDiv) {  // ~2^(k-126) / ~2^k
          *a = near(1u + k);
          *b = near(127u + k);
        } else {  // ~2^-126 +- a few subnormal ulps
          *a = near(1u);
          *b = (Below(2) << 31) | Below(16);
        }
        return;
      }
      default:
        *a = Operand();
        *b = Operand();
        return;
    }
  }

 private:
  std::mt19937_64 rng_;
};

// ---- Environment ----------------------------------------------------------------------------

TEST(Fp32Env, MxcsrRoundToNearestFtzDazOff) {
  const unsigned csr = _mm_getcsr();
  EXPECT_EQ((csr >> 13) & 3u, 0u) << Format("MXCSR=0x%08x: rounding control not nearest", csr);
  EXPECT_EQ(csr & (1u << 15), 0u) << Format("MXCSR=0x%08x: FTZ set", csr);
  EXPECT_EQ(csr & (1u << 6), 0u) << Format("MXCSR=0x%08x: DAZ set", csr);
  EXPECT_NO_THROW(CheckFpEnvironment());
  // And the arithmetic agrees: a subnormal result and a subnormal operand survive.
  volatile float tiny = U2F(0x00800000u);
  volatile float half = 0.5f;
  EXPECT_EQ(F2U(tiny * half), 0x00400000u) << "host flushes subnormal results";
  volatile float sub = U2F(0x00400000u);
  EXPECT_EQ(F2U(sub * 2.0f), 0x00800000u) << "host reads subnormal operands as zero";
}

// ---- Canon / Flush --------------------------------------------------------------------------

TEST(Fp32Canon, HandPicked) {
  struct Case {
    uint32_t in, out;
  };
  const Case cases[] = {
      {0x00000000u, 0x00000000u}, {0x80000000u, 0x80000000u}, {0x00000001u, 0x00000001u},
      {0x807fffffu, 0x807fffffu}, {0x3f800000u, 0x3f800000u}, {0xff7fffffu, 0xff7fffffu},
      {0x7f800000u, 0x7f800000u}, {0xff800000u, 0xff800000u}, {0x7f800001u, 0x7fc00000u},
      {0xff800001u, 0x7fc00000u}, {0x7fbfffffu, 0x7fc00000u}, {0x7fc00000u, 0x7fc00000u},
      {0xffc00000u, 0x7fc00000u}, {0x7fc00001u, 0x7fc00000u}, {0xffffffffu, 0x7fc00000u},
      {0x7fffffffu, 0x7fc00000u},
  };
  for (const Case& c : cases) {
    const uint32_t got = F2U(Canon(U2F(c.in)));
    EXPECT_EQ(got, c.out) << Format("Canon in=0x%08x exp=0x%08x got=0x%08x", c.in, c.out, got);
  }
}

TEST(Fp32Flush, HandPicked) {
  struct Case {
    uint32_t in, ieee, ftz;
  };
  const Case cases[] = {
      {0x00000000u, 0x00000000u, 0x00000000u}, {0x80000000u, 0x80000000u, 0x80000000u},
      {0x00000001u, 0x00000001u, 0x00000000u}, {0x80000001u, 0x80000001u, 0x80000000u},
      {0x007fffffu, 0x007fffffu, 0x00000000u}, {0x807fffffu, 0x807fffffu, 0x80000000u},
      {0x00400000u, 0x00400000u, 0x00000000u}, {0x00800000u, 0x00800000u, 0x00800000u},
      {0x80800000u, 0x80800000u, 0x80800000u}, {0x3f800000u, 0x3f800000u, 0x3f800000u},
      {0x7f800000u, 0x7f800000u, 0x7f800000u}, {0x7f800001u, 0x7f800001u, 0x7f800001u},
      {0xffc00000u, 0xffc00000u, 0xffc00000u},  // Flush leaves NaNs alone (Canon's job)
  };
  for (const Case& c : cases) {
    const uint32_t ieee = F2U(Flush(false, U2F(c.in)));
    const uint32_t ftz = F2U(Flush(true, U2F(c.in)));
    EXPECT_EQ(ieee, c.ieee) << Format("Flush(false) in=0x%08x exp=0x%08x got=0x%08x", c.in, c.ieee,
                                      ieee);
    EXPECT_EQ(ftz, c.ftz) << Format("Flush(true) in=0x%08x exp=0x%08x got=0x%08x", c.in, c.ftz,
                                    ftz);
  }
}

// ---- Sign -----------------------------------------------------------------------------------

TEST(Fp32Sign, HandPicked) {
  struct Case {
    uint32_t in, ieee, ftz;
  };
  const Case cases[] = {
      {0x00000000u, 0x00000000u, 0x00000000u},  // +0 -> +0
      {0x80000000u, 0x00000000u, 0x00000000u},  // -0 -> +0
      {0x00000001u, 0x3f800000u, 0x00000000u},  // subnormal: +1 (IEEE), +0 (DAZ)
      {0x80000001u, 0xbf800000u, 0x00000000u},
      {0x007fffffu, 0x3f800000u, 0x00000000u},
      {0x807fffffu, 0xbf800000u, 0x00000000u},
      {0x00800000u, 0x3f800000u, 0x3f800000u},  // smallest normal
      {0x80800000u, 0xbf800000u, 0xbf800000u},
      {0x3f800000u, 0x3f800000u, 0x3f800000u},
      {0xc2c80000u, 0xbf800000u, 0xbf800000u},  // -100
      {0x7f7fffffu, 0x3f800000u, 0x3f800000u},
      {0x7f800000u, 0x3f800000u, 0x3f800000u},  // +inf
      {0xff800000u, 0xbf800000u, 0xbf800000u},  // -inf
      {0x7f800001u, 0x7fc00000u, 0x7fc00000u},  // NaNs -> canonical NaN
      {0xff800001u, 0x7fc00000u, 0x7fc00000u},
      {0x7fc00000u, 0x7fc00000u, 0x7fc00000u},
      {0xffffffffu, 0x7fc00000u, 0x7fc00000u},
  };
  const Fp32 ieee(false), ftz(true);
  for (const Case& c : cases) {
    const uint32_t gi = F2U(ieee.Sign(U2F(c.in)));
    const uint32_t gf = F2U(ftz.Sign(U2F(c.in)));
    EXPECT_EQ(gi, c.ieee) << Format("Sign ieee in=0x%08x exp=0x%08x got=0x%08x", c.in, c.ieee, gi);
    EXPECT_EQ(gf, c.ftz) << Format("Sign ftz in=0x%08x exp=0x%08x got=0x%08x", c.in, c.ftz, gf);
  }
}

TEST(Fp32Sign, Random) {
  // Reference by classification: NaN -> canonical NaN, zero (or subnormal under DAZ) -> +0,
  // otherwise copysign(1, a).
  const uint64_t seed = Seed();
  OperandGen gen(seed);
  const Fp32 ieee(false), ftz(true);
  MismatchLog log("Sign random");
  for (int i = 0; i < (1 << 18); ++i) {
    const uint32_t a = gen.Operand();
    const float af = U2F(a);
    for (const Fp32* fp : {&ieee, &ftz}) {
      const bool zero = af == 0.0f || (fp->ftz() && std::fpclassify(af) == FP_SUBNORMAL);
      const uint32_t exp = std::isnan(af) ? 0x7fc00000u : zero ? 0u : F2U(std::copysign(1.0f, af));
      const uint32_t got = F2U(fp->Sign(af));
      if (got != exp) {
        log.Add(Format("seed=0x%016llx policy=%s index=%d a=0x%08x exp=0x%08x got=0x%08x",
                       static_cast<unsigned long long>(seed), fp->ftz() ? "ftz" : "ieee", i, a, exp,
                       got));
      }
    }
  }
  log.Finish();
}

// ---- Add / Sub / Mul / Div / Sqrt: directed cases -------------------------------------------

struct Directed {
  Op op;
  uint32_t a, b;  // b unused for Sqrt
  uint32_t ieee, ftz;
  const char* why;
};

// Hand-derived results under both policies; each is also checked against the reference so a
// wrong hand value cannot hide.
const Directed kDirected[] = {
    // Exact result just below 2^-126 that rounds up to 2^-126: normal, kept under FTZ.
    {Op::kMul, 0x3f7fffffu, 0x00800000u, 0x00800000u, 0x00800000u,
     "(1-2^-24)*2^-126 = 2^-126-2^-150: tie, rounds to even 2^-126, kept"},
    {Op::kMul, 0x3f7ffffeu, 0x00800001u, 0x00800000u, 0x00800000u,
     "(1-2^-23)*2^-126(1+2^-23) = 2^-126(1-2^-46): rounds up to 2^-126, kept"},
    {Op::kMul, 0xbf7fffffu, 0x00800000u, 0x80800000u, 0x80800000u, "negative of the tie case"},
    {Op::kDiv, 0x00ffffffu, 0x40000000u, 0x00800000u, 0x00800000u,
     "(2^-125-2^-149)/2 = 2^-126-2^-150: tie, rounds to even 2^-126, kept"},
    {Op::kAdd, 0x00800001u, 0x80000001u, 0x00800000u, 0x00800001u,
     "2^-126+ulp minus subnormal: IEEE 2^-126; DAZ reads -2^-149 as -0"},
    // Subnormal results: kept under IEEE, signed zero under FTZ.
    {Op::kMul, 0x3f000000u, 0x00800000u, 0x00400000u, 0x00000000u, "0.5*2^-126 = 2^-127"},
    {Op::kMul, 0xbf000000u, 0x00800000u, 0x80400000u, 0x80000000u, "-0.5*2^-126 -> -0"},
    {Op::kMul, 0x9c800000u, 0x1c800000u, 0x80000200u, 0x80000000u, "-2^-70*2^-70 = -2^-140"},
    {Op::kSub, 0x01000000u, 0x00ffffffu, 0x00000001u, 0x00000000u, "2^-125-(2^-125-2^-149)"},
    {Op::kSub, 0x00ffffffu, 0x01000000u, 0x80000001u, 0x80000000u, "negative difference -> -0"},
    {Op::kSub, 0x00800002u, 0x00800001u, 0x00000001u, 0x00000000u, "normal-normal = 2^-149"},
    {Op::kAdd, 0x00800000u, 0x80000001u, 0x007fffffu, 0x00800000u,
     "IEEE 2^-126-2^-149; DAZ flushes the operand"},
    {Op::kDiv, 0x00800000u, 0x3f800001u, 0x007fffffu, 0x00000000u,
     "2^-126/(1+2^-23) rounds to the largest subnormal"},
    {Op::kDiv, 0x80800000u, 0x40000000u, 0x80400000u, 0x80000000u, "-2^-126/2 -> -0"},
    // Subnormal operands.
    {Op::kMul, 0x00400000u, 0x4b000000u, 0x0b800000u, 0x00000000u, "2^-127*2^23 vs DAZ 0*2^23"},
    {Op::kMul, 0x80400000u, 0x4b000000u, 0x8b800000u, 0x80000000u, "DAZ keeps the sign"},
    {Op::kDiv, 0x00000001u, 0x00000001u, 0x3f800000u, 0x7fc00000u, "IEEE 1; DAZ 0/0 = NaN"},
    {Op::kDiv, 0x3f800000u, 0x80000001u, 0xff800000u, 0xff800000u, "1/-2^-149 overflows; 1/-0"},
    {Op::kDiv, 0x3f800000u, 0x00400000u, 0x7f000000u, 0x7f800000u, "1/2^-127 = 2^127; 1/+0"},
    {Op::kAdd, 0x00000003u, 0x80000003u, 0x00000000u, 0x00000000u, "x + -x = +0"},
    {Op::kAdd, 0x80000003u, 0x80000005u, 0x80000008u, 0x80000000u, "-0 + -0 = -0 under DAZ"},
    {Op::kSqrt, 0x00000001u, 0, 0x1a3504f3u, 0x00000000u, "sqrt(2^-149); DAZ sqrt(+0)"},
    {Op::kSqrt, 0x80000001u, 0, 0x7fc00000u, 0x80000000u, "sqrt(-2^-149) = NaN; DAZ sqrt(-0)"},
    {Op::kSqrt, 0x80000000u, 0, 0x80000000u, 0x80000000u, "sqrt(-0) = -0"},
    {Op::kSqrt, 0xbf800000u, 0, 0x7fc00000u, 0x7fc00000u, "sqrt(-1) = canonical NaN"},
    {Op::kSqrt, 0x00800000u, 0, 0x20000000u, 0x20000000u, "sqrt(2^-126) = 2^-63"},
    // Infinities and NaNs.
    {Op::kAdd, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7fc00000u, "inf - inf"},
    {Op::kMul, 0x80000000u, 0x7f800000u, 0x7fc00000u, 0x7fc00000u, "-0 * inf"},
    {Op::kMul, 0x00000001u, 0xff800000u, 0xff800000u, 0x7fc00000u, "subnormal*-inf; DAZ 0*inf"},
    {Op::kDiv, 0x7f800000u, 0x7f800000u, 0x7fc00000u, 0x7fc00000u, "inf / inf"},
    {Op::kAdd, 0xffc12345u, 0x3f800000u, 0x7fc00000u, 0x7fc00000u, "qNaN payload dropped"},
    {Op::kAdd, 0x3f800000u, 0x7f800001u, 0x7fc00000u, 0x7fc00000u, "sNaN payload dropped"},
    {Op::kSub, 0xff812345u, 0x7fd00000u, 0x7fc00000u, 0x7fc00000u, "two NaNs"},
    // Overflow and ties in the normal range.
    {Op::kAdd, 0x7f7fffffu, 0x73000000u, 0x7f800000u, 0x7f800000u, "MAX + half ulp: tie to inf"},
    {Op::kAdd, 0x7f7fffffu, 0x72800000u, 0x7f7fffffu, 0x7f7fffffu, "MAX + quarter ulp"},
    {Op::kAdd, 0x3f800000u, 0x33800000u, 0x3f800000u, 0x3f800000u, "1 + 2^-24: tie to even 1"},
    {Op::kAdd, 0x3f800001u, 0x33800000u, 0x3f800002u, 0x3f800002u, "tie to even, up"},
    {Op::kMul, 0x3f801000u, 0x3f801000u, 0x3f802002u, 0x3f802002u,
     "(1+2^-11)^2 = 1+2^-10+2^-22: exact"},
    {Op::kMul, 0x3f800800u, 0x3f800800u, 0x3f801000u, 0x3f801000u,
     "(1+2^-12)^2 = 1+2^-11+2^-24: tie to even"},
    {Op::kMul, 0x7f000000u, 0x40000000u, 0x7f800000u, 0x7f800000u, "2^127*2 overflows"},
};

TEST(Fp32Directed, HandDerivedBothPolicies) {
  const Fp32 ieee(false), ftz(true);
  for (const Directed& d : kDirected) {
    for (const Fp32* fp : {&ieee, &ftz}) {
      const uint32_t exp = fp->ftz() ? d.ftz : d.ieee;
      const uint32_t got = RunOp(*fp, d.op, d.a, d.b);
      const uint32_t ref = RefOp(d.op, fp->ftz(), d.a, d.b);
      EXPECT_EQ(got, exp) << Format("%s policy=%s a=0x%08x b=0x%08x exp=0x%08x got=0x%08x (%s)",
                                    OpName(d.op), fp->ftz() ? "ftz" : "ieee", d.a, d.b, exp, got,
                                    d.why);
      EXPECT_EQ(ref, exp) << Format(
          "hand value disagrees with the reference: %s policy=%s "
          "a=0x%08x b=0x%08x hand=0x%08x ref=0x%08x (%s)",
          OpName(d.op), fp->ftz() ? "ftz" : "ieee", d.a, d.b, exp, ref, d.why);
    }
  }
}

// ---- Add / Sub / Mul / Div / Sqrt: specials cross product and biased random ----------------

struct OpPolicy {
  Op op;
  bool ftz;
};

void PrintTo(const OpPolicy& p, std::ostream* os) {
  *os << OpName(p.op) << (p.ftz ? " ftz" : " ieee");
}

/// Whether the exact result of a op b (Add, Sub, Mul on finite operands) lies exactly halfway
/// between two binary32 values: computed in double, which holds every product exactly and every
/// sum that can be a tie. Only used to check that the generator reaches ties.
bool IsTie(Op op, uint32_t a_bits, uint32_t b_bits) {
  const double a = U2F(a_bits), b = U2F(b_bits);
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  double d;
  switch (op) {
    case Op::kAdd:
      d = a + b;
      break;
    case Op::kSub:
      d = a - b;
      break;
    case Op::kMul:
      d = a * b;
      break;
    default:
      return false;
  }
  const float r = static_cast<float>(d);
  if (std::isinf(r) || static_cast<double>(r) == d) return false;
  const double other = 2.0 * d - static_cast<double>(r);  // r's mirror image about d
  return std::nextafter(r, static_cast<float>(other)) == other;
}

std::string OpPolicyName(const ::testing::TestParamInfo<OpPolicy>& info) {
  return std::string(OpName(info.param.op)) + (info.param.ftz ? "_Ftz" : "_Ieee");
}

class Fp32OpTest : public ::testing::TestWithParam<OpPolicy> {};

TEST_P(Fp32OpTest, SpecialValuesCrossProduct) {
  const OpPolicy p = GetParam();
  const Fp32 fp(p.ftz);
  MismatchLog log(Format("%s %s specials", OpName(p.op), p.ftz ? "ftz" : "ieee"));
  const std::vector<uint32_t>& v = SpecialValues();
  uint64_t index = 0;
  for (uint32_t a : v) {
    for (uint32_t b : v) {
      const uint32_t exp = RefOp(p.op, p.ftz, a, b);
      const uint32_t got = RunOp(fp, p.op, a, b);
      if (got != exp) {
        log.Add(Format("index=%llu a=0x%08x b=0x%08x exp=0x%08x got=0x%08x",
                       static_cast<unsigned long long>(index), a, b, exp, got));
      }
      ++index;
      if (p.op == Op::kSqrt) break;  // unary: one b per a
    }
  }
  log.Finish();
}

TEST_P(Fp32OpTest, BiasedRandom) {
  const OpPolicy p = GetParam();
  const Fp32 fp(p.ftz);
  // One stream per (op, policy), derived from the seed, so each test is reproducible alone.
  const uint64_t seed = Seed();
  OperandGen gen(
      seed ^ (0x9e3779b97f4a7c15ull * (1u + static_cast<unsigned>(p.op) * 2u + (p.ftz ? 1u : 0u))));
  MismatchLog log(Format("%s %s random", OpName(p.op), p.ftz ? "ftz" : "ieee"));
  uint64_t nan_results = 0, subnormal_inputs = 0, subnormal_results = 0, ties = 0,
           up_to_min_normal = 0;
  for (int i = 0; i < kRandomPairs; ++i) {
    uint32_t a, b;
    if (p.op == Op::kSqrt) {  // three in four made non-negative, so most results are not NaN
      a = gen.Operand();
      if (gen.Below(4) != 0u) a &= ~kSignMask;
      b = 0u;
    } else {
      gen.Pair(p.op, &a, &b);
    }
    const uint32_t exp = RefOp(p.op, p.ftz, a, b);
    const uint32_t got = RunOp(fp, p.op, a, b);
    if (got != exp) {
      log.Add(Format("seed=0x%016llx index=%d a=0x%08x b=0x%08x exp=0x%08x got=0x%08x",
                     static_cast<unsigned long long>(seed), i, a, b, exp, got));
    }
    nan_results += exp == 0x7fc00000u;
    subnormal_inputs += std::fpclassify(U2F(a)) == FP_SUBNORMAL;
    subnormal_results += std::fpclassify(U2F(RefOp(p.op, false, a, b))) == FP_SUBNORMAL;
    ties += IsTie(p.op, a, b);
    // Exact (Mul) or correctly rounded in double (Div) value below 2^-126 whose binary32 result
    // is +-2^-126: the result FTZ must keep. (A double quotient cannot fall below 2^-126 when
    // the exact one is not, so the Div count is a lower bound.)
    if (p.op == Op::kMul || p.op == Op::kDiv) {
      const double x = U2F(a), y = U2F(b);
      const double d = p.op == Op::kMul ? x * y : x / y;
      up_to_min_normal +=
          std::fabs(d) < 0x1p-126 && (RefOp(p.op, false, a, b) & ~kSignMask) == 0x00800000u;
    }
  }
  if (std::getenv("CSDKIT_TEST_COVERAGE") != nullptr) {
    std::printf("%s %s: nan=%llu subnormal_in=%llu subnormal_out=%llu ties=%llu up=%llu\n",
                OpName(p.op), p.ftz ? "ftz" : "ieee", (unsigned long long)nan_results,
                (unsigned long long)subnormal_inputs, (unsigned long long)subnormal_results,
                (unsigned long long)ties, (unsigned long long)up_to_min_normal);
  }
  log.Finish();
  // The generator must actually reach the classes this test is about.
  EXPECT_GT(nan_results, uint64_t{kRandomPairs / 100}) << "seed=" << seed;
  EXPECT_GT(subnormal_inputs, uint64_t{kRandomPairs / 100}) << "seed=" << seed;
  if (p.op != Op::kSqrt) {  // sqrt never yields a subnormal
    EXPECT_GT(subnormal_results, uint64_t{kRandomPairs / 1000}) << "seed=" << seed;
  }
  if (p.op == Op::kAdd || p.op == Op::kSub || p.op == Op::kMul) {
    EXPECT_GT(ties, uint64_t{kRandomPairs / 100}) << "seed=" << seed;
  }
  if (p.op == Op::kMul || p.op == Op::kDiv) {
    EXPECT_GT(up_to_min_normal, uint64_t{kRandomPairs / 1000}) << "seed=" << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, Fp32OpTest,
                         ::testing::Values(OpPolicy{Op::kAdd, false}, OpPolicy{Op::kAdd, true},
                                           OpPolicy{Op::kSub, false}, OpPolicy{Op::kSub, true},
                                           OpPolicy{Op::kMul, false}, OpPolicy{Op::kMul, true},
                                           OpPolicy{Op::kDiv, false}, OpPolicy{Op::kDiv, true},
                                           OpPolicy{Op::kSqrt, false}, OpPolicy{Op::kSqrt, true}),
                         OpPolicyName);

TEST(Fp32Policy, FtzAccessor) {
  EXPECT_FALSE(Fp32(false).ftz());
  EXPECT_TRUE(Fp32(true).ftz());
}

}  // namespace
}  // namespace hls
}  // namespace csdkit
