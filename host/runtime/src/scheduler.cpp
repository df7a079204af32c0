#include "csdkit/runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <cerrno>
#include <sys/stat.h>
#include <sstream>
#include <thread>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string Hex32(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

[[noreturn]] void CorruptState(const Store& s, unsigned d, unsigned v, const Subgroup& g,
                               uint32_t expected, uint32_t found) {
  std::string files;  // the variable's files (a q8 moment: its codes and its absmax values)
  for (unsigned a : s.ArraysOf(v)) files += (files.empty() ? "" : " + ") + s.FilePath(d, a, s.slot());
  throw StoreError("store '" + s.dir() + "' is corrupt: " + files + " subgroup " + std::to_string(g.index) + ": expected CRC " + Hex32(expected) +
                   ", found " + Hex32(found) +
                   " (the kernel's CRC of the state as it read it: the file, or its copy in "
                   "device or host memory, is damaged); nothing was committed (a step that "
                   "fails again means the file: restore the store or re-run `csdkit init`)");
}

}  // namespace

const char* UpdateModeName(UpdateMode m) { return m == UpdateMode::kSmart ? "smart" : "baseline"; }

UpdateMode ParseUpdateMode(const std::string& s) {
  if (s == "smart") return UpdateMode::kSmart;
  if (s == "baseline") return UpdateMode::kBaseline;
  throw std::invalid_argument("mode: expected smart or baseline, found '" + s + "'");
}

nlohmann::json StepReport::ToJson() const {
  return {{"step", step},
          {"mode", UpdateModeName(mode)},
          {"skipped", skipped},
          {"skip_reason", skip_reason},
          {"seconds", seconds},
          {"started_at", started_at},
          {"finished_at", finished_at},
          {"io_wait_seconds", io_seconds},
          {"compute_seconds", compute_seconds},
          {"virtual_seconds", virtual_seconds},
          {"subgroups", subgroups},
          {"bytes", bytes.ToJson()},
          {"dumped_launches", dumped_launches},
          {"host_threads", host_threads},
          {"pinned_threads", pinned_threads},
          {"nonfinite_values", nonfinite_values},
          {"warning", warning}};
}

// --------------------------------------------------------------------------------------------
// Scheduler

namespace {

// The buffer of a launch that holds a store array (theta, m, v, or a q8 moment's absmax).
template <typename B>
B& ArrayOf(UpdateLaunch<B>& l, const StateArray& a) {
  switch (a.arg) {
    case update_arg::m:
      return l.m;
    case update_arg::v:
      return l.v;
    case update_arg::m_absmax:
      return l.m_absmax;
    case update_arg::v_absmax:
      return l.v_absmax;
    default:
      return l.theta;
  }
}

// What the store's launches can need at most: a sparse launch of a whole subgroup with every
// element kept (the largest gradient buffer, the index stream, the block table).
UpdateFootprint SubgroupFootprint(const StoreConfig& c) {
  GradSpec gs;
  gs.grad = c.grad;
  gs.out = c.out;
  gs.sparse = true;
  gs.state = c.state;
  const KernelLaunch k = MakeLaunch(c.hyper, gs, 1);
  return LaunchFootprint(k.mode, c.subgroup_elems, c.subgroup_elems);
}

// The status lanes that carry the CRC-32 of store variable `name` as the kernel read it and as
// it wrote it (docs/kernel-interface.md).
std::pair<unsigned, unsigned> CrcLanes(const std::string& name) {
  if (name == "theta") return {hls::kStatusCrcThetaIn, hls::kStatusCrcThetaOut};
  if (name == "m") return {hls::kStatusCrcMIn, hls::kStatusCrcMOut};
  return {hls::kStatusCrcVIn, hls::kStatusCrcVOut};
}

// "parameter P (tensor 'name' element i)" for flattened parameter index p.
std::string NameParameter(const Store& s, uint64_t p) {
  std::string r = "parameter " + std::to_string(p);
  if (const ParamLayout* l = s.layout()) {
    for (size_t t = 0; t < l->tensors().size(); ++t) {
      const uint64_t b = l->offset(t);
      if (p >= b && p < b + l->tensors()[t].numel) {
        return r + " (tensor '" + l->tensors()[t].name + "' element " + std::to_string(p - b) +
               ")";
      }
    }
    r += " (padding after a tensor)";
  }
  return r;
}

// Checks one launch's status word (either path: the device's kernel or the host's) before
// anything of it is written back: that the kernel ran and ended well, that the state it read
// is what the manifest committed (its input CRC lanes), and, unless the options allow it, that
// it wrote no NaN or infinity into theta, m or v. Throws naming the device, subgroup and what
// was found; returns the count of non-finite values written (0 unless allowed).
uint32_t CheckStatus(const Store& store, unsigned d, const Subgroup& sg, uint64_t shard_base,
                     const uint32_t* st, const StepOptions& o, const char* where) {
  const std::string at = std::string(where) + " of device " + std::to_string(d) + " subgroup " +
                         std::to_string(sg.index);
  if (st[hls::kStatusMagic] != hls::kStatusMagicValue) {
    throw std::runtime_error(at + ": expected the kernel's status word (magic " +
                             Hex32(hls::kStatusMagicValue) + " in lane " +
                             std::to_string(hls::kStatusMagic) + "), found " +
                             Hex32(st[hls::kStatusMagic]) +
                             ": the kernel did not run to its end or is not csdkit's updater");
  }
  if (st[hls::kStatusAxiError] & hls::kStatusAxiErrorSeen) {
    throw std::runtime_error(at + ": the kernel saw an AXI error response (lane " +
                             std::to_string(hls::kStatusAxiError) + " = " +
                             Hex32(st[hls::kStatusAxiError]) + ", first failing bundle " +
                             std::to_string((st[hls::kStatusAxiError] >>
                                             hls::kStatusAxiErrorBundleShift) & 0xffu) +
                             "); nothing was committed");
  }
  if (st[hls::kStatusError] != 0) {
    throw std::runtime_error(at + ": kernel error: " +
                             DescribeKernelError(st[hls::kStatusError],
                                                 st[hls::kStatusErrorPos]));
  }
  if (st[hls::kStatusElems] != sg.n) {
    throw std::runtime_error(at + ": expected the kernel to report " + std::to_string(sg.n) +
                             " elements updated, found " + std::to_string(st[hls::kStatusElems]));
  }
  // The state must be what the manifest committed: the kernel checksummed it as it read it.
  for (unsigned v = 0; v < store.vars().size(); ++v) {
    const uint32_t found = st[CrcLanes(store.vars()[v]).first];
    if (found != store.checksum(d, v, sg.index)) {
      CorruptState(store, d, v, sg, store.checksum(d, v, sg.index), found);
    }
  }
  const uint32_t bad = st[hls::kStatusNonFinite];
  if (bad != 0 && !o.allow_nonfinite) {
    const uint32_t pos = st[hls::kStatusNonFinitePos];
    throw DivergenceError(
        at + ": the update wrote " + std::to_string(bad) + " non-finite value" +
        (bad == 1 ? "" : "s") + " (NaN or infinity) into the weights or optimizer state, the " +
        "first at subgroup element " + std::to_string(pos) + ", " +
        NameParameter(store, shard_base + sg.begin + pos) + "; the step was refused and " +
        "nothing was committed (the store keeps step " + std::to_string(store.step()) +
        "). Lower the learning rate, the loss scale or the clip coefficient, or commit it " +
        "anyway with allow_nonfinite (csdkit step --allow-nonfinite)");
  }
  return bad;
}

}  // namespace

struct Scheduler::DevBufs {
  DeviceLaunch b;
  std::vector<DeviceBufferPtr> state;  // theta, m, v in store var order
  DeviceBufferPtr scratch;             // restores tensors without a gradient (allocated on use)
  // A subgroup of several launches (tensors at different step counts): each launch's results
  // for its tensors, kept while the next launch runs (allocated on use).
  std::vector<DeviceBufferPtr> stash;
  DeviceBufferPtr stash16;
};

namespace {

constexpr uint64_t kScratchBytes = 512u << 10;

// The parts of subgroup `sg` (shard at `shard_base`) that belong to tensors without a gradient,
// as subgroup-relative element ranges.
// `align` (a q8 store's 256) widens each range to whole blocks: a tensor's last block holds
// only padding after it, which stays zero either way, and a block's codes and absmax are kept
// or replaced whole.
std::vector<std::pair<uint32_t, uint32_t>> FrozenIn(const GradientSet& g, uint64_t shard_base,
                                                    const Subgroup& sg, uint64_t align) {
  std::vector<std::pair<uint32_t, uint32_t>> r;
  const uint64_t b = shard_base + sg.begin, e = b + sg.n;
  for (const auto& [fb, fe] : g.frozen()) {
    const uint64_t lo = std::max(fb, b), hi = std::min((fe + align - 1) / align * align, e);
    if (lo < hi) r.push_back({static_cast<uint32_t>(lo - b), static_cast<uint32_t>(hi - b)});
  }
  return r;
}

}  // namespace

namespace {

// Element ranges of a store's tensors are handled in whole blocks of this many elements: 256
// in the compressed formats (every tensor starts on a block), else 1.
uint64_t StateAlign(const Store& s) { return hls::IsQ8(s.state()) ? hls::kQ8Block : 1; }

// A buffer for a dump: at least one word, so that an empty array still has an address.
AlignedBuffer DumpBuffer(uint64_t bytes) { return AlignedBuffer(std::max<uint64_t>(bytes, 4)); }

// Reads a device launch's buffers back into host buffers for a dump (not booked on the link
// model): the inputs before the kernel (state, gradient, sparse index and block table), or the
// outputs after it (state, low-precision copy, status). Returns the bytes read.
uint64_t ReadBack(Device& dev, DeviceLaunch& b, const Store& st, const Subgroup& sg,
                  bool inputs, uint32_t n, uint32_t nnz, unsigned eb, bool sparse, DType out,
                  UpdateLaunch<AlignedBuffer>* h) {
  uint64_t total = 0;
  auto get = [&](const DeviceBufferPtr& src, AlignedBuffer& dst, uint64_t bytes) {
    dst = DumpBuffer(bytes);
    if (bytes > 0) dev.DeviceToHost(*src, 0, dst.data(), bytes, nullptr);
    total += bytes;
  };
  for (unsigned a = 0; a < st.arrays().size(); ++a) {
    const StateArray& arr = st.arrays()[a];
    get(ArrayOf(b, arr), ArrayOf(*h, arr), st.Extent(a, sg).bytes);
  }
  if (inputs) {
    if (sparse) {
      get(b.grad, h->grad, uint64_t{nnz} * eb);
      get(b.sp_idx, h->sp_idx, 2ull * nnz);
      get(b.sp_blk, h->sp_blk, (hls::NumBlocks(n) + 1ull) * 4);
    } else {
      get(b.grad, h->grad, uint64_t{n} * eb);
    }
  } else {
    if (out != DType::kFp32) get(b.out16, h->out16, 2ull * n);
    get(b.status, h->status, 4ull * hls::kLanes);
  }
  return total;
}

// The same from the baseline's host buffers (a copy; the launch goes on with its own).
void CopyBack(const Store& st, const Subgroup& sg, const std::vector<AlignedBuffer*>& state,
              bool inputs, uint32_t n, uint32_t nnz, unsigned eb, const void* grad,
              const void* sp_idx, const void* sp_blk, const UpdateLaunch<AlignedBuffer>& hb,
              DType out, UpdateLaunch<AlignedBuffer>* h) {
  auto put = [](AlignedBuffer& dst, const void* src, uint64_t bytes) {
    dst = DumpBuffer(bytes);
    if (bytes > 0) std::memcpy(dst.data(), src, bytes);
  };
  for (unsigned a = 0; a < st.arrays().size(); ++a) {
    put(ArrayOf(*h, st.arrays()[a]), state[a]->data(), st.Extent(a, sg).bytes);
  }
  if (inputs) {
    if (sp_blk != nullptr) {
      put(h->grad, grad, uint64_t{nnz} * eb);
      put(h->sp_idx, sp_idx, 2ull * nnz);
      put(h->sp_blk, sp_blk, (hls::NumBlocks(n) + 1ull) * 4);
    } else {
      put(h->grad, grad, uint64_t{n} * eb);
    }
  } else {
    if (out != DType::kFp32) put(h->out16, hb.out16.data(), 2ull * n);
    put(h->status, hb.status.data(), 4ull * hls::kLanes);
  }
}

}  // namespace

bool Scheduler::Dumps(const StepOptions& o, unsigned d, const Subgroup& sg) const {
  if (o.dump_dir.empty()) return false;
  if (o.dump_only.empty()) return true;
  return std::find(o.dump_only.begin(), o.dump_only.end(),
                   std::pair<unsigned, uint32_t>(d, sg.index)) != o.dump_only.end();
}

void Scheduler::DumpLaunch(const StepOptions& o, unsigned d, const Subgroup& sg, uint32_t nnz,
                           const UpdateLaunch<AlignedBuffer>& in,
                           const UpdateLaunch<AlignedBuffer>& out, int64_t step,
                           const KernelLaunch& launch, int part) {
  Problem p;
  p.spec.hyper = step_hyper_[sg.group];
  p.spec.grad = step_grad_;
  p.spec.n = sg.n;
  p.spec.step = step;
  p.launch = launch;
  p.nnz = nnz;
  const std::string dir = o.dump_dir + "/device-" + std::to_string(d) + "-subgroup-" +
                          std::to_string(sg.index) +
                          (part >= 0 ? "-launch-" + std::to_string(part) : std::string());
  // A new directory per launch: a dump never writes into one it did not create.
  if (::mkdir(dir.c_str(), 0755) != 0) {
    const int e = errno;
    throw std::runtime_error("launch dump: expected to create '" + dir + "', found " +
                             (e == EEXIST ? std::string("it exists already")
                                          : std::string(std::strerror(e))));
  }
  const nlohmann::json source{
      {"command", "step"},
      {"mode", UpdateModeName(o.mode)},
      {"backend", o.mode == UpdateMode::kSmart ? devices_.device(d).Describe()
                                               : std::string("host model (baseline)")},
      {"store", store_.dir()},
      {"device", d},
      {"subgroup", sg.index},
      {"param_group", sg.group},
      {"step_count", step},
      {"first_element", store_.shards()[d].begin + sg.begin}};
  DumpProblem(dir, p, in, out, source);
  ++dumped_;
}

Scheduler::Scheduler(Store& store, DeviceGroup& devices) : store_(store), devices_(devices) {
  if (devices_.size() != store.config().devices) {
    throw std::invalid_argument("scheduler: expected " + std::to_string(store.config().devices) +
                                " devices for this store, found " +
                                std::to_string(devices_.size()));
  }
  if (store.planning() && devices_.moves_data()) {
    throw std::invalid_argument("scheduler: a planning store (no files, no state) needs null "
                                "devices (backend null), found devices that move data");
  }
  if (!store.planning() && !devices_.moves_data()) {
    throw std::invalid_argument("scheduler: null devices hold no data and need a planning store "
                                "(Store::Plan or PlanCopy), found the store '" + store.dir() +
                                "' with files");
  }
  for (unsigned d = 0; d < devices_.size(); ++d) kernel_mu_.push_back(std::make_unique<std::mutex>());
  // A planning store's weights are never written (null devices move no bytes): an address
  // range with no memory stands in for the copy, whatever the model's size.
  if (store.config().out != DType::kFp32) {
    weights16_ = store.planning() ? AlignedBuffer::Reserve(store.config().params * 2)
                                  : AlignedBuffer(store.config().params * 2);
  }
}

Scheduler::~Scheduler() = default;

void Scheduler::Progress(const StepOptions& o) {
  const uint64_t d = ++done_;
  if (o.progress) {
    std::lock_guard<std::mutex> lock(progress_mu_);
    o.progress(d, total_);
  }
}

std::vector<Scheduler::StepClass> Scheduler::ClassesIn(uint64_t shard_base,
                                                        const Subgroup& sg) const {
  std::vector<StepClass> classes;
  if (uniform_counts_) return classes;
  const uint64_t b = shard_base + sg.begin, e = b + sg.n;
  const std::vector<TensorSpec>& ts = store_.layout()->tensors();
  // The last tensor starting at or before b, then every tensor starting before e.
  size_t t = std::upper_bound(tensor_begin_.begin(), tensor_begin_.end(), b) -
             tensor_begin_.begin();
  t = t > 0 ? t - 1 : 0;
  for (; t < ts.size() && tensor_begin_[t] < e; ++t) {
    const uint64_t align = StateAlign(store_);  // (q8: whole blocks, as FrozenIn)
    const uint64_t lo = std::max(tensor_begin_[t], b),
                   hi = std::min((tensor_begin_[t] + ts[t].numel + align - 1) / align * align, e);
    if (lo >= hi || !stepped_[t]) continue;
    const int64_t c = next_counts_[t];
    auto it = std::find_if(classes.begin(), classes.end(),
                           [c](const StepClass& k) { return k.step == c; });
    if (it == classes.end()) {
      classes.push_back({c, {}});
      it = classes.end() - 1;
    }
    const auto r = std::make_pair(static_cast<uint32_t>(lo - b), static_cast<uint32_t>(hi - b));
    if (!it->ranges.empty() && it->ranges.back().second == r.first) {
      it->ranges.back().second = r.second;  // adjacent tensors of one count: one range
    } else {
      it->ranges.push_back(r);
    }
  }
  std::sort(classes.begin(), classes.end(),
            [](const StepClass& x, const StepClass& y) { return x.step < y.step; });
  return classes;
}

const KernelLaunch& Scheduler::LaunchFor(unsigned g, int64_t step) const {
  return class_launch_.at({g, step});
}

void Scheduler::SmartWorker(unsigned d, unsigned w, const GradientSet& g,
                            const std::vector<KernelLaunch>& k,
                          Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                          const StepOptions& o) {
  Device& dev = devices_.device(d);
  DevBufs& bufs = *bufs_[d * 2 + w];
  const StoreConfig& c = store_.config();
  const unsigned eb = DTypeBytes(c.grad);
  const unsigned rs = store_.slot(), ws = 1 - rs;
  const uint64_t shard_base = store_.shards()[d].begin;
  VirtualClock vc;
  vc.worker = d * 2 + w;  // unique per step: the link model schedules by worker
  double io = 0, compute = 0;
  std::vector<aio::IoTicket> pending;  // deferred write-backs of the previous subgroup
  auto drain = [&] {
    const auto t0 = Clock::now();
    for (auto& t : pending) t.Wait();
    pending.clear();
    io += Since(t0);
  };
  std::vector<Subgroup> order = store_.Subgroups(d);
  if (o.reverse_subgroups) std::reverse(order.begin(), order.end());
  try {
    for (const Subgroup& sg : order) {
      if (o.overlap ? sg.index % 2 != w : w != 0) continue;
      if (abort_) break;
      drain();  // this worker's buffers are about to be reused
      const bool do_io = o.phases != StepPhases::kComputeOnly;
      const bool do_compute = o.phases != StepPhases::kIoOnly;
      // Load: state P2P from the committed slot, gradient over the shared link.
      std::vector<aio::IoTicket> loads;
      for (unsigned a = 0; do_io && a < bufs.state.size(); ++a) {
        const ArrayExtent e = store_.Extent(a, sg);
        loads.push_back(dev.P2PRead(store_.file(d, a, rs), e.offset, *bufs.state[a], 0,
                                    e.io_bytes, &vc));
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
        if (o.gradient_wait) o.gradient_wait(shard_base + sg.begin, sg.n);  // (not storage time)
        dev.HostToDevice(g.dense().data() + (shard_base + sg.begin) * eb, *bufs.b.grad, 0,
                         static_cast<uint64_t>(sg.n) * eb, &vc);
      }
      const auto t0 = Clock::now();
      for (auto& t : loads) t.Wait();
      io += Since(t0);
      // The subgroup's launches: one, unless its tensors are at different step counts (a
      // tensor without a gradient in earlier steps): then one per count, each from the
      // committed inputs, each keeping the results of its own tensors.
      const std::vector<StepClass> classes =
          do_io && do_compute && o.phases == StepPhases::kAll ? ClassesIn(shard_base, sg)
                                                              : std::vector<StepClass>();
      const size_t launches = std::max<size_t>(classes.size(), 1);
      const bool dump = Dumps(o, d, sg);
      uint32_t status[hls::kLanes] = {};
      // Copies a class's element ranges of array `a` (a < 0: the low-precision copy).
      auto ranges_between = [&](const DeviceBufferPtr& from, const DeviceBufferPtr& to,
                                const StepClass& cls, int a) {
        for (const auto& [lo, hi] : cls.ranges) {
          const auto [off, len] = a < 0 ? std::pair<uint64_t, uint64_t>(2ull * lo, 2ull * (hi - lo))
                                        : store_.ArrayRange(static_cast<unsigned>(a), lo, hi);
          dev.CopyWithin(*from, off, *to, off, len);
        }
      };
      for (size_t li = 0; li < launches; ++li) {
        const int64_t lstep = classes.empty() ? step_ : classes[li].step;
        const KernelLaunch& kl = classes.empty() ? k[sg.group] : LaunchFor(sg.group, lstep);
        if (li > 0) {
          // The last launch's results for its tensors kept; the inputs read again.
          if (bufs.stash.empty()) {
            for (unsigned a = 0; a < bufs.state.size(); ++a) {
              bufs.stash.push_back(dev.Alloc(store_.ArrayBufferBytes(a), BufferRole::kState));
            }
            if (c.out != DType::kFp32) {
              bufs.stash16 = dev.Alloc(2ull * c.subgroup_elems, BufferRole::kState);
            }
          }
          for (unsigned a = 0; a < bufs.state.size(); ++a) {
            ranges_between(bufs.state[a], bufs.stash[a], classes[li - 1], static_cast<int>(a));
          }
          if (c.out != DType::kFp32) ranges_between(bufs.b.out16, bufs.stash16, classes[li - 1], -1);
          const auto t0 = Clock::now();
          for (unsigned a = 0; a < bufs.state.size(); ++a) {
            const ArrayExtent e = store_.Extent(a, sg);
            dev.P2PRead(store_.file(d, a, rs), e.offset, *bufs.state[a], 0, e.io_bytes, &vc)
                .Wait();
          }
          io += Since(t0);
        }
        // The launch's inputs as the device holds them, for a dump (outside the timed work).
        UpdateLaunch<AlignedBuffer> dump_in, dump_out;
        if (dump) {
          dump_read_bytes_ += ReadBack(dev, bufs.b, store_, sg, true, sg.n, nnz, eb,
                                       g.sparse(), c.out, &dump_in);
          dump_in.SetRandomKey(c.seed, static_cast<uint64_t>(store_.step() + 1),
                               shard_base + sg.begin);
        }
        // Compute: one kernel at a time per device (one compute unit).
        if (do_compute) {
          const auto t1 = Clock::now();
          std::lock_guard<std::mutex> lock(*kernel_mu_[d]);
          bufs.b.SetScalars(sg.n, nnz, kl);
          bufs.b.SetRandomKey(c.seed, static_cast<uint64_t>(store_.step() + 1),
                              shard_base + sg.begin);
          dev.LaunchUpdate(bufs.b, nullptr, &vc);
          compute += Since(t1);
        }
        if (dump) {  // a failing launch is dumped too: its status says why
          dump_read_bytes_ += ReadBack(dev, bufs.b, store_, sg, false, sg.n, nnz, eb,
                                       g.sparse(), c.out, &dump_out);
          DumpLaunch(o, d, sg, nnz, dump_in, dump_out, lstep, kl,
                     launches > 1 ? static_cast<int>(li) : -1);
        }
        if (do_io) dev.DeviceToHost(*bufs.b.status, 0, status, sizeof status, &vc);
        // The kernel's status decides before anything is written back: errors, the CRCs of
        // the state it read against the manifest, non-finite values it wrote (of several
        // launches, each is checked over the whole subgroup).
        if (o.phases == StepPhases::kAll) {
          const uint32_t bad = CheckStatus(store_, d, sg, shard_base, status, o, "launch");
          if (bad != 0) nonfinite_ += bad;
        }
      }
      for (size_t li = 0; li + 1 < launches; ++li) {  // the earlier launches' results back
        for (unsigned a = 0; a < bufs.state.size(); ++a) {
          ranges_between(bufs.stash[a], bufs.state[a], classes[li], static_cast<int>(a));
        }
        if (c.out != DType::kFp32) ranges_between(bufs.stash16, bufs.b.out16, classes[li], -1);
      }
      const auto frozen = do_io && do_compute ? FrozenIn(g, shard_base, sg, StateAlign(store_))
                                              : std::vector<std::pair<uint32_t, uint32_t>>();
      // Tensors without a gradient keep their weights and state: their elements are read again
      // from the committed slot (P2P, through a small scratch buffer) over what the kernel wrote.
      if (do_io && do_compute) {
        for (const auto& [lo, hi] : frozen) {
          if (!bufs.scratch) bufs.scratch = dev.Alloc(kScratchBytes, BufferRole::kState);
          for (unsigned v = 0; v < bufs.state.size(); ++v) {
            const ArrayExtent e = store_.Extent(v, sg);
            const auto [off, len] = store_.ArrayRange(v, lo, hi);
            const uint64_t want0 = e.offset + off, want1 = want0 + len;
            for (uint64_t c0 = want0 / 4096 * 4096; c0 < want1; c0 += kScratchBytes) {
              const uint64_t c1 = std::min(c0 + kScratchBytes, (want1 + 4095) / 4096 * 4096);
              const uint64_t a = std::max(c0, want0), z = std::min(c1, want1);
              dev.P2PRead(store_.file(d, v, rs), c0, *bufs.scratch, 0, c1 - c0, &vc).Wait();
              dev.CopyWithin(*bufs.scratch, a - c0, *bufs.state[v], a - e.offset, z - a);
            }
          }
        }
      }
      // The low-precision weights go out first: the next forward pass needs them.
      if (c.out != DType::kFp32 && do_io) {
        dev.DeviceToHost(*bufs.b.out16, 0, weights16_.data() + (shard_base + sg.begin) * 2,
                         2ull * sg.n, &vc);
      } else if (o.fp32_weights_out && do_io && store_.state() == hls::StateFmt::kQ8Bf16) {
        // bf16 weights, handed out widened (exactly) to binary32.
        std::vector<uint16_t> h(sg.n);
        dev.DeviceToHost(*bufs.b.theta, 0, h.data(), 2ull * sg.n, &vc);
        uint32_t* w32 = reinterpret_cast<uint32_t*>(weights32_.data()) + shard_base + sg.begin;
        for (uint32_t i = 0; i < sg.n; ++i) w32[i] = static_cast<uint32_t>(h[i]) << 16;
      } else if (o.fp32_weights_out && do_io) {
        dev.DeviceToHost(*bufs.b.theta, 0, weights32_.data() + (shard_base + sg.begin) * 4,
                         4ull * sg.n, &vc);
      }
      if (o.weights_ready && o.phases == StepPhases::kAll && !store_.planning() &&
          (c.out != DType::kFp32 || o.fp32_weights_out)) {
        o.weights_ready(shard_base + sg.begin, sg.n);
      }
      // The new checksums are the kernel's output CRC lanes, unless elements of tensors
      // without a gradient were restored over what it wrote (then a device-side CRC of the
      // result); then the deferred write-backs into the other slot.
      if (o.before_write && do_io && o.phases == StepPhases::kAll) o.before_write();
      if (o.phases == StepPhases::kAll) {
        for (unsigned v = 0; v < store_.vars().size(); ++v) {
          if (frozen.empty() && launches == 1) {
            (*crcs)[d][v][sg.index] = status[CrcLanes(store_.vars()[v]).second];
            continue;
          }
          std::vector<uint32_t> ac;
          for (unsigned a : store_.ArraysOf(v)) {
            ac.push_back(dev.Crc32(*bufs.state[a], 0, store_.Extent(a, sg).bytes));
          }
          (*crcs)[d][v][sg.index] = store_.VarChecksum(v, sg, ac.data());
        }
      }
      for (unsigned a = 0; do_io && a < bufs.state.size(); ++a) {
        const ArrayExtent e = store_.Extent(a, sg);
        pending.push_back(dev.P2PWrite(store_.file(d, a, ws), e.offset, *bufs.state[a], 0,
                                       e.io_bytes, &vc));
      }
      if (!o.overlap) drain();  // without the handler: written back before the next load
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
}

void Scheduler::BaselineWorker(const std::vector<Subgroup>* work, unsigned t, unsigned nt,
                             const GradientSet& g, const std::vector<KernelLaunch>& k,
                             Store::Checksums* crcs, StepReport* rep, std::mutex* rep_mu,
                             const StepOptions& o) {
  const StoreConfig& c = store_.config();
  const unsigned eb = DTypeBytes(c.grad);
  const unsigned rs = store_.slot(), ws = 1 - rs;
  const size_t nv = store_.arrays().size();  // (the state arrays: one per variable in fp32)
  const uint64_t sgb = c.subgroup_elems;
  // Host buffers, allocated once per worker at the subgroup size: the state the optimizer has
  // (store var order), the dense gradient, the low-precision copy, the status word.
  // A planning store holds no data (null devices): the worker issues the same transfers and
  // books the same host computation, and skips what would read or write the values; its
  // buffers are then address ranges with no memory behind them.
  const bool data = !store_.planning();
  auto host_buffer = [data](uint64_t bytes) {
    return data ? AlignedBuffer(bytes) : AlignedBuffer::Reserve(bytes);
  };
  UpdateLaunch<AlignedBuffer> hb;
  std::vector<AlignedBuffer*> var_buf;
  for (unsigned a = 0; a < nv; ++a) {
    AlignedBuffer& b = ArrayOf(hb, store_.arrays()[a]);
    b = host_buffer(store_.ArrayBufferBytes(a));
    var_buf.push_back(&b);
  }
  if (!g.sparse()) hb.grad = host_buffer(sgb * eb);
  if (c.out != DType::kFp32) hb.out16 = host_buffer(sgb * 2);
  hb.status = AlignedBuffer(hls::kWordBytes);
  double io = 0, compute = 0;
  VirtualClock vc;
  vc.worker = t;
  // Thread t takes subgroups t, t + nt, ...: a fixed split, so that each thread's transfers
  // (and the virtual time the link model schedules from them) are the same on every run.
  for (size_t idx = t; idx < work->size() && !abort_; idx += nt) {
    const Subgroup& sg = (*work)[idx];
    const unsigned d = sg.device;
    Device& dev = devices_.device(d);
    const uint64_t shard_base = store_.shards()[d].begin;
    auto t0 = Clock::now();
    std::vector<aio::IoTicket> loads;
    for (unsigned v = 0; v < nv; ++v) {
      const ArrayExtent e = store_.Extent(v, sg);
      loads.push_back(dev.HostRead(store_.file(d, v, rs), e.offset, var_buf[v]->data(),
                                   e.io_bytes, &vc));
    }
    for (auto& ticket : loads) ticket.Wait();
    io += Since(t0);
    // The kernel on the host: the same csd_update through the same launch type, on host
    // buffers; the gradient is the worker's copy of the dense slice or the stream itself.
    const auto t1 = Clock::now();
    UpdateLaunch<hls::Word*> l = WordsOf(hb);
    uint32_t nnz = 0;
    if (g.sparse()) {
      const SparseGrad& s = g.sparse_for(d, sg.index);
      nnz = s.nnz;
      l.grad = const_cast<hls::Word*>(s.val.words());
      l.sp_idx = const_cast<hls::Word*>(s.idx.words());
      l.sp_blk = const_cast<hls::Word*>(s.blk.words());
    } else if (data) {
      std::memcpy(hb.grad.data(), g.dense().data() + (shard_base + sg.begin) * eb,
                  static_cast<uint64_t>(sg.n) * eb);
    }
    // The subgroup's launches: one, unless its tensors are at different step counts (as in
    // the smart mode: one per count, each from the committed inputs).
    const std::vector<StepClass> classes =
        data ? ClassesIn(shard_base, sg) : std::vector<StepClass>();
    const size_t launches = std::max<size_t>(classes.size(), 1);
    l.SetScalars(sg.n, nnz, classes.empty() ? k[sg.group] : LaunchFor(sg.group, classes[0].step));
    l.SetRandomKey(c.seed, static_cast<uint64_t>(store_.step() + 1), shard_base + sg.begin);
    // The update itself (planning: skipped; the state, zeros, stays what it was).
    uint32_t err = 0;
    const auto frozen = data ? FrozenIn(g, shard_base, sg, StateAlign(store_))
                             : std::vector<std::pair<uint32_t, uint32_t>>();
    if (data) {
      // Tensors without a gradient keep their weights and state: saved here, put back below.
      std::vector<std::vector<uint8_t>> saved;
      for (const auto& [lo, hi] : frozen) {
        for (unsigned v = 0; v < nv; ++v) {
          const auto [off, len] = store_.ArrayRange(v, lo, hi);
          const uint8_t* p = var_buf[v]->data() + off;
          saved.emplace_back(p, p + len);
        }
      }
      // Several launches: the inputs kept for the next ones, each launch's results for its
      // tensors kept (stash, then the low-precision copy's) while the next runs.
      std::vector<std::vector<uint8_t>> inputs, stash;
      if (launches > 1) {
        for (unsigned v = 0; v < nv; ++v) {
          const uint64_t bytes = store_.Extent(v, sg).bytes;
          inputs.emplace_back(var_buf[v]->data(), var_buf[v]->data() + bytes);
          stash.emplace_back(bytes);
        }
        if (c.out != DType::kFp32) stash.emplace_back(2ull * sg.n);
      }
      auto keep = [&](const StepClass& cls, bool back) {
        for (const auto& [lo, hi] : cls.ranges) {
          for (unsigned v = 0; v < stash.size(); ++v) {
            const auto [off, len] = v < nv ? store_.ArrayRange(v, lo, hi)
                                           : std::pair<uint64_t, uint64_t>(2ull * lo, 2ull * (hi - lo));
            uint8_t* live = (v < nv ? var_buf[v]->data() : hb.out16.data()) + off;
            uint8_t* kept = stash[v].data() + off;
            if (back) {
              std::memcpy(live, kept, len);
            } else {
              std::memcpy(kept, live, len);
            }
          }
        }
      };
      const bool dump = Dumps(o, d, sg);
      for (size_t li = 0; li < launches; ++li) {
        const int64_t lstep = classes.empty() ? step_ : classes[li].step;
        const KernelLaunch& kl = classes.empty() ? k[sg.group] : LaunchFor(sg.group, lstep);
        if (li > 0) {
          keep(classes[li - 1], false);
          for (unsigned v = 0; v < nv; ++v) {
            std::memcpy(var_buf[v]->data(), inputs[v].data(), inputs[v].size());
          }
          l.SetScalars(sg.n, nnz, kl);
        }
        UpdateLaunch<AlignedBuffer> dump_in, dump_out;
        if (dump) {
          CopyBack(store_, sg, var_buf, true, sg.n, nnz, eb, l.grad, l.sp_idx,
                   g.sparse() ? l.sp_blk : nullptr, hb, c.out, &dump_in);
          dump_in.SetRandomKey(c.seed, static_cast<uint64_t>(store_.step() + 1),
                               shard_base + sg.begin);
        }
        err = InvokeUpdate(l);
        if (dump) {
          CopyBack(store_, sg, var_buf, false, sg.n, nnz, eb, nullptr, nullptr, nullptr, hb,
                   c.out, &dump_out);
          DumpLaunch(o, d, sg, nnz, dump_in, dump_out, lstep, kl,
                     launches > 1 ? static_cast<int>(li) : -1);
        }
        if (err != 0) break;  // reported below
        if (li + 1 < launches) {  // the last launch's status is checked below
          const uint32_t bad = CheckStatus(store_, d, sg, shard_base, hb.status.as<uint32_t>(),
                                           o, "host update");
          if (bad != 0) nonfinite_ += bad;
        }
      }
      for (size_t li = 0; err == 0 && li + 1 < launches; ++li) keep(classes[li], true);
      for (size_t f = 0, k2 = 0; f < frozen.size(); ++f) {
        for (unsigned v = 0; v < nv; ++v, ++k2) {
          const uint64_t off = store_.ArrayRange(v, frozen[f].first, frozen[f].second).first;
          std::memcpy(var_buf[v]->data() + off, saved[k2].data(), saved[k2].size());
        }
      }
      compute += Since(t1);
    }
    // Virtual time: the host's update at the link profile's host rate, from the launch's memory
    // traffic (its measured wall time here would make the estimate depend on this machine and
    // its load, and differ from run to run).
    for (size_t li = 0; li < launches; ++li) {
      devices_.BookHostCompute(LaunchMemoryTraffic(l.mode, sg.n, nnz), &vc);
    }
    if (err != 0) {
      throw std::runtime_error("host update of device " + std::to_string(d) + " subgroup " +
                               std::to_string(sg.index) + ": " +
                               DescribeKernelError(err, hb.status.as<uint32_t>()[1]));
    }
    // The same checks of the status as a device launch's: the input CRCs against the manifest
    // (the host model checksummed the state as it read it), non-finite values written.
    if (data) {
      const uint32_t bad =
          CheckStatus(store_, d, sg, shard_base, hb.status.as<uint32_t>(), o, "host update");
      if (bad != 0) nonfinite_ += bad;
    }
    if (data && c.out != DType::kFp32) {
      std::memcpy(weights16_.data() + (shard_base + sg.begin) * 2, hb.out16.data(), 2ull * sg.n);
    } else if (data && o.fp32_weights_out && store_.state() == hls::StateFmt::kQ8Bf16) {
      uint32_t* w32 = reinterpret_cast<uint32_t*>(weights32_.data()) + shard_base + sg.begin;
      for (uint32_t i = 0; i < sg.n; ++i) w32[i] = static_cast<uint32_t>(hb.theta.as<uint16_t>()[i]) << 16;
    } else if (data && o.fp32_weights_out) {
      std::memcpy(weights32_.data() + (shard_base + sg.begin) * 4, hb.theta.data(), 4ull * sg.n);
    }
    if (data && o.weights_ready && (c.out != DType::kFp32 || o.fp32_weights_out)) {
      o.weights_ready(shard_base + sg.begin, sg.n);
    }
    std::vector<aio::IoTicket> writes;
    for (unsigned v = 0; v < store_.vars().size(); ++v) {
      // The output CRC lanes, or the host's CRC where tensors without a gradient were restored.
      if (!data) {
        (*crcs)[d][v][sg.index] = store_.checksum(d, v, sg.index);
      } else if (frozen.empty() && launches == 1) {
        (*crcs)[d][v][sg.index] = hb.status.as<uint32_t>()[CrcLanes(store_.vars()[v]).second];
      } else {
        std::vector<uint32_t> ac;
        for (unsigned a : store_.ArraysOf(v)) {
          ac.push_back(Crc32(var_buf[a]->data(), store_.Extent(a, sg).bytes));
        }
        (*crcs)[d][v][sg.index] = store_.VarChecksum(v, sg, ac.data());
      }
    }
    for (unsigned v = 0; v < nv; ++v) {
      const ArrayExtent e = store_.Extent(v, sg);
      writes.push_back(dev.HostWrite(store_.file(d, v, ws), e.offset, var_buf[v]->data(),
                                     e.io_bytes, &vc));
    }
    t0 = Clock::now();
    for (auto& ticket : writes) ticket.Wait();
    io += Since(t0);
    Progress(o);
  }
  std::lock_guard<std::mutex> lock(*rep_mu);
  rep->io_seconds += io;
  rep->compute_seconds += compute;
}

StepReport Scheduler::Step(const GradientSet& grads, const StepOptions& o) {
  StepReport rep;
  rep.mode = o.mode;
  rep.step = store_.step() + 1;
  const StoreConfig& c = store_.config();
  if (grads.dtype() != c.grad) {
    throw std::invalid_argument(std::string("gradient dtype: expected ") + DTypeName(c.grad) +
                                " (the store's), found " + DTypeName(grads.dtype()));
  }
  std::string where;
  if (o.found_inf) {
    rep.skipped = true;
    rep.skip_reason = "found_inf: the trainer found a non-finite gradient; step skipped, nothing "
                      "read, written or committed";
    return rep;
  }
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
  gs.state = c.state;
  gs.loss_scale = o.loss_scale ? *o.loss_scale : c.loss_scale;
  gs.clip_coef = o.clip_coef;
  // The kernel scalars of every param group for this step (computed in double, rounded once).
  const std::vector<OptimizerConfig>& used =
      o.group_hyper.empty() ? store_.group_hyper() : o.group_hyper;
  if (used.size() != store_.group_hyper().size()) {
    throw std::invalid_argument("step: expected hyper-parameters for " +
                                std::to_string(store_.group_hyper().size()) +
                                " param groups, found " + std::to_string(used.size()));
  }
  std::vector<KernelLaunch> k;
  for (size_t g = 0; g < used.size(); ++g) {
    if (used[g].opt != c.hyper.opt) {
      throw std::invalid_argument("param group " + std::to_string(g) + ": expected optimizer " +
                                  OptimizerName(c.hyper.opt) + " (the store's), found " +
                                  OptimizerName(used[g].opt));
    }
    if (StateVariables(used[g]) != store_.vars()) {
      throw std::invalid_argument(
          "param group " + std::to_string(g) + ": these hyper-parameters need another optimizer "
          "state than the store keeps (e.g. SGD momentum turned on or off after creation)");
    }
    try {
      k.push_back(MakeLaunch(used[g], gs, rep.step));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("param group " + std::to_string(g) + ": " + e.what());
    }
  }

  if (grads.planned() && !store_.planning()) {
    throw std::invalid_argument("gradients: a planned gradient set (sizes, no values) needs a "
                                "planning store and null devices, found the store '" +
                                store_.dir() + "'");
  }
  if (store_.planning() && !o.dump_dir.empty()) {
    throw std::invalid_argument("launch dump: a planning store (null devices) has no launch "
                                "data to dump, found a dump directory '" + o.dump_dir + "'");
  }
  if (!o.dump_dir.empty()) {
    struct stat st{};
    if (o.phases != StepPhases::kAll) {
      throw std::invalid_argument("launch dump: expected a whole step (StepPhases::kAll), found "
                                  "a partial one");
    }
    const bool exists = ::stat(o.dump_dir.c_str(), &st) == 0;
    if (!exists || !S_ISDIR(st.st_mode)) {
      throw std::invalid_argument("launch dump: expected an existing directory '" + o.dump_dir +
                                  "', found " + (exists ? "something else" : "nothing"));
    }
    for (const auto& [d, sgi] : o.dump_only) {
      if (d >= devices_.size() || sgi >= store_.Subgroups(d).size()) {
        throw std::invalid_argument(
            "launch dump: device " + std::to_string(d) + " subgroup " + std::to_string(sgi) +
            ": expected a device below " + std::to_string(devices_.size()) +
            (d < devices_.size() ? " and a subgroup below " +
                                       std::to_string(store_.Subgroups(d).size())
                                 : std::string()) +
            ", found none");
      }
    }
  }
  step_ = rep.step;
  step_grad_ = gs;
  step_hyper_ = used;
  // Per-tensor step counts (torch.optim's per-parameter `step`): a tensor with a gradient in
  // this step takes its count + 1 (a tensor without one keeps its count). Where every tensor
  // with a gradient reaches rep.step -- it had one in every step so far -- each subgroup is one
  // launch at rep.step, as without counts; else the scalars for each (group, count) present.
  next_counts_.clear();
  stepped_.clear();
  tensor_begin_.clear();
  class_launch_.clear();
  uniform_counts_ = true;
  if (const ParamLayout* l = store_.layout()) {
    const auto& fz = grads.frozen();
    next_counts_ = store_.tensor_steps();
    size_t f = 0;
    for (size_t t = 0; t < l->tensors().size(); ++t) {
      const uint64_t b = l->offset(t), e = b + l->tensors()[t].numel;
      tensor_begin_.push_back(b);
      while (f < fz.size() && fz[f].second <= b) ++f;
      // Without a gradient: every element of the tensor in the step's frozen ranges.
      uint64_t covered = b;
      for (size_t j = f; j < fz.size() && fz[j].first <= covered && covered < e; ++j) {
        covered = std::max(covered, fz[j].second);
      }
      const bool has = covered < e;
      stepped_.push_back(has);
      if (!has) continue;
      const int64_t next = next_counts_[t] + 1;
      next_counts_[t] = next;
      if (next != rep.step) uniform_counts_ = false;
      const unsigned g = l->tensors()[t].group;
      if (class_launch_.count({g, next}) == 0) {
        try {
          class_launch_.emplace(std::make_pair(g, next), MakeLaunch(used[g], gs, next));
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("param group " + std::to_string(g) + ", tensor '" +
                                      l->tensors()[t].name + "' at its step " +
                                      std::to_string(next) + ": " + e.what());
        }
      }
    }
  }
  dumped_ = 0;
  dump_read_bytes_ = 0;
  nonfinite_ = 0;
  if (o.fp32_weights_out && c.out == DType::kFp32 && weights32_.size() == 0) {
    weights32_ = store_.planning() ? AlignedBuffer::Reserve(c.params * 4)
                                   : AlignedBuffer(c.params * 4);
  }
  const LinkBytes before = devices_.bytes();
  devices_.ResetVirtualTime();
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
      const UpdateFootprint need = SubgroupFootprint(c);
      for (unsigned d = 0; d < devices_.size(); ++d) {
        for (unsigned w = 0; w < 2; ++w) {
          auto b = std::make_unique<DevBufs>();
          Device& dev = devices_.device(d);
          // The state arrays at their P2P size (whole 4096-byte units), the rest as the
          // largest launch needs.
          std::vector<unsigned> array_args;
          for (const StateArray& a : store_.arrays()) array_args.push_back(a.arg);
          b->b.ForEachBuffer([&](const hls::ArgInfo& a, DeviceBufferPtr& p) {
            const bool state = std::find(array_args.begin(), array_args.end(), a.index) !=
                               array_args.end();
            if (need[a.index] > 0 && !state) p = dev.Alloc(need[a.index], UpdateBufferRole(a));
          });
          for (unsigned a = 0; a < store_.arrays().size(); ++a) {
            DeviceBufferPtr& p = ArrayOf(b->b, store_.arrays()[a]);
            p = dev.Alloc(store_.ArrayBufferBytes(a), BufferRole::kState);
            b->state.push_back(p);
          }
          bufs_.push_back(std::move(b));
        }
      }
    }
    for (unsigned d = 0; d < devices_.size(); ++d) {
      for (unsigned w = 0; w < (o.overlap ? 2u : 1u); ++w) {
        ts.emplace_back([&, d, w] {
          guarded([&] { SmartWorker(d, w, grads, k, &crcs, &rep, &rep_mu, o); });
        });
      }
    }
  } else {
    if (o.phases != StepPhases::kAll) {
      throw std::invalid_argument("step phases: only the smart mode can run partial phases");
    }
    if (o.gradient_wait || o.before_write) {
      throw std::invalid_argument("gradient wait / before write: only the smart mode takes "
                                  "gradients as they become final; the baseline needs them all "
                                  "at its start");
    }
    // The work list interleaves the devices (subgroup 0 of every device, then subgroup 1, ...),
    // so that the threads, which take consecutive entries, read from all SSDs at once as a
    // RAID0 stripe does, instead of queueing on one device's SSD.
    std::vector<std::vector<Subgroup>> per_device;
    size_t most = 0;
    for (unsigned d = 0; d < devices_.size(); ++d) {
      per_device.push_back(store_.Subgroups(d));
      most = std::max(most, per_device.back().size());
    }
    std::vector<Subgroup> work;
    for (size_t i = 0; i < most; ++i) {
      for (const auto& list : per_device) {
        if (i < list.size()) work.push_back(list[i]);
      }
    }
    const unsigned nt =
        o.host_threads ? o.host_threads : std::max(1u, std::thread::hardware_concurrency());
    // The host threads: created at the first baseline step and kept (pinned one per CPU
    // unless the options say not to) while the thread count and pinning stay the same.
    if (!host_pool_ || host_pool_->size() != nt || host_pool_->pin() != o.pin_host_threads) {
      host_pool_.reset();
      host_pool_ = std::make_unique<WorkerPool>(nt, o.pin_host_threads);
    }
    rep.host_threads = nt;
    rep.pinned_threads = host_pool_->pinned();
    host_pool_->Run([&](unsigned t) {
      guarded([&] { BaselineWorker(&work, t, nt, grads, k, &crcs, &rep, &rep_mu, o); });
    });
  }
  for (auto& t : ts) t.join();
  if (err) std::rethrow_exception(err);
  if (o.phases == StepPhases::kAll) {
    if (o.before_write) o.before_write();
    store_.Commit(crcs, &used, std::nullopt, store_.layout() ? &next_counts_ : nullptr);
    rep.warning = store_.durability_warning();
    have_weights_ = c.out != DType::kFp32 || o.fp32_weights_out;
    last_frozen_ = grads.frozen();
  }
  if (o.phases == StepPhases::kIoOnly) store_.SyncNextSlot();  // durability is part of the I/O
  const auto t1 = Clock::now();
  rep.seconds = std::chrono::duration<double>(t1 - t0).count();
  rep.started_at = std::chrono::duration<double>(t0.time_since_epoch()).count();
  rep.finished_at = std::chrono::duration<double>(t1.time_since_epoch()).count();
  rep.bytes = devices_.bytes() - before;
  rep.bytes[Link::kDeviceToHost] -= dump_read_bytes_;  // the dump's reads are not the step's
  rep.dumped_launches = dumped_;
  rep.nonfinite_values = nonfinite_;
  // The link model's schedule of what every worker issued (deterministic: see link_model.h).
  rep.virtual_seconds = devices_.has_link_model() ? devices_.VirtualHorizon() : 0.0;
  return rep;
}

void Scheduler::CheckWeightsOut(const std::vector<void*>& dst, bool allow_missing) const {
  const ParamLayout* l = store_.layout();
  if (l == nullptr) {
    throw std::invalid_argument("weights out: expected a store created for a model, found '" +
                                store_.dir() + "' without a parameter layout");
  }
  if (dst.size() != l->tensors().size()) {
    throw std::invalid_argument("weights out: expected one destination per tensor (" +
                                std::to_string(l->tensors().size()) + "), found " +
                                std::to_string(dst.size()));
  }
  for (size_t t = 0; t < dst.size(); ++t) {
    if (dst[t] == nullptr && !allow_missing) {
      throw std::invalid_argument("weights out: tensor " + std::to_string(t) + " '" +
                                  l->tensors()[t].name + "': expected a destination, found none");
    }
  }
}

void Scheduler::CopyWeightsOut(const std::vector<void*>& dst) const {
  CheckWeightsOut(dst);
  if (!have_weights_) {
    throw std::logic_error("weights out: no step has produced weights yet (a store without a "
                           "low-precision copy needs StepOptions::fp32_weights_out)");
  }
  CopyWeightsRange(dst, 0, store_.config().params, last_frozen_, nullptr);
}

namespace {

// Calls fn(tensor bytes, offset in the store's element space, elements) for each part of a
// tensor of `l` within [begin, begin + n), but tensors listed in `frozen` (no gradient this
// step: the trainer's copy is already theirs) and those without a destination.
template <typename Fn>
void ForEachTensorPart(const ParamLayout& l, const std::vector<void*>& dst, uint64_t begin,
                       uint64_t n, unsigned eb,
                       const std::vector<std::pair<uint64_t, uint64_t>>& frozen, Fn&& fn) {
  const uint64_t end = begin + n;
  for (size_t t = 0; t < dst.size(); ++t) {
    const uint64_t lo = l.offset(t), hi = lo + l.tensors()[t].numel;
    if (hi <= begin || lo >= end || dst[t] == nullptr) continue;
    if (std::find(frozen.begin(), frozen.end(), std::make_pair(lo, hi)) != frozen.end()) continue;
    const uint64_t a = std::max(lo, begin), z = std::min(hi, end);
    fn(static_cast<uint8_t*>(dst[t]) + (a - lo) * eb, a, z - a);
  }
}

}  // namespace

uint64_t Scheduler::CopyWeightsRange(const std::vector<void*>& dst, uint64_t begin, uint64_t n,
                                     const std::vector<std::pair<uint64_t, uint64_t>>& frozen,
                                     uint8_t* saved) const {
  const bool low = store_.config().out != DType::kFp32;
  const unsigned eb = low ? 2 : 4;
  const uint8_t* src = (low ? weights16_ : weights32_).data();
  uint64_t bytes = 0;
  ForEachTensorPart(*store_.layout(), dst, begin, n, eb, frozen,
                    [&](uint8_t* to, uint64_t at, uint64_t count) {
                      if (saved != nullptr) std::memcpy(saved + at * eb, to, count * eb);
                      std::memcpy(to, src + at * eb, count * eb);
                      bytes += count * eb;
                    });
  return bytes;
}

void Scheduler::PutBackWeightsRange(const std::vector<void*>& dst, uint64_t begin, uint64_t n,
                                    const std::vector<std::pair<uint64_t, uint64_t>>& frozen,
                                    const uint8_t* saved) const {
  const unsigned eb = store_.config().out != DType::kFp32 ? 2 : 4;
  ForEachTensorPart(*store_.layout(), dst, begin, n, eb, frozen,
                    [&](uint8_t* to, uint64_t at, uint64_t count) {
                      std::memcpy(to, saved + at * eb, count * eb);
                    });
}

}  // namespace csdkit
