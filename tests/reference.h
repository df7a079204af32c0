// The plain reference of the updater: one element at a time, each optimizer in its textbook
// form (written independently of the unified datapath in rules.h), the gradient decoded by a
// plain scatter from the sparse arrays, no tiles, no words; the status word's integrity lanes
// from zlib's crc32 over the arrays before and after the update and a plain loop for the
// non-finite count. Shared by the kernel tests.
#ifndef CSDKIT_TESTS_REFERENCE_H_
#define CSDKIT_TESTS_REFERENCE_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include <zlib.h>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/fp32.h"
#include "csdkit/hls/mode.h"
#include "csdkit/platform/problem.h"

namespace csdkit::testing {

/// The dense binary32 gradient (bits) the kernel should see: widened from the grad dtype;
/// for a sparse stream, zeros with the kept values scattered at their indices.
inline std::vector<uint32_t> DenseGradBits(const Problem& p, const UpdateBuffers& b) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const uint32_t n = p.spec.n;
  std::vector<uint32_t> g(n, 0u);
  auto widen = [&](const AlignedBuffer& buf, uint64_t i) -> uint32_t {
    if (md.grad == DType::kFp32) return buf.as<uint32_t>()[i];
    const uint16_t h = buf.as<uint16_t>()[i];
    return md.grad == DType::kFp16 ? hls::F16ToF32(h) : hls::Bf16ToF32(h);
  };
  if (!md.sparse) {
    for (uint32_t i = 0; i < n; ++i) g[i] = widen(b.grad, i);
    return g;
  }
  const uint32_t* blk = b.sp_blk.as<uint32_t>();
  const uint16_t* idx = b.sp_idx.as<uint16_t>();
  const uint32_t nb = (n + 65535u) / 65536u;
  for (uint32_t blkno = 0; blkno < nb; ++blkno) {
    for (uint32_t k = blk[blkno]; k < blk[blkno + 1]; ++k) g[blkno * 65536u + idx[k]] = widen(b.grad, k);
  }
  return g;
}

/// zlib's CRC-32 of the first n binary32 elements of a buffer (the bytes, not the words).
inline uint32_t ReferenceCrc(const AlignedBuffer& a, uint32_t n) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(a.data()), size_t{n} * 4));
}

/// Applies one step to `b` in textbook form. Returns nothing; `b` must be a valid launch.
inline void ReferenceUpdate(const Problem& p, UpdateBuffers& b) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const uint32_t n = p.spec.n;
  // Which arrays the optimizer keeps, written out here rather than taken from mode.h.
  const bool has_m = md.opt == Optimizer::kAdamW || md.opt == Optimizer::kAdam ||
                     md.opt == Optimizer::kLion || (md.opt == Optimizer::kSgd && md.momentum);
  const bool has_v = md.opt == Optimizer::kAdamW || md.opt == Optimizer::kAdam ||
                     md.opt == Optimizer::kAdagrad;
  const uint32_t crc_theta_in = ReferenceCrc(b.theta, n);
  const uint32_t crc_m_in = has_m ? ReferenceCrc(b.m, n) : 0u;
  const uint32_t crc_v_in = has_v ? ReferenceCrc(b.v, n) : 0u;
  const hls::Scalars& s = p.launch.scalars;
  const hls::Fp32 f(md.ftz);
  using hls::U2F;
  using hls::F2U;
  const float unscale = U2F(s.unscale), lr = U2F(s.lr), b1 = U2F(s.beta1), omb1 = U2F(s.omb1),
              b2 = U2F(s.beta2), omb2 = U2F(s.omb2), eps = U2F(s.eps), wd = U2F(s.wd),
              c1 = U2F(s.c1), c2 = U2F(s.c2);
  const std::vector<uint32_t> gbits = DenseGradBits(p, b);
  float* th = b.theta.as<float>();
  float* m = b.m.as<float>();
  float* v = b.v.as<float>();
  for (uint32_t i = 0; i < p.spec.n; ++i) {
    float g = f.Mul(U2F(gbits[i]), unscale);
    switch (md.opt) {
      case Optimizer::kAdamW:
      case Optimizer::kAdam: {
        if (md.l2) g = f.Add(g, f.Mul(wd, th[i]));
        m[i] = f.Add(f.Mul(b1, m[i]), f.Mul(omb1, g));
        v[i] = f.Add(f.Mul(b2, v[i]), f.Mul(omb2, f.Mul(g, g)));
        const float den = f.Add(f.Mul(f.Sqrt(v[i]), c2), eps);
        const float upd = f.Mul(lr, f.Div(m[i], den));
        th[i] = md.opt == Optimizer::kAdamW ? f.Sub(f.Mul(th[i], c1), upd) : f.Sub(th[i], upd);
        break;
      }
      case Optimizer::kSgd: {
        if (md.l2) g = f.Add(g, f.Mul(wd, th[i]));
        if (md.momentum) {
          m[i] = md.first ? g : f.Add(f.Mul(b1, m[i]), f.Mul(omb1, g));
          g = md.nesterov ? f.Add(g, f.Mul(b1, m[i])) : m[i];
        }
        th[i] = f.Sub(th[i], f.Mul(lr, g));
        break;
      }
      case Optimizer::kAdagrad: {
        if (md.l2) g = f.Add(g, f.Mul(wd, th[i]));
        v[i] = f.Add(v[i], f.Mul(g, g));
        th[i] = f.Sub(th[i], f.Mul(lr, f.Div(g, f.Add(f.Sqrt(v[i]), eps))));
        break;
      }
      case Optimizer::kLion: {
        const float c = f.Add(f.Mul(b1, m[i]), f.Mul(omb1, g));
        th[i] = f.Sub(f.Mul(th[i], c1), f.Mul(lr, f.Sign(c)));
        m[i] = f.Add(f.Mul(b2, m[i]), f.Mul(omb2, g));
        break;
      }
    }
    if (md.out == DType::kFp16) b.out16.as<uint16_t>()[i] = hls::F32ToF16(F2U(th[i]));
    if (md.out == DType::kBf16) b.out16.as<uint16_t>()[i] = hls::F32ToBf16(F2U(th[i]));
  }
  // Non-finite values written: exponent field 255, counted per array.
  uint64_t nonfinite = 0;
  uint32_t first = 0xffffffffu;
  const uint32_t* arrays[3] = {b.theta.as<uint32_t>(), has_m ? b.m.as<uint32_t>() : nullptr,
                               has_v ? b.v.as<uint32_t>() : nullptr};
  for (uint32_t i = 0; i < n; ++i) {
    for (const uint32_t* a : arrays) {
      if (a != nullptr && ((a[i] >> 23) & 0xffu) == 0xffu) {
        ++nonfinite;
        if (first == 0xffffffffu) first = i;
      }
    }
  }
  uint32_t* st = b.status.as<uint32_t>();
  std::memset(st, 0, hls::kWordBytes);
  st[hls::kStatusElems] = n;
  st[hls::kStatusNnz] = md.sparse ? p.nnz : 0u;
  st[hls::kStatusCrcThetaIn] = crc_theta_in;
  st[hls::kStatusCrcMIn] = crc_m_in;
  st[hls::kStatusCrcVIn] = crc_v_in;
  st[hls::kStatusCrcThetaOut] = ReferenceCrc(b.theta, n);
  st[hls::kStatusCrcMOut] = has_m ? ReferenceCrc(b.m, n) : 0u;
  st[hls::kStatusCrcVOut] = has_v ? ReferenceCrc(b.v, n) : 0u;
  st[hls::kStatusNonFinite] =
      nonfinite > 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(nonfinite);
  st[hls::kStatusNonFinitePos] = first;
  st[hls::kStatusAxiError] = 0u;
  st[hls::kStatusMagic] = hls::kStatusMagicValue;
}

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_REFERENCE_H_
