#include "csdkit/update.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include "csd_update.h"
#include "csdkit/checksum.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/problem.h"

namespace csdkit {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}


bool FiniteBits(uint32_t bits, DType t) {
  if (t == DType::kFp32) return (bits & 0x7f800000u) != 0x7f800000u;
  if (t == DType::kFp16) return (bits & 0x7c00u) != 0x7c00u;
  return (bits & 0x7f80u) != 0x7f80u;
}

[[noreturn]] void CorruptState(const Store& s, unsigned d, unsigned v, const Subgroup& g,
                               uint32_t expected, uint32_t found) {
  char b[80];
  std::snprintf(b, sizeof b, "expected CRC 0x%08x, found 0x%08x", expected, found);
  throw StoreError("store '" + s.dir() + "' is corrupt: " + s.FilePath(d, v, s.slot()) +
                   " subgroup " + std::to_string(g.index) + ": " + b +
                   "; nothing was committed (restore the store or re-run `csdkit init`)");
}

}  // namespace

const char* UpdateModeName(UpdateMode m) { return m == UpdateMode::kSmart ? "smart" : "baseline"; }

UpdateMode ParseUpdateMode(const std::string& s) {
  if (s == "smart") return UpdateMode::kSmart;
  if (s == "baseline") return UpdateMode::kBaseline;
  throw std::invalid_argument("mode: expected smart or baseline, found '" + s + "'");
}

// --------------------------------------------------------------------------------------------
// GradientSet

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

nlohmann::json StepReport::ToJson() const {
  return {{"step", step},
          {"mode", UpdateModeName(mode)},
          {"skipped", skipped},
          {"skip_reason", skip_reason},
          {"seconds", seconds},
          {"io_wait_seconds", io_seconds},
          {"compute_seconds", compute_seconds},
          {"virtual_seconds", virtual_seconds},
          {"subgroups", subgroups},
          {"bytes", bytes.ToJson()}};
}

// --------------------------------------------------------------------------------------------
// Runtime

struct Runtime::DevBufs {
  UpdateBuffersDev b;
  std::vector<DeviceBufferPtr> state;  // theta, m, v in store var order
};

Runtime::Runtime(Store& store, std::vector<Device*> devices, std::function<double()> vt,
                 std::function<void()> reset_vt)
    : store_(store),
      devices_(std::move(devices)),
      virtual_time_(std::move(vt)),
      reset_virtual_time_(std::move(reset_vt)) {
  if (devices_.size() != store.config().devices) {
    throw std::invalid_argument("runtime: expected " + std::to_string(store.config().devices) +
                                " devices for this store, found " +
                                std::to_string(devices_.size()));
  }
  for (size_t d = 0; d < devices_.size(); ++d) kernel_mu_.push_back(std::make_unique<std::mutex>());
  if (store.config().out != DType::kFp32) weights16_ = AlignedBuffer(store.config().params * 2);
}

Runtime::~Runtime() = default;

void Runtime::Progress(const StepOptions& o) {
  const uint64_t d = ++done_;
  if (o.progress) {
    std::lock_guard<std::mutex> lock(progress_mu_);
    o.progress(d, total_);
  }
}

void Runtime::SmartWorker(unsigned d, unsigned w, const GradientSet& g, const KernelLaunch& k,
                          Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                          const StepOptions& o) {
  Device& dev = *devices_[d];
  DevBufs& bufs = *bufs_[d * 2 + w];
  const StoreConfig& c = store_.config();
  const unsigned eb = DTypeBytes(c.grad);
  const unsigned rs = store_.slot(), ws = 1 - rs;
  const uint64_t shard_base = store_.shards()[d].begin;
  VirtualClock vc;
  double io = 0, compute = 0;
  std::vector<aio::IoTicket> pending;  // deferred write-backs of the previous subgroup
  auto drain = [&] {
    const auto t0 = Clock::now();
    for (auto& t : pending) t.Wait();
    pending.clear();
    io += Since(t0);
  };
  try {
    for (const Subgroup& sg : store_.Subgroups(d)) {
      if (sg.index % 2 != w) continue;
      if (abort_) break;
      drain();  // this worker's buffers are about to be reused
      const bool do_io = o.phases != StepPhases::kComputeOnly;
      const bool do_compute = o.phases != StepPhases::kIoOnly;
      // Load: state P2P from the committed slot, gradient over the shared link.
      std::vector<aio::IoTicket> loads;
      for (unsigned v = 0; do_io && v < bufs.state.size(); ++v) {
        loads.push_back(dev.P2PRead(store_.file(d, v, rs), sg.file_offset(), *bufs.state[v], 0,
                                    sg.io_bytes(), &vc));
      }
      uint32_t nnz = 0;
      if (g.sparse()) {
        const SparseGrad& s = g.sparse_for(d, sg.index);
        nnz = s.nnz;
      }
      if (!do_io) {
      } else if (g.sparse()) {
        const SparseGrad& s = g.sparse_for(d, sg.index);
        dev.HostToDevice(s.blk.data(), *bufs.b.sp_blk, 0, (hls::NumBlocks(s.n) + 1ull) * 4, &vc);
        if (nnz > 0) {
          dev.HostToDevice(s.idx.data(), *bufs.b.sp_idx, 0, nnz * 2ull, &vc);
          dev.HostToDevice(s.val.data(), *bufs.b.grad, 0, static_cast<uint64_t>(nnz) * eb, &vc);
        }
      } else {
        dev.HostToDevice(g.dense().data() + (shard_base + sg.begin) * eb, *bufs.b.grad, 0,
                         static_cast<uint64_t>(sg.n) * eb, &vc);
      }
      const auto t0 = Clock::now();
      for (auto& t : loads) t.Wait();
      io += Since(t0);
      // The loaded state must be what the manifest committed (checked on the device).
      for (unsigned v = 0; o.phases == StepPhases::kAll && v < bufs.state.size(); ++v) {
        const uint32_t crc = dev.Crc32(*bufs.state[v], 0, 4ull * sg.n);
        if (crc != store_.checksum(d, v, sg.index)) {
          CorruptState(store_, d, v, sg, store_.checksum(d, v, sg.index), crc);
        }
      }
      // Compute: one kernel at a time per device (one compute unit).
      uint32_t status[hls::kLanes] = {};
      if (do_compute) {
        const auto t1 = Clock::now();
        std::lock_guard<std::mutex> lock(*kernel_mu_[d]);
        if (o.phases == StepPhases::kComputeOnly) {
          for (unsigned v = 0; v < bufs.state.size(); ++v) dev.Crc32(*bufs.state[v], 0, 4ull * sg.n);
        }
        dev.LaunchUpdate(bufs.b, sg.n, nnz, k, nullptr, &vc);
        compute += Since(t1);
      }
      if (do_io) dev.DeviceToHost(*bufs.b.status, 0, status, sizeof status, &vc);
      if (o.phases == StepPhases::kAll && status[hls::kStatusError] != 0) {
        throw std::runtime_error("device " + std::to_string(d) + " subgroup " +
                                 std::to_string(sg.index) + ": kernel error: " +
                                 DescribeKernelError(status[hls::kStatusError],
                                                     status[hls::kStatusErrorPos]));
      }
      // The low-precision weights go out first: the next forward pass needs them.
      if (c.out != DType::kFp32 && do_io) {
        dev.DeviceToHost(*bufs.b.out16, 0, weights16_.data() + (shard_base + sg.begin) * 2,
                         2ull * sg.n, &vc);
      }
      // New checksums (device-side), then the deferred write-backs into the other slot.
      for (unsigned v = 0; v < bufs.state.size(); ++v) {
        if (do_compute) (*crcs)[d][v][sg.index] = dev.Crc32(*bufs.state[v], 0, 4ull * sg.n);
        if (!do_io) continue;
        pending.push_back(dev.P2PWrite(store_.file(d, v, ws), sg.file_offset(), *bufs.state[v],
                                       0, sg.io_bytes(), &vc));
      }
      Progress(o);
    }
    drain();
  } catch (...) {
    abort_ = true;
    for (auto& t : pending) {
      try {
        t.Wait();
      } catch (...) {
      }
    }
    throw;
  }
  std::lock_guard<std::mutex> lock(*rep_mu);
  rep->io_seconds += io;
  rep->compute_seconds += compute;
  rep->virtual_seconds = std::max(rep->virtual_seconds, vc.now);
}

void Runtime::BaselineWorker(const std::vector<Subgroup>* work, std::atomic<size_t>* next,
                             const GradientSet& g, const KernelLaunch& k,
                             Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                             const StepOptions& o) {
  const StoreConfig& c = store_.config();
  const unsigned eb = DTypeBytes(c.grad);
  const unsigned rs = store_.slot(), ws = 1 - rs;
  const size_t nv = store_.vars().size();
  const uint64_t sgb = c.subgroup_elems;
  // Host buffers, allocated once per worker at the subgroup size.
  UpdateBuffers hb;
  hb.theta = AlignedBuffer(64);
  hb.m = AlignedBuffer(64);
  hb.v = AlignedBuffer(64);
  hb.grad = AlignedBuffer(g.sparse() ? 64 : sgb * eb);
  hb.out16 = AlignedBuffer(sgb * 2);
  hb.status = AlignedBuffer(64);
  hb.sp_idx = AlignedBuffer(64);
  hb.sp_blk = AlignedBuffer(64);
  // The state buffers the optimizer has, in store var order, at the subgroup size.
  std::vector<AlignedBuffer*> var_buf;
  for (const std::string& name : store_.vars()) {
    AlignedBuffer* b = name == "theta" ? &hb.theta : name == "m" ? &hb.m : &hb.v;
    *b = AlignedBuffer(sgb * 4);
    var_buf.push_back(b);
  }
  double io = 0, compute = 0;
  VirtualClock vc;
  for (;;) {
    const size_t idx = (*next)++;
    if (idx >= work->size() || abort_) break;
    const Subgroup& sg = (*work)[idx];
    const unsigned d = sg.device;
    Device& dev = *devices_[d];
    const uint64_t shard_base = store_.shards()[d].begin;
    auto t0 = Clock::now();
    std::vector<aio::IoTicket> loads;
    for (unsigned v = 0; v < nv; ++v) {
      loads.push_back(dev.HostRead(store_.file(d, v, rs), sg.file_offset(), var_buf[v]->data(),
                                   sg.io_bytes(), &vc));
    }
    for (auto& t : loads) t.Wait();
    io += Since(t0);
    for (unsigned v = 0; v < nv; ++v) {
      const uint32_t crc = Crc32(var_buf[v]->data(), 4ull * sg.n);
      if (crc != store_.checksum(d, v, sg.index)) {
        CorruptState(store_, d, v, sg, store_.checksum(d, v, sg.index), crc);
      }
    }
    // The kernel on the host: the same csd_update, on host buffers.
    const auto t1 = Clock::now();
    uint32_t nnz = 0;
    uint32_t err;
    if (g.sparse()) {
      const SparseGrad& s = g.sparse_for(d, sg.index);
      nnz = s.nnz;
      const hls::Scalars& sc = k.scalars;
      csd_update(hb.theta.words(), hb.m.words(), hb.v.words(), s.val.words(), s.idx.words(),
                 s.blk.words(), hb.out16.words(), hb.status.words(), sg.n, nnz, k.mode,
                 sc.unscale, sc.lr, sc.beta1, sc.omb1, sc.beta2, sc.omb2, sc.eps, sc.wd, sc.c1,
                 sc.c2);
      err = hb.status.as<uint32_t>()[hls::kStatusError];
    } else {
      std::memcpy(hb.grad.data(), g.dense().data() + (shard_base + sg.begin) * eb,
                  static_cast<uint64_t>(sg.n) * eb);
      err = RunUpdate(hb, sg.n, 0, k);
    }
    const double dt = Since(t1);
    compute += dt;
    vc.now += dt;  // host compute takes real time on the real system too
    if (err != 0) {
      throw std::runtime_error("host update of device " + std::to_string(d) + " subgroup " +
                               std::to_string(sg.index) + ": " +
                               DescribeKernelError(err, hb.status.as<uint32_t>()[1]));
    }
    if (c.out != DType::kFp32) {
      std::memcpy(weights16_.data() + (shard_base + sg.begin) * 2, hb.out16.data(), 2ull * sg.n);
    }
    std::vector<aio::IoTicket> writes;
    for (unsigned v = 0; v < nv; ++v) {
      (*crcs)[d][v][sg.index] = Crc32(var_buf[v]->data(), 4ull * sg.n);
      writes.push_back(dev.HostWrite(store_.file(d, v, ws), sg.file_offset(), var_buf[v]->data(),
                                     sg.io_bytes(), &vc));
    }
    t0 = Clock::now();
    for (auto& t : writes) t.Wait();
    io += Since(t0);
    Progress(o);
  }
  std::lock_guard<std::mutex> lock(*rep_mu);
  rep->io_seconds += io;
  rep->compute_seconds += compute;
  rep->virtual_seconds = std::max(rep->virtual_seconds, vc.now);
}

StepReport Runtime::Step(const GradientSet& grads, const StepOptions& o) {
  StepReport rep;
  rep.mode = o.mode;
  rep.step = store_.step() + 1;
  const StoreConfig& c = store_.config();
  if (grads.dtype() != c.grad) {
    throw std::invalid_argument(std::string("gradient dtype: expected ") + DTypeName(c.grad) +
                                " (the store's), found " + DTypeName(grads.dtype()));
  }
  std::string where;
  if (!grads.AllFinite(&where)) {
    rep.skipped = true;
    rep.skip_reason = "loss-scale overflow: non-finite " + where + "; step skipped, nothing "
                      "read, written or committed";
    return rep;
  }
  GradSpec gs;
  gs.grad = c.grad;
  gs.out = c.out;
  gs.sparse = grads.sparse();
  gs.ftz = c.ftz;
  gs.loss_scale = c.loss_scale;
  gs.clip_coef = o.clip_coef;
  const KernelLaunch k = MakeLaunch(c.hyper, gs, rep.step);

  LinkBytes before;
  for (Device* d : devices_) before += d->bytes();
  if (reset_virtual_time_) reset_virtual_time_();
  Store::Checksums crcs = store_.EmptyChecksums();
  std::mutex rep_mu;
  abort_ = false;
  done_ = 0;
  total_ = store_.AllSubgroups().size();
  rep.subgroups = total_;
  const auto t0 = Clock::now();
  std::exception_ptr err;
  std::mutex err_mu;
  auto guarded = [&](auto&& fn) {
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (!err) err = std::current_exception();
      abort_ = true;
    }
  };
  std::vector<std::thread> ts;
  if (o.mode == UpdateMode::kSmart) {
    if (bufs_.empty()) {
      // Device buffers: allocated once, at the subgroup size, two sets per device.
      const uint64_t s = c.subgroup_elems;
      const unsigned eb = DTypeBytes(c.grad);
      for (unsigned d = 0; d < devices_.size(); ++d) {
        for (unsigned w = 0; w < 2; ++w) {
          auto b = std::make_unique<DevBufs>();
          Device& dev = *devices_[d];
          for (size_t v = 0; v < store_.vars().size(); ++v) b->state.push_back(dev.Alloc(s * 4));
          for (size_t v = 0; v < store_.vars().size(); ++v) {
            const std::string& name = store_.vars()[v];
            (name == "theta" ? b->b.theta : name == "m" ? b->b.m : b->b.v) = b->state[v];
          }
          b->b.grad = dev.Alloc(s * eb);
          b->b.sp_idx = dev.Alloc(s * 2);
          b->b.sp_blk = dev.Alloc((hls::NumBlocks(static_cast<uint32_t>(s)) + 1ull) * 4);
          if (c.out != DType::kFp32) b->b.out16 = dev.Alloc(s * 2);
          b->b.status = dev.Alloc(64);
          bufs_.push_back(std::move(b));
        }
      }
    }
    for (unsigned d = 0; d < devices_.size(); ++d) {
      for (unsigned w = 0; w < 2; ++w) {
        ts.emplace_back([&, d, w] {
          guarded([&] { SmartWorker(d, w, grads, k, &crcs, &rep, &rep_mu, o); });
        });
      }
    }
  } else {
    if (o.phases != StepPhases::kAll) {
      throw std::invalid_argument("step phases: only the smart mode can run partial phases");
    }
    const std::vector<Subgroup> work = store_.AllSubgroups();
    std::atomic<size_t> next{0};
    const unsigned nt =
        o.host_threads ? o.host_threads : std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 0; t < nt; ++t) {
      ts.emplace_back([&, t] {
        guarded([&] { BaselineWorker(&work, &next, grads, k, &crcs, &rep, &rep_mu, o); });
      });
    }
    for (auto& t : ts) t.join();
    ts.clear();
  }
  for (auto& t : ts) t.join();
  if (err) std::rethrow_exception(err);
  if (o.phases == StepPhases::kAll) store_.Commit(crcs);
  if (o.phases == StepPhases::kIoOnly) store_.SyncNextSlot();  // durability is part of the I/O
  rep.seconds = Since(t0);
  LinkBytes after;
  for (Device* d : devices_) after += d->bytes();
  rep.bytes = after - before;
  if (virtual_time_) rep.virtual_seconds = std::max(rep.virtual_seconds, virtual_time_());
  else rep.virtual_seconds = 0;
  return rep;
}

}  // namespace csdkit
