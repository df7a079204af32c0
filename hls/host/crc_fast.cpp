// CRC-32 of whole arrays for the host model (crc_fast.h): carry-less multiplication folding,
// chosen at run time.
//
// Folding (Intel's white paper, as the Linux kernel's crc32-pclmul does it for zlib's reflected
// polynomial): the message is held in 128-bit accumulators; each step multiplies the two 64-bit
// halves of an accumulator by x^(D+32) and x^(D-32) mod P (bit-reflected, shifted left by one:
// the constants below, D the folding distance in bits) and adds (xor) the data D bits further
// on, which keeps the accumulator congruent to the message so far, times a power of x, mod P.
// At the end the accumulators are folded into one, reduced from 128 to 64 to 32 bits, and a
// Barrett reduction gives the register. The raw register enters xored into the first 32 bits of
// the data, as the bitwise CRC would xor it into the first word.
//
// Constants (x^e mod P, bit-reflected, times 2; P = 0x104C11DB7):
//   fold by 1024 bits (4 x 256-bit accumulators): e = 1056, 992
//   fold by  512 bits (4 x 128-bit accumulators): e = 544, 480  (Linux: R1, R2)
//   fold by  128 bits:                             e = 160, 96   (Linux: R3, R4)
//   128 -> 64 bits: R4; 64 -> 32 bits: e = 64 (Linux: R5); Barrett: P' and u' = x^64 / P.
#include "crc_fast.h"

#include <immintrin.h>

#include <atomic>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"

namespace csdkit {
namespace hls {
namespace host {

namespace {

constexpr uint64_t kK2048Lo = kCrcFold2048.lo, kK2048Hi = kCrcFold2048.hi;
constexpr uint64_t kK1024Lo = kCrcFold1024.lo, kK1024Hi = kCrcFold1024.hi;
constexpr uint64_t kK512Lo = kCrcFold512.lo, kK512Hi = kCrcFold512.hi;
constexpr uint64_t kK128Lo = kCrcFold128.lo, kK128Hi = kCrcFold128.hi;
constexpr uint64_t kK64 = 0x163cd6124ull;
constexpr uint64_t kPoly = 0x1db710641ull, kMu = 0x1f7011641ull;

// The table implementation (crc.h), with the non-finite count as a plain loop.
template <bool kCount>
uint32_t TableWords(uint32_t reg, const uint32_t* p, size_t words, uint64_t* nonfinite) {
  uint64_t nf = 0;
  for (size_t i = 0; i < words; ++i) {
    reg = Crc32WordTable(reg, p[i]);
    if (kCount) nf += (p[i] & kExpMask) == kExpMask ? 1u : 0u;
  }
  if (kCount) *nonfinite += nf;
  return reg;
}

#define CSDKIT_PCLMUL __attribute__((target("sse4.1,pclmul")))
#define CSDKIT_VPCLMUL __attribute__((target("avx2,sse4.1,pclmul,vpclmulqdq")))

// An accumulator moved D bits on (k: the two constants of D) plus the data there.
CSDKIT_PCLMUL inline __m128i Fold(__m128i x, __m128i k, __m128i data) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                     _mm_clmulepi64_si128(x, k, 0x11)),
                       data);
}

CSDKIT_PCLMUL inline __m128i NonFinite(__m128i d) {
  const __m128i e = _mm_set1_epi32(static_cast<int>(kExpMask));
  return _mm_cmpeq_epi32(_mm_and_si128(d, e), e);  // all ones in each non-finite lane
}

CSDKIT_PCLMUL inline uint64_t SumLanes(__m128i neg_counts) {
  // Each lane holds minus its count (a compare's all-ones is -1): negate and add the lanes.
  alignas(16) uint32_t c[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(c), _mm_sub_epi32(_mm_setzero_si128(), neg_counts));
  return uint64_t{c[0]} + c[1] + c[2] + c[3];
}

// The rest after the wide loop: 16-byte folds of the single accumulator x, the reduction to the
// register, then the last (< 4) words through the table.
template <bool kCount>
CSDKIT_PCLMUL uint32_t Finish(__m128i x, const uint32_t* p, size_t words, __m128i nf,
                              uint64_t* nonfinite) {
  const __m128i k128 = _mm_set_epi64x(static_cast<long long>(kK128Hi), static_cast<long long>(kK128Lo));
  for (; words >= 4; words -= 4, p += 4) {
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if (kCount) nf = _mm_add_epi32(nf, NonFinite(d));
    x = Fold(x, k128, d);
  }
  // 128 -> 64 bits (appending 32 zero bits): the low half times x^96, plus the high half.
  x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(k128, x, 0x01));
  // 64 -> 32 bits.
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i k64 = _mm_set_epi64x(0, static_cast<long long>(kK64));
  x = _mm_xor_si128(_mm_srli_si128(x, 4),
                    _mm_clmulepi64_si128(_mm_and_si128(x, mask32), k64, 0x00));
  // Barrett reduction to the 32-bit register.
  const __m128i pu = _mm_set_epi64x(static_cast<long long>(kMu), static_cast<long long>(kPoly));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), pu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), pu, 0x00);
  const uint32_t reg = static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
  if (kCount) *nonfinite += SumLanes(nf);
  return TableWords<kCount>(reg, p, words, nonfinite);
}

// 128-bit folding: 4 accumulators, 64 bytes a step. Needs at least 16 words.
template <bool kCount>
CSDKIT_PCLMUL uint32_t PclmulWords(uint32_t reg, const uint32_t* p, size_t words,
                                   uint64_t* nonfinite) {
  if (words < 16) return TableWords<kCount>(reg, p, words, nonfinite);
  const __m128i* q = reinterpret_cast<const __m128i*>(p);
  __m128i x[4], nf = _mm_setzero_si128();
  for (int j = 0; j < 4; ++j) x[j] = _mm_loadu_si128(q + j);
  if (kCount) {
    for (int j = 0; j < 4; ++j) nf = _mm_add_epi32(nf, NonFinite(x[j]));
  }
  x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(static_cast<int>(reg)));
  q += 4;
  words -= 16;
  const __m128i k512 = _mm_set_epi64x(static_cast<long long>(kK512Hi), static_cast<long long>(kK512Lo));
  for (; words >= 16; words -= 16, q += 4) {
    for (int j = 0; j < 4; ++j) {
      const __m128i d = _mm_loadu_si128(q + j);
      if (kCount) nf = _mm_add_epi32(nf, NonFinite(d));
      x[j] = Fold(x[j], k512, d);
    }
  }
  const __m128i k128 = _mm_set_epi64x(static_cast<long long>(kK128Hi), static_cast<long long>(kK128Lo));
  __m128i a = x[0];
  for (int j = 1; j < 4; ++j) a = Fold(a, k128, x[j]);
  return Finish<kCount>(a, reinterpret_cast<const uint32_t*>(q), words, nf, nonfinite);
}

// 256-bit folding: 4 accumulators of two 128-bit lanes each, 128 bytes a step. Needs at least 32
// words.
template <bool kCount>
CSDKIT_VPCLMUL uint32_t VpclmulWords(uint32_t reg, const uint32_t* p, size_t words,
                                     uint64_t* nonfinite) {
  if (words < 32) return PclmulWords<kCount>(reg, p, words, nonfinite);
  const __m256i* q = reinterpret_cast<const __m256i*>(p);
  const __m256i e = _mm256_set1_epi32(static_cast<int>(kExpMask));
  __m256i y[4], nf = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) y[j] = _mm256_loadu_si256(q + j);
  if (kCount) {
    for (int j = 0; j < 4; ++j) nf = _mm256_add_epi32(nf, _mm256_cmpeq_epi32(_mm256_and_si256(y[j], e), e));
  }
  y[0] = _mm256_xor_si256(y[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
  q += 4;
  words -= 32;
  const __m256i k1024 = _mm256_set_epi64x(static_cast<long long>(kK1024Hi), static_cast<long long>(kK1024Lo),
                                          static_cast<long long>(kK1024Hi), static_cast<long long>(kK1024Lo));
  for (; words >= 32; words -= 32, q += 4) {
    for (int j = 0; j < 4; ++j) {
      const __m256i d = _mm256_loadu_si256(q + j);
      if (kCount) nf = _mm256_add_epi32(nf, _mm256_cmpeq_epi32(_mm256_and_si256(d, e), e));
      y[j] = _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(y[j], k1024, 0x00),
                                               _mm256_clmulepi64_epi128(y[j], k1024, 0x11)),
                              d);
    }
  }
  // The eight 128-bit lanes in message order, folded into one.
  const __m128i k128 = _mm_set_epi64x(static_cast<long long>(kK128Hi), static_cast<long long>(kK128Lo));
  __m128i a = _mm256_castsi256_si128(y[0]);
  a = Fold(a, k128, _mm256_extracti128_si256(y[0], 1));
  for (int j = 1; j < 4; ++j) {
    a = Fold(a, k128, _mm256_castsi256_si128(y[j]));
    a = Fold(a, k128, _mm256_extracti128_si256(y[j], 1));
  }
  const __m128i nf128 = _mm_add_epi32(_mm256_castsi256_si128(nf), _mm256_extracti128_si256(nf, 1));
  return Finish<kCount>(a, reinterpret_cast<const uint32_t*>(q), words, nf128, nonfinite);
}

#define CSDKIT_VPCLMUL512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx2,sse4.1,pclmul,vpclmulqdq")))

// A 512-bit accumulator moved D bits on plus the data there (Fold, four lanes at once).
CSDKIT_VPCLMUL512 inline __m512i Fold512(__m512i x, __m512i k, __m512i data) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), data, 0x96);
}

// nf minus one in each lane of d that holds a non-finite word (the counts are kept negated).
CSDKIT_VPCLMUL512 inline __m512i CountNonFinite512(__m512i nf, __m512i d) {
  const __m512i e = _mm512_set1_epi32(static_cast<int>(kExpMask));
  return _mm512_mask_add_epi32(nf, _mm512_cmpeq_epi32_mask(_mm512_and_si512(d, e), e), nf,
                               _mm512_set1_epi32(-1));
}

// 512-bit folding: 4 accumulators of four 128-bit lanes each, 256 bytes a step. Needs at least
// 64 words. At the end each accumulator is folded into the next (512 bits on), then the last
// one's four lanes into one.
template <bool kCount>
CSDKIT_VPCLMUL512 uint32_t Vpclmul512Words(uint32_t reg, const uint32_t* p, size_t words,
                                           uint64_t* nonfinite) {
  if (words < 64) return VpclmulWords<kCount>(reg, p, words, nonfinite);
  const __m512i* q = reinterpret_cast<const __m512i*>(p);
  __m512i z[4], nf = _mm512_setzero_si512();
  for (int j = 0; j < 4; ++j) z[j] = _mm512_loadu_si512(q + j);
  if (kCount) {
    for (int j = 0; j < 4; ++j) nf = CountNonFinite512(nf, z[j]);
  }
  z[0] = _mm512_xor_si512(z[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
  q += 4;
  words -= 64;
  const __m512i k2048 = _mm512_maskz_broadcast_i32x4(0xffff, _mm_set_epi64x(
      static_cast<long long>(kK2048Hi), static_cast<long long>(kK2048Lo)));
  for (; words >= 64; words -= 64, q += 4) {
    for (int j = 0; j < 4; ++j) {
      const __m512i d = _mm512_loadu_si512(q + j);
      if (kCount) nf = CountNonFinite512(nf, d);
      z[j] = Fold512(z[j], k2048, d);
    }
  }
  const __m512i k512 = _mm512_maskz_broadcast_i32x4(0xffff, _mm_set_epi64x(
      static_cast<long long>(kK512Hi), static_cast<long long>(kK512Lo)));
  __m512i y = z[0];
  for (int j = 1; j < 4; ++j) y = Fold512(y, k512, z[j]);
  const __m128i k128 = _mm_set_epi64x(static_cast<long long>(kK128Hi), static_cast<long long>(kK128Lo));
  __m128i a = _mm512_maskz_extracti32x4_epi32(0xf, y, 0);
  a = Fold(a, k128, _mm512_maskz_extracti32x4_epi32(0xf, y, 1));
  a = Fold(a, k128, _mm512_maskz_extracti32x4_epi32(0xf, y, 2));
  a = Fold(a, k128, _mm512_maskz_extracti32x4_epi32(0xf, y, 3));
  const __m256i nf256 = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xf, nf, 0),
                                         _mm512_maskz_extracti64x4_epi64(0xf, nf, 1));
  const __m128i nf128 = _mm_add_epi32(_mm256_castsi256_si128(nf256), _mm256_extracti128_si256(nf256, 1));
  return Finish<kCount>(a, reinterpret_cast<const uint32_t*>(q), words, nf128, nonfinite);
}

bool Supported(CrcImpl impl) {
  switch (impl) {
    case CrcImpl::kVpclmul512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") &&
             __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case CrcImpl::kVpclmul:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
             __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case CrcImpl::kPclmul:
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    default:
      return true;
  }
}

std::atomic<uint32_t>& Chosen() {
  static std::atomic<uint32_t> impl{static_cast<uint32_t>(
      Supported(CrcImpl::kVpclmul512) ? CrcImpl::kVpclmul512
      : Supported(CrcImpl::kVpclmul) ? CrcImpl::kVpclmul
                                   : Supported(CrcImpl::kPclmul) ? CrcImpl::kPclmul
                                                                 : CrcImpl::kTable)};
  return impl;
}

template <bool kCount>
uint32_t Dispatch(uint32_t reg, const uint32_t* p, size_t words, uint64_t* nonfinite) {
  switch (ActiveCrcImpl()) {
    case CrcImpl::kVpclmul512: return Vpclmul512Words<kCount>(reg, p, words, nonfinite);
    case CrcImpl::kVpclmul: return VpclmulWords<kCount>(reg, p, words, nonfinite);
    case CrcImpl::kPclmul: return PclmulWords<kCount>(reg, p, words, nonfinite);
    default: return TableWords<kCount>(reg, p, words, nonfinite);
  }
}

}  // namespace

uint32_t Crc32FromFold(uint64_t lo, uint64_t hi) {
  const __m128i x = _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
  return Finish<false>(x, nullptr, 0, _mm_setzero_si128(), nullptr);
}

uint32_t Crc32Words(uint32_t reg, const uint32_t* p, size_t words) {
  return Dispatch<false>(reg, p, words, nullptr);
}

uint32_t Crc32WordsNonFinite(uint32_t reg, const uint32_t* p, size_t words, uint64_t* nonfinite) {
  return Dispatch<true>(reg, p, words, nonfinite);
}

bool HasCrcImpl(CrcImpl impl) {
  static const bool has[4] = {Supported(CrcImpl::kVpclmul), Supported(CrcImpl::kPclmul), true,
                              Supported(CrcImpl::kVpclmul512)};
  return static_cast<uint32_t>(impl) < 4 && has[static_cast<uint32_t>(impl)];
}

CrcImpl ActiveCrcImpl() { return static_cast<CrcImpl>(Chosen().load(std::memory_order_relaxed)); }

bool SetCrcImpl(CrcImpl impl) {
  if (!HasCrcImpl(impl)) return false;
  Chosen().store(static_cast<uint32_t>(impl), std::memory_order_relaxed);
  return true;
}

const char* CrcImplName(CrcImpl impl) {
  switch (impl) {
    case CrcImpl::kVpclmul512: return "vpclmulqdq512";
    case CrcImpl::kVpclmul: return "vpclmulqdq";
    case CrcImpl::kPclmul: return "pclmulqdq";
    default: return "table";
  }
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
