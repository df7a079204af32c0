// The optimizer rules: one per-element datapath shared by AdamW, Adam, SGD (momentum,
// dampening, Nesterov), Adagrad and Lion.
//
// NORMATIVE ORDER OF OPERATIONS. Every line is one binary32 operation of fp32.h (rounded to
// nearest even, canonical NaN, the launch's IEEE or FTZ/DAZ policy); nothing is fused. The RTL
// datapath and the OpenCL build implement exactly this graph.
//
//   (1)  g   = g_in * unscale
//   (2)  g   = g + wd * theta                      if L2           (Adam, SGD, Adagrad)
//   (3)  mom = g                                   if SGD first step or SGD without momentum
//        mom = beta1 * m + omb1 * g                otherwise
//   (4)  sq  = g                                   Lion
//        sq  = g * g                               otherwise
//   (5)  acc = beta2 * (Lion ? m : v) + omb2 * sq
//   (6)  den = sqrt(acc) * c2 + eps
//   (7)  q   = (Adagrad ? g : mom) / den
//   (8)  u   = q                                   AdamW, Adam, Adagrad
//        u   = mom                                 SGD
//        u   = g + beta1 * mom                     SGD Nesterov
//        u   = sign(mom)                           Lion (sign(+-0) = +0)
//   (9)  theta' = theta * c1 - lr * u
//   (10) m'  = Lion ? acc : mom                    (written when the optimizer has m)
//        v'  = acc                                 (written when the optimizer has v)
//
// Operands fixed by the optimizer (the kernel uses these constants and ignores the register):
//   c1 = 1 except AdamW and Lion; c2 = 1 except AdamW and Adam; Adagrad beta2 = omb2 = 1.
// With those constants each rule reduces to its textbook form bit for bit (x * 1 = x and
// 1 * x = x exactly, NaN canonical either way), e.g. Adagrad: v' = v + g*g,
// theta' = theta - lr * (g / (sqrt(v') + eps)). tests/rules_test.cpp holds the textbook forms.
//
// Host-computed operands (double, rounded once to binary32), t = step number from 1:
//   AdamW   lr = lr_t / (1 - beta1^t), c1 = 1 - lr_t * wd, c2 = 1 / sqrt(1 - beta2^t)
//   Adam    lr = lr_t / (1 - beta1^t), wd (L2 if wd != 0),  c2 = 1 / sqrt(1 - beta2^t)
//   SGD     lr, beta1 = momentum, omb1 = 1 - dampening, wd (L2 if wd != 0)
//   Adagrad lr = lr_t / (1 + (t - 1) * lr_decay), eps, wd (L2 if wd != 0)
//   Lion    lr, beta1, omb1, beta2, omb2, c1 = 1 - lr * wd
#ifndef CSDKIT_HLS_RULES_H_
#define CSDKIT_HLS_RULES_H_

#include <cstdint>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp32.h"
#include "csdkit/hls/mode.h"

namespace csdkit {
namespace hls {

/// Everything the per-element datapath needs, decoded once per launch: the operands with the
/// optimizer's fixed constants substituted, and the select signals of the graph above.
struct RuleCtl {
  float unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2;
  bool ftz;
  // Select signals, all-ones (take the first input) or zero. Masks rather than bools: a select
  // is then pure bit logic, a mux in hardware and a blend in the vectorised model.
  uint32_t l2;        // (2)
  uint32_t mom_pass;  // (3) mom = g
  uint32_t lion;      // (4), (5), (8), (10)
  uint32_t adagrad;   // (7) numerator g
  uint32_t use_q;     // (8) u = q
  uint32_t sgd;       // (8) u = mom or Nesterov
  uint32_t nesterov;  // (8)
};

/// Bitwise select: a where mask is all ones, b where it is zero. Exact (no arithmetic).
inline float Sel(uint32_t mask, float a, float b) {
  return U2F((F2U(a) & mask) | (F2U(b) & ~mask));
}

/// All-ones for true, zero for false.
inline uint32_t Mask(bool b) { return b ? 0xffffffffu : 0u; }

/// Builds the launch-constant controls from a decoded mode and the scalar registers.
inline RuleCtl MakeRuleCtl(const Mode& md, const Scalars& s) {
  const bool adam = md.opt == Optimizer::kAdamW || md.opt == Optimizer::kAdam;
  const bool adagrad = md.opt == Optimizer::kAdagrad;
  const bool sgd = md.opt == Optimizer::kSgd;
  const bool lion = md.opt == Optimizer::kLion;
  const bool keeps_c1 = md.opt == Optimizer::kAdamW || lion;
  RuleCtl c;
  c.unscale = U2F(s.unscale);
  c.lr = U2F(s.lr);
  c.beta1 = U2F(s.beta1);
  c.omb1 = U2F(s.omb1);
  c.beta2 = adagrad ? 1.0f : U2F(s.beta2);
  c.omb2 = adagrad ? 1.0f : U2F(s.omb2);
  c.eps = U2F(s.eps);
  c.wd = U2F(s.wd);
  c.c1 = keeps_c1 ? U2F(s.c1) : 1.0f;
  c.c2 = adam ? U2F(s.c2) : 1.0f;
  c.ftz = md.ftz;
  c.l2 = Mask(md.l2);
  c.mom_pass = Mask(sgd && (md.first || !md.momentum));
  c.lion = Mask(lion);
  c.adagrad = Mask(adagrad);
  c.use_q = Mask(adam || adagrad);
  c.sgd = Mask(sgd);
  c.nesterov = Mask(md.nesterov);
  return c;
}

/// Result of one element.
struct ElemOut {
  float theta, m, v;
};

/// One element of the update, in the normative order above. `g_in` is the gradient already
/// widened to binary32 (exactly) from its storage type; state the optimizer does not use may be
/// passed as anything (its inputs are not selected and its outputs are not stored).
/// `ftz` is c.ftz, passed separately so a caller may pass it as a compile-time constant
/// (std::true_type / std::false_type) and let the compiler fold the policy away.
template <typename FtzT>
inline ElemOut UpdateElement(const RuleCtl& c, FtzT ftz, float theta, float m, float v,
                             float g_in) {
  // Every operation is evaluated unconditionally and the graph's choices are selects, as in the
  // hardware datapath (this also lets the host compiler vectorise the loop around it). NaNs are
  // canonicalised once, at the three outputs (see Fp32T for why that equals per-operation).
  const Fp32Lazy f(static_cast<bool>(ftz));
  const float g1 = f.Mul(g_in, c.unscale);                                        // (1)
  const float g2 = f.Add(g1, f.Mul(c.wd, theta));
  const float g = Sel(c.l2, g2, g1);                                              // (2)
  const float ema1 = f.Add(f.Mul(c.beta1, m), f.Mul(c.omb1, g));
  const float mom = Sel(c.mom_pass, g, ema1);                                     // (3)
  const float sq = Sel(c.lion, g, f.Mul(g, g));                                   // (4)
  const float acc = f.Add(f.Mul(c.beta2, Sel(c.lion, m, v)), f.Mul(c.omb2, sq));  // (5)
  const float den = f.Add(f.Mul(f.Sqrt(acc), c.c2), c.eps);                       // (6)
  const float q = f.Div(Sel(c.adagrad, g, mom), den);                             // (7)
  const float u_sgd = Sel(c.nesterov, f.Add(g, f.Mul(c.beta1, mom)), mom);
  const float u = Sel(c.use_q, q, Sel(c.sgd, u_sgd, f.Sign(mom)));                // (8)
  ElemOut o;
  o.theta = Canon(f.Sub(f.Mul(theta, c.c1), f.Mul(c.lr, u)));                     // (9)
  o.m = Canon(Sel(c.lion, acc, mom));                                             // (10)
  o.v = Canon(acc);
  return o;
}

/// UpdateElement with the launch's policy taken from c.ftz.
inline ElemOut UpdateElement(const RuleCtl& c, float theta, float m, float v, float g_in) {
  return UpdateElement(c, c.ftz, theta, m, v, g_in);
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_RULES_H_
