#include "csdkit/runtime/state_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "csdkit/aio/aio_engine.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/checksum.h"

namespace csdkit {
namespace {

const ParamLayout& LayoutOf(const Store& s, const char* what) {
  if (s.layout() == nullptr) {
    throw std::invalid_argument(std::string(what) + ": store '" + s.dir() +
                                "' has no parameter layout (created by `csdkit init`, not for a "
                                "model)");
  }
  return *s.layout();
}

void CheckCount(const ParamLayout& l, size_t n, const std::string& what) {
  if (n != l.tensors().size()) {
    throw std::invalid_argument(what + ": expected one entry per tensor of the layout (" +
                                std::to_string(l.tensors().size()) + "), found " +
                                std::to_string(n));
  }
}

// Calls fn(t, lo, hi) for every tensor t overlapping global elements [base, base + n), with
// [lo, hi) the overlap (global element numbers). Tensors are in increasing offset order.
template <typename Fn>
void ForEachOverlap(const ParamLayout& l, uint64_t base, uint64_t n, Fn&& fn) {
  const size_t nt = l.tensors().size();
  // The last tensor starting at or before base.
  size_t lo_t = 0, hi_t = nt;
  while (hi_t - lo_t > 1) {
    const size_t mid = (lo_t + hi_t) / 2;
    if (l.offset(mid) <= base) lo_t = mid; else hi_t = mid;
  }
  for (size_t t = lo_t; t < nt && l.offset(t) < base + n; ++t) {
    const uint64_t tb = l.offset(t), te = tb + l.tensors()[t].numel;
    const uint64_t lo = std::max(tb, base), hi = std::min(te, base + n);
    if (lo < hi) fn(t, lo, hi);
  }
}

// Reads one subgroup's arrays of variable v from the committed slot into raw (one buffer per
// array, in ArraysOf order, as stored) and checks the variable's CRC against the manifest.
void ReadArrays(const Store& s, aio::Engine& engine, unsigned d, unsigned v, const Subgroup& g,
                std::vector<AlignedBuffer>& raw) {
  const std::vector<unsigned> as = s.ArraysOf(v);
  std::vector<uint32_t> crcs;
  std::string files;
  raw.clear();
  for (unsigned a : as) {
    const ArrayExtent e = s.Extent(a, g);
    raw.emplace_back(s.ArrayBufferBytes(a));
    engine.Read(s.file(d, a, s.slot()), e.offset, raw.back().data(), e.io_bytes);
    crcs.push_back(Crc32(raw.back().data(), e.bytes));
    files += (files.empty() ? "" : " + ") + s.FilePath(d, a, s.slot());
  }
  const uint32_t crc = s.VarChecksum(v, g, crcs.data());
  if (crc != s.checksum(d, v, g.index)) {
    char b[64];
    std::snprintf(b, sizeof b, "expected CRC 0x%08x, found 0x%08x", s.checksum(d, v, g.index),
                  crc);
    throw StoreError("store '" + s.dir() + "' is corrupt: " + files + " subgroup " +
                     std::to_string(g.index) + " (elements " + std::to_string(g.begin) + ".." +
                     std::to_string(g.begin + g.n) + "): " + b);
  }
}

// Reads one subgroup of variable v of the committed slot, checks its CRC and gives its values
// as binary32 in buf (n of them): as stored in an fp32 store; in a q8 store theta widened from
// bf16 (q8-bf16) and a moment dequantized from its codes and absmax values under the store's
// policy (docs/state-formats.md).
void ReadChecked(const Store& s, aio::Engine& engine, unsigned d, unsigned v, const Subgroup& g,
                 AlignedBuffer& buf) {
  std::vector<AlignedBuffer> raw;
  ReadArrays(s, engine, d, v, g, raw);
  float* x = buf.as<float>();
  const StateArray& first = s.arrays()[s.ArraysOf(v)[0]];
  if (raw.size() == 2) {  // a q8 moment
    const hls::Fp32 policy(s.config().ftz);
    const uint8_t* codes = raw[0].as<uint8_t>();
    const float* amax = raw[1].as<float>();
    for (uint32_t i = 0; i < g.n; ++i) {
      x[i] = hls::DequantQ8(codes[i], amax[i / hls::kQ8Block], s.vars()[v] == "m", policy);
    }
  } else if (first.elem_bytes == 2) {  // bf16 theta
    for (uint32_t i = 0; i < g.n; ++i) x[i] = hls::U2F(hls::Bf16ToF32(raw[0].as<uint16_t>()[i]));
  } else {
    std::memcpy(x, raw[0].data(), 4ull * g.n);
  }
}

// A q8 moment of one subgroup as stored: a code per element, an absmax per block.
struct Q8Moment {
  std::vector<uint8_t> codes;
  std::vector<float> amax;
};

// Quantizes n binary32 values of moment v block by block (the store's policy).
Q8Moment Quantize(const Store& s, unsigned v, const Subgroup& g, const float* x) {
  Q8Moment q;
  q.codes.resize(g.n);
  q.amax.resize(g.n / hls::kQ8Block);
  const hls::Fp32 policy(s.config().ftz);
  for (uint32_t k = 0; k < g.n / hls::kQ8Block; ++k) {
    hls::QuantizeBlockQ8(x + uint64_t{k} * hls::kQ8Block, hls::kQ8Block, s.vars()[v] == "m",
                         policy, q.codes.data() + uint64_t{k} * hls::kQ8Block, &q.amax[k]);
  }
  return q;
}

// Writes variable v of subgroup g into slot `slot` in the store's format and returns the
// variable's CRC as the manifest records it: theta from x (to bf16 by nearest even in q8-bf16:
// an import is not a step), an fp32 moment from x, a q8 moment from q.
uint32_t WriteVar(const Store& s, aio::Engine& engine, unsigned d, unsigned v, const Subgroup& g,
                  unsigned slot, const float* x, const Q8Moment* q) {
  const std::vector<unsigned> as = s.ArraysOf(v);
  std::vector<uint32_t> crcs;
  for (size_t k = 0; k < as.size(); ++k) {
    const StateArray& arr = s.arrays()[as[k]];
    const ArrayExtent e = s.Extent(as[k], g);
    AlignedBuffer out(s.ArrayBufferBytes(as[k]));
    std::memset(out.data(), 0, e.io_bytes);
    if (arr.absmax) {
      std::memcpy(out.data(), q->amax.data(), e.bytes);
    } else if (arr.elem_bytes == 1) {
      std::memcpy(out.data(), q->codes.data(), e.bytes);
    } else if (arr.elem_bytes == 2) {
      for (uint32_t i = 0; i < g.n; ++i) out.as<uint16_t>()[i] = hls::F32ToBf16(hls::F2U(x[i]));
    } else {
      std::memcpy(out.data(), x, e.bytes);
    }
    crcs.push_back(Crc32(out.data(), e.bytes));
    engine.Write(s.file(d, as[k], slot), e.offset, out.data(), e.io_bytes);
  }
  return s.VarChecksum(v, g, crcs.data());
}

float Widen(DType dt, const void* p, uint64_t i) {
  uint32_t bits;
  if (dt == DType::kFp32) {
    std::memcpy(&bits, static_cast<const uint8_t*>(p) + 4 * i, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
    bits = dt == DType::kFp16 ? hls::F16ToF32(h) : hls::Bf16ToF32(h);
  }
  return hls::U2F(bits);
}

// Refuses non-finite values (and negative ones where `nonneg`) naming tensor and element.
void CheckValues(const ParamLayout& l, const char* var, size_t t, DType dt, const void* p,
                 bool nonneg) {
  for (uint64_t i = 0; i < l.tensors()[t].numel; ++i) {
    const float x = Widen(dt, p, i);
    if (!std::isfinite(x) || (nonneg && x < 0.0f)) {
      char b[96];
      std::snprintf(b, sizeof b, "element %llu is %.9g (0x%08x)",
                    static_cast<unsigned long long>(i), static_cast<double>(x), hls::F2U(x));
      throw std::invalid_argument(std::string(var) + " of tensor '" + l.tensors()[t].name +
                                  "': expected " + (nonneg ? "finite values >= 0" : "finite values") +
                                  ", found " + b);
    }
  }
}

}  // namespace

unsigned StateVariableIndex(const Store& s, const std::string& var) {
  const auto it = std::find(s.vars().begin(), s.vars().end(), var);
  if (it == s.vars().end()) {
    std::string have;
    for (const std::string& v : s.vars()) have += (have.empty() ? "" : ", ") + v;
    throw std::invalid_argument("state variable '" + var + "': the store's optimizer (" +
                                OptimizerName(s.config().hyper.opt) + ") keeps no '" + var +
                                "' (it keeps " + have + ")");
  }
  return static_cast<unsigned>(it - s.vars().begin());
}

void ExportState(const Store& s, const std::string& var, const std::vector<float*>& dst,
                 const aio::AioConfig& aio_cfg) {
  const ParamLayout& l = LayoutOf(s, "state export");
  CheckCount(l, dst.size(), "state export");
  const unsigned v = StateVariableIndex(s, var);
  aio::Engine engine(aio_cfg);
  AlignedBuffer buf(static_cast<size_t>(s.config().subgroup_elems) * 4);
  for (const Shard& sh : s.shards()) {
    for (const Subgroup& g : s.Subgroups(sh.device)) {
      const uint64_t base = sh.begin + g.begin;
      bool wanted = false;
      ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t, uint64_t) { wanted |= dst[t] != nullptr; });
      if (!wanted) continue;
      ReadChecked(s, engine, sh.device, v, g, buf);
      const float* x = buf.as<float>();
      ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t lo, uint64_t hi) {
        if (dst[t] != nullptr) {
          std::memcpy(dst[t] + (lo - l.offset(t)), x + (lo - base), 4 * (hi - lo));
        }
      });
    }
  }
}

uint64_t Q8TensorBlocks(uint64_t numel) { return (numel + hls::kQ8Block - 1) / hls::kQ8Block; }

namespace {

// The index of moment `var` of a q8 model store, for the raw (codes and absmax) calls.
unsigned Q8MomentIndex(const Store& s, const std::string& var, const std::string& what) {
  if (!hls::IsQ8(s.state())) {
    throw std::invalid_argument(what + ": store '" + s.dir() + "' keeps its state as " +
                                StateFmtName(s.state()) +
                                ", not as codes (expected a q8 or q8-bf16 store)");
  }
  if (var != "m" && var != "v") {
    throw std::invalid_argument(what + ": expected a moment ('m' or 'v'), found '" + var + "'");
  }
  return StateVariableIndex(s, var);
}

}  // namespace

void ExportStateQ8(const Store& s, const std::string& var, const std::vector<uint8_t*>& codes,
                   const std::vector<float*>& absmax, const aio::AioConfig& aio_cfg) {
  const ParamLayout& l = LayoutOf(s, "state export (codes)");
  CheckCount(l, codes.size(), "state export (codes): codes");
  CheckCount(l, absmax.size(), "state export (codes): absmax");
  const unsigned v = Q8MomentIndex(s, var, "state export (codes)");
  aio::Engine engine(aio_cfg);
  std::vector<AlignedBuffer> raw;
  for (const Shard& sh : s.shards()) {
    for (const Subgroup& g : s.Subgroups(sh.device)) {
      const uint64_t base = sh.begin + g.begin;
      bool wanted = false;
      ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t, uint64_t) {
        wanted |= codes[t] != nullptr || absmax[t] != nullptr;
      });
      if (!wanted) continue;
      ReadArrays(s, engine, sh.device, v, g, raw);
      const uint8_t* c = raw[0].as<uint8_t>();
      const float* a = raw[1].as<float>();
      // Tensors start on blocks and subgroups end on blocks: a tensor's last block, padding
      // included, is in the subgroup that holds its last element.
      ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t lo, uint64_t hi) {
        const uint64_t hi_blk = (hi - base + hls::kQ8Block - 1) / hls::kQ8Block * hls::kQ8Block;
        const uint64_t at = lo - l.offset(t);  // element of the tensor, a multiple of 256
        if (codes[t] != nullptr) std::memcpy(codes[t] + at, c + (lo - base), hi_blk - (lo - base));
        if (absmax[t] != nullptr) {
          std::memcpy(absmax[t] + at / hls::kQ8Block, a + (lo - base) / hls::kQ8Block,
                      4 * ((hi_blk - (lo - base)) / hls::kQ8Block));
        }
      });
    }
  }
}

void ImportState(Store& s, const StateImport& in, const aio::AioConfig& aio_cfg) {
  const ParamLayout& l = LayoutOf(s, "state import");
  if (s.access() != StoreAccess::kWrite) {
    throw std::invalid_argument("state import: store '" + s.dir() + "' was opened for reading");
  }
  if (in.step < 0) {
    throw std::invalid_argument("state import: step: expected a value >= 0, found " +
                                std::to_string(in.step));
  }
  CheckCount(l, in.theta.size(), "state import: theta");
  const bool adagrad = s.config().hyper.opt == Optimizer::kAdagrad;
  const std::vector<const float*>* lists[] = {&in.m, &in.v};
  const char* names[] = {"m", "v"};
  for (int k = 0; k < 2; ++k) {
    if (lists[k]->empty()) continue;
    CheckCount(l, lists[k]->size(), std::string("state import: ") + names[k]);
    const bool any = std::any_of(lists[k]->begin(), lists[k]->end(),
                                 [](const float* p) { return p != nullptr; });
    if (any) StateVariableIndex(s, names[k]);  // refuses a variable the optimizer lacks
  }
  if (!in.group_hyper.empty()) {
    if (in.group_hyper.size() != s.group_hyper().size()) {
      throw std::invalid_argument("state import: group_hyper: expected " +
                                  std::to_string(s.group_hyper().size()) + " groups, found " +
                                  std::to_string(in.group_hyper.size()));
    }
    for (size_t g = 0; g < in.group_hyper.size(); ++g) {
      if (in.group_hyper[g].opt != s.config().hyper.opt) {
        throw std::invalid_argument("state import: group_hyper[" + std::to_string(g) +
                                    "]: expected optimizer " +
                                    OptimizerName(s.config().hyper.opt) + ", found " +
                                    OptimizerName(in.group_hyper[g].opt));
      }
      try {
        ValidateConfig(in.group_hyper[g]);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("state import: group_hyper[" + std::to_string(g) + "]: " +
                                    e.what());
      }
    }
  }
  if (!in.tensor_steps.empty()) {
    CheckCount(l, in.tensor_steps.size(), "state import: tensor_steps");
    for (size_t t = 0; t < in.tensor_steps.size(); ++t) {
      if (in.tensor_steps[t] < 0 || in.tensor_steps[t] > in.step) {
        throw std::invalid_argument("state import: tensor_steps: tensor '" + l.tensors()[t].name +
                                    "': expected a step count in [0, " +
                                    std::to_string(in.step) + "] (the imported step), found " +
                                    std::to_string(in.tensor_steps[t]));
      }
    }
  }
  // Every value checked before the first write.
  for (size_t t = 0; t < l.tensors().size(); ++t) {
    if (in.theta[t]) CheckValues(l, "theta", t, in.theta_dtype, in.theta[t], false);
    if (!in.m.empty() && in.m[t]) CheckValues(l, "m", t, DType::kFp32, in.m[t], false);
    if (!in.v.empty() && in.v[t]) CheckValues(l, "v", t, DType::kFp32, in.v[t], true);
  }
  const std::vector<const uint8_t*>* raw_codes[] = {&in.m_codes, &in.v_codes};
  const std::vector<const float*>* raw_amax[] = {&in.m_absmax, &in.v_absmax};
  for (int k = 0; k < 2; ++k) {
    if (raw_codes[k]->empty() && raw_amax[k]->empty()) continue;
    const std::string what = std::string("state import: ") + names[k];
    CheckCount(l, raw_codes[k]->size(), what + "_codes");
    CheckCount(l, raw_amax[k]->size(), what + "_absmax");
    Q8MomentIndex(s, names[k], what + "_codes");
    for (size_t t = 0; t < l.tensors().size(); ++t) {
      const uint8_t* c = (*raw_codes[k])[t];
      const float* a = (*raw_amax[k])[t];
      const std::string tensor = "tensor '" + l.tensors()[t].name + "'";
      if ((c == nullptr) != (a == nullptr)) {
        throw std::invalid_argument(what + "_codes / " + names[k] + "_absmax of " + tensor +
                                    ": expected both or neither, found only " +
                                    (c ? "the codes" : "the absmax values"));
      }
      if (c == nullptr) continue;
      const uint64_t nb = Q8TensorBlocks(l.tensors()[t].numel);
      for (uint64_t b = 0; b < nb; ++b) {
        const uint32_t u = hls::F2U(a[b]);
        const uint32_t exp = (u >> 23) & 0xffu;
        if (u != 0 && ((u >> 31) != 0 || exp == 0 || exp == 0xffu)) {
          char m[96];
          std::snprintf(m, sizeof m, "block %llu is %.9g (0x%08x)",
                        static_cast<unsigned long long>(b), static_cast<double>(a[b]), u);
          throw std::invalid_argument(what + "_absmax of " + tensor +
                                      ": expected +0 or a normal finite positive value, found " +
                                      m);
        }
      }
      const std::vector<const float*>& vals = *lists[k];
      if (vals.empty() || vals[t] == nullptr) continue;
      const hls::Fp32 policy(s.config().ftz);
      for (uint64_t i = 0; i < l.tensors()[t].numel; ++i) {
        const float d = hls::DequantQ8(c[i], a[i / hls::kQ8Block], k == 0, policy);
        if (hls::F2U(d) != hls::F2U(vals[t][i])) {
          char m[160];
          std::snprintf(m, sizeof m, "element %llu: code 0x%02x with absmax 0x%08x is 0x%08x, the "
                        "values give 0x%08x", static_cast<unsigned long long>(i), c[i],
                        hls::F2U(a[i / hls::kQ8Block]), hls::F2U(d), hls::F2U(vals[t][i]));
          throw std::invalid_argument(what + " of " + tensor + ": expected the values to be " +
                                      "the codes dequantized, found " + m);
        }
      }
    }
  }

  aio::Engine engine(aio_cfg);
  AlignedBuffer buf(static_cast<size_t>(s.config().subgroup_elems) * 4);
  Store::Checksums crcs = s.EmptyChecksums();
  const unsigned ws = 1 - s.slot();
  for (const Shard& sh : s.shards()) {
    for (const Subgroup& g : s.Subgroups(sh.device)) {
      const uint64_t base = sh.begin + g.begin;
      for (unsigned v = 0; v < s.vars().size(); ++v) {
        const std::string& name = s.vars()[v];
        float* x = buf.as<float>();
        if (name == "theta") {
          bool keep = false;
          ForEachOverlap(l, base, g.n,
                         [&](size_t t, uint64_t, uint64_t) { keep |= in.theta[t] == nullptr; });
          if (keep) {
            ReadChecked(s, engine, sh.device, v, g, buf);
          } else {
            std::fill(x, x + g.n, 0.0f);
          }
          ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t lo, uint64_t hi) {
            if (in.theta[t] == nullptr) return;
            for (uint64_t i = lo; i < hi; ++i) {
              x[i - base] = Widen(in.theta_dtype, in.theta[t], i - l.offset(t));
            }
          });
        } else {
          const std::vector<const float*>& src = name == "m" ? in.m : in.v;
          const float init =
              name == "v" && adagrad
                  ? static_cast<float>(
                        (in.group_hyper.empty() ? s.group_hyper() : in.group_hyper)[g.group]
                            .initial_accumulator_value)
                  : 0.0f;
          std::fill(x, x + g.n, init);
          if (!src.empty()) {
            ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t lo, uint64_t hi) {
              if (src[t]) std::memcpy(x + (lo - base), src[t] + (lo - l.offset(t)), 4 * (hi - lo));
            });
          }
        }
        Q8Moment q;
        if (name != "theta" && hls::IsQ8(s.state())) {
          q = Quantize(s, v, g, x);
          // Tensors given as stored: their blocks' codes and absmax values replace the ones
          // quantized from the values (a tensor's blocks lie in one subgroup).
          const std::vector<const uint8_t*>& rc = name == "m" ? in.m_codes : in.v_codes;
          const std::vector<const float*>& ra = name == "m" ? in.m_absmax : in.v_absmax;
          if (!rc.empty()) {
            ForEachOverlap(l, base, g.n, [&](size_t t, uint64_t lo, uint64_t hi) {
              if (rc[t] == nullptr) return;
              const uint64_t from = lo - base;
              const uint64_t to = (hi - base + hls::kQ8Block - 1) / hls::kQ8Block * hls::kQ8Block;
              const uint64_t at = lo - l.offset(t);
              std::memcpy(q.codes.data() + from, rc[t] + at, to - from);
              std::memcpy(q.amax.data() + from / hls::kQ8Block, ra[t] + at / hls::kQ8Block,
                          4 * ((to - from) / hls::kQ8Block));
            });
          }
        }
        crcs[sh.device][v][g.index] = WriteVar(s, engine, sh.device, v, g, ws, x, &q);
      }
    }
  }
  s.Commit(crcs, in.group_hyper.empty() ? nullptr : &in.group_hyper, in.step,
           in.tensor_steps.empty() ? nullptr : &in.tensor_steps);
}

}  // namespace csdkit
