// The specialised loops of datapath.h for one instruction set. CMake compiles this file once
// per set with CSDKIT_HOST_ISA naming it (Avx2, Avx512) and the matching -march; datapath.cpp
// picks one at run time.
#include <immintrin.h>

#include <type_traits>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/fp32.h"
#include "datapath.h"

#ifndef CSDKIT_HOST_ISA
#error "CSDKIT_HOST_ISA must name the instruction set this file is compiled for"
#endif
#define CSDKIT_CAT2(a, b) a##b
#define CSDKIT_CAT(a, b) CSDKIT_CAT2(a, b)

namespace csdkit {
namespace hls {
namespace host {

void CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Span& s);

namespace {

// Canon (fp32.h) in arithmetic form: the NaN test is the carry out of (|u| + 0x007fffff), so no
// compiler turns it into a branch, and the loops below stay vectorisable. Same result for every
// input: |u| > 0x7f800000 exactly when |u| + 0x007fffff >= 2^31 (|u| < 2^31, no wrap).
inline float CanonA(float x) {
  const uint32_t u = F2U(x);
  const uint32_t nan = 0u - (((u & ~kSignMask) + 0x007fffffu) >> 31);
  return U2F((u & ~nan) | (kCanonicalNan & nan));
}

// Fp32T::Sign in arithmetic form, for the same reason: +-1 with x's sign, +0 for a zero (under
// kFtz also for a subnormal, which DAZ reads as zero), the canonical NaN for a NaN. For x < 2^31,
// (x | -x) >> 31 is 1 exactly when x != 0.
template <bool kFtz>
inline float SignA(float x) {
  const uint32_t u = F2U(x);
  const uint32_t mag = u & ~kSignMask;
  const uint32_t nan = 0u - ((mag + 0x007fffffu) >> 31);
  const uint32_t z = kFtz ? (mag & kExpMask) : mag;
  const uint32_t zero = ((z | (0u - z)) >> 31) - 1u;  // all ones when zero
  const uint32_t one = (u & kSignMask) | 0x3f800000u;
  return U2F((one & ~zero & ~nan) | (kCanonicalNan & nan));
}

// One element of rules.h's graph for optimizer kOpt: the operations its rule selects, in the
// normative order, as UpdateElement computes them (same operands, same operation order); the
// constants the optimizer fixes (c1 = 1, c2 = 1, Adagrad's beta2 = omb2 = 1) are literals here
// and registers there, which gives the same bits (x * 1 is exact, and under the FTZ/DAZ policy
// both flush x).
template <Optimizer kOpt, bool kL2, bool kFtz>
struct Rule {
  static constexpr bool kKeepsM = kOpt != Optimizer::kAdagrad;  // SGD: when momentum is on
  static constexpr bool kKeepsV =
      kOpt == Optimizer::kAdamW || kOpt == Optimizer::kAdam || kOpt == Optimizer::kAdagrad;

  static inline void Apply(const RuleCtl& c, float theta, float m, float v, float g_in,
                           float* theta_o, float* m_o, float* v_o) {
    const Fp32Lazy f(kFtz);
    float g = f.Mul(g_in, c.unscale);                                            // (1)
    if (kL2) g = f.Add(g, f.Mul(c.wd, theta));                                   // (2)
    if (kOpt == Optimizer::kAdamW || kOpt == Optimizer::kAdam) {
      const float mom = f.Add(f.Mul(c.beta1, m), f.Mul(c.omb1, g));              // (3)
      const float acc = f.Add(f.Mul(c.beta2, v), f.Mul(c.omb2, f.Mul(g, g)));    // (4) (5)
      const float den = f.Add(f.Mul(f.Sqrt(acc), c.c2), c.eps);                  // (6)
      const float u = f.Div(mom, den);                                           // (7) (8)
      const float c1 = kOpt == Optimizer::kAdamW ? c.c1 : 1.0f;
      *theta_o = CanonA(f.Sub(f.Mul(theta, c1), f.Mul(c.lr, u)));                 // (9)
      *m_o = CanonA(mom);                                                         // (10)
      *v_o = CanonA(acc);
    } else if (kOpt == Optimizer::kAdagrad) {
      const float acc = f.Add(f.Mul(1.0f, v), f.Mul(1.0f, f.Mul(g, g)));         // (4) (5)
      const float den = f.Add(f.Mul(f.Sqrt(acc), 1.0f), c.eps);                  // (6)
      const float u = f.Div(g, den);                                             // (7) (8)
      *theta_o = CanonA(f.Sub(f.Mul(theta, 1.0f), f.Mul(c.lr, u)));               // (9)
      *v_o = CanonA(acc);                                                         // (10)
    } else if (kOpt == Optimizer::kSgd) {
      const float ema1 = f.Add(f.Mul(c.beta1, m), f.Mul(c.omb1, g));
      const float mom = Sel(c.mom_pass, g, ema1);                                // (3)
      const float u = Sel(c.nesterov, f.Add(g, f.Mul(c.beta1, mom)), mom);       // (8)
      *theta_o = CanonA(f.Sub(f.Mul(theta, 1.0f), f.Mul(c.lr, u)));               // (9)
      *m_o = CanonA(mom);                                                         // (10)
    } else {  // Lion
      const float mom = f.Add(f.Mul(c.beta1, m), f.Mul(c.omb1, g));              // (3)
      const float acc = f.Add(f.Mul(c.beta2, m), f.Mul(c.omb2, g));              // (4) (5)
      *theta_o = CanonA(f.Sub(f.Mul(theta, c.c1), f.Mul(c.lr, SignA<kFtz>(mom))));     // (8) (9)
      *m_o = CanonA(acc);                                                         // (10)
    }
  }
};

// Elements per chunk: fp16 gradients are widened, and fp16 copies narrowed, a chunk at a time
// through two small arrays that stay in L1 (F16C's vcvtph2ps / vcvtps2ph, 8 lanes each, as
// F16ToF32 and F32ToF16Array use them): g++ does not vectorise _Float16 conversions itself, and
// the rule's loop must stay free of them to be vectorised.
constexpr uint32_t kChunk = 512;

// The whole span in one pass, chunk by chunk: the rule's loop reads each element's state and
// gradient and writes its state (and a bf16 copy) straight back, with nothing else in the loop.
// (flatten: every call inside is inlined, whatever the inliner's size limits; a call left in the
// rule's loop would stop its vectorisation.)
template <Optimizer kOpt, bool kL2, bool kFtz, DType kGrad, DType kOut>
__attribute__((flatten)) void Loop(const RuleCtl& ctl, const Span& s) {
  using R = Rule<kOpt, kL2, kFtz>;
  const RuleCtl c = ctl;
  const bool has_m = R::kKeepsM && (kOpt != Optimizer::kSgd || s.m != nullptr);
  alignas(64) uint32_t gw[kChunk];  // fp16 gradients, widened
  alignas(64) float tn[kChunk];     // theta' for the fp16 copy
  for (uint32_t base = 0; base < s.len; base += kChunk) {
    const uint32_t cl = s.len - base < kChunk ? s.len - base : kChunk;
    uint32_t* __restrict th = s.theta + base;
    uint32_t* __restrict mm = has_m ? s.m + base : nullptr;
    uint32_t* __restrict vv = R::kKeepsV ? s.v + base : nullptr;
    const uint32_t* __restrict g32 = static_cast<const uint32_t*>(s.grad) + base;
    const uint16_t* __restrict g16 = static_cast<const uint16_t*>(s.grad) + base;
    uint16_t* __restrict out = kOut != DType::kFp32 ? s.out + base : nullptr;
    if (kGrad == DType::kFp16) {
      uint32_t j = 0;
      for (; j + 8 <= cl; j += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g16 + j));
        _mm256_store_ps(reinterpret_cast<float*>(gw + j), _mm256_cvtph_ps(h));
      }
      for (; j < cl; ++j) gw[j] = F16ToF32(g16[j]);
    }
    for (uint32_t j = 0; j < cl; ++j) {
      const uint32_t gbits = kGrad == DType::kFp32   ? g32[j]
                             : kGrad == DType::kFp16 ? gw[j]
                                                     : Bf16ToF32(g16[j]);
      float t, mo, vo;
      R::Apply(c, U2F(th[j]), has_m ? U2F(mm[j]) : 0.0f, R::kKeepsV ? U2F(vv[j]) : 0.0f,
               U2F(gbits), &t, &mo, &vo);
      th[j] = F2U(t);
      if (has_m) mm[j] = F2U(mo);
      if (R::kKeepsV) vv[j] = F2U(vo);
      if (kOut == DType::kFp16) tn[j] = t;
      if (kOut == DType::kBf16) out[j] = F32ToBf16(F2U(t));
    }
    if (kOut == DType::kFp16) {
      uint32_t j = 0;
      for (; j + 8 <= cl; j += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_load_ps(tn + j),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), h);
      }
      for (; j < cl; ++j) out[j] = F32ToF16(F2U(tn[j]));
    }
  }
}

using LoopFn = void (*)(const RuleCtl&, const Span&);

template <Optimizer kOpt, bool kL2, bool kFtz, DType kGrad>
LoopFn PickOut(DType out) {
  switch (out) {
    case DType::kFp16: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kFp16>;
    case DType::kBf16: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kBf16>;
    default: return &Loop<kOpt, kL2, kFtz, kGrad, DType::kFp32>;
  }
}

template <Optimizer kOpt, bool kL2, bool kFtz>
LoopFn PickGrad(DType grad, DType out) {
  switch (grad) {
    case DType::kFp16: return PickOut<kOpt, kL2, kFtz, DType::kFp16>(out);
    case DType::kBf16: return PickOut<kOpt, kL2, kFtz, DType::kBf16>(out);
    default: return PickOut<kOpt, kL2, kFtz, DType::kFp32>(out);
  }
}

template <Optimizer kOpt, bool kL2>
LoopFn PickFtz(const Mode& md, DType grad) {
  return md.ftz ? PickGrad<kOpt, kL2, true>(grad, md.out) : PickGrad<kOpt, kL2, false>(grad, md.out);
}

template <Optimizer kOpt>
LoopFn PickL2(const Mode& md, DType grad) {
  return md.l2 ? PickFtz<kOpt, true>(md, grad) : PickFtz<kOpt, false>(md, grad);
}

}  // namespace

void CSDKIT_CAT(Update, CSDKIT_HOST_ISA)(const Mode& md, const RuleCtl& c, const Span& s) {
  LoopFn fn;
  switch (md.opt) {
    case Optimizer::kAdamW: fn = PickFtz<Optimizer::kAdamW, false>(md, s.grad_type); break;
    case Optimizer::kAdam: fn = PickL2<Optimizer::kAdam>(md, s.grad_type); break;
    case Optimizer::kSgd: fn = PickL2<Optimizer::kSgd>(md, s.grad_type); break;
    case Optimizer::kAdagrad: fn = PickL2<Optimizer::kAdagrad>(md, s.grad_type); break;
    default: fn = PickFtz<Optimizer::kLion, false>(md, s.grad_type); break;
  }
  fn(c, s);
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
