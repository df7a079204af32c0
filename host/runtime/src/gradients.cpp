#include "csdkit/runtime/gradients.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/runtime/synthetic.h"

namespace csdkit {

namespace {

bool FiniteBits(uint32_t bits, DType t) {
  if (t == DType::kFp32) return (bits & 0x7f800000u) != 0x7f800000u;
  if (t == DType::kFp16) return (bits & 0x7c00u) != 0x7c00u;
  return (bits & 0x7f80u) != 0x7f80u;
}

}  // namespace

GradientSet GradientSet::Planned(const Store& store, double topk) {
  if (!(topk >= 0.0 && topk <= 1.0)) {
    throw std::invalid_argument("topk: expected a ratio in (0, 1], or 0 for dense, found " +
                                std::to_string(topk));
  }
  const StoreConfig& c = store.config();
  GradientSet g;
  g.dtype_ = c.grad;
  g.params_ = c.params;
  g.planned_ = true;
  g.known_finite_ = 1;
  if (topk > 0.0) {
    g.sparse_ = true;
    g.streams_.resize(c.devices);
    for (unsigned d = 0; d < c.devices; ++d) {
      for (const Subgroup& sg : store.Subgroups(d)) {
        SparseGrad s;
        s.n = sg.n;
        s.nnz = TopKCount(sg.n, topk);
        s.dtype = c.grad;
        g.streams_[d].push_back(std::move(s));
      }
    }
  } else {
    g.dense_ = AlignedBuffer::Reserve(c.params * DTypeBytes(c.grad));
  }
  return g;
}

GradientSet GradientSet::Synthetic(const Store& store, int64_t step, double topk,
                                   int64_t poison) {
  const StoreConfig& c = store.config();
  GradientSet g;
  g.dtype_ = c.grad;
  g.params_ = c.params;
  const unsigned eb = DTypeBytes(c.grad);
  AlignedBuffer dense(c.params * eb);
  // Fill in parallel: the generator is counter-based, so any split gives the same values.
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < nt; ++t) {
    ts.emplace_back([&, t] {
      const uint64_t lo = c.params * t / nt, hi = c.params * (t + 1) / nt;
      for (uint64_t i = lo; i < hi; ++i) {
        const uint32_t b = SyntheticGradientBits(c.seed, step, i, c.grad, c.loss_scale);
        if (eb == 4) dense.as<uint32_t>()[i] = b;
        else dense.as<uint16_t>()[i] = static_cast<uint16_t>(b);
      }
    });
  }
  for (auto& t : ts) t.join();
  if (poison >= 0 && static_cast<uint64_t>(poison) < c.params) {
    if (eb == 4) dense.as<uint32_t>()[poison] = 0x7f800000u;
    else dense.as<uint16_t>()[poison] = c.grad == DType::kFp16 ? 0x7c00 : 0x7f80;
  }
  if (topk > 0.0) {
    g.sparse_ = true;
    g.streams_.resize(c.devices);
    for (unsigned d = 0; d < c.devices; ++d) {
      const uint64_t base = store.shards()[d].begin;
      for (const Subgroup& sg : store.Subgroups(d)) {
        g.streams_[d].push_back(
            CompressTopK(dense.data() + (base + sg.begin) * eb, c.grad, sg.n, topk));
      }
    }
  } else {
    g.dense_ = std::move(dense);
  }
  return g;
}

namespace {

// Whether all n elements are finite: each element's exponent test OR-ed into one flag (a loop
// the compiler vectorises; -O3 for this function only, as the library builds at -O2).
template <typename T>
__attribute__((optimize("O3"))) bool AllFiniteBits(const T* x, uint64_t n, T exp_mask) {
  T bad = 0;
  for (uint64_t i = 0; i < n; ++i) bad |= static_cast<T>((x[i] & exp_mask) == exp_mask);
  return bad == 0;
}

// Copies n elements and tells whether all are finite, in one pass over memory: 64 KiB at a
// time, copied (memcpy) and then checked while in cache; with `sum`, also adds the squares
// (double, in element order).
template <typename T>
bool CopyChecked(T* dst, const T* src, uint64_t n, T exp_mask, double* sum, DType dt) {
  constexpr uint64_t kChunk = (64u << 10) / sizeof(T);
  bool finite = true;
  for (uint64_t at = 0; at < n; at += kChunk) {
    const uint64_t m = std::min(kChunk, n - at);
    std::memcpy(dst + at, src + at, m * sizeof(T));
    finite &= AllFiniteBits(dst + at, m, exp_mask);
  }
  if (sum != nullptr) {
    double s = *sum;  // one running sum over the model, in element order
    for (uint64_t i = 0; i < n; ++i) {  // over what was just copied (still in cache)
      uint32_t bits = dst[i];
      if (dt == DType::kFp16) bits = hls::F16ToF32(static_cast<uint16_t>(bits));
      if (dt == DType::kBf16) bits = hls::Bf16ToF32(static_cast<uint16_t>(bits));
      const double x = hls::U2F(bits);
      s += x * x;
    }
    *sum = s;
  }
  return finite;
}

}  // namespace

TensorGradient CopyTensorGradient(void* dst, const void* src, uint64_t n, DType dt,
                                  bool want_sumsq) {
  TensorGradient r;
  double sum = 0.0;
  double* s = want_sumsq ? &sum : nullptr;
  if (DTypeBytes(dt) == 4) {
    r.finite = CopyChecked(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), n,
                           0x7f800000u, s, dt);
  } else {
    r.finite = CopyChecked(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), n,
                           static_cast<uint16_t>(dt == DType::kFp16 ? 0x7c00u : 0x7f80u), s, dt);
  }
  r.sumsq = sum;
  return r;
}

double GradientNorm(const std::vector<TensorGradient>& per_tensor) {
  double sum = 0.0;
  for (const TensorGradient& t : per_tensor) {
    if (!t.finite) return INFINITY;
    sum += t.sumsq;
  }
  return std::sqrt(sum);
}

GradientSet GradientSet::Gather(const Store& store, const std::vector<const void*>& grads,
                                double* l2norm, AlignedBuffer reuse) {
  const ParamLayout* l = store.layout();
  if (l == nullptr) {
    throw std::invalid_argument("gradients: expected a store created for a model (with a "
                                "parameter layout), found '" + store.dir() + "' without one");
  }
  if (grads.size() != l->tensors().size()) {
    throw std::invalid_argument("gradients: expected one pointer per tensor of the layout (" +
                                std::to_string(l->tensors().size()) + "), found " +
                                std::to_string(grads.size()));
  }
  const StoreConfig& c = store.config();
  GradientSet g;
  g.dtype_ = c.grad;
  g.params_ = c.params;
  const unsigned eb = DTypeBytes(c.grad);
  const bool reused = reuse.size() >= c.params * eb && reuse.size() <= c.params * eb + (4u << 20);
  g.dense_ = reused ? std::move(reuse) : AlignedBuffer(c.params * eb);  // new: all zero
  // Zeroes [from, to) (elements) of a reused buffer: the gaps no tensor's gradient fills.
  auto zero = [&](uint64_t from, uint64_t to) {
    if (reused && to > from) std::memset(g.dense_.data() + from * eb, 0, (to - from) * eb);
  };
  std::vector<size_t> with_grad;  // the tensors to copy, in layout order
  uint64_t end_prev = 0, bytes = 0;
  for (size_t t = 0; t < grads.size(); ++t) {
    const uint64_t n = l->tensors()[t].numel, at = l->offset(t);
    zero(end_prev, at);  // group padding
    end_prev = at + n;
    if (grads[t] == nullptr) {
      g.frozen_.push_back({at, at + n});  // gradient zero: the kernel's output is replaced
      zero(at, at + n);
      continue;
    }
    with_grad.push_back(t);
    bytes += n * eb;
  }
  zero(end_prev, c.params);
  // Each tensor's pass (copy, finiteness, its sum of squares in element order) is its own, so
  // several threads take whole tensors and the results are those of one thread, bit for bit
  // (GradientNorm adds the per-tensor sums in layout order). Below 16 MiB one thread.
  std::vector<TensorGradient> per_tensor(with_grad.size());
  auto copy_one = [&](size_t i) {
    const size_t t = with_grad[i];
    per_tensor[i] = CopyTensorGradient(g.dense_.data() + l->offset(t) * eb, grads[t],
                                       l->tensors()[t].numel, c.grad, l2norm != nullptr);
  };
  const unsigned threads = static_cast<unsigned>(std::min<uint64_t>(
      {bytes >= (16u << 20) ? std::max(1u, std::min(8u, std::thread::hardware_concurrency())) : 1u,
       with_grad.size()}));
  if (threads <= 1) {
    for (size_t i = 0; i < with_grad.size(); ++i) copy_one(i);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned k = 0; k < threads; ++k) {
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < with_grad.size();) copy_one(i);
      });
    }
    for (std::thread& th : pool) th.join();
  }
  bool finite = true;
  for (const TensorGradient& r : per_tensor) finite &= r.finite;
  if (reused) {  // the capacity beyond the model, as a new buffer has it
    std::memset(g.dense_.data() + c.params * eb, 0, g.dense_.size() - c.params * eb);
  }
  g.known_finite_ = finite ? 1 : 0;
  if (l2norm != nullptr) *l2norm = GradientNorm(per_tensor);
  return g;
}

GradientSet GradientSet::FromArena(const Store& store, AlignedBuffer arena,
                                   const std::vector<bool>& has_grad, bool all_finite) {
  const ParamLayout* l = store.layout();
  if (l == nullptr) {
    throw std::invalid_argument("gradients: expected a store created for a model (with a "
                                "parameter layout), found '" + store.dir() + "' without one");
  }
  const StoreConfig& c = store.config();
  const unsigned eb = DTypeBytes(c.grad);
  if (arena.size() < c.params * eb) {
    throw std::invalid_argument("gradient arena: expected at least " +
                                std::to_string(c.params * eb) + " bytes (the model in " +
                                DTypeName(c.grad) + "), found " + std::to_string(arena.size()));
  }
  if (has_grad.size() != l->tensors().size()) {
    throw std::invalid_argument("gradient arena: expected one has-gradient flag per tensor of "
                                "the layout (" + std::to_string(l->tensors().size()) +
                                "), found " + std::to_string(has_grad.size()));
  }
  GradientSet g;
  g.dtype_ = c.grad;
  g.params_ = c.params;
  g.dense_ = std::move(arena);
  for (size_t t = 0; t < has_grad.size(); ++t) {
    if (!has_grad[t]) g.frozen_.push_back({l->offset(t), l->offset(t) + l->tensors()[t].numel});
  }
  g.known_finite_ = all_finite ? 1 : -1;  // not finite: AllFinite finds and names the value
  return g;
}

GradientSet GradientSet::FromFlat(const Store& store, const void* flat, double* l2norm) {
  const ParamLayout* l = store.layout();
  if (l == nullptr) return Gather(store, {}, l2norm);  // throws the message for a plain store
  if (flat == nullptr) throw std::invalid_argument("gradients: expected a buffer, found none");
  std::vector<const void*> ptrs;
  const auto* p = static_cast<const uint8_t*>(flat);
  for (const TensorSpec& t : l->tensors()) {
    ptrs.push_back(p);
    p += t.numel * DTypeBytes(store.config().grad);
  }
  return Gather(store, ptrs, l2norm);
}

GradientSet GradientSet::FromStreams(const Store& store,
                                     std::vector<std::vector<SparseGrad>> streams,
                                     std::vector<std::pair<uint64_t, uint64_t>> frozen) {
  const StoreConfig& c = store.config();
  uint64_t prev_end = 0;
  for (size_t i = 0; i < frozen.size(); ++i) {
    const auto [b, e] = frozen[i];
    if (b >= e || e > c.params || (i > 0 && b < prev_end)) {
      throw std::invalid_argument(
          "sparse gradients: frozen range " + std::to_string(i) + ": expected [begin, end) with "
          "begin < end <= " + std::to_string(c.params) + " (the store's elements), after the "
          "previous range (ending at " + std::to_string(prev_end) + "), found [" +
          std::to_string(b) + ", " + std::to_string(e) + ")");
    }
    prev_end = e;
  }
  if (streams.size() != c.devices) {
    throw std::invalid_argument("sparse gradients: expected streams for " +
                                std::to_string(c.devices) + " devices, found " +
                                std::to_string(streams.size()));
  }
  for (unsigned d = 0; d < c.devices; ++d) {
    const std::vector<Subgroup> sgs = store.Subgroups(d);
    if (streams[d].size() != sgs.size()) {
      throw std::invalid_argument("sparse gradients of device " + std::to_string(d) +
                                  ": expected one stream per subgroup (" +
                                  std::to_string(sgs.size()) + "), found " +
                                  std::to_string(streams[d].size()));
    }
    for (size_t j = 0; j < sgs.size(); ++j) {
      const SparseGrad& sg = streams[d][j];
      const std::string where =
          "sparse gradient of device " + std::to_string(d) + " subgroup " + std::to_string(j);
      if (sg.n != sgs[j].n) {
        throw std::invalid_argument(where + ": expected n = " + std::to_string(sgs[j].n) +
                                    " (the subgroup's size), found " + std::to_string(sg.n));
      }
      if (sg.dtype != c.grad) {
        throw std::invalid_argument(where + ": expected values in " +
                                    std::string(DTypeName(c.grad)) + " (the store's), found " +
                                    DTypeName(sg.dtype));
      }
      const std::string err = CheckSparse(sg);
      if (!err.empty()) throw std::invalid_argument(where + ": " + err);
    }
  }
  GradientSet g;
  g.dtype_ = c.grad;
  g.params_ = c.params;
  g.sparse_ = true;
  g.streams_ = std::move(streams);
  g.frozen_ = std::move(frozen);
  return g;
}

GradientSet GradientSet::TopK(const Store& store, double ratio) const {
  if (sparse_) throw std::invalid_argument("Top-K: the gradient set is already sparse");
  if (planned_) {
    throw std::invalid_argument("Top-K: a planned gradient set has no values to compress (use "
                                "GradientSet::Planned(store, ratio))");
  }
  const StoreConfig& c = store.config();
  const unsigned eb = DTypeBytes(dtype_);
  GradientSet g;
  g.dtype_ = dtype_;
  g.params_ = params_;
  g.sparse_ = true;
  g.frozen_ = frozen_;
  g.streams_.resize(c.devices);
  for (unsigned d = 0; d < c.devices; ++d) {
    const uint64_t base = store.shards()[d].begin;
    for (const Subgroup& sg : store.Subgroups(d)) {
      g.streams_[d].push_back(
          CompressTopK(dense_.data() + (base + sg.begin) * eb, dtype_, sg.n, ratio));
    }
  }
  return g;
}

bool GradientSet::AllFinite(std::string* where) const {
  if (known_finite_ == 1) return true;  // the gather pass saw every value (the usual case)
  const unsigned eb = DTypeBytes(dtype_);
  auto check = [&](const AlignedBuffer& b, uint64_t count, const std::string& what) {
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t bits = eb == 4 ? b.as<uint32_t>()[i] : b.as<uint16_t>()[i];
      if (!FiniteBits(bits, dtype_)) {
        if (where != nullptr) {
          char x[24];
          std::snprintf(x, sizeof x, "0x%0*x", eb * 2, bits);
          *where = what + " element " + std::to_string(i) + " = " + x;
        }
        return false;
      }
    }
    return true;
  };
  if (!sparse_) return check(dense_, params_, "gradient");
  for (size_t d = 0; d < streams_.size(); ++d) {
    for (size_t j = 0; j < streams_[d].size(); ++j) {
      const SparseGrad& s = streams_[d][j];
      if (!check(s.val, s.nnz,
                 "sparse gradient of device " + std::to_string(d) + " subgroup " +
                     std::to_string(j) + ", entry")) {
        return false;
      }
    }
  }
  return true;
}

uint64_t GradientSet::TransferBytes() const {
  if (!sparse_) return params_ * DTypeBytes(dtype_);
  uint64_t b = 0;
  for (const auto& dev : streams_)
    for (const SparseGrad& s : dev) b += s.StreamBytes();
  return b;
}

}  // namespace csdkit
