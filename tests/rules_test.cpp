// The optimizer rules (rules.h) against an independent double-precision evaluation of each
// textbook formula, with stated ulp bounds; and hand-worked special-value vectors.
//
// ULP BOUNDS. Inputs are drawn so that no sum cancels (EMA terms share a sign, |lr * update| <=
// 0.1 |theta|); then every binary32 operation adds at most 0.5 ulp of relative error to its
// result and the errors compound additively:
//   m'  = b1*m + omb1*g              g carries 0.5 (unscale; +1 with L2), products 0.5, sum:  <= 2
//   v'  = b2*v + omb2*(g*g)          g*g carries 1.5, times omb2 2, sum 2.5:                   <= 3
//   theta' = theta*c1 - lr*q         q carries <= 7 relative, but |lr q| <= 0.1 |theta'|, so it
//                                    contributes <= 0.7; theta*c1 0.5; the difference 0.5:      <= 2
// The bounds are asserted as stated; the measured maxima are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/rules.h"
#include "csdkit/platform/optimizer.h"

namespace csdkit::testing {
namespace {

using hls::F2U;
using hls::U2F;

int64_t UlpDiff(float a, double exact) {
  const float e = static_cast<float>(exact);
  auto ord = [](float x) {
    const int32_t i = static_cast<int32_t>(F2U(x));
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(ord(a) - ord(e));
}

struct Bounds {
  int64_t theta, m, v;
};

struct Scal {
  double unscale, lr, b1, omb1, b2, omb2, eps, wd, c1, c2;
};

Scal ToDouble(const hls::Scalars& s) {
  return {U2F(s.unscale), U2F(s.lr), U2F(s.beta1), U2F(s.omb1), U2F(s.beta2),
          U2F(s.omb2),    U2F(s.eps), U2F(s.wd),   U2F(s.c1),   U2F(s.c2)};
}

// Textbook formulas in double, from the same binary32 inputs and operands.
void DoubleStep(const hls::Mode& md, const Scal& s, double th, double m, double v, double gin,
                double* th_o, double* m_o, double* v_o) {
  double g = gin * s.unscale;
  switch (md.opt) {
    case Optimizer::kAdamW:
    case Optimizer::kAdam: {
      if (md.l2) g += s.wd * th;
      *m_o = s.b1 * m + s.omb1 * g;
      *v_o = s.b2 * v + s.omb2 * g * g;
      const double q = *m_o / (std::sqrt(*v_o) * s.c2 + s.eps);
      *th_o = (md.opt == Optimizer::kAdamW ? th * s.c1 : th) - s.lr * q;
      break;
    }
    case Optimizer::kSgd: {
      if (md.l2) g += s.wd * th;
      *m_o = m;
      if (md.momentum) {
        *m_o = md.first ? g : s.b1 * m + s.omb1 * g;
        g = md.nesterov ? g + s.b1 * *m_o : *m_o;
      }
      *th_o = th - s.lr * g;
      *v_o = v;
      break;
    }
    case Optimizer::kAdagrad: {
      if (md.l2) g += s.wd * th;
      *v_o = v + g * g;
      *th_o = th - s.lr * g / (std::sqrt(*v_o) + s.eps);
      *m_o = m;
      break;
    }
    case Optimizer::kLion: {
      const double c = s.b1 * m + s.omb1 * g;
      *th_o = th * s.c1 - s.lr * (c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0));
      *m_o = s.b2 * m + s.omb2 * g;
      *v_o = v;
      break;
    }
  }
}

struct Case {
  const char* name;
  OptimizerConfig cfg;
  int64_t step;
  Bounds bound;
};

TEST(Rules, AgainstDoublePrecisionWithinStatedUlps) {
  OptimizerConfig adamw = OptimizerConfig::Defaults(Optimizer::kAdamW);
  OptimizerConfig adam = OptimizerConfig::Defaults(Optimizer::kAdam);
  adam.weight_decay = 0.01;
  OptimizerConfig sgd = OptimizerConfig::Defaults(Optimizer::kSgd);
  sgd.dampening = 0.1;
  sgd.weight_decay = 1e-4;
  OptimizerConfig nest = OptimizerConfig::Defaults(Optimizer::kSgd);
  nest.nesterov = true;
  OptimizerConfig adagrad = OptimizerConfig::Defaults(Optimizer::kAdagrad);
  adagrad.lr_decay = 0.01;
  adagrad.weight_decay = 1e-3;
  OptimizerConfig lion = OptimizerConfig::Defaults(Optimizer::kLion);
  lion.weight_decay = 0.1;
  const Case cases[] = {
      {"adamw", adamw, 10, {2, 2, 3}},  {"adam_l2", adam, 3, {2, 2, 3}},
      {"sgd_damp", sgd, 4, {2, 2, 0}},  {"sgd_nesterov", nest, 2, {2, 2, 0}},
      {"adagrad", adagrad, 5, {2, 0, 3}}, {"lion", lion, 1, {2, 2, 0}},
  };
  const uint64_t seed = 20261121;
  for (const Case& c : cases) {
    for (bool ftz : {false, true}) {
      GradSpec gs;
      gs.ftz = ftz;
      gs.loss_scale = 128.0;
      gs.clip_coef = 0.5;
      const KernelLaunch k = MakeLaunch(c.cfg, gs, c.step);
      hls::Mode md{};
      ASSERT_TRUE(hls::DecodeMode(k.mode, &md));
      const hls::RuleCtl ctl = hls::MakeRuleCtl(md, k.scalars);
      const Scal s = ToDouble(k.scalars);
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<float> mag(0.1f, 1.0f), small(1e-4f, 1e-2f), unit(0.1f, 1.0f);
      int64_t worst[3] = {0, 0, 0};
      for (int i = 0; i < 200000; ++i) {
        const float sign = (rng() & 1) ? 1.0f : -1.0f;
        const float th = mag(rng) * ((rng() & 1) ? 1.0f : -1.0f);
        const float m = sign * small(rng) * 0.1f;
        const float gin = sign * unit(rng) * 128.0f;  // same sign as m: no cancellation
        const float v = small(rng) * small(rng);
        const hls::ElemOut o = hls::UpdateElement(ctl, th, m, v, gin);
        double th_d, m_d, v_d;
        DoubleStep(md, s, th, m, v, gin, &th_d, &m_d, &v_d);
        const int64_t d[3] = {UlpDiff(o.theta, th_d), UlpDiff(o.m, m_d), UlpDiff(o.v, v_d)};
        const int64_t b[3] = {c.bound.theta, c.bound.m, c.bound.v};
        const bool has[3] = {true, hls::UsesM(md), hls::UsesV(md)};
        for (int j = 0; j < 3; ++j) {
          if (!has[j]) continue;
          worst[j] = std::max(worst[j], d[j]);
          if (d[j] > b[j]) {
            char buf[256];
            std::snprintf(buf, sizeof buf,
                          "%s ftz=%d seed=%llu i=%d out=%d: theta=0x%08x m=0x%08x v=0x%08x "
                          "g=0x%08x EXP=0x%08x GOT=0x%08x (%lld ulp > %lld)",
                          c.name, ftz, static_cast<unsigned long long>(seed), i, j, F2U(th),
                          F2U(m), F2U(v), F2U(gin),
                          F2U(static_cast<float>(j == 0 ? th_d : j == 1 ? m_d : v_d)),
                          F2U(j == 0 ? o.theta : j == 1 ? o.m : o.v), static_cast<long long>(d[j]),
                          static_cast<long long>(b[j]));
            FAIL() << buf;
          }
        }
      }
      std::printf("%-13s ftz=%d  max ulp: theta %lld, m %lld, v %lld\n", c.name, ftz,
                  static_cast<long long>(worst[0]), static_cast<long long>(worst[1]),
                  static_cast<long long>(worst[2]));
    }
  }
}

// Hand-worked special values. Operands: AdamW defaults at step 1 (lr/bc1 = 1e-2, c2 = 1/sqrt(1e-3)).
class Special : public ::testing::Test {
 protected:
  hls::RuleCtl Ctl(Optimizer o, bool ftz, OptimizerConfig cfg = {}, int64_t step = 1) {
    if (cfg.opt != o) cfg = OptimizerConfig::Defaults(o);
    GradSpec gs;
    gs.ftz = ftz;
    const KernelLaunch k = MakeLaunch(cfg, gs, step);
    hls::Mode md{};
    EXPECT_TRUE(hls::DecodeMode(k.mode, &md));
    return hls::MakeRuleCtl(md, k.scalars);
  }
  static constexpr uint32_t kNan = 0x7fc00000u;
};

TEST_F(Special, AdamWNonFiniteGradients) {
  const hls::RuleCtl c = Ctl(Optimizer::kAdamW, false);
  // NaN gradient (signalling, negative): every output is the canonical NaN.
  hls::ElemOut o = hls::UpdateElement(c, 0.5f, 0.1f, 0.2f, U2F(0xff800001u));
  EXPECT_EQ(F2U(o.m), kNan);
  EXPECT_EQ(F2U(o.v), kNan);
  EXPECT_EQ(F2U(o.theta), kNan);
  // +inf gradient: m' = +inf, v' = +inf, q = inf/inf = NaN -> theta' NaN.
  o = hls::UpdateElement(c, 0.5f, 0.1f, 0.2f, INFINITY);
  EXPECT_EQ(F2U(o.m), 0x7f800000u);
  EXPECT_EQ(F2U(o.v), 0x7f800000u);
  EXPECT_EQ(F2U(o.theta), kNan);
  // Huge finite gradient: g*g overflows to inf, m' stays finite, q = m'/inf = +0, so
  // theta' = theta * c1 exactly.
  o = hls::UpdateElement(c, 0.5f, 0.0f, 0.0f, 3e38f);
  EXPECT_EQ(F2U(o.v), 0x7f800000u);
  EXPECT_TRUE(std::isfinite(o.m));
  EXPECT_EQ(F2U(o.theta), F2U(0.5f * c.c1));
}

TEST_F(Special, AdamWZeroAndNegativeState) {
  const hls::RuleCtl c = Ctl(Optimizer::kAdamW, false);
  // All zero: den = eps, q = 0/eps = +0, theta' = theta * c1 - 0.
  hls::ElemOut o = hls::UpdateElement(c, -0.25f, 0.0f, 0.0f, 0.0f);
  EXPECT_EQ(F2U(o.m), 0u);
  EXPECT_EQ(F2U(o.v), 0u);
  EXPECT_EQ(F2U(o.theta), F2U(-0.25f * c.c1));
  // A negative second moment (corrupt state) gives sqrt(negative) = NaN, visible in theta.
  o = hls::UpdateElement(c, 1.0f, 0.0f, -1.0f, 0.0f);
  EXPECT_EQ(F2U(o.theta), kNan);
}

TEST_F(Special, SubnormalGradientUnderBothPolicies) {
  const float sub = U2F(0x00000400u);  // 2^-139
  // IEEE: g = sub * 1 = sub, m' = 0.9*0 + 0.1*sub = a subnormal, kept.
  hls::ElemOut o = hls::UpdateElement(Ctl(Optimizer::kAdamW, false), 0.0f, 0.0f, 0.0f, sub);
  EXPECT_NE(F2U(o.m), 0u);
  EXPECT_EQ(F2U(o.m) & 0x7f800000u, 0u);
  // FTZ/DAZ: the subnormal gradient reads as +0, everything stays zero.
  o = hls::UpdateElement(Ctl(Optimizer::kAdamW, true), 0.0f, 0.0f, 0.0f, sub);
  EXPECT_EQ(F2U(o.m), 0u);
  EXPECT_EQ(F2U(o.v), 0u);
  EXPECT_EQ(F2U(o.theta), 0u);
  // FTZ: a negative subnormal reads as -0: m' = 0.9*0 + 0.1*(-0) = +0 + -0 = +0.
  o = hls::UpdateElement(Ctl(Optimizer::kAdamW, true), 0.0f, 0.0f, 0.0f, U2F(0x80000400u));
  EXPECT_EQ(F2U(o.m), 0u);
}

TEST_F(Special, SgdFirstStepBufferIsGradient) {
  OptimizerConfig cfg = OptimizerConfig::Defaults(Optimizer::kSgd);
  cfg.dampening = 0.5;  // not applied on the first step (PyTorch: buf = clone(grad))
  const hls::RuleCtl c = Ctl(Optimizer::kSgd, false, cfg, 1);
  const hls::ElemOut o = hls::UpdateElement(c, 1.0f, 123.0f /*ignored*/, 0.0f, 2.0f);
  EXPECT_EQ(o.m, 2.0f);
  EXPECT_EQ(o.theta, 1.0f - 0.01f * 2.0f);
  // Second step: buf = 0.9 * 2 + 0.5 * 2.
  const hls::RuleCtl c2 = Ctl(Optimizer::kSgd, false, cfg, 2);
  const hls::ElemOut o2 = hls::UpdateElement(c2, 1.0f, 2.0f, 0.0f, 2.0f);
  EXPECT_EQ(o2.m, 0.9f * 2.0f + 0.5f * 2.0f);
}

TEST_F(Special, LionSignOfZeroAndNan) {
  OptimizerConfig cfg = OptimizerConfig::Defaults(Optimizer::kLion);
  const hls::RuleCtl c = Ctl(Optimizer::kLion, false, cfg);
  // c = 0.9*0 + 0.1*(-0) = +0: sign +0, theta' = theta*1 - lr*0 = theta.
  hls::ElemOut o = hls::UpdateElement(c, -0.0f, 0.0f, 0.0f, -0.0f);
  EXPECT_EQ(F2U(o.theta), 0x80000000u);  // -0 * 1 - (+0) = -0
  o = hls::UpdateElement(c, 0.5f, -1.0f, 0.0f, 0.0f);  // c < 0: theta + lr
  EXPECT_EQ(o.theta, 0.5f + 1e-4f);
  o = hls::UpdateElement(c, 0.5f, 0.0f, 0.0f, NAN);
  EXPECT_EQ(F2U(o.theta), kNan);
  EXPECT_EQ(F2U(o.m), kNan);
}

TEST_F(Special, AdagradZeroGradientLeavesWeights) {
  OptimizerConfig cfg = OptimizerConfig::Defaults(Optimizer::kAdagrad);
  const hls::RuleCtl c = Ctl(Optimizer::kAdagrad, false, cfg, 3);
  const hls::ElemOut o = hls::UpdateElement(c, 0.75f, 0.0f, 0.0f, 0.0f);
  EXPECT_EQ(o.theta, 0.75f);  // q = 0 / (0 + eps) = 0
  EXPECT_EQ(F2U(o.v), 0u);
}

TEST(Launch, ScalarsComputedInDoubleThenRounded) {
  OptimizerConfig cfg = OptimizerConfig::Defaults(Optimizer::kAdamW);
  GradSpec gs;
  gs.loss_scale = 65536.0;
  gs.clip_coef = 0.3;
  const KernelLaunch k = MakeLaunch(cfg, gs, 3);
  EXPECT_EQ(k.scalars.lr, F2U(static_cast<float>(1e-3 / (1.0 - std::pow(0.9, 3)))));
  EXPECT_EQ(k.scalars.c2, F2U(static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, 3)))));
  EXPECT_EQ(k.scalars.c1, F2U(static_cast<float>(1.0 - 1e-3 * 1e-2)));
  EXPECT_EQ(k.scalars.unscale, F2U(static_cast<float>(0.3 / 65536.0)));
  // Out-of-range hyper-parameters are refused with what was expected and found.
  cfg.beta1 = 1.0;
  try {
    MakeLaunch(cfg, gs, 1);
    FAIL() << "beta1 = 1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("found 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeLaunch(OptimizerConfig::Defaults(Optimizer::kAdam), gs, 0),
               std::invalid_argument);
}

// Hyper-parameters that are finite in double but overflow binary32 once combined are refused
// before a launch exists (they would turn the whole state into NaN), naming the scalar.
TEST(Rules, ScalarsMustBeFiniteAsBinary32) {
  auto refused = [](OptimizerConfig c, GradSpec gs, const std::string& must) {
    try {
      MakeLaunch(c, gs, 1);
      ADD_FAILURE() << "accepted; expected an error naming " << must;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(must), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("finite as binary32"), std::string::npos) << e.what();
    }
  };
  const GradSpec gs;
  const OptimizerConfig adamw = OptimizerConfig::Defaults(Optimizer::kAdamW);
  // Hyper-parameters that are not finite as binary32 themselves.
  for (const char* name : {"lr", "weight_decay", "eps"}) {
    OptimizerConfig c = adamw;
    (std::string(name) == "lr" ? c.lr : std::string(name) == "eps" ? c.eps : c.weight_decay) =
        1e39;
    refused(c, gs, std::string(name) + ": expected a value finite as binary32");
  }
  OptimizerConfig c = OptimizerConfig::Defaults(Optimizer::kSgd);
  c.momentum = 1e39;
  refused(c, gs, "momentum: expected a value finite as binary32");
  // Each finite as binary32, but a kernel scalar made of them is not.
  c = adamw;
  c.lr = 3e38;  // lr / (1 - beta1) at step 1 = 3e39
  refused(c, gs, "kernel scalar lr = lr / (1 - beta1^t) (step 1)");
  c = adamw;
  c.lr = 1e30;
  c.weight_decay = 1e30;
  refused(c, gs, "kernel scalar c1 = 1 - lr * weight_decay");
  GradSpec tiny = gs;
  tiny.loss_scale = 1e-39;
  refused(adamw, tiny, "kernel scalar unscale = clip_coef / loss_scale");
  // The largest binary32 value itself is fine.
  c = OptimizerConfig::Defaults(Optimizer::kSgd);
  c.lr = 3.4028234663852886e38;
  EXPECT_NO_THROW(MakeLaunch(c, gs, 1));
}

}  // namespace
}  // namespace csdkit::testing
