#include "test_util.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/splitmix.h"

namespace csdkit::testing {

namespace {

uint64_t Mix(uint64_t& s) {
  SplitMix64 g{s};
  const uint64_t r = g.Next();
  s = g.state;
  return r;
}

const uint32_t kSpecial32[] = {
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffa5a5a5u, 0x7fffffffu,  // NaNs (quiet, signalling)
    0x7f800000u, 0xff800000u,                                        // infinities
    0x00000000u, 0x80000000u,                                        // zeros
    0x00000001u, 0x807fffffu, 0x00400000u, 0x80000123u,              // subnormals
    0x00800000u, 0x80800001u,                                        // smallest normals
    0x7f7fffffu, 0xff7fffffu, 0x7e967699u,                           // huge
    0x3f800000u, 0xbf800001u, 0x2b8cbccc,                            // ordinary
};
const uint16_t kSpecial16[] = {
    0x7e00u, 0xfe00u, 0x7c01u, 0x7d55u,  // NaNs
    0x7c00u, 0xfc00u,                    // infinities
    0x0000u, 0x8000u,                    // zeros
    0x0001u, 0x83ffu, 0x0200u,           // subnormal halves
    0x0400u, 0x7bffu, 0xfbffu,           // smallest normal, max
    0x3c00u, 0xbc01u,
};
const uint16_t kSpecialBf16[] = {
    0x7fc0u, 0xffc0u, 0x7f81u, 0xffa5u,  // NaNs
    0x7f80u, 0xff80u, 0x0000u, 0x8000u,  // infinities, zeros
    0x0001u, 0x807fu,                    // subnormals
    0x0080u, 0x7f7fu, 0xff7fu, 0x3f80u, 0xbf81u,
};

template <typename T, size_t N>
T Pick(const T (&a)[N], uint64_t r) {
  return a[r % N];
}

}  // namespace

void InjectSpecials(Problem& p, double fraction, uint64_t seed) {
  uint64_t s = seed * 0x51ed27u + 17u;
  const uint64_t thresh = static_cast<uint64_t>(fraction * 18446744073709551615.0);
  uint32_t* th = p.buf.theta.as<uint32_t>();
  uint32_t* m = p.buf.m.as<uint32_t>();
  uint32_t* v = p.buf.v.as<uint32_t>();
  for (uint32_t i = 0; i < p.spec.n; ++i) {
    if (Mix(s) < thresh) th[i] = Pick(kSpecial32, Mix(s));
    if (Mix(s) < thresh) m[i] = Pick(kSpecial32, Mix(s));
    if (Mix(s) < thresh) v[i] = Pick(kSpecial32, Mix(s));
  }
  const uint64_t ng = p.spec.grad.sparse ? p.nnz : p.spec.n;
  for (uint64_t k = 0; k < ng; ++k) {
    if (Mix(s) >= thresh) continue;
    switch (p.spec.grad.grad) {
      case DType::kFp32: p.buf.grad.as<uint32_t>()[k] = Pick(kSpecial32, Mix(s)); break;
      case DType::kFp16: p.buf.grad.as<uint16_t>()[k] = Pick(kSpecial16, Mix(s)); break;
      case DType::kBf16: p.buf.grad.as<uint16_t>()[k] = Pick(kSpecialBf16, Mix(s)); break;
    }
  }
}

Problem OverflowProblem(const Variant& var, DType grad, DType out, uint32_t n, Overflow how,
                        const std::vector<uint32_t>& hot, uint64_t seed) {
  ProblemSpec spec;
  spec.hyper = var.cfg;
  spec.step = var.step;
  spec.grad.grad = grad;
  spec.grad.out = out;
  spec.n = n;
  spec.seed = seed;
  Problem p = Problem::Generate(spec);
  std::memset(p.buf.grad.data(), 0, p.buf.grad.size());
  for (uint32_t i : hot) {
    if (grad == DType::kFp32) {
      p.buf.grad.as<uint32_t>()[i] = 0x40000000u;  // 2.0f
    } else {
      p.buf.grad.as<uint16_t>()[i] = 0x4000u;  // 2.0 in fp16 and in bf16
    }
  }
  if (how == Overflow::kHugeUnscale) {
    p.launch.scalars.unscale = hls::F2U(3e38f);
  } else {
    p.launch.scalars.lr = hls::F2U(3e38f);
  }
  return p;
}

void MakeNonZeroRuleProblem(Problem& p, uint64_t seed) {
  hls::Mode md{};
  const uint32_t n = p.spec.n;
  if (!hls::DecodeMode(p.launch.mode, &md) || md.opt != hls::Optimizer::kAdamW || md.sparse ||
      md.grad != DType::kFp32 || !hls::IsQ8(md.state) || n == 0 || n % hls::kQ8Block != 0) {
    char b[240];
    std::snprintf(b, sizeof b,
                  "MakeNonZeroRuleProblem: expected AdamW, a dense fp32 gradient, q8 or q8-bf16 "
                  "state and n a non-zero multiple of %d; found mode 0x%08x, n = %u",
                  hls::kQ8Block, p.launch.mode, n);
    throw std::invalid_argument(b);
  }
  // m' = 0 * m + 1 * g = g and v' = 0 * v + 1 * (g * g) = g * g, g = g_in * 1.
  hls::Scalars& sc = p.launch.scalars;
  sc.unscale = 0x3f800000u;
  sc.beta1 = 0u;
  sc.omb1 = 0x3f800000u;
  sc.beta2 = 0u;
  sc.omb2 = 0x3f800000u;

  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x2545f491u;
  auto uniform = [&]() { return static_cast<double>(Mix(s) >> 11) * 0x1p-53; };  // [0, 1)
  auto sign = [&]() { return (Mix(s) & 1u) != 0u ? hls::kSignMask : 0u; };
  auto subnormal = [&]() { return 1u + static_cast<uint32_t>(Mix(s) % 0x7fffffu); };
  // log2 of the ratios |g| / max that bound the categories: below TM[0] m's index is 0; below
  // TU[0]^1/2 v's is (v' / max v' is the ratio squared).
  const double tm0 = hls::U2F(hls::kQ8SignedThr[0]);
  const double log_m0 = std::log2(tm0);
  const double log_v0 = 0.5 * std::log2(static_cast<double>(hls::U2F(hls::kQ8UnsignedThr[0])));
  // Per kind (block mod 8): log2 of the block's largest magnitude, and of the smallest ratio
  // drawn (kind 6: g stays normal; kind 7: q = |g| * r goes below 2^-126).
  const int top_exp[8] = {0, -9, 21, -50, 55, 0, -100, 90};
  const double low[8] = {-45, -45, -45, -45, -45, 0, -26, -170};
  uint32_t* g = p.buf.grad.as<uint32_t>();
  for (uint32_t blk = 0; blk < n / hls::kQ8Block; ++blk) {
    const unsigned kind = blk % 8;
    uint32_t* x = g + static_cast<uint64_t>(blk) * hls::kQ8Block;
    if (kind == 5) {  // the tiny block: subnormals and zeros of both signs
      for (int i = 0; i < hls::kQ8Block; ++i) x[i] = sign() | (Mix(s) % 5 < 2 ? 0u : subnormal());
      continue;
    }
    const double top = std::ldexp(1.0, top_exp[kind]);
    const uint64_t at = Mix(s) % hls::kQ8Block;
    for (int i = 0; i < hls::kQ8Block; ++i) {
      const uint32_t sg = sign();
      double r = 1.0;
      const unsigned c = static_cast<unsigned>(Mix(s) % 20);
      if (static_cast<uint64_t>(i) == at) {
        x[i] = sg | hls::F2U(static_cast<float>(top));  // the block's largest magnitude
        continue;
      } else if (c < 7) {  // m's (and v's) index 0
        r = std::exp2(low[kind] + uniform() * (log_m0 - 0.02 - low[kind]));
      } else if (c < 11) {  // v's index 0, m's 1 or more
        r = std::exp2(log_m0 + 0.02 + uniform() * (log_v0 - log_m0 - 0.04));
      } else if (c == 11) {  // at m's first threshold
        r = tm0 * (1.0 + (2.0 * uniform() - 1.0) * 0x1p-10);
      } else if (c < 14) {
        x[i] = sg;  // +-0
        continue;
      } else if (c == 14) {
        x[i] = sg | subnormal();
        continue;
      } else {  // ordinary
        r = std::exp2(log_v0 * uniform());
      }
      x[i] = sg | hls::F2U(static_cast<float>(top * r));
    }
  }
}

std::string NonZeroRuleCoverage::Missing(uint64_t min) const {
  std::string r;
  auto need = [&](const char* what, uint64_t got, uint64_t want) {
    if (got >= want) return;
    char b[120];
    std::snprintf(b, sizeof b, "%s%s: %llu (need %llu)", r.empty() ? "" : ", ", what,
                  static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
    r += b;
  };
  need("m > 0 at index 0", m_pos, min);
  need("m < 0 at index 0", m_neg, min);
  need("v at index 0", v, min);
  need("m zeros", m_zero, min);
  need("v zeros", v_zero, min);
  need("tiny m blocks", m_tiny, 1);
  need("tiny v blocks", v_tiny, 1);
  return r;
}

NonZeroRuleCoverage CountNonZeroRule(const Problem& p) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const hls::Fp32 f(md.ftz);
  NonZeroRuleCoverage cov;
  const uint32_t* g = p.buf.grad.as<uint32_t>();
  float x[2][hls::kQ8Block];  // m' = g1, v' = g1 * g1 (their magnitudes, which is what counts)
  for (uint32_t blk = 0; blk < p.spec.n / hls::kQ8Block; ++blk) {
    for (int i = 0; i < hls::kQ8Block; ++i) {
      const float g1 = f.Mul(hls::U2F(g[static_cast<uint64_t>(blk) * hls::kQ8Block + i]), 1.0f);
      x[0][i] = g1;
      x[1][i] = f.Mul(g1, g1);
    }
    for (int mo = 0; mo < 2; ++mo) {
      // QuantizeBlockQ8's steps: non-finite block, absmax as read, tiny block, r, q, index.
      bool finite = true;
      uint32_t amax = 0;
      for (int i = 0; i < hls::kQ8Block; ++i) {
        finite &= !hls::IsNonFinite(hls::F2U(x[mo][i]));
        const uint32_t mag = hls::F2U(f.Mul(hls::U2F(hls::F2U(x[mo][i]) & ~hls::kSignMask), 1.0f));
        amax = mag > amax ? mag : amax;
      }
      if (!finite) continue;
      if (amax < 0x00800000u) {
        ++(mo == 0 ? cov.m_tiny : cov.v_tiny);
        continue;
      }
      const float r = 1.0f / hls::U2F(amax);
      for (int i = 0; i < hls::kQ8Block; ++i) {
        const uint32_t u = hls::F2U(x[mo][i]);
        const float mag = f.Mul(hls::U2F(u & ~hls::kSignMask), 1.0f);
        if (hls::F2U(mag) == 0u) {
          ++(mo == 0 ? cov.m_zero : cov.v_zero);
          continue;
        }
        const uint32_t q = hls::F2U(f.Mul(mag, r));
        const bool idx0 = mo == 0 ? hls::Q8Index(q, hls::kQ8SignedThr, 127u) == 0u
                                  : hls::Q8Index(q, hls::kQ8UnsignedThr, 255u) == 0u;
        if (!idx0) continue;
        if (mo == 1) {
          ++cov.v;
        } else {
          ++((u & hls::kSignMask) != 0u ? cov.m_neg : cov.m_pos);
        }
      }
    }
  }
  return cov;
}

std::string CheckNothingWrittenLanes(const AlignedBuffer& status) {
  const uint32_t* st = status.as<uint32_t>();
  std::string r;
  for (unsigned lane = hls::kStatusCrcThetaIn; lane < hls::kStatusMagic; ++lane) {
    const uint32_t exp = lane == hls::kStatusNonFinitePos ? hls::kStatusNoPosition : 0u;
    if (st[lane] != exp) {
      char b[96];
      std::snprintf(b, sizeof b, "%sstatus lane %u: EXP=0x%08x GOT=0x%08x", r.empty() ? "" : "; ",
                    lane, exp, st[lane]);
      r += b;
    }
  }
  return r;
}

std::string DescribeInputs(const Problem& p, const UpdateBuffers& in, uint64_t i) {
  char b[200];
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  if (i >= p.spec.n) i = p.spec.n == 0 ? 0 : p.spec.n - 1;  // (a lane past n: show the last)
  std::string s;
  if (hls::IsQ8(md.state)) {
    // theta as stored; a moment as its code and its block's absmax.
    const bool bf16 = md.state == hls::StateFmt::kQ8Bf16;
    const uint64_t k = i / hls::kQ8Block;
    std::snprintf(b, sizeof b, bf16 ? "in[%llu]: theta=0x%04x" : "in[%llu]: theta=0x%08x",
                  static_cast<unsigned long long>(i),
                  bf16 ? in.theta.as<uint16_t>()[i] : in.theta.as<uint32_t>()[i]);
    s = b;
    if (hls::UsesM(md)) {
      std::snprintf(b, sizeof b, " m=code 0x%02x absmax 0x%08x", in.m.as<uint8_t>()[i],
                    in.m_absmax.as<uint32_t>()[k]);
      s += b;
    }
    if (hls::UsesV(md)) {
      std::snprintf(b, sizeof b, " v=code 0x%02x absmax 0x%08x", in.v.as<uint8_t>()[i],
                    in.v_absmax.as<uint32_t>()[k]);
      s += b;
    }
  } else {
    const uint32_t* th = in.theta.as<uint32_t>();
    const uint32_t* m = in.m.as<uint32_t>();
    const uint32_t* v = in.v.as<uint32_t>();
    std::snprintf(b, sizeof b, "in[%llu]: theta=0x%08x m=0x%08x v=0x%08x",
                  static_cast<unsigned long long>(i), th[i], m[i], v[i]);
    s = b;
  }
  if (!p.spec.grad.sparse && i < p.spec.n) {
    if (p.spec.grad.grad == DType::kFp32)
      std::snprintf(b, sizeof b, " g=0x%08x", in.grad.as<uint32_t>()[i]);
    else
      std::snprintf(b, sizeof b, " g=0x%04x", in.grad.as<uint16_t>()[i]);
    s += b;
  }
  return s;
}

}  // namespace csdkit::testing
