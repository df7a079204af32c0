// Biased random operands for the rtl/fp benches. Uniform random bit patterns almost never hit
// the cases where fp hardware goes wrong, so operands are drawn from weighted classes (zeros,
// subnormals, tiny normals, values near 1, huge values, infinities, NaNs with payloads, special
// values) and operand pairs are often built on purpose: cancellations, exact rounding ties,
// results around 2^-126 (where FTZ starts) and around the overflow threshold, ties in the
// subnormal range. Only raw std::mt19937_64 output is used (no <random> distributions), so a
// seed gives the same stimulus with every standard library.
#ifndef CSDKIT_RTL_FP_TB_TB_GEN_H_
#define CSDKIT_RTL_FP_TB_TB_GEN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace csd_tb {

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kExp = 0x7f800000u;
constexpr uint32_t kMan = 0x007fffffu;

/// Hand-picked binary32 magnitudes; both signs are used.
constexpr uint32_t kSpecials[] = {
    0x00000000u, 0x00000001u, 0x00000002u, 0x00000003u, 0x00400000u, 0x00400001u,
    0x007ffffeu, 0x007fffffu, 0x00800000u, 0x00800001u, 0x00ffffffu, 0x01000000u,
    0x0c000000u, 0x1f800000u, 0x33800000u, 0x33800001u, 0x387fe000u, 0x387ff000u,
    0x38800000u, 0x3effffffu, 0x3f000000u, 0x3f7fffffu, 0x3f800000u, 0x3f800001u,
    0x3fb504f3u, 0x3fc00000u, 0x40000000u, 0x40400000u, 0x477fe000u, 0x477fefffu,
    0x477ff000u, 0x4b000000u, 0x5f800000u, 0x7e800000u, 0x7f000000u, 0x7f7f7fffu,
    0x7f7f8000u, 0x7f7ffffeu, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fa00000u,
    0x7fbfffffu, 0x7fc00000u, 0x7fc00001u, 0x7fd23456u, 0x7fffffffu,
};
constexpr uint32_t kNumSpecials = sizeof(kSpecials) / sizeof(kSpecials[0]);

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint64_t Bits() { return rng_(); }
  /// Uniform in [0, n) for small n (the modulo bias does not matter for coverage).
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  uint32_t RandSign() { return static_cast<uint32_t>(rng_() & 1u) << 31; }

  /// A finite normal value, random sign, exponent field in [lo, hi].
  uint32_t Normal(uint32_t lo, uint32_t hi) {
    const uint64_t x = rng_();
    const uint32_t e = lo + static_cast<uint32_t>(x >> 40) % (hi - lo + 1u);
    return (static_cast<uint32_t>(x >> 63) << 31) | (e << 23) | (static_cast<uint32_t>(x) & kMan);
  }

  /// One operand from the weighted class mix.
  uint32_t Operand() {
    const uint64_t x = rng_();
    const uint32_t sign = static_cast<uint32_t>(x >> 63) << 31;
    const uint32_t man = static_cast<uint32_t>(x) & kMan;
    const uint32_t r = static_cast<uint32_t>(x >> 32);
    switch (r % 24u) {
      case 0:  // zero
        return sign;
      case 1:  // subnormal
        return sign | (man != 0u ? man : 1u);
      case 2:  // subnormal with few significant bits
        return sign | ((man >> ((r >> 8) % 23u)) | 1u);
      case 3:  // tiny normal
        return sign | ((1u + (r >> 8) % 8u) << 23) | man;
      case 4:
      case 5:
      case 6:
      case 7:  // near 1
        return sign | ((118u + (r >> 8) % 19u) << 23) | man;
      case 8:  // near 1, fraction close to 0 or to all ones
        return sign | ((126u + (r >> 8) % 2u) << 23) |
               (((r >> 9) & 1u) != 0u ? (man & 0xffu) : (kMan - (man & 0xffu)));
      case 9:  // huge
        return sign | ((238u + (r >> 8) % 17u) << 23) | man;
      case 10:  // infinity
        return sign | kExp;
      case 11:  // quiet NaN with a payload
        return sign | 0x7fc00000u | (man & 0x003fffffu);
      case 12:  // signalling NaN with a non-zero payload
        return sign | kExp | ((man & 0x003fffffu) != 0u ? (man & 0x003fffffu) : 1u);
      case 13:
      case 14:  // hand-picked
        return sign | kSpecials[(r >> 8) % kNumSpecials];
      case 15:
      case 16:
      case 17:
      case 18:  // any finite value
        return sign | (((r >> 8) % 255u) << 23) | man;
      case 19:  // few significand bits (exact products, sums that tie)
        return sign | (((r >> 8) % 254u + 1u) << 23) | (man & (0xfff000u << ((r >> 16) % 12u)));
      default:  // any bit pattern
        return static_cast<uint32_t>(x);
    }
  }

  /// A value a few ulps around 2^(e - 127) (exponent field e >= 1), random sign.
  uint32_t NearPow2(uint32_t e) {
    const uint32_t sign = RandSign();
    return Below(2) != 0u ? sign | (e << 23) | Below(4)
                          : sign | ((e - 1u) << 23) | (kMan - Below(4));
  }

  /// Operand pair for add (sub = false) or sub (sub = true).
  std::pair<uint32_t, uint32_t> AddPair(bool sub) {
    uint32_t a, b;
    switch (Below(12)) {
      case 0:
      case 1: {  // cancellation: |b| within a few ulps of |a|, opposite effective signs
        a = Normal(1, 254);
        const uint32_t d = Below(5);
        const uint32_t near = Below(2) != 0u ? a + d : a - d;
        b = sub ? near : near ^ kSign;
        break;
      }
      case 2: {  // cancellation near 1 with different exponents (long normalisation shifts)
        a = (126u + Below(2)) << 23 | static_cast<uint32_t>(Bits() & kMan);
        b = ((126u + Below(2)) << 23 | static_cast<uint32_t>(Bits() & kMan)) ^ (sub ? 0u : kSign);
        break;
      }
      case 3: {  // tie: b is an odd number of half-ulps of a (1, 3 or 5), either sign
        a = Normal(27, 254);
        const int32_t e = static_cast<int32_t>((a >> 23) & 0xffu) - 24;  // half ulp: field e
        const uint32_t k = 1u + 2u * Below(3);
        const uint32_t top = k == 1u ? 0u : (k == 3u ? 0x400000u : 0x200000u);
        const int32_t eb = e + (k == 1u ? 0 : (k == 3u ? 1 : 2));
        b = RandSign() | (static_cast<uint32_t>(eb) << 23) | top;
        break;
      }
      case 4: {  // around the smallest normal: normal +- a few subnormal ulps
        a = NearPow2(1u);
        b = RandSign() | Below(16);
        break;
      }
      case 5: {  // subnormal +- subnormal (exact, may become normal)
        a = RandSign() | static_cast<uint32_t>(Bits() & kMan);
        b = RandSign() | static_cast<uint32_t>(Bits() & kMan);
        break;
      }
      case 6: {  // overflow boundary: the largest finite values plus an ulp or half
        a = (0x7f7fffffu - Below(4)) | RandSign();
        // b: a half ulp of the largest finite value (2^103) or a bit less or more.
        b = (((230u - Below(2)) << 23) | (Below(2) != 0u ? 0u : Below(1u << 23))) | (a & kSign);
        break;
      }
      case 7: {  // exponents far apart (everything into the sticky bit, or just not)
        a = Normal(1, 254);
        const uint32_t ea = (a >> 23) & 0xffu;
        const uint32_t d = 20u + Below(12);
        b = RandSign() | ((ea > d ? ea - d : 0u) << 23) | static_cast<uint32_t>(Bits() & kMan);
        break;
      }
      default:
        a = Operand();
        b = Operand();
        break;
    }
    if (Below(2) != 0u) std::swap(a, b);
    return {a, b};
  }

  /// Operand pair for mul.
  std::pair<uint32_t, uint32_t> MulPair() {
    uint32_t a, b;
    switch (Below(12)) {
      case 0: {  // tie: an odd significand below 2^25/3 times 1.5 has 25 significant bits
        const uint32_t m = (static_cast<uint32_t>(Bits()) % (11184810u - 8388608u)) | 1u;
        a = RandSign() | (Below(254) + 1u) << 23 | (m & kMan);
        b = RandSign() | (Below(254) + 1u) << 23 | 0x400000u;
        break;
      }
      case 1: {  // 13-bit odd significands: products with 25 or 26 significant bits
        a = RandSign() | (Below(254) + 1u) << 23 | (Below(4096) | 1u) << 11;
        b = RandSign() | (Below(254) + 1u) << 23 | (Below(4096) | 1u) << 11;
        break;
      }
      case 2: {  // tie at the subnormal lsb: odd * 2^(s-150) times 2^-s
        const uint32_t s = 1u + Below(100);
        const uint32_t odd = (static_cast<uint32_t>(Bits()) & 0xffffu) | 1u;
        // odd * 2^(s-150) as binary32: exact (odd < 2^16, exponent >= -149).
        const int32_t lead = 31 - __builtin_clz(odd);         // odd in [2^lead, 2^(lead+1))
        const int32_t e = static_cast<int32_t>(s) - 150 + lead;  // unbiased exponent
        if (e >= -126) {
          a = static_cast<uint32_t>(e + 127) << 23 | ((odd << (23 - lead)) & kMan);
        } else {
          a = odd << (s - 1u);  // subnormal: odd * 2^(s-150) = (odd << (s-1)) * 2^-149
        }
        a |= RandSign();
        b = RandSign() | (127u - s) << 23;  // 2^-s
        break;
      }
      case 3: {  // results within a few ulps of 2^-126
        const uint32_t k = Below(100);
        a = NearPow2(127u - k);
        b = NearPow2(1u + k);
        break;
      }
      case 4: {  // products around the overflow threshold
        const uint32_t k = Below(100);
        a = NearPow2(127u + k);
        b = NearPow2(254u - k);
        break;
      }
      case 5: {  // subnormal times a large value (normalisation of the operand)
        a = RandSign() | static_cast<uint32_t>(Bits() & kMan);
        b = Normal(150, 254);
        break;
      }
      case 6: {  // products deep in the subnormal range and below it
        a = Normal(1, 60);
        b = Normal(40, 100);
        break;
      }
      default:
        a = Operand();
        b = Operand();
        break;
    }
    if (Below(2) != 0u) std::swap(a, b);
    return {a, b};
  }

  /// Operand pair for div.
  std::pair<uint32_t, uint32_t> DivPair() {
    uint32_t a, b;
    switch (Below(12)) {
      case 0: {  // exact quotients: a = q * b with short significands
        const uint32_t qa = (Below(4096) | 1u) << 11;
        const uint32_t qb = (Below(2048) | 1u) << 12;
        const float fa = static_cast<float>(static_cast<double>(0x800000u | qa) *
                                            static_cast<double>(0x800000u | qb) / 8388608.0 /
                                            8388608.0);
        a = RandSign() | (((Below(200) + 20u) << 23) + (__builtin_bit_cast(uint32_t, fa) -
                                                         0x3f800000u));
        b = RandSign() | (Below(200) + 20u) << 23 | qb;
        break;
      }
      case 1: {  // tie in the subnormal range: a divided by 2^k drops exactly one set bit
        const uint32_t k = 1u + Below(24);
        a = RandSign() | (Below(k + 1u) << 23) | static_cast<uint32_t>(Bits() & kMan) | 1u;
        b = RandSign() | (127u + k) << 23;
        break;
      }
      case 2: {  // quotients within a few ulps of 2^-126
        const uint32_t k = Below(100);
        a = NearPow2(1u + k);
        b = NearPow2(127u + k);
        break;
      }
      case 3: {  // quotients around the overflow threshold
        const uint32_t k = Below(100);
        a = NearPow2(254u - k);
        b = NearPow2(127u - k);
        break;
      }
      case 4: {  // near-equal significands (quotient near 1 from either side)
        a = Normal(1, 254);
        b = (a & ~kSign) + Below(5) - 2u;
        b = RandSign() | (((b & kExp) == 0u || (b & kExp) == kExp) ? 0x3f800000u : b);
        if (Below(2) != 0u) b = (b & ~kExp) | (Below(254) + 1u) << 23;
        break;
      }
      case 5: {  // subnormal dividend or divisor
        a = RandSign() | static_cast<uint32_t>(Bits() & kMan);
        b = Operand();
        if (Below(2) != 0u) std::swap(a, b);
        break;
      }
      default:
        a = Operand();
        b = Operand();
        break;
    }
    return {a, b};
  }

  /// Operand for sqrt: the class mix plus exact squares and their neighbours.
  uint32_t SqrtOperand() {
    switch (Below(6)) {
      case 0: {  // s*s with a 12-bit significand s: exact, or a few ulps off it
        const float s = static_cast<float>(0x800u | Below(0x800u)) *
                        std::ldexp(1.0f, static_cast<int>(Below(120)) - 60 - 11);
        const uint32_t sq = __builtin_bit_cast(uint32_t, s * s);
        return sq + Below(3) - 1u;
      }
      case 1:  // subnormal
        return RandSign() | static_cast<uint32_t>(Bits() & kMan) | 1u;
      case 2:  // negative (NaN results)
        return Operand() | kSign;
      default:  // mostly non-negative: the interesting roots
        return Operand() & ~kSign;
    }
  }

  /// Operand for fp32 -> fp16: around the half range with ties at the 13-bit boundary.
  uint32_t F16Operand() {
    const uint32_t sign = RandSign();
    switch (Below(8)) {
      case 0:  // half normal and subnormal range
        return sign | (98u + Below(46)) << 23 | static_cast<uint32_t>(Bits() & kMan);
      case 1: {  // exact ties and their neighbours at the rounding position for that range
        const uint32_t e = 98u + Below(46);
        const uint32_t drop = e >= 113u ? 13u : std::min(23u, 13u + (113u - e));
        const uint32_t half = 1u << (drop - 1u);
        const uint32_t hi = static_cast<uint32_t>(Bits() & kMan) & ~((half << 1) - 1u);
        return sign | e << 23 | ((hi | half) + Below(3) - 1u);
      }
      case 2:  // around 65504 .. 65520 .. inf
        return sign | (0x477fe000u + Below(0x2000u));
      case 3:  // around the smallest subnormal half 2^-24 and half of it
        return sign | (0x33000000u + Below(0x1000000u));
      default:
        return Operand();
    }
  }

  /// Operand for fp32 -> bf16: ties at the 16-bit boundary, the top of the range.
  uint32_t Bf16Operand() {
    const uint32_t sign = RandSign();
    switch (Below(6)) {
      case 0:  // a tie or its neighbours
        return (static_cast<uint32_t>(Bits()) & 0xffff0000u) | (0x8000u + Below(3) - 1u);
      case 1:  // the largest finite values
        return sign | (0x7f7f0000u + Below(0x10000u));
      case 2:  // subnormal ties
        return sign | (static_cast<uint32_t>(Bits()) & 0x007f0000u) | (0x8000u + Below(3) - 1u);
      default:
        return Operand();
    }
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace csd_tb

#endif  // CSDKIT_RTL_FP_TB_TB_GEN_H_
