// The specialised loops of datapath.h for one instruction set. CMake compiles this file once
// per set with CSDKIT_HOST_ISA naming it (Avx2, Avx512) and the matching -march; datapath.cpp
// picks one at run time.
//
// The loops are vectorised by hand (GCC vector extensions plus a few intrinsics), not left to the
// auto-vectoriser, so that every configuration gets the same shape of loop:
//   * one pass: each element goes from its loads to its stores in registers; an fp16/bf16
//     gradient is widened and the fp16/bf16 copy narrowed inside the loop (F16C or AVX-512
//     conversions, bf16 in integer vector code), with no staging arrays;
//   * a block of kU independent vectors per iteration, each operation issued for all kU before
//     the next: the update is one long dependency chain per element (sqrt, then a divide, for
//     the Adam family) and out-of-order execution alone keeps too few chains in flight;
//   * elements that do not fill a block (the span's end, and the head peeled to align streamed
//     stores) run through the same code on a zero-padded copy, so there is no scalar path;
//   * the outputs' NaN canonicalisation is one test per block, with the replacement done only
//     when a NaN is present; on large spans the copy is written with streaming stores;
//   * every line a block reads is prefetched in software 512 elements ahead;
//   * with a SpanIntegrity (and VPCLMULQDQ), the CRC-32 of each state array is folded in the
//     loop on the vectors as loaded and as stored, and the non-finite outputs counted there.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/fp32.h"
#include "crc_fast.h"
#include "datapath.h"

#ifndef CSDKIT_HOST_ISA
#error "CSDKIT_HOST_ISA must name the instruction set this file is compiled for"
#endif
#define CSDKIT_CAT2(a, b) a##b
#define CSDKIT_CAT(a, b) CSDKIT_CAT2(a, b)

#if !defined(__AVX2__) || !defined(__F16C__)
#error "datapath_isa.cpp needs at least AVX2 and F16C (-march=x86-64-v3)"
#endif
// The fused integrity lanes use VPCLMULQDQ; the build enables it (-mvpclmulqdq) and Update runs
// those loops only where the processor has it (FusedIntegrity), else the chunked path.
#if !defined(__VPCLMULQDQ__) || !defined(__PCLMUL__)
#error "datapath_isa.cpp is compiled with -mpclmul -mvpclmulqdq (used only where present)"
#endif
// 512-bit vectors where the build has AVX-512 (F, BW, VL, DQ: x86-64-v4), else 256-bit.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__)
#define CSDKIT_HOST_ZMM 1
#endif

namespace csdkit {
namespace hls {
namespace host {

void CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Span& s);

namespace {

// ---------------------------------------------------------------------------------------------
// One machine vector: kW binary32 lanes (a ymm or a zmm register).

#ifdef CSDKIT_HOST_ZMM
constexpr uint32_t kW = 16;
#else
constexpr uint32_t kW = 8;
#endif
// Vectors per block, processed interleaved. 4 measured fastest on Zen 3 (AVX2): with fewer, the
// long chain of each element (a sqrt, then a divide, for the Adam family) fills the
// out-of-order window before the vector units are busy; the AVX2 build then spills a few
// constants to the stack, which costs less than it gains.
constexpr uint32_t kU = 4;
constexpr uint32_t kB = kW * kU;  // elements per block

typedef float VF __attribute__((vector_size(4 * kW)));
typedef uint32_t VU __attribute__((vector_size(4 * kW)));
#ifdef CSDKIT_HOST_ZMM
// The 512-bit intrinsics below are the zero-masking forms with every lane selected, which
// compile to the plain instructions: with the unmasked forms g++ 12 warns, wrongly, that their
// undefined pass-through operand may be used uninitialised.
constexpr __mmask16 kAll = 0xffff;
#endif

inline VF Splat(float x) {
  VF r;
  for (uint32_t i = 0; i < kW; ++i) r[i] = x;  // one broadcast
  return r;
}
inline VU SplatU(uint32_t x) {
  VU r;
  for (uint32_t i = 0; i < kW; ++i) r[i] = x;
  return r;
}

inline VU Load32(const uint32_t* p) {
  VU r;
  std::memcpy(&r, p, sizeof r);  // one unaligned load
  return r;
}
inline void Store32(uint32_t* p, VU x) { std::memcpy(p, &x, sizeof x); }

inline VF SqrtV(VF a) {
#ifdef CSDKIT_HOST_ZMM
  return (VF)_mm512_maskz_sqrt_ps(kAll, (__m512)a);
#else
  return (VF)_mm256_sqrt_ps((__m256)a);
#endif
}

// x86 maxps / minps: max(a, b) or min(a, b), and b when either is a NaN.
inline VF MaxV(VF a, VF b) {
#ifdef CSDKIT_HOST_ZMM
  return (VF)_mm512_maskz_max_ps(kAll, (__m512)a, (__m512)b);
#else
  return (VF)_mm256_max_ps((__m256)a, (__m256)b);
#endif
}
inline VF MinV(VF a, VF b) {
#ifdef CSDKIT_HOST_ZMM
  return (VF)_mm512_maskz_min_ps(kAll, (__m512)a, (__m512)b);
#else
  return (VF)_mm256_min_ps((__m256)a, (__m256)b);
#endif
}

// Whether a lane of a or of b is a NaN (the unordered compare), as a mask that is non-zero
// exactly then, and the test of such a mask.
#ifdef CSDKIT_HOST_ZMM
typedef __mmask16 NanMask;
inline NanMask Unordered(VF a, VF b) {
  return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_UNORD_Q);
}
inline NanMask Or(NanMask a, NanMask b) { return a | b; }
inline bool AnySet(NanMask m) { return m != 0; }
#else
typedef __m256 NanMask;
inline NanMask Unordered(VF a, VF b) { return _mm256_cmp_ps((__m256)a, (__m256)b, _CMP_UNORD_Q); }
inline NanMask Or(NanMask a, NanMask b) { return _mm256_or_ps(a, b); }
inline bool AnySet(NanMask m) { return !_mm256_testz_ps(m, m); }
#endif

// fp16 -> binary32: F16C's vcvtph2ps, which is F16ToF32 (fp16.h) by definition: exact; a NaN
// keeps its sign and payload and gets the quiet bit. The AVX-512 form is the same on 16 lanes.
inline VF LoadF16(const uint16_t* p) {
#ifdef CSDKIT_HOST_ZMM
  return (VF)_mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#else
  return (VF)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
}

// bf16 -> binary32: Bf16ToF32, the half in the upper 16 bits (exact, NaN payloads included).
inline VF LoadBf16(const uint16_t* p) {
#ifdef CSDKIT_HOST_ZMM
  const __m512i w =
      _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return (VF)((VU)w << 16);  // vpmovzxwd, vpslld
#else
  // The 8 halves in both 128-bit lanes (a plain load), then one vpshufb puts halves 0-3 (low
  // lane) and 4-7 (high lane) in the upper 16 bits of each lane and zeroes the lower ones.
  const __m256i ctl =
      _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,  //
                       -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
  return (VF)_mm256_shuffle_epi8(
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), ctl);
#endif
}

// binary32 -> fp16 of one vector: F16C's vcvtps2ph with immediate rounding 0 (to nearest even,
// whatever MXCSR says), which is F32ToF16 by definition: for a NaN it keeps the sign and the top
// 10 payload bits and sets the quiet bit, as F32ToF16Int does. kStream: a streaming store, p
// aligned to the size of the halves stored (2 * kW bytes).
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

template <bool kStream>
inline void StoreF16(uint16_t* p, VF t) {
#ifdef CSDKIT_HOST_ZMM
  const __m256i h = _mm512_maskz_cvtps_ph(kAll, (__m512)t, kRne);
  if (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
#else
  const __m128i h = _mm256_cvtps_ph((__m256)t, kRne);
  if (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), h);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
  }
#endif
}

// F32ToBf16 of a value that is not a NaN or is the canonical NaN, in the low 16 bits of each
// lane: the dropped 16 bits rounded to nearest even, which also rounds subnormals correctly and
// the largest finite values to infinity. F32ToBf16's separate NaN rule (keep the sign and top 7
// payload bits, set the quiet bit) gives 0x7fc0 for 0x7fc00000, which the rounding gives too
// (0x7fc00000 + 0x7fff carries nothing out of the low half), so on these inputs, the only ones
// the copy sees (theta' is canonicalised), the rounding alone is F32ToBf16.
inline VU Bf16Bits(VU u) { return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }

#ifdef CSDKIT_HOST_ZMM
template <bool kStream>
inline void StoreBf16(uint16_t* p, VU b) {
  const __m256i h = _mm512_maskz_cvtepi32_epi16(kAll, (__m512i)b);  // vpmovdw: low 16 bits
  if (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
}
#else
// Two vectors' halves at once: vpackusdw interleaves them by 128-bit lane (every value fits 16
// bits, so its unsigned saturation changes nothing) and vpermq restores element order.
template <bool kStream>
inline void StoreBf16x2(uint16_t* p, VU b0, VU b1) {
  const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32((__m256i)b0, (__m256i)b1), 0xd8);
  if (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// CRC-32 folding on machine vectors (crc_fast.h has the method and the constants). Each stream
// (theta, m, v as loaded; theta', m', v' as stored) has one accumulator of the vector's width:
// 128-bit lanes, each folded on by the vector's width in bits for every vector of the stream.

// An accumulator moved on by one vector (k: the constants of that distance) plus the next vector.
inline VU FoldV(VU acc, VU k, VU d) {
#ifdef CSDKIT_HOST_ZMM
  const __m512i a = (__m512i)acc, kk = (__m512i)k;
  return (VU)_mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, kk, 0x00),
                                       _mm512_clmulepi64_epi128(a, kk, 0x11), (__m512i)d, 0x96);
#else
  const __m256i a = (__m256i)acc, kk = (__m256i)k;
  return (VU)_mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, kk, 0x00),
                                               _mm256_clmulepi64_epi128(a, kk, 0x11)),
                              (__m256i)d);
#endif
}

// The folding constants of one vector's width, in every 128-bit lane.
inline VU FoldConstants() {
  constexpr CrcFold k = kW == 16 ? kCrcFold512 : kCrcFold256;
  VU r;
  for (uint32_t i = 0; i < kW; i += 4) {
    r[i] = static_cast<uint32_t>(k.lo);
    r[i + 1] = static_cast<uint32_t>(k.lo >> 32);
    r[i + 2] = static_cast<uint32_t>(k.hi);
    r[i + 3] = static_cast<uint32_t>(k.hi >> 32);
  }
  return r;
}

// The raw register of a stream whose accumulator is `acc`: its 128-bit lanes (earlier bytes
// first) folded into one, then reduced.
inline uint32_t CrcOfAcc(VU acc) {
  const __m128i k = _mm_set_epi64x(static_cast<long long>(kCrcFold128.hi),
                                   static_cast<long long>(kCrcFold128.lo));
  alignas(64) uint32_t w[kW];
  std::memcpy(w, &acc, sizeof acc);
  __m128i a = _mm_load_si128(reinterpret_cast<const __m128i*>(w));
  for (uint32_t l = 4; l < kW; l += 4) {
    a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00),
                                    _mm_clmulepi64_si128(a, k, 0x11)),
                      _mm_load_si128(reinterpret_cast<const __m128i*>(w + l)));
  }
  uint64_t half[2];
  std::memcpy(half, &a, sizeof half);
  return Crc32FromFold(half[0], half[1]);
}

// Software prefetch, kPrefetchAhead elements ahead of the block being computed (2 KiB of each
// binary32 stream), of every line a block reads: theta, m, v and the gradient. The hardware
// prefetchers alone leave each stream short of lines when 4 to 7 streams run at once, above all
// at 4 KiB page boundaries, which they do not cross (docs/host-model.md has the figures: up to
// +16% at n = 2^26 on an AVX-512 Xeon); 256 and 1024 elements ahead measured slower than 512,
// and spans that fit in cache are unaffected.
// The addresses are formed as integers (a prefetch past an array's end is allowed and harmless;
// a pointer past it would not be).
constexpr uint32_t kPrefetchAhead = 512;

template <bool kM, bool kV, DType kGrad>
inline void Prefetch(const uint32_t* th, const uint32_t* mm, const uint32_t* vv, const void* g,
                     uint32_t at) {
  constexpr uintptr_t kLine = 64;
  const auto line = [](const void* base, uintptr_t off) {
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + off),
                 _MM_HINT_T0);
  };
  const uintptr_t s32 = uintptr_t{at} * 4;
  const uintptr_t sg = uintptr_t{at} * (kGrad == DType::kFp32 ? 4 : 2);
  _Pragma("GCC unroll 16") for (uintptr_t l = 0; l < kB * 4; l += kLine) {
    line(th, s32 + l);
    if constexpr (kM) line(mm, s32 + l);
    if constexpr (kV) line(vv, s32 + l);
    if (kGrad == DType::kFp32 || l < kB * 2) line(g, sg + l);
  }
}

// Whether any lane of a compare mask is set.
inline bool AnyLane(VU m) {
#ifdef CSDKIT_HOST_ZMM
  return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#else
  return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#endif
}

// ---------------------------------------------------------------------------------------------
// A block: kU machine vectors, kB consecutive elements.

struct GF {
  VF x[kU];
};

// Operand u of an operation: a block's vector u, or a launch constant (the same for every u).
inline VF Part(const GF& a, uint32_t u) { return a.x[u]; }
inline VF Part(VF a, uint32_t) { return a; }

// The contract's binary32 operations (fp32.h's Fp32Lazy), lane for lane.
//
// Fp32Lazy applies the policy to each operand and to each result. The FTZ loops leave that to
// the processor where it gives the same bits: they run with MXCSR's DAZ bit set (Update sets
// it and restores the caller's MXCSR), under which every SSE/AVX arithmetic instruction, min,
// max and compare included, reads a subnormal operand as a zero of its sign, exactly the
// contract's DAZ. A result is left as IEEE rounds it (MXCSR's FTZ stays off: it flushes a
// result that is tiny before rounding, which the contract keeps when it rounds up to 2^-126),
// so a subnormal result is read as its flushed value by every operation that takes it, and
// flushed by Pol (below) where it leaves the loop: theta', m' and v' before their NaN test,
// CRCs, stores and the copy. The loaded state and gradient enter only arithmetic, and the
// launch constants are flushed once (PolScalar). (Each result flushed in software instead cost
// two instructions per operation: the FTZ q8 launches took 1.5 times the IEEE ones' time.)
// NaN payloads are left to the hardware and canonicalised at the outputs, as Fp32Lazy does.
template <bool kFtz>
inline VF Pol(VF x) {
  if constexpr (!kFtz) {
    return x;
  } else {
    // Under FTZ/DAZ a zero-exponent value loses its mantissa (a subnormal becomes a signed zero).
#ifdef CSDKIT_HOST_ZMM
    // One test into a mask register and one masked AND (the vector form below compiles to four).
    const __m512i u = (__m512i)x;
    return (VF)_mm512_mask_and_epi32(u, _mm512_testn_epi32_mask(u, _mm512_set1_epi32(kExpMask)), u,
                                     _mm512_set1_epi32(static_cast<int>(kSignMask)));
#else
    const VU u = (VU)x;
    const VU sub = (VU)((u & kExpMask) == 0u);
    return (VF)(u & ~(sub & kManMask));
#endif
  }
}

template <bool kFtz>
inline float PolScalar(float x) {
  const uint32_t u = F2U(x);
  return kFtz && (u & kExpMask) == 0u ? U2F(u & kSignMask) : x;
}

#define CSDKIT_EACH _Pragma("GCC unroll 16") for (uint32_t u = 0; u < kU; ++u)

template <bool kFtz>
struct Ops {
  template <class A, class B>
  static GF Add(const A& a, const B& b) {
    GF r;
    CSDKIT_EACH r.x[u] = Part(a, u) + Part(b, u);
    return r;
  }
  template <class A, class B>
  static GF Sub(const A& a, const B& b) {
    GF r;
    CSDKIT_EACH r.x[u] = Part(a, u) - Part(b, u);
    return r;
  }
  template <class A, class B>
  static GF Mul(const A& a, const B& b) {
    GF r;
    CSDKIT_EACH r.x[u] = Part(a, u) * Part(b, u);
    return r;
  }
  template <class A, class B>
  static GF Div(const A& a, const B& b) {
    GF r;
    CSDKIT_EACH r.x[u] = Part(a, u) / Part(b, u);
    return r;
  }
  static GF Sqrt(const GF& a) {
    GF r;
    CSDKIT_EACH r.x[u] = SqrtV(a.x[u]);
    return r;
  }
  // Fp32T::Sign of a policy-applied operand: +-1 with its sign, +0 for either zero (a subnormal
  // is non-zero under IEEE, and read as a zero under DAZ by the first multiplication), and a
  // NaN for a NaN (not necessarily the canonical one: Lion's only use, lr * sign, is then a
  // NaN, and so is theta', which is canonicalised). Computed as clamp(a * 2^127 * 2^127, -1,
  // 1) + 0: the scaling takes every non-zero magnitude, the smallest subnormal included
  // (2^-149 -> 2^105), to at least 1 and keeps zeros; the clamp's maxps/minps return their
  // second operand when one is a NaN, so a NaN passes; adding +0 turns -0 into +0 (round to
  // nearest) and changes nothing else.
  static GF Sign(const GF& a) {
    const VF big = Splat(0x1p127f), lo = Splat(-1.0f), hi = Splat(1.0f), zero = Splat(0.0f);
    GF r;
    CSDKIT_EACH r.x[u] = MinV(hi, MaxV(lo, a.x[u] * big * big)) + zero;
    return r;
  }
};

// Canon: any NaN (found by the unordered self-compare) becomes the canonical NaN.
inline void Canon(GF* a) {
  CSDKIT_EACH a->x[u] = (VF)(a->x[u] != a->x[u] ? SplatU(kCanonicalNan) : (VU)a->x[u]);
}

// The launch's operands, one vector each, the policy already applied (see Pol).
template <bool kFtz>
struct VCtl {
  VF unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2;
  explicit VCtl(const RuleCtl& c)
      : unscale(Splat(PolScalar<kFtz>(c.unscale))),
        lr(Splat(PolScalar<kFtz>(c.lr))),
        beta1(Splat(PolScalar<kFtz>(c.beta1))),
        omb1(Splat(PolScalar<kFtz>(c.omb1))),
        beta2(Splat(PolScalar<kFtz>(c.beta2))),
        omb2(Splat(PolScalar<kFtz>(c.omb2))),
        eps(Splat(PolScalar<kFtz>(c.eps))),
        wd(Splat(PolScalar<kFtz>(c.wd))),
        c1(Splat(PolScalar<kFtz>(c.c1))),
        c2(Splat(PolScalar<kFtz>(c.c2))) {}
};

// The loop's form, beside the optimizer, L2 and policy: which state it keeps, and SGD's two
// launch-constant selects, resolved per loop rather than blended per element.
constexpr uint32_t kHasM = 1u;      // reads and writes m
constexpr uint32_t kHasV = 2u;      // reads and writes v
constexpr uint32_t kMomPass = 4u;   // SGD (3): mom = g (first step, or no momentum buffer)
constexpr uint32_t kNesterov = 8u;  // SGD (8): u = g + beta1 * mom

// One block of rules.h's graph for optimizer kOpt: the operations its rule selects, in the
// normative order, as UpdateElement computes them (same operands, same operation order); the
// constants the optimizer fixes (c1 = 1, c2 = 1, Adagrad's beta2 = omb2 = 1) are literals here
// and registers there, which gives the same bits (x * 1 is exact, its NaN is canonicalised at
// the output either way, and every operand is already policy-applied). The outputs theta', m',
// v' are returned before (10)'s NaN canonicalisation, which Blocks applies.
template <Optimizer kOpt, bool kL2, bool kFtz, uint32_t kForm>
struct Rule {
  static inline void Apply(const VCtl<kFtz>& c, const GF& theta, const GF& m, const GF& v,
                           const GF& g_in, GF* theta_o, GF* m_o, GF* v_o) {
    using f = Ops<kFtz>;
    const VF one = Splat(1.0f);
    GF g = f::Mul(g_in, c.unscale);                                              // (1)
    if (kL2) g = f::Add(g, f::Mul(c.wd, theta));                                 // (2)
    if constexpr (kOpt == Optimizer::kAdamW || kOpt == Optimizer::kAdam) {
      const GF mom = f::Add(f::Mul(c.beta1, m), f::Mul(c.omb1, g));              // (3)
      const GF acc = f::Add(f::Mul(c.beta2, v), f::Mul(c.omb2, f::Mul(g, g)));   // (4) (5)
      const GF den = f::Add(f::Mul(f::Sqrt(acc), c.c2), c.eps);                  // (6)
      const GF u = f::Div(mom, den);                                             // (7) (8)
      const VF c1 = kOpt == Optimizer::kAdamW ? c.c1 : one;
      *theta_o = f::Sub(f::Mul(theta, c1), f::Mul(c.lr, u));                     // (9)
      *m_o = mom;                                                                // (10)
      *v_o = acc;
    } else if constexpr (kOpt == Optimizer::kAdagrad) {
      const GF acc = f::Add(f::Mul(one, v), f::Mul(one, f::Mul(g, g)));          // (4) (5)
      const GF den = f::Add(f::Mul(f::Sqrt(acc), one), c.eps);                   // (6)
      const GF u = f::Div(g, den);                                               // (7) (8)
      *theta_o = f::Sub(f::Mul(theta, one), f::Mul(c.lr, u));                    // (9)
      *v_o = acc;                                                                // (10)
    } else if constexpr (kOpt == Optimizer::kSgd) {
      GF mom = g;                                                                // (3)
      if constexpr (!(kForm & kMomPass)) mom = f::Add(f::Mul(c.beta1, m), f::Mul(c.omb1, g));
      GF u = mom;                                                                // (8)
      if constexpr ((kForm & kNesterov) != 0) u = f::Add(g, f::Mul(c.beta1, mom));
      *theta_o = f::Sub(f::Mul(theta, one), f::Mul(c.lr, u));                    // (9)
      *m_o = mom;                                                                // (10)
    } else {  // Lion
      const GF mom = f::Add(f::Mul(c.beta1, m), f::Mul(c.omb1, g));              // (3)
      const GF acc = f::Add(f::Mul(c.beta2, m), f::Mul(c.omb2, g));              // (4) (5)
      *theta_o = f::Sub(f::Mul(theta, c.c1), f::Mul(c.lr, f::Sign(mom)));        // (8) (9)
      *m_o = acc;                                                                // (10)
    }
  }
};

// The blocks [i, end) of a span (end - i a multiple of kB): loads, rule, NaN canonicalisation,
// stores. kStreamOut: the copy is written with streaming stores (s.out + i 64-byte aligned).
// kCrc: s.integrity is advanced over the blocks (the CRCs folded on the loaded and the stored
// vectors, the non-finite outputs counted); the blocks must then be the span's elements
// [i, end) themselves, not a padded copy.
// (noinline: one copy of the loop serves the span's body and its padded ends; flatten: every
// call inside it is inlined, whatever the inliner's size limits.)
template <Optimizer kOpt, bool kL2, bool kFtz, DType kGrad, DType kOut, uint32_t kForm,
          bool kStreamOut, bool kCrc>
__attribute__((noinline, flatten)) void Blocks(const VCtl<kFtz>& ctl, const Span& s, uint32_t i,
                                               uint32_t end) {
  constexpr bool kM = (kForm & kHasM) != 0, kV = (kForm & kHasV) != 0;
  // The integrity lanes: per stream an accumulator (0 folds on to 0) and the register to xor
  // into the stream's first 32 bits, which goes in with the first block's first vector.
  // Streams 0-2: theta, m, v as loaded; 3-5: as stored.
  const uint32_t first_i = i;
  VU acc[6] = {}, inject[6] = {}, nf = {};
  const VU kfold = FoldConstants(), kexp = SplatU(kExpMask);
  if constexpr (kCrc) {
    for (uint32_t k = 0; k < 3; ++k) {
      inject[k][0] = s.integrity->crc_in[k];
      inject[k + 3][0] = s.integrity->crc_out[k];
    }
  }
  // The operands and the span's pointers in locals: the stores below could otherwise alias
  // them and make the compiler reload them every block.
  const VCtl<kFtz> c = ctl;
  uint32_t* const th0 = s.theta;
  uint32_t* const mm0 = s.m;
  uint32_t* const vv0 = s.v;
  const uint32_t* const g32 = static_cast<const uint32_t*>(s.grad);
  const uint16_t* const g16 = static_cast<const uint16_t*>(s.grad);
  uint16_t* const out = s.out;
  for (; i < end; i += kB) {
    uint32_t* const th = th0 + i;
    uint32_t* const mm = kM ? mm0 + i : nullptr;
    uint32_t* const vv = kV ? vv0 + i : nullptr;
    Prefetch<kM, kV, kGrad>(th0, mm0, vv0, s.grad, i + kPrefetchAhead);
    GF gin, theta, m{}, v{};
    CSDKIT_EACH {
      if constexpr (kGrad == DType::kFp32) {
        gin.x[u] = (VF)Load32(g32 + i + u * kW);
      } else if constexpr (kGrad == DType::kFp16) {
        gin.x[u] = LoadF16(g16 + i + u * kW);
      } else {
        gin.x[u] = LoadBf16(g16 + i + u * kW);
      }
      const VU t_in = Load32(th + u * kW);
      theta.x[u] = (VF)t_in;
      if constexpr (kCrc) acc[0] = FoldV(acc[0], kfold, u == 0 ? t_in ^ inject[0] : t_in);
      if constexpr (kM) {
        const VU m_in = Load32(mm + u * kW);
        m.x[u] = (VF)m_in;
        if constexpr (kCrc) acc[1] = FoldV(acc[1], kfold, u == 0 ? m_in ^ inject[1] : m_in);
      }
      if constexpr (kV) {
        const VU v_in = Load32(vv + u * kW);
        v.x[u] = (VF)v_in;
        if constexpr (kCrc) acc[2] = FoldV(acc[2], kfold, u == 0 ? v_in ^ inject[2] : v_in);
      }
    }
    GF t, mo, vo;
    Rule<kOpt, kL2, kFtz, kForm>::Apply(c, theta, m, v, gin, &t, &mo, &vo);
    if constexpr (kFtz) {  // the outputs flushed (inside, DAZ reads a subnormal as a zero)
      CSDKIT_EACH {
        t.x[u] = Pol<true>(t.x[u]);
        if (kM) mo.x[u] = Pol<true>(mo.x[u]);
        if (kV) vo.x[u] = Pol<true>(vo.x[u]);
      }
    }

    // (10): NaNs become the canonical NaN. NaNs are rare, so the block's outputs are tested
    // first, two vectors per unordered compare, and canonicalised only when one holds a NaN.
    // For AdamW, Adam, Adagrad and SGD a NaN in m' or v' always reaches theta' (mom or acc ->
    // u -> lr * u -> theta'; +, -, *, / and sqrt return a NaN for a NaN operand, whatever the
    // other), so testing theta' covers them; Lion's m' (acc) is no operand of its theta', so
    // it is tested as well.
    constexpr bool kTestM = kOpt == Optimizer::kLion;
    NanMask nan = Unordered(t.x[0], t.x[1]);
    _Pragma("GCC unroll 16") for (uint32_t u = 2; u < kU; u += 2) {
      nan = Or(nan, Unordered(t.x[u], t.x[u + 1]));
    }
    _Pragma("GCC unroll 16") for (uint32_t u = 0; kTestM && u < kU; u += 2) {
      nan = Or(nan, Unordered(mo.x[u], mo.x[u + 1]));
    }
    if (__builtin_expect(AnySet(nan), 0)) {
      Canon(&t);
      if (kM) Canon(&mo);
      if (kV) Canon(&vo);
    }

    CSDKIT_EACH {
      Store32(th + u * kW, (VU)t.x[u]);
      if (kM) Store32(mm + u * kW, (VU)mo.x[u]);
      if (kV) Store32(vv + u * kW, (VU)vo.x[u]);
    }
    if constexpr (kCrc) {
      // The stored vectors into the output CRCs; non-finite lanes (exponent all ones) counted
      // (a compare's all-ones lane is -1) and, the first time a block has one, located.
      VU hit = {};
      CSDKIT_EACH {
        const VU to = (VU)t.x[u];
        acc[3] = FoldV(acc[3], kfold, u == 0 ? to ^ inject[3] : to);
        const VU ht = (VU)((to & kexp) == kexp);
        nf -= ht;
        hit |= ht;
        if constexpr (kM) {
          const VU mv = (VU)mo.x[u];
          acc[4] = FoldV(acc[4], kfold, u == 0 ? mv ^ inject[4] : mv);
          const VU hm = (VU)((mv & kexp) == kexp);
          nf -= hm;
          hit |= hm;
        }
        if constexpr (kV) {
          const VU vv_o = (VU)vo.x[u];
          acc[5] = FoldV(acc[5], kfold, u == 0 ? vv_o ^ inject[5] : vv_o);
          const VU hv = (VU)((vv_o & kexp) == kexp);
          nf -= hv;
          hit |= hv;
        }
      }
      for (uint32_t k = 0; k < 6; ++k) inject[k] = VU{};
      if (__builtin_expect(AnyLane(hit), 0) && s.integrity->first == 0xffffffffu) {
        for (uint32_t j = 0; j < kB; ++j) {
          if (IsNonFinite(th[j]) || (kM && IsNonFinite(mm[j])) || (kV && IsNonFinite(vv[j]))) {
            s.integrity->first = s.integrity->origin + i + j;
            break;
          }
        }
      }
    }
    if constexpr (kOut == DType::kFp16) {
      CSDKIT_EACH StoreF16<kStreamOut>(out + i + u * kW, t.x[u]);
    } else if constexpr (kOut == DType::kBf16) {
#ifdef CSDKIT_HOST_ZMM
      CSDKIT_EACH StoreBf16<kStreamOut>(out + i + u * kW, Bf16Bits((VU)t.x[u]));
#else
      _Pragma("GCC unroll 16") for (uint32_t u = 0; u < kU; u += 2) {
        StoreBf16x2<kStreamOut>(out + i + u * kW, Bf16Bits((VU)t.x[u]), Bf16Bits((VU)t.x[u + 1]));
      }
#endif
    }
  }
  if constexpr (kCrc) {
    if (first_i < end) {  // at least one block: the accumulators hold the streams
      SpanIntegrity* ig = s.integrity;
      ig->crc_in[0] = CrcOfAcc(acc[0]);
      ig->crc_out[0] = CrcOfAcc(acc[3]);
      if (kM) ig->crc_in[1] = CrcOfAcc(acc[1]);
      if (kM) ig->crc_out[1] = CrcOfAcc(acc[4]);
      if (kV) ig->crc_in[2] = CrcOfAcc(acc[2]);
      if (kV) ig->crc_out[2] = CrcOfAcc(acc[5]);
      uint64_t count = 0;
      for (uint32_t l = 0; l < kW; ++l) count += nf[l];
      ig->nonfinite += count;
    }
  }
}

// The whole span in one pass of kB-element blocks. The elements [i, i + r) with r < kB (the
// head peeled to align the streamed copy, the tail) are copied into zero-padded stack arrays,
// run through the same blocks and copied back: the padding lanes compute on zeros and are
// dropped.
template <Optimizer kOpt, bool kL2, bool kFtz, DType kGrad, DType kOut, uint32_t kForm>
void Loop(const RuleCtl& ctl, const Span& s) {
  constexpr bool kM = (kForm & kHasM) != 0, kV = (kForm & kHasV) != 0;
  constexpr bool kCopy = kOut != DType::kFp32;
  constexpr size_t kGBytes = kGrad == DType::kFp32 ? 4 : 2;
  const VCtl<kFtz> c(ctl);
  const uint32_t n = s.len;

  // With integrity lanes, the padded ends are checksummed on the span's own arrays, before and
  // after; the body folds them in its loop.
  const bool crc = s.integrity != nullptr;
  const auto partial = [&](uint32_t i, uint32_t r) {
    if (crc) IntegrityIn(s, i, r);
    alignas(64) uint32_t t[kB] = {}, m[kB] = {}, v[kB] = {}, g[kB] = {};
    alignas(64) uint16_t o[kB];
    Span p = s;
    p.integrity = nullptr;
    p.theta = t;
    p.m = m;
    p.v = v;
    p.grad = g;
    p.out = o;
    std::memcpy(t, s.theta + i, r * 4);
    if (kM) std::memcpy(m, s.m + i, r * 4);
    if (kV) std::memcpy(v, s.v + i, r * 4);
    std::memcpy(g, static_cast<const char*>(s.grad) + size_t{i} * kGBytes, r * kGBytes);
    Blocks<kOpt, kL2, kFtz, kGrad, kOut, kForm, false, false>(c, p, 0, kB);
    std::memcpy(s.theta + i, t, r * 4);
    if (kM) std::memcpy(s.m + i, m, r * 4);
    if (kV) std::memcpy(s.v + i, v, r * 4);
    if (kCopy) std::memcpy(s.out + i, o, r * 2);
    if (crc) IntegrityOut(s, i, r);
  };

  uint32_t i = 0;
  const uint32_t pass = s.stream_len != 0u ? s.stream_len : n;
  if (kCopy && pass >= kStreamCopyMin && reinterpret_cast<uintptr_t>(s.out) % 2 == 0) {
    // Peel up to the copy's next 64-byte line: each block then stores whole aligned vectors of
    // halves (16 or 32 bytes each, 2 * kB bytes per block).
    constexpr uintptr_t kLine = 64;
    const uint32_t head =
        static_cast<uint32_t>((kLine - reinterpret_cast<uintptr_t>(s.out) % kLine) % kLine / 2);
    if (head > 0) partial(0, head);
    i = head + (n - head) / kB * kB;
    if (crc) {
      Blocks<kOpt, kL2, kFtz, kGrad, kOut, kForm, true, true>(c, s, head, i);
    } else {
      Blocks<kOpt, kL2, kFtz, kGrad, kOut, kForm, true, false>(c, s, head, i);
    }
    _mm_sfence();  // the streamed stores are ordered before whatever the caller does next
  } else {
    i = n / kB * kB;
    if (crc) {
      Blocks<kOpt, kL2, kFtz, kGrad, kOut, kForm, false, true>(c, s, 0, i);
    } else {
      Blocks<kOpt, kL2, kFtz, kGrad, kOut, kForm, false, false>(c, s, 0, i);
    }
  }
  if (i < n) partial(i, n - i);
}

#undef CSDKIT_EACH

using LoopFn = void (*)(const RuleCtl&, const Span&);

template <Optimizer kOpt, bool kL2, bool kFtz, DType kGrad, uint32_t kForm>
LoopFn PickOut(DType out) {
  switch (out) {
    case DType::kFp16: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kFp16, kForm>;
    case DType::kBf16: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kBf16, kForm>;
    default: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kFp32, kForm>;
  }
}

template <Optimizer kOpt, bool kL2, bool kFtz, uint32_t kForm>
LoopFn PickGrad(DType grad, DType out) {
  switch (grad) {
    case DType::kFp16: return PickOut<kOpt, kL2, kFtz, DType::kFp16, kForm>(out);
    case DType::kBf16: return PickOut<kOpt, kL2, kFtz, DType::kBf16, kForm>(out);
    default: return PickOut<kOpt, kL2, kFtz, DType::kFp32, kForm>(out);
  }
}

// The loop's form. The state is fixed by the optimizer, except SGD's m (kept with momentum,
// when the span has the buffer). SGD's selects come from the controls (MakeRuleCtl): without
// a momentum buffer mom_pass is always set and Nesterov off.
template <Optimizer kOpt, bool kL2, bool kFtz>
LoopFn PickForm(const RuleCtl& c, const Span& s, DType out) {
  const DType g = s.grad_type;
  if constexpr (kOpt == Optimizer::kSgd) {
    if (s.m == nullptr) return PickGrad<kOpt, kL2, kFtz, kMomPass>(g, out);
    if (c.mom_pass != 0u) {
      return c.nesterov != 0u ? PickGrad<kOpt, kL2, kFtz, kHasM | kMomPass | kNesterov>(g, out)
                              : PickGrad<kOpt, kL2, kFtz, kHasM | kMomPass>(g, out);
    }
    return c.nesterov != 0u ? PickGrad<kOpt, kL2, kFtz, kHasM | kNesterov>(g, out)
                            : PickGrad<kOpt, kL2, kFtz, kHasM>(g, out);
  } else if constexpr (kOpt == Optimizer::kAdagrad) {
    return PickGrad<kOpt, kL2, kFtz, kHasV>(g, out);
  } else if constexpr (kOpt == Optimizer::kLion) {
    return PickGrad<kOpt, kL2, kFtz, kHasM>(g, out);
  } else {
    return PickGrad<kOpt, kL2, kFtz, kHasM | kHasV>(g, out);
  }
}

template <Optimizer kOpt, bool kL2>
LoopFn PickFtz(const Mode& md, const RuleCtl& c, const Span& s) {
  return md.ftz ? PickForm<kOpt, kL2, true>(c, s, md.out)
                 : PickForm<kOpt, kL2, false>(c, s, md.out);
}

template <Optimizer kOpt>
LoopFn PickL2(const Mode& md, const RuleCtl& c, const Span& s) {
  return md.l2 ? PickFtz<kOpt, true>(md, c, s) : PickFtz<kOpt, false>(md, c, s);
}

}  // namespace

void CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Span& s) {
  LoopFn fn;
  switch (md.opt) {
    case Optimizer::kAdamW: fn = PickFtz<Optimizer::kAdamW, false>(md, c, s); break;
    case Optimizer::kAdam: fn = PickL2<Optimizer::kAdam>(md, c, s); break;
    case Optimizer::kSgd: fn = PickL2<Optimizer::kSgd>(md, c, s); break;
    case Optimizer::kAdagrad: fn = PickL2<Optimizer::kAdagrad>(md, c, s); break;
    default: fn = PickFtz<Optimizer::kLion, false>(md, c, s); break;
  }
  if (md.ftz) {
    // The FTZ loops run with MXCSR's DAZ bit set (see Ops), and restore the caller's MXCSR.
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | kMxcsrDaz);
    fn(c, s);
    _mm_setcsr(csr);
  } else {
    fn(c, s);
  }
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
