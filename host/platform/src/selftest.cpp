#include "csdkit/platform/selftest.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>
#include <utility>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/checksum.h"

namespace csdkit {

std::vector<Variant> AllVariants() {
  std::vector<Variant> v;
  auto d = [](Optimizer o) { return OptimizerConfig::Defaults(o); };
  OptimizerConfig c = d(Optimizer::kAdamW);
  v.push_back({"adamw", c, 1});
  c.weight_decay = 0.1;
  v.push_back({"adamw_wd_t7", c, 7});
  c = d(Optimizer::kAdam);
  v.push_back({"adam", c, 2});
  c.weight_decay = 0.01;
  v.push_back({"adam_l2", c, 3});
  c = d(Optimizer::kSgd);
  v.push_back({"sgd_mom_first", c, 1});
  c.dampening = 0.1;
  c.weight_decay = 1e-3;
  v.push_back({"sgd_mom_damp_l2", c, 5});
  c.dampening = 0.0;
  c.nesterov = true;
  v.push_back({"sgd_nesterov", c, 2});
  c = d(Optimizer::kSgd);
  c.momentum = 0.0;
  v.push_back({"sgd_plain", c, 1});
  c = d(Optimizer::kAdagrad);
  c.lr_decay = 0.01;
  c.weight_decay = 0.01;
  c.initial_accumulator_value = 0.1;
  v.push_back({"adagrad", c, 4});
  c = d(Optimizer::kLion);
  c.weight_decay = 0.1;
  v.push_back({"lion", c, 1});
  return v;
}


UpdateBuffers RunOnDevice(Device& dev, const Problem& p) {
  DeviceLaunch db = p.buf.Map<DeviceBufferPtr>([&](const hls::ArgInfo& a, const AlignedBuffer& b) {
    DeviceBufferPtr d = dev.Alloc(b.size(), UpdateBufferRole(a));
    dev.HostToDevice(b.data(), *d, 0, b.size());
    return d;
  });
  db.SetScalars(p.spec.n, p.nnz, p.launch);
  dev.LaunchUpdate(db);
  UpdateBuffers out = p.buf.Clone();
  db.ForEachBuffer([&](const hls::ArgInfo& a, DeviceBufferPtr& d) {
    AlignedBuffer* back = nullptr;
    out.ForEachBuffer([&](const hls::ArgInfo& b, AlignedBuffer& h) {
      if (b.index == a.index) back = &h;
    });
    dev.DeviceToHost(*d, 0, back->data(), back->size());
  });
  return out;
}

std::string DiffBuffers(const char* name, const AlignedBuffer& exp, const AlignedBuffer& got,
                        unsigned elem_bytes, const std::string& context) {
  if (exp.size() != got.size()) {
    return std::string(name) + ": buffer sizes differ (" + std::to_string(exp.size()) + " vs " +
           std::to_string(got.size()) + ")";
  }
  if (exp.SameBytes(got)) return "";
  std::ostringstream os;
  os << name << " mismatch" << (context.empty() ? "" : " (" + context + ")") << ":";
  const uint64_t count = exp.size() / elem_bytes;
  int shown = 0;
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t e = 0, g = 0;
    std::memcpy(&e, exp.data() + i * elem_bytes, elem_bytes);
    std::memcpy(&g, got.data() + i * elem_bytes, elem_bytes);
    if (e == g) continue;
    ++total;
    if (shown++ < 6) {
      char b[80];
      std::snprintf(b, sizeof b, " [%llu] EXP=0x%0*x GOT=0x%0*x", static_cast<unsigned long long>(i),
                    elem_bytes * 2, e, elem_bytes * 2, g);
      os << b;
    }
  }
  os << " (" << total << " elements differ)";
  return os.str();
}

std::string CheckStatusLanes(const Problem& p, const UpdateBuffers& got) {
  hls::Mode md{};
  if (!hls::DecodeMode(p.launch.mode, &md)) return "status: the launch's mode word is invalid";
  const uint32_t n = p.spec.n;
  const bool um = hls::UsesM(md), uv = hls::UsesV(md);
  const bool q8 = hls::IsQ8(md.state), bf16 = md.state == hls::StateFmt::kQ8Bf16;
  const uint64_t blocks = n / hls::kQ8Block;
  // The host's CRC-32 (zlib's) of an array as stored, 0 for unused state: n binary32 (or bf16)
  // theta values; a q8 moment's n codes followed by its absmax values.
  auto crc = [&](const AlignedBuffer& b, bool used) {
    return used ? Crc32(b.data(), uint64_t{n} * (bf16 ? 2 : 4)) : 0u;
  };
  auto mcrc = [&](const AlignedBuffer& codes, const AlignedBuffer& amax, bool used) {
    if (!used) return 0u;
    if (!q8) return Crc32(codes.data(), 4ull * n);
    return hls::Crc32Combine(Crc32(codes.data(), n), Crc32(amax.data(), 4 * blocks), 4 * blocks);
  };
  // What reads back non-finite: a theta value, a moment element (q8: every element of a block
  // whose absmax is non-finite).
  uint32_t count = 0, first = hls::kStatusNoPosition;
  auto nonfinite = [](uint32_t x) { return (x & hls::kExpMask) == hls::kExpMask; };
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t t = bf16 ? static_cast<uint32_t>(got.theta.as<uint16_t>()[i]) << 16
                            : got.theta.as<uint32_t>()[i];
    const uint32_t mb = !um ? 0u : q8 ? got.m_absmax.as<uint32_t>()[i / hls::kQ8Block]
                                      : got.m.as<uint32_t>()[i];
    const uint32_t vb = !uv ? 0u : q8 ? got.v_absmax.as<uint32_t>()[i / hls::kQ8Block]
                                      : got.v.as<uint32_t>()[i];
    for (uint32_t x : {t, mb, vb}) {
      if (!nonfinite(x)) continue;
      if (count != 0xffffffffu) ++count;
      if (first == hls::kStatusNoPosition) first = i;
    }
  }
  const std::tuple<unsigned, const char*, uint32_t> want[] = {
      {hls::kStatusCrcThetaIn, "CRC of theta read", crc(p.buf.theta, true)},
      {hls::kStatusCrcMIn, "CRC of m read", mcrc(p.buf.m, p.buf.m_absmax, um)},
      {hls::kStatusCrcVIn, "CRC of v read", mcrc(p.buf.v, p.buf.v_absmax, uv)},
      {hls::kStatusCrcThetaOut, "CRC of theta written", crc(got.theta, true)},
      {hls::kStatusCrcMOut, "CRC of m written", mcrc(got.m, got.m_absmax, um)},
      {hls::kStatusCrcVOut, "CRC of v written", mcrc(got.v, got.v_absmax, uv)},
      {hls::kStatusNonFinite, "non-finite count", count},
      {hls::kStatusNonFinitePos, "first non-finite element", first},
      {hls::kStatusAxiError, "AXI error", 0u}};
  std::string r;
  const uint32_t* st = got.status.as<uint32_t>();
  for (const auto& [lane, what, exp] : want) {
    if (st[lane] == exp) continue;
    char b[128];
    std::snprintf(b, sizeof b, "%sstatus lane %u (%s): host EXP=0x%08x GOT=0x%08x",
                  r.empty() ? "" : "; ", lane, what, exp, st[lane]);
    r += b;
  }
  return r;
}

nlohmann::json SelfTestReport::ToJson() const {
  return {{"launches", launches}, {"failed", failed}, {"failures", failures},
          {"passed", failed == 0 && launches > 0}};
}

SelfTestReport SelfTest(Device& dev, const SelfTestOptions& o) {
  SelfTestReport rep;
  uint64_t seed = o.seed;
  // Special values for a few elements of every array (NaN payloads, infinities, zeros,
  // subnormals, huge), so the comparison covers them.
  const uint32_t sp32[] = {0x7fc00000u, 0xff800001u, 0x7f800000u, 0x80000000u, 0x00000001u,
                           0x807fffffu, 0x7f7fffffu, 0x00800000u};
  const uint16_t sp16[] = {0x7e00u, 0xfc01u, 0x7c00u, 0x8000u, 0x0001u, 0x83ffu, 0x7bffu, 0x0400u};
  std::vector<std::pair<hls::StateFmt, Variant>> cases;  // every format x optimizer variant
  for (hls::StateFmt st : o.states) {
    for (const Variant& var : AllVariants()) cases.push_back({st, var});
  }
  for (const auto& [st, var] : cases) {
    const bool q8 = hls::IsQ8(st);
    for (DType g : {DType::kFp32, DType::kFp16, DType::kBf16}) {
      for (DType out : {DType::kFp32, DType::kFp16, DType::kBf16}) {
        if (st == hls::StateFmt::kQ8Bf16 && out == DType::kFp16) continue;
        for (bool sparse : {false, true}) {
          for (bool ftz : {false, true}) {
            if ((ftz && !o.ftz) || (!ftz && !o.ieee)) continue;
            for (uint32_t size : o.sizes) {
              const uint32_t n =
                  q8 ? (size + hls::kQ8Block - 1) / hls::kQ8Block * hls::kQ8Block : size;
              ProblemSpec spec;
              spec.hyper = var.cfg;
              spec.step = var.step;
              spec.grad.grad = g;
              spec.grad.out = out;
              spec.grad.ftz = ftz;
              spec.grad.loss_scale = g == DType::kFp16 ? 1024.0 : 1.0;
              spec.n = n;
              spec.topk = sparse ? 0.05 : 0.0;
              spec.seed = ++seed;
              spec.grad.state = st;
              spec.index = q8 ? 256ull * (seed % 1000) : 0;
              if (q8 && seed % 2 == 0) spec.data = ProblemData::kSpecial;
              Problem p = Problem::Generate(spec);
              for (uint32_t k = 0; !q8 && k < 8 && k * 7 < n; ++k) {
                p.buf.theta.as<uint32_t>()[k * 7] = sp32[k];
                p.buf.m.as<uint32_t>()[(k * 5) % n] = sp32[(k + 3) % 8];
                if (!sparse && g == DType::kFp32) p.buf.grad.as<uint32_t>()[k * 7] = sp32[(k + 1) % 8];
                if (!sparse && g != DType::kFp32) p.buf.grad.as<uint16_t>()[k * 7] = sp16[k];
              }
              std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());
              UpdateBuffers exp = p.buf.Clone();
              RunUpdate(exp, p.spec.n, p.nnz, p.launch);
              const UpdateBuffers got = RunOnDevice(dev, p);
              std::string r;
              const unsigned tb = st == hls::StateFmt::kQ8Bf16 ? 2u : 4u, mb = q8 ? 1u : 4u;
              for (const auto& [nm, a, b, eb] :
                   {std::tuple{"theta", &exp.theta, &got.theta, tb},
                    std::tuple{"m", &exp.m, &got.m, mb}, std::tuple{"v", &exp.v, &got.v, mb},
                    std::tuple{"m_absmax", &exp.m_absmax, &got.m_absmax, 4u},
                    std::tuple{"v_absmax", &exp.v_absmax, &got.v_absmax, 4u},
                    std::tuple{"out16", &exp.out16, &got.out16, 2u},
                    std::tuple{"status", &exp.status, &got.status, 4u}}) {
                const std::string d = DiffBuffers(nm, *a, *b, eb);
                if (!d.empty()) r += (r.empty() ? "" : "; ") + d;
              }
              // The integrity lanes against the host's own CRCs and scan of the buffers (not
              // only against the model, which computes them the same way as the kernel).
              const std::string lanes = CheckStatusLanes(p, got);
              if (!lanes.empty()) r += (r.empty() ? "" : "; ") + lanes;
              std::ostringstream desc;
              desc << var.name << " state=" << StateFmtName(st) << " grad=" << DTypeName(g)
                   << " out=" << OutDTypeName(out)
                   << (sparse ? " sparse" : " dense") << (ftz ? " ftz" : " ieee") << " n=" << n
                   << " seed=" << spec.seed;
              ++rep.launches;
              if (!r.empty()) {
                ++rep.failed;
                if (rep.failures.size() < 10) rep.failures.push_back(desc.str() + ": " + r);
              }
              if (o.on_case) o.on_case(desc.str(), r);
            }
          }
        }
      }
    }
  }
  return rep;
}

}  // namespace csdkit
