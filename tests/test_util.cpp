#include "test_util.h"

#include <cstring>
#include <sstream>

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
