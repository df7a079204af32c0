#include "csdkit/runtime/gradients.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "csdkit/runtime/synthetic.h"

namespace csdkit {

namespace {

bool FiniteBits(uint32_t bits, DType t) {
  if (t == DType::kFp32) return (bits & 0x7f800000u) != 0x7f800000u;
  if (t == DType::kFp16) return (bits & 0x7c00u) != 0x7c00u;
  return (bits & 0x7f80u) != 0x7f80u;
}

}  // namespace

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

bool GradientSet::AllFinite(std::string* where) const {
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
