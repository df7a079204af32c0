// The compressed state formats on the specialised datapath (datapath.h, UpdateQ8) for one
// instruction set. CMake compiles this file with datapath_isa.cpp, once per set, with the same
// CSDKIT_HOST_ISA and -march; datapath.cpp picks one at run time.
//
// A span runs in chunks of kQ8Chunk elements (whole blocks), each while it is in cache:
//   1. the CRCs as read, over the bytes as stored (theta's words or halves, a moment's codes,
//      its absmax values apart: crc_fast.h);
//   2. the moments dequantized into binary32 scratch arrays (DequantQ8: a table value times the
//      block's absmax under the policy, the sign applied after; the table values by VBMI byte
//      shuffles where the processor has them), q8-bf16 theta widened into a third one;
//   3. the binary32 update by Update's own loop for the launch's configuration (theta in place
//      for q8; q8-bf16 without the copy, which is of the rounded theta);
//   4. the moments quantized block by block (QuantizeBlockQ8), the index of each value found
//      with look-ups instead of the threshold search (VBMI byte look-ups through buckets where
//      the processor has them, else one table entry per value: below); q8-bf16 theta rounded
//      stochastically with Philox bits computed for many groups at once, the copy written from
//      it (with streaming stores on long passes, as q8's by Update's loop); then the CRCs as
//      written and the non-finite count. While the blocks are quantized, the next chunk's input
//      lines are requested (NextChunk).
// Every step gives the bits of the state_q8.h function it replaces (tests/state_q8_kernel_test
// runs both datapaths on both instruction sets, the 512-bit one with and without VBMI, against a
// plain composition of those).
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "crc_fast.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"
#include "csdkit/hls/state_q8.h"
#include "datapath.h"
#include "datapath_q8.h"

#ifndef CSDKIT_HOST_ISA
#error "CSDKIT_HOST_ISA must name the instruction set this file is compiled for"
#endif
#define CSDKIT_CAT2(a, b) a##b
#define CSDKIT_CAT(a, b) CSDKIT_CAT2(a, b)

#if !defined(__AVX2__)
#error "datapath_q8_isa.cpp needs at least AVX2 (-march=x86-64-v3)"
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__)
#define CSDKIT_HOST_ZMM 1
#endif

namespace csdkit {
namespace hls {
namespace host {

void CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Span& s);
void CSDKIT_CAT(UpdateQ8, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Q8Span& s,
                                           Q8Integrity* ig);
void CSDKIT_CAT(DequantQ8Blocks, CSDKIT_HOST_ISA)(const uint8_t* codes, const uint32_t* absmax,
                                                  uint32_t blocks, bool is_signed, bool ftz,
                                                  uint32_t* out);
uint32_t CSDKIT_CAT(QuantizeQ8Blocks, CSDKIT_HOST_ISA)(const uint32_t* x, uint32_t blocks,
                                                       bool is_signed, bool ftz, uint8_t* codes,
                                                       uint32_t* absmax);
uint64_t CSDKIT_CAT(RoundBf16Span, CSDKIT_HOST_ISA)(const uint32_t* theta, uint32_t len,
                                                    uint64_t seed, uint64_t step, uint64_t index,
                                                    uint16_t* dst);

namespace {

// ---------------------------------------------------------------------------------------------
// One machine vector: kW 32-bit lanes (a ymm or a zmm register), and its narrow forms.

#ifdef CSDKIT_HOST_ZMM
constexpr uint32_t kW = 16;
constexpr __mmask16 kAll = 0xffff;  // (zero-masking forms: see datapath_isa.cpp)
#else
constexpr uint32_t kW = 8;
#endif
typedef uint32_t VU __attribute__((vector_size(4 * kW)));
typedef int32_t VI __attribute__((vector_size(4 * kW)));
typedef float VF __attribute__((vector_size(4 * kW)));
typedef uint16_t VH __attribute__((vector_size(2 * kW)));
typedef uint8_t VB __attribute__((vector_size(kW)));

// (A broadcast by intrinsic: GCC 12 builds the lane-by-lane form of a value loaded in a loop
// as 16 single-lane masked moves; Philox's round keys, built so, were once half of the
// rounding's instructions.)
inline VU SplatU(uint32_t x) {
#ifdef CSDKIT_HOST_ZMM
  return (VU)_mm512_set1_epi32(static_cast<int>(x));
#else
  return (VU)_mm256_set1_epi32(static_cast<int>(x));
#endif
}
inline VU Load32(const uint32_t* p) {
  VU r;
  std::memcpy(&r, p, sizeof r);
  return r;
}
inline void Store32(uint32_t* p, VU x) { std::memcpy(p, &x, sizeof x); }
inline VU LoadCodes(const uint8_t* p) {
  VB b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(b, VU);  // vpmovzxbd
}
inline void StoreCodes(uint8_t* p, VU k) {
  const VB b = __builtin_convertvector(k, VB);  // every lane < 256
  std::memcpy(p, &b, sizeof b);
}
inline void StoreHalves(uint16_t* p, VU h) {
  const VH x = __builtin_convertvector(h, VH);  // every lane < 65536
  std::memcpy(p, &x, sizeof x);
}

// table[idx] for each lane (idx < the table's length).
inline VU Gather(const uint32_t* table, VU idx) {
#ifdef CSDKIT_HOST_ZMM
  return (VU)_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kAll, (__m512i)idx, table, 4);
#else
  return (VU)_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), (__m256i)idx, 4);
#endif
}

// The largest lane.
inline uint32_t MaxLane(VU x) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < kW; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// The policy on binary32 bit patterns (fp32.h's Flush): under FTZ/DAZ a zero-exponent value
// loses its mantissa.
template <bool kFtz>
inline VU PolU(VU u) {
  if constexpr (!kFtz) {
    return u;
  } else {
#ifdef CSDKIT_HOST_ZMM
    // One test into a mask register and one masked AND (the vector form compiles to four).
    return (VU)_mm512_mask_and_epi32((__m512i)u, _mm512_testn_epi32_mask((__m512i)u,
                                                                        _mm512_set1_epi32(kExpMask)),
                                     (__m512i)u, _mm512_set1_epi32(static_cast<int>(kSignMask)));
#else
    return u & ~((VU)((u & kExpMask) == 0u) & kManMask);
#endif
  }
}
template <bool kFtz>
inline float PolScalar(float x) {
  const uint32_t u = F2U(x);
  return kFtz && (u & kExpMask) == 0u ? U2F(u & kSignMask) : x;
}

// ---------------------------------------------------------------------------------------------
// Dequantization: DequantQ8 lane for lane. The map's value (binary32, exact; looked up as
// DequantBlocks says), one binary32 multiplication by the block's absmax read under the policy
// (the table values are normal or zero: the policy leaves them), the NaN result canonicalised
// and the policy applied to the result, then the code's sign.

#ifdef CSDKIT_HOST_ZMM
// With 512-bit vectors but no VBMI the signed map's value comes from registers: the table in 8 vectors of
// 16 entries, each two of them a 32-entry look-up (vpermt2ps on the code's low 5 bits), the
// four results chosen by the code's bits 5 and 6. On the processor measured the 7 shuffles and
// blends cost about half of a 16-lane gather.
struct SignedMapRegs {
  __m512 t[8];
  SignedMapRegs() {
    for (uint32_t k = 0; k < 8; ++k) t[k] = _mm512_loadu_ps(kQ8SignedMag + 16 * k);
  }
  // kQ8SignedMag[c] for each lane (c < 128).
  VF Lookup(VU c) const {
    const __m512i i = (__m512i)c;
    const __mmask16 b5 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32));
    const __mmask16 b6 = _mm512_test_epi32_mask(i, _mm512_set1_epi32(64));
    const auto quarter = [&](uint32_t k) {  // entries 64 * k .. 64 * k + 63
      return _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t[4 * k], i, t[4 * k + 1]),
                                  _mm512_permutex2var_ps(t[4 * k + 2], i, t[4 * k + 3]));
    };
    return (VF)_mm512_mask_blend_ps(b6, quarter(0), quarter(1));
  }
};
#endif

// out[i] = kQ8Unsigned[codes[i]] for a block, by scalar loads (not vectorised: the compiler
// would make it a gather).
__attribute__((optimize("no-tree-vectorize"), noinline)) void LookUpUnsigned(
    const uint8_t* codes, uint32_t* out) {
  for (uint32_t i = 0; i < kQ8Block; i += 8) {
    uint64_t eight;
    std::memcpy(&eight, codes + i, 8);
    for (uint32_t k = 0; k < 8; ++k) out[i + k] = kQ8Unsigned[(eight >> (8 * k)) & 0xffu];
  }
}

// The map's values: the signed map (128 entries) by shuffles (AVX-512) or a gather (AVX2); the
// unsigned one (256) by scalar loads first (LookUpUnsigned), which measured faster than 15
// shuffles and blends (AVX-512) or a gather (AVX2) (docs/host-model.md).
template <bool kSigned, bool kFtz>
void DequantBlocks(const uint8_t* codes, const uint32_t* absmax, uint32_t blocks, uint32_t* out) {
  constexpr bool kScalarMap = !kSigned;
#ifdef CSDKIT_HOST_ZMM
  const SignedMapRegs map;
#else
  const uint32_t* const table = kQ8SignedMag;
#endif
  for (uint32_t b = 0; b < blocks; ++b) {
    VF a;
    const float as = PolScalar<kFtz>(U2F(absmax[b]));
    for (uint32_t i = 0; i < kW; ++i) a[i] = as;
    const uint8_t* const cb = codes + size_t{b} * kQ8Block;
    uint32_t* const ob = out + size_t{b} * kQ8Block;
    if constexpr (kScalarMap) LookUpUnsigned(cb, ob);
    _Pragma("GCC unroll 4") for (uint32_t i = 0; i < kQ8Block; i += kW) {
      const VU c = LoadCodes(cb + i);
#ifdef CSDKIT_HOST_ZMM
      const VF t = kScalarMap ? (VF)Load32(ob + i) : map.Lookup(c & 0x7fu);
#else
      const VF t = kScalarMap ? (VF)Load32(ob + i) : (VF)Gather(table, c & 0x7fu);
#endif
      VU p = (VU)(t * a);
      const VU nan = (VU)((p & ~kSignMask) > kExpMask);
      p = (nan & kCanonicalNan) | (~nan & p);
      p = PolU<kFtz>(p);
      if constexpr (kSigned) p ^= (c & 0x80u) << 24;
      Store32(ob + i, p);
    }
  }
}

#ifdef CSDKIT_HOST_ZMM
// With AVX-512 VBMI (not part of x86-64-v4: chosen at run time, Q8Vbmi) the map's values come
// from byte shuffles, 64 codes at a time: each of the value's four bytes from its own plane of
// the table (vpermt2b looks up 128 bytes held in two registers; the unsigned map's 256 take two
// and a blend on the code's top bit, the signed map's 128 magnitudes one, which ignores the sign
// bit), the four byte vectors interleaved into binary32 words by two rounds of unpacking.
// Unpacking works within 128-bit lanes, so the codes are first permuted (kVbmiOrder) so that
// the four word vectors come out holding elements 0-15, 16-31, 32-47, 48-63.
struct VbmiPlanes {
  uint8_t b[4][256];  // b[k][c]: byte k (little-endian) of the map's value for code c
};
constexpr VbmiPlanes MakeVbmiPlanes(const uint32_t* map, uint32_t n) {
  VbmiPlanes p{};
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t c = 0; c < 256; ++c) p.b[k][c] = static_cast<uint8_t>(map[c % n] >> (8 * k));
  }
  return p;
}
alignas(64) constexpr VbmiPlanes kPlanesSigned = MakeVbmiPlanes(kQ8SignedMag, 128);
alignas(64) constexpr VbmiPlanes kPlanesUnsigned = MakeVbmiPlanes(kQ8Unsigned, 256);

// Byte j of the permuted codes, j = 16 * lane + 4 * k + i (lane, k, i < 4), is code
// 16 * k + 4 * lane + i: after the unpacking, word vector k's lane `lane` holds elements
// 16 * k + 4 * lane .. + 3.
struct VbmiOrder {
  uint8_t j[64];
};
constexpr VbmiOrder MakeVbmiOrder() {
  VbmiOrder o{};
  for (uint32_t lane = 0; lane < 4; ++lane) {
    for (uint32_t k = 0; k < 4; ++k) {
      for (uint32_t i = 0; i < 4; ++i) o.j[16 * lane + 4 * k + i] = 16 * k + 4 * lane + i;
    }
  }
  return o;
}
alignas(64) constexpr VbmiOrder kVbmiOrder = MakeVbmiOrder();

// Four byte vectors (bytes 0-3 of 64 words, the words in kVbmiOrder) interleaved into the 64
// words, in element order: w[k] holds words 16k .. 16k + 15.
inline void WordsFromPlanes(const __m512i by[4], __m512i w[4]) {
  const __m512i w01l = _mm512_unpacklo_epi8(by[0], by[1]), w01h = _mm512_unpackhi_epi8(by[0], by[1]);
  const __m512i w23l = _mm512_unpacklo_epi8(by[2], by[3]), w23h = _mm512_unpackhi_epi8(by[2], by[3]);
  w[0] = _mm512_unpacklo_epi16(w01l, w23l);
  w[1] = _mm512_unpackhi_epi16(w01l, w23l);
  w[2] = _mm512_unpacklo_epi16(w01h, w23h);
  w[3] = _mm512_unpackhi_epi16(w01h, w23h);
}

template <bool kSigned, bool kFtz>
__attribute__((target("avx512vbmi"), noinline)) void DequantBlocksVbmi(const uint8_t* codes,
                                                                       const uint32_t* absmax,
                                                                       uint32_t blocks,
                                                                       uint32_t* out) {
  const VbmiPlanes& pl = kSigned ? kPlanesSigned : kPlanesUnsigned;
  __m512i t[4][4];
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t q = 0; q < (kSigned ? 2u : 4u); ++q) t[k][q] = _mm512_loadu_si512(pl.b[k] + 64 * q);
  }
  const __m512i order = _mm512_loadu_si512(kVbmiOrder.j);
  const __m512i nan_min = _mm512_set1_epi32(static_cast<int>(kExpMask + 1u));
  const __m512i canon = _mm512_set1_epi32(static_cast<int>(kCanonicalNan));
  const __m512i exp = _mm512_set1_epi32(static_cast<int>(kExpMask));
  const __m512i man = _mm512_set1_epi32(static_cast<int>(kManMask));
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(kSignMask));
  // The products are NaN only where absmax (as read) is NaN or infinite: a table value is 1 at
  // most and finite, so a finite absmax gives finite products and needs no canonical NaN.
  for (uint32_t b = 0; b < blocks; ++b) {
    const float af = PolScalar<kFtz>(U2F(absmax[b]));
    const __m512 a = _mm512_set1_ps(af);
    const uint8_t* const cb = codes + size_t{b} * kQ8Block;
    uint32_t* const ob = out + size_t{b} * kQ8Block;
    const auto block = [&](auto nan_possible) __attribute__((target("avx512vbmi"))) {
      _Pragma("GCC unroll 2") for (uint32_t i = 0; i < kQ8Block; i += 64) {
        const __m512i c0 = _mm512_loadu_si512(cb + i);
        const __m512i c = _mm512_maskz_permutexvar_epi8(~__mmask64{0}, order, c0);
        __m512i by[4];
        for (uint32_t k = 0; k < 4; ++k) {
          const __m512i lo = _mm512_permutex2var_epi8(t[k][0], c, t[k][1]);
          if constexpr (kSigned) {
            by[k] = lo;
          } else {
            const __m512i hi = _mm512_permutex2var_epi8(t[k][2], c, t[k][3]);
            by[k] = _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), lo, hi);
          }
        }
        __m512i w[4];
        WordsFromPlanes(by, w);
        const __mmask64 neg = kSigned ? _mm512_movepi8_mask(c0) : 0;  // the codes' sign bits
        for (uint32_t k = 0; k < 4; ++k) {
          __m512i p = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(w[k]), a));
          // NaN (magnitude above the exponent mask) -> canonical.
          if constexpr (decltype(nan_possible)::value) {
            p = _mm512_mask_mov_epi32(
                p, _mm512_cmpge_epu32_mask((__m512i)((VU)p & ~kSignMask), nan_min), canon);
          }
          if constexpr (kFtz) {
            p = _mm512_mask_andnot_epi32(p, _mm512_testn_epi32_mask(p, exp), man, p);
          }
          if constexpr (kSigned) {
            p = _mm512_mask_xor_epi32(p, static_cast<__mmask16>(neg >> (16 * k)), p, sign);
          }
          _mm512_storeu_si512(ob + i + 16 * k, p);
        }
      }
    };
    if (!IsNonFinite(F2U(af))) {
      block(std::false_type{});
    } else {
      block(std::true_type{});
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// Quantization: QuantizeBlockQ8 block for block.
//
// The index of q (Q8Index: the number of thresholds <= q, q a non-negative binary32 as bits)
// from one look-up keyed by q's top 16 bits (sign, exponent, 7 mantissa bits): no two
// thresholds of either map share a key (checked below, at compile time), so the thresholds
// <= q are those of lower keys (a count per key) and at most one of q's own key (its low 16
// bits per key, or 2^16 when the key has none). Keys below the first threshold's share the
// entry "none below, none here"; keys above 1.0's (no threshold is >= 1.0) clamp to 1.0's,
// whose entry counts them all. An entry packs the count (8 bits) and the low bits (17).

constexpr uint32_t kLutMax = 3072;  // entries of the larger map (2900)

struct Q8Lut {
  uint32_t key0 = 0;  // the key of entry 0: one below the first threshold's key
  uint32_t last = 0;  // the largest entry index (1.0's key)
  uint32_t e[kLutMax] = {};
};

constexpr Q8Lut MakeQ8Lut(const uint32_t* thr, uint32_t n) {
  Q8Lut l;
  l.key0 = (thr[0] >> 16) - 1u;
  l.last = 0x3f80u - l.key0;
  uint32_t below = 0;  // thresholds of keys before the current one
  for (uint32_t j = 0; j <= l.last; ++j) {
    const uint32_t key = l.key0 + j;
    uint32_t low = 0x10000u, here = 0;
    for (uint32_t t = below; t < n && (thr[t] >> 16) == key; ++t, ++here) low = thr[t] & 0xffffu;
    if (here > 1u) throw "two thresholds share a key";  // not a constant expression: no build
    l.e[j] = below | (low << 8);
    below += here;
  }
  if (below != n) throw "a threshold at or above 1.0";
  return l;
}

constexpr Q8Lut kLutSigned = MakeQ8Lut(kQ8SignedThr, 127);
constexpr Q8Lut kLutUnsigned = MakeQ8Lut(kQ8UnsignedThr, 255);
static_assert(kLutUnsigned.last < kLutMax && kLutSigned.last < kLutMax, "look-up table size");

// js[i] = table[js[i]] for a block, by scalar loads (not vectorised: the compiler would make
// it a gather).
__attribute__((optimize("no-tree-vectorize"), noinline)) void LookUp(const uint32_t* table,
                                                                     uint32_t* js) {
  for (uint32_t i = 0; i < kQ8Block; i += 2) {
    uint64_t two;
    std::memcpy(&two, js + i, 8);
    js[i] = table[static_cast<uint32_t>(two)];
    js[i + 1] = table[two >> 32];
  }
}

#ifdef CSDKIT_HOST_ZMM
// With VBMI the index comes from byte shuffles, 64 values at a time. q's exponent picks a row of
// buckets (one register look-up of 32 entries: how many mantissa bits index the row's buckets,
// as few as keep every two thresholds of that binade in different buckets, and where its first
// bucket is), and the bucket's count of thresholds below its start is a byte look-up (the signed
// map has 216 buckets, two registers pairs; the unsigned 441, four). A bucket holds at most one
// threshold, and if it holds one that is thr[count]: the index is count + (q >= thr[count]),
// thr[count] looked up by its four byte planes as DequantBlocksVbmi looks up map values (padded
// with 0xffffffff: in a bucket without a threshold, and past the last, q is below it).
// Exponents below the first threshold's share bucket 0 (count 0), those of 1.0 and above the
// last bucket (count = all). The bucket numbers are packed into bytes in kVbmiOrder's order, so
// that the thresholds come out of the unpacking in element order.
// A row's entry is shift << 16 | (top - first) mod 2^16, where top = q >> shift for the row's
// first q (the exponent and the row's mantissa bits; shift 31 takes none: q is non-negative),
// so that the bucket is (q >> shift) - entry in the low 16 bits, three instructions.
// The non-zero rule costs no mask: in the table of thresholds, thr[0] is replaced by the bits 1
// (the least positive value) and q by max(q, min(|x|, 1)), which differs from q only where q is
// zero, as 1 if x is not. A bucket of count 0 then gives 0 + (|x| != 0), where it gave
// max(0 + (q >= thr[0]), |x| != 0): the same, since such a bucket holds no q >= thr[0] but
// thr[0]'s own, whose q are non-zero. Buckets of larger counts give the codes they gave, none 0.
// (The tables are read with unaligned loads, and aligned besides.)
struct VbmiQuant {
  alignas(64) uint32_t param[32] = {};  // row r = max(e - e0 + 1, 0): shift << 16 | offset
  alignas(64) uint8_t count[512] = {};  // per bucket: thresholds below its start
  alignas(64) uint8_t thr[4][256] = {};  // byte k of thr[c] (thr[0] = 1), 0xffffffff past the last
  uint32_t e0 = 0;    // the binary32 exponent field of the first threshold
  uint32_t rows = 0;  // rows of the parameter table: below, e0 .. 126, 1.0 and above
  uint32_t buckets = 0;
};

constexpr VbmiQuant MakeVbmiQuant(const uint32_t* thr, uint32_t n) {
  VbmiQuant q;
  q.e0 = thr[0] >> 23;
  uint32_t b = 1;  // bucket 0: below e0
  // The row's entry: the bucket is (q >> shift) - entry, modulo 2^16.
  const auto entry = [](uint32_t first, uint32_t top, uint32_t shift) {
    return ((top - first) & 0xffffu) | shift << 16;
  };
  q.param[0] = entry(0, 0, 31);
  for (uint32_t e = q.e0; e < 127u; ++e) {
    // The fewest top mantissa bits that separate the binade's thresholds.
    uint32_t m = 0;
    for (;; ++m) {
      bool clash = false;
      for (uint32_t i = 0; i + 1 < n; ++i) {
        clash |= (thr[i] >> 23) == e && (thr[i + 1] >> 23) == e &&
                 ((thr[i] & 0x7fffffu) >> (23 - m)) == ((thr[i + 1] & 0x7fffffu) >> (23 - m));
      }
      if (!clash) break;
    }
    q.param[e - q.e0 + 1] = entry(b, (e << 23) >> (23 - m), 23 - m);
    for (uint32_t j = 0; j < (1u << m); ++j) {
      const uint32_t start = e << 23 | j << (23 - m);
      uint32_t below = 0;
      for (uint32_t i = 0; i < n; ++i) below += thr[i] < start ? 1u : 0u;
      q.count[b + j] = static_cast<uint8_t>(below);
    }
    b += 1u << m;
  }
  q.rows = 127u - q.e0 + 2u;
  // 1.0 and above: the exponent of q <= 1 + 2^-23 (the largest |x| times 1 / itself) is 127.
  q.param[q.rows - 1] = entry(b, 0, 31);
  q.count[b] = static_cast<uint8_t>(n);
  q.buckets = b + 1;
  if (q.rows > 32u || q.buckets > 512u) throw "bucket tables too large";
  for (uint32_t c = 0; c < 256; ++c) {
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t t = c == 0 ? 1u : c < n ? thr[c] : 0xffffffffu;
      q.thr[k][c] = static_cast<uint8_t>(t >> (8 * k));
    }
  }
  return q;
}

alignas(64) constexpr VbmiQuant kVqSigned = MakeVbmiQuant(kQ8SignedThr, 127);
alignas(64) constexpr VbmiQuant kVqUnsigned = MakeVbmiQuant(kQ8UnsignedThr, 255);
static_assert(kVqSigned.buckets <= 256 && kVqUnsigned.buckets <= 512, "bucket table size");

// Byte-permutation indices that gather byte h of the bucket numbers of words 16k + 4 * lane + i
// (h = 0 the low byte, 1 the next, which holds bit 8) into position 16 * lane + 4 * k + i
// (kVbmiOrder), from vectors k = 0, 1 (the first pair) and k = 2, 3 (the second).
struct VbmiPack {
  uint8_t j[2][2][64];  // [h][pair]
};
constexpr VbmiPack MakeVbmiPack() {
  VbmiPack p{};
  for (uint32_t h = 0; h < 2; ++h) {
    for (uint32_t lane = 0; lane < 4; ++lane) {
      for (uint32_t k = 0; k < 4; ++k) {
        for (uint32_t i = 0; i < 4; ++i) {
          p.j[h][k / 2][16 * lane + 4 * k + i] =
              static_cast<uint8_t>(64 * (k % 2) + 4 * (4 * lane + i) + h);
        }
      }
    }
  }
  return p;
}
alignas(64) constexpr VbmiPack kVbmiPack = MakeVbmiPack();

// The codes of one block, its values x (as read) and r = 1 / absmax given (absmax a normal).
template <bool kSigned, bool kFtz>
__attribute__((target("avx512vbmi"), noinline)) void CodesVbmi(const uint32_t* xb, float r,
                                                              uint8_t* cb) {
  const VbmiQuant& vq = kSigned ? kVqSigned : kVqUnsigned;
  const __m512 rv = _mm512_set1_ps(r);
  const __m512i p0 = _mm512_loadu_si512(vq.param), p1 = _mm512_loadu_si512(vq.param + 16);
  const __m512i row_off = _mm512_set1_epi32(static_cast<int>(vq.e0 - 1));
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i one8 = _mm512_set1_epi8(1), sign8 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i order = _mm512_loadu_si512(kVbmiOrder.j);
  const __m512i pk[2][2] = {{_mm512_loadu_si512(kVbmiPack.j[0][0]), _mm512_loadu_si512(kVbmiPack.j[0][1])},
                            {_mm512_loadu_si512(kVbmiPack.j[1][0]), _mm512_loadu_si512(kVbmiPack.j[1][1])}};
  constexpr __mmask64 kPair1 = 0xff00ff00ff00ff00ull;  // positions of vectors k = 2, 3
  for (uint32_t i = 0; i < kQ8Block; i += 64) {
    __m512i u[4], q[4], bk[4];
    for (uint32_t k = 0; k < 4; ++k) {
      u[k] = _mm512_loadu_si512(xb + i + 16 * k);
      const __m512i mag = (__m512i)PolU<kFtz>((VU)u[k] & ~kSignMask);
      const __m512i qk = (__m512i)PolU<kFtz>((VU)((VF)mag * (VF)rv));
      // The row of q's exponent (e - e0 + 1 saturated at 0 in the low half-word; e <= 127),
      // its entry, the bucket in the low 16 bits.
      // (Vector-extension shifts: the intrinsics' undefined pass-through operand draws GCC 12's
      // uninitialised-use warnings.)
      const __m512i row = _mm512_subs_epu16((__m512i)((VU)qk >> 23), row_off);
      const VU prm = (VU)_mm512_permutex2var_epi32(p0, row, p1);
      bk[k] = (__m512i)(((VU)qk >> (prm >> 16)) - prm);
      q[k] = _mm512_maskz_max_epu32(kAll, qk, _mm512_maskz_min_epu32(kAll, mag, one));  // (above)
    }
    // The bucket numbers as bytes (and their bit 8 as a mask), in kVbmiOrder.
    const __m512i b8 = _mm512_mask_blend_epi8(kPair1,
                                              _mm512_permutex2var_epi8(bk[0], pk[0][0], bk[1]),
                                              _mm512_permutex2var_epi8(bk[2], pk[0][1], bk[3]));
    const __mmask64 b7 = _mm512_movepi8_mask(b8);
    const auto table = [&](const uint8_t* t, uint32_t k) { return _mm512_loadu_si512(t + 64 * k); };
    __m512i cnt = _mm512_mask_blend_epi8(
        b7, _mm512_permutex2var_epi8(table(vq.count, 0), b8, table(vq.count, 1)),
        _mm512_permutex2var_epi8(table(vq.count, 2), b8, table(vq.count, 3)));
    if constexpr (!kSigned) {
      const __m512i h8 = _mm512_mask_blend_epi8(kPair1,
                                                _mm512_permutex2var_epi8(bk[0], pk[1][0], bk[1]),
                                                _mm512_permutex2var_epi8(bk[2], pk[1][1], bk[3]));
      const __m512i hi = _mm512_mask_blend_epi8(
          b7, _mm512_permutex2var_epi8(table(vq.count, 4), b8, table(vq.count, 5)),
          _mm512_permutex2var_epi8(table(vq.count, 6), b8, table(vq.count, 7)));
      cnt = _mm512_mask_blend_epi8(_mm512_test_epi8_mask(h8, h8), cnt, hi);
    }
    // thr[count] by its byte planes, and the counts as words, both in element order.
    const __mmask64 c7 = _mm512_movepi8_mask(cnt);
    __m512i by[4];
    for (uint32_t k = 0; k < 4; ++k) {
      const __m512i lo = _mm512_permutex2var_epi8(table(vq.thr[k], 0), cnt, table(vq.thr[k], 1));
      if constexpr (kSigned) {
        by[k] = lo;  // counts <= 127
      } else {
        by[k] = _mm512_mask_blend_epi8(
            c7, lo, _mm512_permutex2var_epi8(table(vq.thr[k], 2), cnt, table(vq.thr[k], 3)));
      }
    }
    __m512i t[4];
    WordsFromPlanes(by, t);
    // The code bytes in element order: count + (q >= thr[count]) (with the non-zero rule, above),
    // the sign bit on; the compares' masks joined into 64-bit ones, the counts moved to element
    // order by one byte permutation (kVbmiOrder is its own inverse), stored at once.
    uint64_t ge = 0, neg = 0;
    for (uint32_t k = 0; k < 4; ++k) {
      ge |= uint64_t{_cvtmask16_u32(_mm512_cmpge_epu32_mask(q[k], t[k]))} << (16 * k);
      if constexpr (kSigned) {
        neg |= uint64_t{_cvtmask16_u32(_mm512_movepi32_mask(u[k]))} << (16 * k);
      }
    }
    __m512i code = _mm512_maskz_permutexvar_epi8(~__mmask64{0}, order, cnt);
    code = _mm512_mask_add_epi8(code, _cvtu64_mask64(ge), code, one8);
    // (The signed map's index is below 0x80: adding the sign bit sets it.)
    if constexpr (kSigned) code = _mm512_mask_add_epi8(code, _cvtu64_mask64(neg), code, sign8);
    _mm512_storeu_si512(cb + i, code);
  }
}
#endif

// The next chunk's input lines (theta as stored, each moment's codes and absmax values, the
// gradient), requested in software a few at a time while this chunk's moments are quantized:
// that work reads no memory, so without the requests each stream of the next chunk started cold
// and its first phase waited on memory (the hardware prefetchers run only a short way ahead of a
// stream's last access). At the start of every block quantized, an equal share of them
// (docs/host-model.md: 2.0 -> 1.6-1.7 ns per q8 element at n = 2^24 on a Zen 5; bursts per block
// measured as fast as requests spread over each block's vectors).
class NextChunk {
 public:
  // The bytes [p, p + bytes) will be read.
  void Add(const void* p, size_t bytes) {
    if (n_ == kRanges || bytes == 0) return;
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
    at_[n_] = first;
    end_[n_] = reinterpret_cast<uintptr_t>(p) + bytes;
    ++n_;
  }
  // Spreads the lines added over `blocks` calls of Issue.
  void Spread(uint32_t blocks) {
    uintptr_t lines = 0;
    for (uint32_t k = 0; k < n_; ++k) lines += (end_[k] - at_[k] + 63) / 64;
    per_ = blocks == 0 ? 0 : static_cast<uint32_t>((lines + blocks - 1) / blocks);
  }
  // Requests the next share of lines.
  void Issue() {
    uint32_t count = per_;
    while (count > 0 && k_ < n_) {
      if (at_[k_] >= end_[k_]) {
        ++k_;
        continue;
      }
      _mm_prefetch(reinterpret_cast<const char*>(at_[k_]), _MM_HINT_T0);
      at_[k_] += 64;
      --count;
    }
  }

 private:
  static constexpr uint32_t kRanges = 6;
  uintptr_t at_[kRanges] = {}, end_[kRanges] = {};
  uint32_t n_ = 0, k_ = 0, per_ = 0;
};

// Quantizes `blocks` blocks of binary32 values x into codes and one absmax each, as
// QuantizeBlockQ8 does; returns the number of blocks with a non-finite value (absmax NaN).
// Requests a share of `next`'s lines at each block, when given.
template <bool kSigned, bool kFtz, bool kVbmi>
uint32_t QuantizeBlocks(const uint32_t* x, uint32_t blocks, uint8_t* codes, uint32_t* absmax,
                        NextChunk* next) {
  const Q8Lut& lut = kSigned ? kLutSigned : kLutUnsigned;
  const VI key0 = (VI)SplatU(lut.key0), last = (VI)SplatU(lut.last), zero = {};
  uint32_t bad = 0;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t* const xb = x + size_t{b} * kQ8Block;
    uint8_t* const cb = codes + size_t{b} * kQ8Block;
    if (next != nullptr) next->Issue();
    // |x| as read (DAZ), its maximum (as bits: the exponent mask or above where any value is
    // non-finite).
    VU amax = {};
    _Pragma("GCC unroll 16") for (uint32_t i = 0; i < kQ8Block; i += kW) {
      const VU mag = PolU<kFtz>(Load32(xb + i) & ~kSignMask);
      amax = mag > amax ? mag : amax;
    }
    const uint32_t a = MaxLane(amax);
    if (__builtin_expect(IsNonFinite(a), 0)) {
      std::memset(cb, 0, kQ8Block);
      absmax[b] = kCanonicalNan;
      ++bad;
      continue;
    }
    if (a < 0x00800000u) {  // the tiny block: sign-only codes
      _Pragma("GCC unroll 4") for (uint32_t i = 0; i < kQ8Block; i += kW) {
        StoreCodes(cb + i, kSigned ? (Load32(xb + i) >> 31) << 7 : VU{});
      }
      absmax[b] = 0u;
      continue;
    }
    const float r = PolScalar<kFtz>(1.0f / U2F(a));  // an operand of q's multiplication
#ifdef CSDKIT_HOST_ZMM
    if constexpr (kVbmi) {
      CodesVbmi<kSigned, kFtz>(xb, r, cb);
      absmax[b] = a;
      continue;
    }
#endif
    VF rv;
    for (uint32_t i = 0; i < kW; ++i) rv[i] = r;
    // q and its table entry's index for the whole block, then the entries by scalar loads (on
    // the processor measured, faster than vector gathers: docs/host-model.md), then the codes.
    alignas(64) uint32_t qs[kQ8Block], js[kQ8Block];
    _Pragma("GCC unroll 4") for (uint32_t i = 0; i < kQ8Block; i += kW) {
      const VU mag = PolU<kFtz>(Load32(xb + i) & ~kSignMask);
      const VU q = PolU<kFtz>((VU)((VF)mag * rv));
      VI j = (VI)(q >> 16) - key0;
      j = j < zero ? zero : j;
      j = j > last ? last : j;
      Store32(qs + i, q);
      Store32(js + i, (VU)j);
    }
    LookUp(lut.e, js);
    _Pragma("GCC unroll 4") for (uint32_t i = 0; i < kQ8Block; i += kW) {
      const VU u = Load32(xb + i);
      const VU mag = PolU<kFtz>(u & ~kSignMask);
      const VU q = Load32(qs + i);
      const VU e = Load32(js + i);
      VU k = (e & 0xffu) - (VU)((q & 0xffffu) >= (e >> 8));  // (a true compare is all ones)
      k |= (VU)((k == 0u) & (mag != 0u)) & 1u;  // a non-zero value never becomes zero
      if constexpr (kSigned) k |= (u >> 31) << 7;
      StoreCodes(cb + i, k);
    }
    absmax[b] = a;
  }
  return bad;
}

// ---------------------------------------------------------------------------------------------
// q8-bf16 theta: the stochastic rounding (RoundBf16Stochastic) with Random16Group's bits,
// Philox4x32-10 run for kW groups of 8 elements at once (one counter per group).
//
// A word of kW counters is held in two vectors of kW/2 64-bit lanes, its value in each lane's
// low half: the multiplier (vpmuludq) reads only that half and leaves the 64-bit product,
// whose low half is the next round's lo word as it stands and whose high half is one shift
// away from the next hi word; the high halves of the lanes are never read. Half 0 holds
// groups 4j, 4j + 1 of each 128-bit lane j, half 1 groups 4j + 2, 4j + 3, so that the low
// halves of the two, taken two by two (vshufps), are the word in group order.
typedef uint64_t VQ __attribute__((vector_size(4 * kW)));

// The 64-bit products of the low halves of a's and m's lanes (their high halves are ignored).
inline VQ MulLow(VQ a, VQ m) {
#ifdef CSDKIT_HOST_ZMM
  return (VQ)_mm512_maskz_mul_epu32(0xff, (__m512i)a, (__m512i)m);
#else
  return (VQ)_mm256_mul_epu32((__m256i)a, (__m256i)m);
#endif
}

// The ten rounds' keys of Philox4x32x10 under (k0, k1): [0][r], [1][r].
struct PhiloxKeys {
  uint32_t k[2][10];
};
inline PhiloxKeys MakePhiloxKeys(uint32_t k0, uint32_t k1) {
  PhiloxKeys pk;
  for (int round = 0; round < 10; ++round) {
    pk.k[0][round] = k0;
    pk.k[1][round] = k1;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return pk;
}

// Philox4x32x10 for kN sets of kW groups: set n the groups e + n * kW + g (g < kW) of step
// `step`; w[n][k] the output word k of each group, lane g group g. The sets' rounds are
// interleaved: one set's round is a chain of dependent multiplies, and the sets side by side
// keep more of them in flight.
template <uint32_t kN>
inline void PhiloxWords(uint64_t e, uint64_t step, const PhiloxKeys& pk, VU w[][4]) {
  VQ g;  // the group of each lane of half 0 (half 1: + 2)
  for (uint32_t l = 0; l < kW / 2; ++l) g[l] = 4 * (l / 2) + l % 2;
  VQ c[kN][2][4];
  for (uint32_t n = 0; n < kN; ++n) {
    for (uint32_t h = 0; h < 2; ++h) {
      const VQ x = (e + n * kW + 2 * h) + g;  // the group number: low word, high word
      c[n][h][0] = x;
      c[n][h][1] = x >> 32;
      c[n][h][2] = (VQ){} + step;
      c[n][h][3] = (VQ){} + (step >> 32);
    }
  }
  const VQ m0 = (VQ){} + 0xD2511F53u, m1 = (VQ){} + 0xCD9E8D57u;
  _Pragma("GCC unroll 10") for (int round = 0; round < 10; ++round) {
    const VQ k0 = (VQ){} + pk.k[0][round], k1 = (VQ){} + pk.k[1][round];
    for (uint32_t n = 0; n < kN; ++n) {
      for (uint32_t h = 0; h < 2; ++h) {
        VQ* const x = c[n][h];
        const VQ p0 = MulLow(x[0], m0), p1 = MulLow(x[2], m1);
        x[0] = (p1 >> 32) ^ x[1] ^ k0;
        x[2] = (p0 >> 32) ^ x[3] ^ k1;
        x[1] = p1;
        x[3] = p0;
      }
    }
  }
  for (uint32_t n = 0; n < kN; ++n) {
    for (uint32_t k = 0; k < 4; ++k) {
      const VU a = (VU)c[n][0][k], b = (VU)c[n][1][k];
#ifdef CSDKIT_HOST_ZMM
      w[n][k] = __builtin_shufflevector(a, b, 0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14,
                                        28, 30);
#else
      w[n][k] = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14);
#endif
    }
  }
}

// Group g's four words are the 16-bit numbers of its elements 8g .. 8g + 7 in order (low half
// first), so the words of consecutive groups side by side (w0[g], w1[g], w2[g], w3[g], w0[g+1],
// ...) are the numbers of consecutive elements: the 4 x kW transpose below. out[k] holds groups
// kW/4 * k .. kW/4 * k + kW/4 - 1, i.e. elements 2kW * k .. 2kW * k + 2kW - 1, two per lane.
inline void Transpose(const VU w[4], VU out[4]) {
#ifdef CSDKIT_HOST_ZMM
  const VU a_lo = __builtin_shufflevector(w[0], w[1], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                          22, 7, 23);
  const VU a_hi = __builtin_shufflevector(w[0], w[1], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                          29, 14, 30, 15, 31);
  const VU b_lo = __builtin_shufflevector(w[2], w[3], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                          22, 7, 23);
  const VU b_hi = __builtin_shufflevector(w[2], w[3], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                          29, 14, 30, 15, 31);
  typedef uint64_t V64 __attribute__((vector_size(64)));
  out[0] = (VU)__builtin_shufflevector((V64)a_lo, (V64)b_lo, 0, 8, 1, 9, 2, 10, 3, 11);
  out[1] = (VU)__builtin_shufflevector((V64)a_lo, (V64)b_lo, 4, 12, 5, 13, 6, 14, 7, 15);
  out[2] = (VU)__builtin_shufflevector((V64)a_hi, (V64)b_hi, 0, 8, 1, 9, 2, 10, 3, 11);
  out[3] = (VU)__builtin_shufflevector((V64)a_hi, (V64)b_hi, 4, 12, 5, 13, 6, 14, 7, 15);
#else
  const VU a_lo = __builtin_shufflevector(w[0], w[1], 0, 8, 1, 9, 2, 10, 3, 11);
  const VU a_hi = __builtin_shufflevector(w[0], w[1], 4, 12, 5, 13, 6, 14, 7, 15);
  const VU b_lo = __builtin_shufflevector(w[2], w[3], 0, 8, 1, 9, 2, 10, 3, 11);
  const VU b_hi = __builtin_shufflevector(w[2], w[3], 4, 12, 5, 13, 6, 14, 7, 15);
  typedef uint64_t V64 __attribute__((vector_size(32)));
  out[0] = (VU)__builtin_shufflevector((V64)a_lo, (V64)b_lo, 0, 4, 1, 5);
  out[1] = (VU)__builtin_shufflevector((V64)a_lo, (V64)b_lo, 2, 6, 3, 7);
  out[2] = (VU)__builtin_shufflevector((V64)a_hi, (V64)b_hi, 0, 4, 1, 5);
  out[3] = (VU)__builtin_shufflevector((V64)a_hi, (V64)b_hi, 2, 6, 3, 7);
#endif
}

// The 16-bit numbers of the kW elements held two per lane in lanes [h * kW/2, h * kW/2 + kW/2)
// of x, one per lane (zero-extended: vpmovzxwd).
inline VU Spread(VU x, uint32_t h) {
#ifdef CSDKIT_HOST_ZMM
  typedef uint64_t V8 __attribute__((vector_size(64)));
  const __m256i half = h == 0 ? (__m256i)__builtin_shufflevector((V8)x, (V8)x, 0, 1, 2, 3)
                              : _mm512_maskz_extracti64x4_epi64(0xf, (__m512i)x, 1);
  return (VU)_mm512_maskz_cvtepu16_epi32(kAll, half);
#else
  const __m128i half = h == 0 ? _mm256_castsi256_si128((__m256i)x)
                              : _mm256_extracti128_si256((__m256i)x, 1);
  return (VU)_mm256_cvtepu16_epi32(half);
#endif
}

// Counter sets per Philox call. The rounding alone, against one set: 2 sets 1.25-1.33x, 4 sets
// 1.23-1.41x with 512-bit vectors, 1.36x / 1.66x with 256-bit ones (Zen 5); whole q8-bf16
// launches on 32 threads of a Xeon host, 2 sets 6217-6346 M elements/s, 4 sets 5695-6268.
constexpr uint32_t kSets = 2;

// Rounds theta' (binary32, canonical NaN) elements [0, len) to bf16 into dst (and the copy,
// when given: the same halves, F32ToBf16 of the stored value being that value); elements are
// store index `index` + i. len a multiple of 8 * kW, index of 8. Returns the non-finite halves.
// (Not inlined: inlined into Chunks it measured 0.93-0.97 times as fast.)
template <bool kStream>
__attribute__((noinline)) uint64_t RoundThetaBf16(const uint32_t* t, uint32_t len, uint64_t seed,
                                                  uint64_t step, uint64_t index, uint16_t* dst,
                                                  uint16_t* copy) {
  const PhiloxKeys keys =
      MakePhiloxKeys(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  VU nf = {};
#ifdef CSDKIT_HOST_ZMM
  const __m512i inf = _mm512_set1_epi32(0x7f80), one = _mm512_set1_epi32(1);
#endif
  // Elements at .. at + 8kW - 1 rounded with the transposed words r.
  const auto round = [&](uint32_t at, const VU r[4]) {
    _Pragma("GCC unroll 8") for (uint32_t v = 0; v < 8; ++v) {
      const uint32_t i = at + v * kW;
      const VU b = Load32(t + i);
      const VU h = (b & ~kSignMask) > kExpMask ? (VU){} + 0x7fc0u
                                                : (b + Spread(r[v / 2], v % 2)) >> 16;
#ifdef CSDKIT_HOST_ZMM
      nf = (VU)_mm512_mask_add_epi32((__m512i)nf,
                                     _mm512_cmpeq_epi32_mask((__m512i)(h & 0x7f80u), inf),
                                     (__m512i)nf, one);
#else
      nf -= (VU)((h & 0x7f80u) == 0x7f80u);  // (a true compare is all ones)
#endif
      StoreHalves(dst + i, h);
      if (copy == nullptr) continue;
      if constexpr (kStream) {
        const VH x = __builtin_convertvector(h, VH);
#ifdef CSDKIT_HOST_ZMM
        _mm256_stream_si256(reinterpret_cast<__m256i*>(copy + i), (__m256i)x);
#else
        _mm_stream_si128(reinterpret_cast<__m128i*>(copy + i), (__m128i)x);
#endif
      } else {
        StoreHalves(copy + i, h);
      }
    }
  };
  uint32_t i = 0;
  for (; i + kSets * 8 * kW <= len; i += kSets * 8 * kW) {
    VU w[kSets][4], r[4];
    PhiloxWords<kSets>((index + i) >> 3, step, keys, w);  // (the group of element i)
    for (uint32_t n = 0; n < kSets; ++n) {
      Transpose(w[n], r);
      round(i + n * 8 * kW, r);
    }
  }
  for (; i < len; i += 8 * kW) {  // one set at a time
    VU w[1][4], r[4];
    PhiloxWords<1>((index + i) >> 3, step, keys, w);
    Transpose(w[0], r);
    round(i, r);
  }
  uint64_t count = 0;
  for (uint32_t l = 0; l < kW; ++l) count += nf[l];
  return count;
}

// ---------------------------------------------------------------------------------------------

template <bool kFtz>
void Dequant(bool is_signed, const uint8_t* codes, const uint32_t* absmax, uint32_t blocks,
             uint32_t* out) {
#ifdef CSDKIT_HOST_ZMM
  if (UseVbmi()) {
    if (is_signed) {
      DequantBlocksVbmi<true, kFtz>(codes, absmax, blocks, out);
    } else {
      DequantBlocksVbmi<false, kFtz>(codes, absmax, blocks, out);
    }
    return;
  }
#endif
  if (is_signed) {
    DequantBlocks<true, kFtz>(codes, absmax, blocks, out);
  } else {
    DequantBlocks<false, kFtz>(codes, absmax, blocks, out);
  }
}

template <bool kFtz>
uint32_t Quantize(bool is_signed, const uint32_t* x, uint32_t blocks, uint8_t* codes,
                  uint32_t* absmax, NextChunk* next) {
#ifdef CSDKIT_HOST_ZMM
  if (UseVbmi()) {
    return is_signed ? QuantizeBlocks<true, kFtz, true>(x, blocks, codes, absmax, next)
                     : QuantizeBlocks<false, kFtz, true>(x, blocks, codes, absmax, next);
  }
#endif
  return is_signed ? QuantizeBlocks<true, kFtz, false>(x, blocks, codes, absmax, next)
                   : QuantizeBlocks<false, kFtz, false>(x, blocks, codes, absmax, next);
}

#ifndef CSDKIT_Q8_STREAMCOPY
#define CSDKIT_Q8_STREAMCOPY 1
#endif

template <bool kFtz>
void Chunks(const Mode& md, const RuleCtl& c, const Q8Span& s, Q8Integrity* ig) {
  const bool bf16 = md.state == StateFmt::kQ8Bf16;
  // q8-bf16's copy is of the rounded theta: written here, not by the update's loop.
  Mode mu = md;
  if (bf16) mu.out = DType::kFp32;
  const size_t gbytes = s.grad_type == DType::kFp32 ? 4 : 2;
  uint8_t* const codes[2] = {s.m, s.v};
  uint32_t* const amax[2] = {s.m_absmax, s.v_absmax};
  alignas(64) uint32_t scratch[3][kQ8Chunk];  // m, v, bf16 theta widened
  // q8-bf16's copy with streaming stores on long passes, as Update writes q8's (datapath.h,
  // kStreamCopyMin), where its vectors of halves are aligned.
  const bool stream = CSDKIT_Q8_STREAMCOPY && bf16 && md.out == DType::kBf16 &&
                      (s.stream_len != 0u ? s.stream_len : s.len) >= kStreamCopyMin &&
                      reinterpret_cast<uintptr_t>(s.out) % (2 * kW) == 0;
  for (uint32_t base = 0; base < s.len; base += kQ8Chunk) {
    const uint32_t len = s.len - base < kQ8Chunk ? s.len - base : kQ8Chunk;
    const uint32_t blocks = len / kQ8Block, b0 = base / kQ8Block;
    uint16_t* const th16 = bf16 ? static_cast<uint16_t*>(s.theta) + base : nullptr;
    uint32_t* const th32 = bf16 ? scratch[2] : static_cast<uint32_t*>(s.theta) + base;

    // As read: CRCs over the bytes as stored; binary32 into the scratch arrays.
    if (bf16) {
      ig->crc_in[0] = Crc32Words(ig->crc_in[0], reinterpret_cast<const uint32_t*>(th16), len / 2);
      for (uint32_t i = 0; i < len; ++i) th32[i] = static_cast<uint32_t>(th16[i]) << 16;
    } else {
      ig->crc_in[0] = Crc32Words(ig->crc_in[0], th32, len);
    }
    for (unsigned a = 0; a < 2; ++a) {
      if (codes[a] == nullptr) continue;
      ig->crc_in[1 + a] = Crc32Words(ig->crc_in[1 + a],
                                     reinterpret_cast<const uint32_t*>(codes[a] + base), len / 4);
      for (uint32_t b = 0; b < blocks; ++b) ig->abs_in[a] = Crc32Word(ig->abs_in[a], amax[a][b0 + b]);
      Dequant<kFtz>(a == 0, codes[a] + base, amax[a] + b0, blocks, scratch[a]);
    }

    Span sp;
    sp.theta = th32;
    sp.m = codes[0] != nullptr ? scratch[0] : nullptr;
    sp.v = codes[1] != nullptr ? scratch[1] : nullptr;
    sp.grad = static_cast<const char*>(s.grad) + base * gbytes;
    sp.grad_type = s.grad_type;
    sp.out = !bf16 && s.out != nullptr ? s.out + base : nullptr;
    sp.len = len;
    sp.stream_len = s.stream_len != 0u ? s.stream_len : s.len;
    CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(mu, c, sp);

    // As written.
    uint64_t nf = 0;
    if (bf16) {
      uint16_t* const copy = md.out == DType::kBf16 ? s.out + base : nullptr;
      nf = stream ? RoundThetaBf16<true>(th32, len, s.seed, s.step, s.index + base, th16, copy)
                  : RoundThetaBf16<false>(th32, len, s.seed, s.step, s.index + base, th16, copy);
      ig->crc_out[0] =
          Crc32Words(ig->crc_out[0], reinterpret_cast<const uint32_t*>(th16), len / 2);
    } else {
      ig->crc_out[0] = Crc32WordsNonFinite(ig->crc_out[0], th32, len, &nf);
    }
    NextChunk next;
    if (s.len - base > kQ8Chunk) {
      const uint32_t nbase = base + kQ8Chunk;
      const uint32_t nlen = s.len - nbase < kQ8Chunk ? s.len - nbase : kQ8Chunk;
      uint32_t quantized = 0;
      next.Add(bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(s.theta) + nbase)
                    : static_cast<const void*>(static_cast<const uint32_t*>(s.theta) + nbase),
               size_t{nlen} * (bf16 ? 2 : 4));
      for (unsigned a = 0; a < 2; ++a) {
        if (codes[a] == nullptr) continue;
        next.Add(codes[a] + nbase, nlen);
        next.Add(amax[a] + nbase / kQ8Block, size_t{nlen / kQ8Block} * 4);
        quantized += blocks;
      }
      next.Add(static_cast<const char*>(s.grad) + nbase * gbytes, nlen * gbytes);
      next.Spread(quantized);
    }
    for (unsigned a = 0; a < 2; ++a) {
      if (codes[a] == nullptr) continue;
      const uint32_t bad =
          Quantize<kFtz>(a == 0, scratch[a], blocks, codes[a] + base, amax[a] + b0, &next);
      nf += uint64_t{bad} * kQ8Block;
      ig->crc_out[1 + a] = Crc32Words(ig->crc_out[1 + a],
                                      reinterpret_cast<const uint32_t*>(codes[a] + base), len / 4);
      for (uint32_t b = 0; b < blocks; ++b) ig->abs_out[a] = Crc32Word(ig->abs_out[a], amax[a][b0 + b]);
    }
    if (nf == 0u) continue;
    ig->nonfinite += nf;
    if (ig->first != 0xffffffffu) continue;
    // The chunk's first element that reads back non-finite: a whole block where a moment's
    // absmax is non-finite, else theta's own.
    for (uint32_t b = 0; b < blocks && ig->first == 0xffffffffu; ++b) {
      bool whole = false;
      for (unsigned a = 0; a < 2; ++a) {
        whole |= codes[a] != nullptr && IsNonFinite(amax[a][b0 + b]);
      }
      if (whole) {
        ig->first = ig->origin + base + b * kQ8Block;
        break;
      }
      for (uint32_t i = b * kQ8Block; i < (b + 1) * kQ8Block; ++i) {
        const uint32_t stored = bf16 ? static_cast<uint32_t>(th16[i]) << 16 : th32[i];
        if (IsNonFinite(stored)) {
          ig->first = ig->origin + base + i;
          break;
        }
      }
    }
  }
  if (stream) _mm_sfence();  // the streamed copy ordered before whatever the caller does next
}

}  // namespace

void CSDKIT_CAT(DequantQ8Blocks, CSDKIT_HOST_ISA)(const uint8_t* codes, const uint32_t* absmax,
                                                  uint32_t blocks, bool is_signed, bool ftz,
                                                  uint32_t* out) {
  if (ftz) {
    Dequant<true>(is_signed, codes, absmax, blocks, out);
  } else {
    Dequant<false>(is_signed, codes, absmax, blocks, out);
  }
}

uint32_t CSDKIT_CAT(QuantizeQ8Blocks, CSDKIT_HOST_ISA)(const uint32_t* x, uint32_t blocks,
                                                       bool is_signed, bool ftz, uint8_t* codes,
                                                       uint32_t* absmax) {
  return ftz ? Quantize<true>(is_signed, x, blocks, codes, absmax, nullptr)
             : Quantize<false>(is_signed, x, blocks, codes, absmax, nullptr);
}

uint64_t CSDKIT_CAT(RoundBf16Span, CSDKIT_HOST_ISA)(const uint32_t* theta, uint32_t len,
                                                    uint64_t seed, uint64_t step, uint64_t index,
                                                    uint16_t* dst) {
  return RoundThetaBf16<false>(theta, len, seed, step, index, dst, nullptr);
}

void CSDKIT_CAT(UpdateQ8, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Q8Span& s,
                                           Q8Integrity* ig) {
  if (md.ftz) {
    Chunks<true>(md, c, s, ig);
  } else {
    Chunks<false>(md, c, s, ig);
  }
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
