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
  bool l2;        // (2)
  bool mom_pass;  // (3) mom = g
  bool lion;      // (4), (5), (8), (10)
  bool adagrad;   // (7) numerator g
  bool use_q;     // (8) u = q
  bool sgd;       // (8) u = mom or Nesterov
  bool nesterov;  // (8)
};

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
  c.l2 = md.l2;
  c.mom_pass = sgd && (md.first || !md.momentum);
  c.lion = lion;
  c.adagrad = adagrad;
  c.use_q = adam || adagrad;
  c.sgd = sgd;
  c.nesterov = md.nesterov;
  return c;
}

/// Result of one element.
struct ElemOut {
  float theta, m, v;
};

/// One element of the update, in the normative order above. `g_in` is the gradient already
/// widened to binary32 (exactly) from its storage type; state the optimizer does not use may be
/// passed as anything (its inputs are not selected and its outputs are not stored).
inline ElemOut UpdateElement(const RuleCtl& c, float theta, float m, float v, float g_in) {
  const Fp32 f(c.ftz);
  float g = f.Mul(g_in, c.unscale);                                             // (1)
  g = c.l2 ? f.Add(g, f.Mul(c.wd, theta)) : g;                                  // (2)
  const float mom = c.mom_pass ? g : f.Add(f.Mul(c.beta1, m), f.Mul(c.omb1, g));  // (3)
  const float sq = c.lion ? g : f.Mul(g, g);                                    // (4)
  const float acc = f.Add(f.Mul(c.beta2, c.lion ? m : v), f.Mul(c.omb2, sq));   // (5)
  const float den = f.Add(f.Mul(f.Sqrt(acc), c.c2), c.eps);                     // (6)
  const float q = f.Div(c.adagrad ? g : mom, den);                              // (7)
  const float u_sgd = c.nesterov ? f.Add(g, f.Mul(c.beta1, mom)) : mom;
  const float u = c.use_q ? q : (c.sgd ? u_sgd : f.Sign(mom));                  // (8)
  ElemOut o;
  o.theta = f.Sub(f.Mul(theta, c.c1), f.Mul(c.lr, u));                          // (9)
  o.m = c.lion ? acc : mom;                                                     // (10)
  o.v = acc;
  return o;
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_RULES_H_
