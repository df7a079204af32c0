// Tests of the fp16 / bf16 <-> binary32 conversions in csdkit/hls/fp16.h.
//
// fp16 is checked against the F16C instructions themselves (VCVTPH2PS, and VCVTPS2PH with
// rounding immediate 0 = round to nearest even), which are the numeric contract's definition.
// bf16 has no instruction on x86-64-v3, so it is checked against RefF32ToBf16 below, written
// differently from the code under test (distances compared in double instead of the integer
// add-and-shift trick).
//
// This file builds two executables (tests/numeric.cmake):
//   fp16_test             (label quick): every fp16/bf16 -> fp32 input, a strided sample of the
//                         fp32 space, every rounding boundary of every fp16/bf16 value, and
//                         hand-checked vectors;
//   fp16_exhaustive_test  (label exhaustive, CSDKIT_FP16_EXHAUSTIVE defined): all 2^32 binary32
//                         inputs of both narrowing conversions, sharded over std::thread.
//
// Failures print the index or sample, the input, the expected and the actual value in hex; at
// most kMaxReports mismatches per test are printed, followed by the total count. The inputs are
// fixed enumerations, so there is no seed.
#include "csdkit/hls/fp16.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "csdkit/hls/bits.h"

namespace csdkit {
namespace hls {
namespace {

constexpr int kMaxReports = 10;

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

/// One mismatch: where (index into the enumeration), the input, expected and actual results.
struct Mismatch {
  uint64_t index;
  uint32_t in;
  uint32_t exp;
  uint32_t got;
};

/// Mismatches of one test (or of one shard of it): the total count and the first kMaxReports.
/// Plain data, so worker threads can fill their own and the main thread reports them.
struct MismatchLog {
  uint64_t count = 0;    // mismatches
  uint64_t checked = 0;  // inputs compared (kept by the exhaustive loops)
  std::vector<Mismatch> first;

  void Add(uint64_t index, uint32_t in, uint32_t exp, uint32_t got) {
    if (first.size() < kMaxReports) first.push_back({index, in, exp, got});
    ++count;
  }
  void Merge(const MismatchLog& o) {
    for (const Mismatch& m : o.first)
      if (first.size() < kMaxReports) first.push_back(m);
    count += o.count;
    checked += o.checked;
  }
};

/// Turns a log into gtest failures: one per recorded mismatch, then the total if more were
/// found. `in_digits` / `out_digits` are the hex widths of the input and the result (8 for
/// binary32, 4 for fp16/bf16). Prints nothing when the log is empty.
void Report(const char* what, const MismatchLog& log, int in_digits, int out_digits) {
  for (const Mismatch& m : log.first) {
    ADD_FAILURE() << Format("%s: index=%llu in=0x%0*x exp=0x%0*x got=0x%0*x", what,
                            static_cast<unsigned long long>(m.index), in_digits, m.in, out_digits,
                            m.exp, out_digits, m.got);
  }
  if (log.count > log.first.size()) {
    ADD_FAILURE() << what << ": " << log.count << " mismatches in total (first " << log.first.size()
                  << " shown)";
  }
}

// ---- References ---------------------------------------------------------------------------

/// fp32 -> bf16, independent of F32ToBf16: for a non-NaN value, chooses between the value
/// truncated to bf16 and the next bf16 up in magnitude by comparing the two distances in
/// double (exact: all three values have at most 24 significant bits and nearby exponents), ties
/// to the even bf16 mantissa. Past the largest finite bf16 the "next up" is 2^128, which IEEE
/// rounding (unbounded exponent, then overflow) treats as infinity. NaN: sign and the top 7
/// payload bits kept, quiet bit 0x0040 set.
uint16_t RefF32ToBf16(uint32_t u) {
  const uint16_t sign = static_cast<uint16_t>((u & 0x80000000u) ? 0x8000u : 0u);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) {
    const uint32_t payload7 = (mag & 0x007fffffu) >> 16;
    return static_cast<uint16_t>(sign | 0x7f80u | payload7 | 0x0040u);
  }
  const uint32_t trunc = mag >> 16;
  if ((mag & 0xffffu) == 0u) return static_cast<uint16_t>(sign | trunc);  // exact (also inf, 0)
  const double x = U2F(mag);
  const double lo = U2F(trunc << 16);
  const double hi = trunc + 1u == 0x7f80u ? std::ldexp(1.0, 128) : U2F((trunc + 1u) << 16);
  const double d_lo = x - lo;
  const double d_hi = hi - x;
  uint32_t r;
  if (d_lo < d_hi) {
    r = trunc;
  } else if (d_hi < d_lo) {
    r = trunc + 1u;
  } else {
    r = (trunc & 1u) ? trunc + 1u : trunc;
  }
  return static_cast<uint16_t>(sign | r);
}

#ifndef CSDKIT_FP16_EXHAUSTIVE

// ---- Quick tests ----------------------------------------------------------------------------

// Stride of the sampled binary32 sweep: a prime, so every low-bit pattern recurs and the sample
// (2^32 / 131, about 3.3e7 inputs) is not aligned with the 13 or 16 dropped bits.
constexpr uint64_t kStride = 131;

/// fp32 -> fp16 by the F16C instruction, round to nearest even (immediate 0).
uint16_t RefF32ToF16(uint32_t u) { return _cvtss_sh(U2F(u), 0); }

/// fp16 -> fp32 by the F16C instruction.
uint32_t RefF16ToF32(uint16_t h) { return F2U(_cvtsh_ss(h)); }

/// The exact value of a finite, non-negative fp16 pattern, computed from the format's
/// definition (not from the code under test, nor from F16C).
double F16Value(uint32_t h) {
  const int e = static_cast<int>(h >> 10);
  const int m = static_cast<int>(h & 0x3ffu);
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
}

/// Special binary32 inputs for the narrowing conversions: zeros, fp32 subnormals, the fp16
/// subnormal / normal / overflow boundaries, infinities and NaNs with assorted payloads
/// (signalling and quiet, payload bits above and below the 10 / 7 that survive). Each is used
/// with both signs.
const std::vector<uint32_t>& SpecialInputs() {
  static const std::vector<uint32_t> v = {
      0x00000000u, 0x00000001u, 0x00000002u, 0x00000003u, 0x00001000u, 0x00008000u, 0x00007fffu,
      0x00008001u, 0x00018000u, 0x00010000u, 0x003fffffu, 0x00400000u, 0x007f8000u, 0x007fffffu,
      0x00800000u, 0x00800001u, 0x00808000u, 0x00ff8000u, 0x32ffffffu, 0x33000000u, 0x33000001u,
      0x337fffffu, 0x33800000u, 0x33c00000u, 0x33bfffffu, 0x33c00001u, 0x34200000u, 0x387fc000u,
      0x387fdfffu, 0x387fe000u, 0x387fe001u, 0x387fffffu, 0x38800000u, 0x38800fffu, 0x38801000u,
      0x38801001u, 0x38803000u, 0x3f7fffffu, 0x3f800000u, 0x3f800fffu, 0x3f801000u, 0x3f801001u,
      0x3f803000u, 0x3f808000u, 0x3f818000u, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u,
      0x477fffffu, 0x47800000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
      0x7f801fffu, 0x7f802000u, 0x7f80ffffu, 0x7f810000u, 0x7f812345u, 0x7fa00000u, 0x7fbfffffu,
      0x7fc00000u, 0x7fc00001u, 0x7fc12345u, 0x7fd55555u, 0x7fe00000u, 0x7fffe000u, 0x7fffffffu,
  };
  return v;
}

TEST(Fp16, F16ToF32AllInputsMatchF16c) {
  MismatchLog log;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t exp = RefF16ToF32(static_cast<uint16_t>(h));
    const uint32_t got = F16ToF32Int(static_cast<uint16_t>(h));
    if (got != exp) log.Add(h, h, exp, got);
  }
  Report("F16ToF32 vs _cvtsh_ss", log, 4, 8);
}

TEST(Fp16, F16ToF32AllInputsMatchVectorF16c) {
  // The 8-lane instruction as a second reference (the one the vectorised model path mirrors).
  MismatchLog log;
  for (uint32_t base = 0; base < 0x10000u; base += 8) {
    alignas(16) uint16_t in[8];
    alignas(32) uint32_t exp[8];
    for (uint32_t i = 0; i < 8; ++i) in[i] = static_cast<uint16_t>(base + i);
    const __m256 v = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(exp), _mm256_castps_si256(v));
    for (uint32_t i = 0; i < 8; ++i) {
      const uint32_t got = F16ToF32Int(in[i]);
      if (got != exp[i]) log.Add(base + i, in[i], exp[i], got);
    }
  }
  Report("F16ToF32 vs _mm256_cvtph_ps", log, 4, 8);
}

TEST(Fp16, RoundTripIsExactAndNanIsQuieted) {
  // fp16 -> fp32 -> fp16 is the identity on non-NaN halves; a NaN comes back with the quiet bit
  // (0x0200) set and sign and payload kept.
  MismatchLog log;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0u;
    const uint32_t exp = nan ? (h | 0x0200u) : h;
    const uint32_t got = F32ToF16Int(F16ToF32Int(static_cast<uint16_t>(h)));
    if (got != exp) log.Add(h, h, exp, got);
  }
  Report("F32ToF16Int(F16ToF32Int(h))", log, 4, 4);
}

TEST(Fp16, F32ToF16StridedSweepMatchesF16c) {
  MismatchLog log;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += kStride) {
    const uint32_t in = static_cast<uint32_t>(u);
    const uint16_t exp = RefF32ToF16(in);
    const uint16_t got = F32ToF16Int(in);
    if (got != exp) log.Add(u / kStride, in, exp, got);
  }
  Report("F32ToF16 strided (index = sample number)", log, 8, 4);
}

TEST(Fp16, F32ToF16RoundingBoundariesMatchF16c) {
  // For every finite non-negative half h: h itself, the exact midpoint between h and the next
  // half up (for 0x7bff that is 65520, the overflow threshold), and the binary32 neighbours of
  // both; then the special inputs. All with both signs.
  std::vector<uint32_t> inputs;
  for (uint32_t h = 0; h <= 0x7bffu; ++h) {
    const double lo = F16Value(h);
    const double hi = h == 0x7bffu ? 65536.0 : F16Value(h + 1u);
    const float mid_f = static_cast<float>((lo + hi) / 2.0);
    ASSERT_EQ(static_cast<double>(mid_f), (lo + hi) / 2.0) << "midpoint not exact, h=" << h;
    const uint32_t lo_u = F2U(static_cast<float>(lo));
    const uint32_t mid = F2U(mid_f);
    for (uint32_t u : {lo_u, lo_u + 1u, mid - 1u, mid, mid + 1u}) {
      inputs.push_back(u);
      inputs.push_back(u | 0x80000000u);
    }
    if (lo_u != 0u) {
      inputs.push_back(lo_u - 1u);
      inputs.push_back((lo_u - 1u) | 0x80000000u);
    }
    // The reference itself must treat the midpoint as a tie: it rounds to the even neighbour.
    const uint16_t r = RefF32ToF16(mid);
    ASSERT_TRUE((r == h || r == h + 1u) && (r & 1u) == 0u)
        << Format("F16C midpoint check: h=0x%04x mid=0x%08x ref=0x%04x", h, mid, r);
  }
  for (uint32_t u : SpecialInputs()) {
    inputs.push_back(u);
    inputs.push_back(u | 0x80000000u);
  }
  MismatchLog log;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint16_t exp = RefF32ToF16(inputs[i]);
    const uint16_t got = F32ToF16Int(inputs[i]);
    if (got != exp) log.Add(i, inputs[i], exp, got);
  }
  Report("F32ToF16 boundary", log, 8, 4);
}

TEST(Fp16, F32ToF16KnownVectors) {
  // Hand-derived expectations; each is also checked against F16C so a wrong hand value shows.
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3c00u},  // 1.0
      {0xc0000000u, 0xc000u},  // -2.0
      {0x477fe000u, 0x7bffu},  // 65504, largest half
      {0x477fefffu, 0x7bffu},  // just below 65520
      {0x477ff000u, 0x7c00u},  // 65520: tie between 65504 (odd) and 65536 -> even = inf
      {0xc77ff000u, 0xfc00u},  // -65520
      {0x7f7fffffu, 0x7c00u},  // FLT_MAX
      {0x7f800000u, 0x7c00u},  // +inf
      {0x33800000u, 0x0001u},  // 2^-24, smallest subnormal half
      {0x33000000u, 0x0000u},  // 2^-25: tie between 0 and 2^-24 -> even = 0
      {0xb3000000u, 0x8000u},  // -2^-25 -> -0
      {0x33000001u, 0x0001u},  // just above 2^-25
      {0x33c00000u, 0x0002u},  // 1.5 * 2^-24: tie -> even = 2
      {0x34200000u, 0x0002u},  // 2.5 * 2^-24: tie -> even = 2
      {0x387fc000u, 0x03ffu},  // largest subnormal half
      {0x387fe000u, 0x0400u},  // midpoint to 2^-14: tie -> even = smallest normal
      {0x38800000u, 0x0400u},  // 2^-14
      {0x3f801000u, 0x3c00u},  // 1 + 2^-11: tie -> even = 1.0
      {0x3f803000u, 0x3c02u},  // 1 + 3 * 2^-11: tie -> even = 1 + 2^-9
      {0x00000001u, 0x0000u},  // fp32 subnormal -> +0
      {0x807fffffu, 0x8000u},  // fp32 subnormal -> -0
      {0x7f800001u, 0x7e00u},  // sNaN, payload below the top 10 bits: quiet, payload 0
      {0x7f802000u, 0x7e01u},  // sNaN, lowest surviving payload bit
      {0xffc12345u, 0xfe09u},  // qNaN: sign kept, payload 0x412345 >> 13 = 0x209
      {0x7fffffffu, 0x7fffu},  // qNaN, all payload bits
  };
  for (const Case& c : cases) {
    const uint16_t got = F32ToF16Int(c.in);
    EXPECT_EQ(got, c.out) << Format("F32ToF16 in=0x%08x exp=0x%04x got=0x%04x", c.in, c.out, got);
    const uint16_t ref = RefF32ToF16(c.in);
    EXPECT_EQ(ref, c.out) << Format(
        "hand value disagrees with F16C: in=0x%08x hand=0x%04x "
        "f16c=0x%04x",
        c.in, c.out, ref);
  }
}

// F32ToF16/F16ToF32, what the kernels call, equal the integer code (which the tests above hold
// to F16C): all 2^16 widenings and a 2^25-sample sweep of narrowings here, all 2^32 narrowings
// under the exhaustive label.
TEST(Fp16, DispatchEqualsIntegerCode) {
  MismatchLog log;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t exp = F16ToF32Int(static_cast<uint16_t>(h));
    const uint32_t got = F16ToF32(static_cast<uint16_t>(h));
    if (got != exp) log.Add(h, h, exp, got);
  }
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 127) {
    const uint32_t in = static_cast<uint32_t>(x);
    const uint16_t exp = F32ToF16Int(in);
    const uint16_t got = F32ToF16(in);
    if (got != exp) log.Add(x, in, exp, got);
  }
  // The array form the kernel's store stage uses, on blocks of 8 strided inputs.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 8 * 131) {
    uint32_t in[8];
    uint16_t got[8];
    for (int j = 0; j < 8; ++j) in[j] = static_cast<uint32_t>(x + j * 131);
    F32ToF16Array(in, got, 8);
    for (int j = 0; j < 8; ++j)
      if (got[j] != F32ToF16Int(in[j])) log.Add(x + j * 131, in[j], F32ToF16Int(in[j]), got[j]);
  }
  std::printf("fp16 dispatch: %s\n", kFp16UsesF16c ? "F16C instruction" : "integer code");
  Report("F16ToF32/F32ToF16 dispatch vs integer code", log, 8, 8);
}

TEST(Bf16, Bf16ToF32AllInputsExact) {
  MismatchLog log;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint32_t exp = b * 0x10000u;  // the bf16 pattern is the top half of the binary32
    const uint32_t got = Bf16ToF32(static_cast<uint16_t>(b));
    if (got != exp) log.Add(b, b, exp, got);
  }
  Report("Bf16ToF32", log, 4, 8);
}

TEST(Bf16, RoundTripIsExactAndNanIsQuieted) {
  MismatchLog log;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const bool nan = (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0u;
    const uint32_t exp = nan ? (b | 0x0040u) : b;
    const uint32_t got = F32ToBf16(Bf16ToF32(static_cast<uint16_t>(b)));
    if (got != exp) log.Add(b, b, exp, got);
  }
  Report("F32ToBf16(Bf16ToF32(b))", log, 4, 4);
}

TEST(Bf16, F32ToBf16StridedSweepMatchesReference) {
  MismatchLog log;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += kStride) {
    const uint32_t in = static_cast<uint32_t>(u);
    const uint16_t exp = RefF32ToBf16(in);
    const uint16_t got = F32ToBf16(in);
    if (got != exp) log.Add(u / kStride, in, exp, got);
  }
  Report("F32ToBf16 strided (index = sample number)", log, 8, 4);
}

TEST(Bf16, F32ToBf16RoundingBoundariesMatchReference) {
  // For every finite non-negative bf16 b: b itself, the midpoint to the next bf16 up (for
  // 0x7f7f: the overflow threshold) and their binary32 neighbours; then the specials. Both signs.
  std::vector<uint32_t> inputs;
  for (uint32_t b = 0; b <= 0x7f7fu; ++b) {
    const uint32_t lo = b << 16;
    const uint32_t mid = lo | 0x8000u;
    for (uint32_t u : {lo, lo + 1u, mid - 1u, mid, mid + 1u, lo + 0xffffu}) {
      inputs.push_back(u);
      inputs.push_back(u | 0x80000000u);
    }
  }
  for (uint32_t u : SpecialInputs()) {
    inputs.push_back(u);
    inputs.push_back(u | 0x80000000u);
  }
  MismatchLog log;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint16_t exp = RefF32ToBf16(inputs[i]);
    const uint16_t got = F32ToBf16(inputs[i]);
    if (got != exp) log.Add(i, inputs[i], exp, got);
  }
  Report("F32ToBf16 boundary", log, 8, 4);
}

TEST(Bf16, F32ToBf16KnownVectors) {
  // Hand-derived expectations, checked against both the code and the reference.
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80u},  // 1.0
      {0x3f808000u, 0x3f80u},  // 1 + 2^-8: tie between 0x3f80 (even) and 0x3f81 -> 0x3f80
      {0x3f808001u, 0x3f81u},  // just above the tie
      {0x3f818000u, 0x3f82u},  // tie between 0x3f81 (odd) and 0x3f82 -> 0x3f82
      {0xbf818000u, 0xbf82u},  // the same, negative
      {0x3f80ffffu, 0x3f81u},  // just below the next bf16 up: rounds up
      {0x7f7f7fffu, 0x7f7fu},  // just below the overflow threshold
      {0x7f7f8000u, 0x7f80u},  // tie between 0x7f7f (odd) and 2^128 -> inf
      {0x7f7fffffu, 0x7f80u},  // FLT_MAX -> inf
      {0xff7fffffu, 0xff80u},  // -FLT_MAX -> -inf
      {0x7f800000u, 0x7f80u},  // inf
      {0x00008000u, 0x0000u},  // subnormal tie between 0 (even) and 0x0001 -> 0
      {0x00018000u, 0x0002u},  // subnormal tie between 0x0001 (odd) and 0x0002 -> 0x0002
      {0x80008001u, 0x8001u},  // negative subnormal, above the tie
      {0x007fffffu, 0x0080u},  // largest subnormal rounds up to the smallest normal
      {0x80000000u, 0x8000u},  // -0
      {0x7f800001u, 0x7fc0u},  // sNaN, payload below the top 7 bits: quiet, payload 0
      {0xff812345u, 0xffc1u},  // sign and top payload bits kept, quiet set
      {0x7fbfffffu, 0x7fffu},  // sNaN, full payload: top 7 bits kept, quiet
      {0x7fc00000u, 0x7fc0u},  // canonical NaN
      {0xffffffffu, 0xffffu},  // negative NaN, all payload bits
  };
  for (const Case& c : cases) {
    const uint16_t got = F32ToBf16(c.in);
    EXPECT_EQ(got, c.out) << Format("F32ToBf16 in=0x%08x exp=0x%04x got=0x%04x", c.in, c.out, got);
    const uint16_t ref = RefF32ToBf16(c.in);
    EXPECT_EQ(ref, c.out) << Format(
        "hand value disagrees with the reference: in=0x%08x "
        "hand=0x%04x ref=0x%04x",
        c.in, c.out, ref);
  }
}

#else  // CSDKIT_FP16_EXHAUSTIVE

// ---- Exhaustive tests -----------------------------------------------------------------------

constexpr unsigned kThreads = 2;  // the build machines have 2 cores
constexpr uint32_t kBlock = 4096;

/// Runs `shard(lo, hi, log)` over [0, 2^32) split into kThreads contiguous ranges, each on its
/// own std::thread with its own log, and merges the logs in input order.
template <typename Shard>
MismatchLog RunSharded(Shard shard) {
  std::vector<MismatchLog> logs(kThreads);
  std::vector<std::thread> threads;
  const uint64_t per = (uint64_t{1} << 32) / kThreads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back(shard, per * t, per * (t + 1), &logs[t]);
  }
  for (std::thread& th : threads) th.join();
  MismatchLog all;
  for (const MismatchLog& l : logs) all.Merge(l);
  return all;
}

TEST(Fp16Exhaustive, F32ToF16AllInputsMatchF16c) {
  // Blocks of consecutive inputs: the code under test fills one array, VCVTPS2PH (8 lanes, the
  // reference) another, and only a block that differs is scanned element by element.
  const MismatchLog log = RunSharded([](uint64_t lo, uint64_t hi, MismatchLog* out) {
    alignas(32) uint32_t in[kBlock];
    alignas(32) uint16_t exp[kBlock];
    alignas(32) uint16_t got[kBlock];
    for (uint64_t base = lo; base < hi; base += kBlock) {
      for (uint32_t i = 0; i < kBlock; ++i) in[i] = static_cast<uint32_t>(base) + i;
      for (uint32_t i = 0; i < kBlock; ++i) got[i] = F32ToF16Int(in[i]);
      // The dispatching F32ToF16 and its array form (F16C in x86 host builds) must be the
      // same function.
      alignas(32) uint16_t arr[kBlock];
      F32ToF16Array(in, arr, kBlock);
      for (uint32_t i = 0; i < kBlock; ++i) {
        const uint16_t d = F32ToF16(in[i]);
        if (d != got[i]) out->Add(in[i], in[i], got[i], d);
        if (arr[i] != got[i]) out->Add(in[i], in[i], got[i], arr[i]);
      }
      for (uint32_t i = 0; i < kBlock; i += 8) {
        const __m256 v =
            _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(in + i)));
        _mm_store_si128(reinterpret_cast<__m128i*>(exp + i), _mm256_cvtps_ph(v, 0));
      }
      if (std::memcmp(exp, got, sizeof exp) != 0) {
        for (uint32_t i = 0; i < kBlock; ++i)
          if (got[i] != exp[i]) out->Add(in[i], in[i], exp[i], got[i]);
      }
      out->checked += kBlock;
    }
  });
  EXPECT_EQ(log.checked, uint64_t{1} << 32) << "harness did not cover every input";
  Report("F32ToF16 vs _mm256_cvtps_ph (index = input)", log, 8, 4);
}

TEST(Bf16Exhaustive, F32ToBf16AllInputsMatchReference) {
  const MismatchLog log = RunSharded([](uint64_t lo, uint64_t hi, MismatchLog* out) {
    uint16_t got[kBlock];
    for (uint64_t base = lo; base < hi; base += kBlock) {
      const uint32_t b = static_cast<uint32_t>(base);
      for (uint32_t i = 0; i < kBlock; ++i) got[i] = F32ToBf16(b + i);
      for (uint32_t i = 0; i < kBlock; ++i) {
        const uint16_t exp = RefF32ToBf16(b + i);
        if (got[i] != exp) out->Add(b + i, b + i, exp, got[i]);
      }
      out->checked += kBlock;
    }
  });
  EXPECT_EQ(log.checked, uint64_t{1} << 32) << "harness did not cover every input";
  Report("F32ToBf16 vs reference (index = input)", log, 8, 4);
}

#endif  // CSDKIT_FP16_EXHAUSTIVE

}  // namespace
}  // namespace hls
}  // namespace csdkit
