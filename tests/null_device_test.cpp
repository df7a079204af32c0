// The null (planning) device: the unchanged scheduler on null devices and a planning store
// gives, step for step, the byte counters and virtual seconds of the same step on emulated
// devices; the counters equal the traffic formulas of docs/runtime.md; a plan is the same on
// every run; a 33e9-parameter step on 10 devices plans in bounded memory. Also the pieces a plan
// stands on: the CRC of zeros, the planning store, the device's own checks.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "test_dir.h"
#include "csdkit/emu/link_model.h"
#include "csdkit/emu/null_device.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

using testing::TestDir;

StoreConfig Config(Optimizer opt, uint64_t params, unsigned devices, uint32_t subgroup,
                   DType grad, DType out) {
  StoreConfig c;
  c.params = params;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(opt);
  if (opt == Optimizer::kSgd) c.hyper.momentum = 0.9;
  c.grad = grad;
  c.out = out;
  c.loss_scale = grad == DType::kFp16 ? 256.0 : 1.0;
  c.subgroup_elems = subgroup;
  c.seed = 11;
  return c;
}

DeviceSpec Spec(Backend b, unsigned count) {
  DeviceSpec d;
  d.backend = b;
  d.count = count;
  d.device_mem = uint64_t{1} << 30;
  return d;
}

StepOptions Options(UpdateMode mode) {
  StepOptions o;
  o.mode = mode;
  o.host_threads = 3;  // the baseline's split of subgroups over threads is part of the plan
  o.pin_host_threads = false;
  return o;
}

// Everything of a step report that does not depend on wall time, in hex where it is a double
// (so that a difference in the last bit shows).
std::string Reproducible(const StepReport& r) {
  char vs[64];
  std::snprintf(vs, sizeof vs, "%a", r.virtual_seconds);
  return "step " + std::to_string(r.step) + " mode " + UpdateModeName(r.mode) + " skipped " +
         std::to_string(r.skipped) + " subgroups " + std::to_string(r.subgroups) +
         " virtual " + vs + " bytes " + r.bytes.ToJson().dump();
}

void ExpectSameStep(const StepReport& model, const StepReport& plan, const std::string& ctx) {
  EXPECT_FALSE(model.skipped) << ctx;
  EXPECT_FALSE(plan.skipped) << ctx;
  EXPECT_EQ(plan.step, model.step) << ctx;
  EXPECT_EQ(plan.subgroups, model.subgroups) << ctx;
  for (unsigned l = 0; l < kNumLinks; ++l) {
    const Link link = static_cast<Link>(l);
    EXPECT_EQ(plan.bytes[link], model.bytes[link]) << ctx << ": link " << LinkName(link);
  }
  EXPECT_GT(model.virtual_seconds, 0.0) << ctx;
  // Exactly: the same workers issued the same operations, scheduled by the same link model.
  EXPECT_EQ(plan.virtual_seconds, model.virtual_seconds)
      << ctx << ": EXP=" << std::hexfloat << model.virtual_seconds
      << " GOT=" << plan.virtual_seconds;
}

struct SmallCase {
  const char* name;
  Optimizer opt;
  DType grad, out;
  uint64_t params;
};

// (a) At small scale: two steps on emulated devices (model backend, a real store, synthetic
// gradients) and on null devices (a planning store, planned gradients) report the same bytes
// on every link and the same virtual seconds, in both modes, dense and Top-K.
TEST(NullDevice, StepEqualsTheEmulatedStepExactly) {
  // 4 devices, subgroups of 65536: each shard has full subgroups and a short, padded last one.
  const std::vector<SmallCase> cases = {
      {"adamw_fp16_fp16", Optimizer::kAdamW, DType::kFp16, DType::kFp16, 4 * 3 * 65536 + 12345},
      {"sgd_momentum_fp32_none", Optimizer::kSgd, DType::kFp32, DType::kFp32, 4 * 2 * 65536 + 999},
      {"lion_bf16_bf16", Optimizer::kLion, DType::kBf16, DType::kBf16, 3 * 65536 + 4097},
  };
  int run = 0;
  for (const SmallCase& sc : cases) {
    for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
      for (double topk : {0.0, 0.05}) {
        const std::string ctx = std::string(sc.name) + " " + UpdateModeName(mode) +
                                " topk " + std::to_string(topk);
        const StoreConfig cfg = Config(sc.opt, sc.params, 4, 65536, sc.grad, sc.out);
        Store real = Store::Create(TestDir("equal/" + std::to_string(run++)), cfg);
        DeviceSet emulated(Spec(Backend::kModel, 4));
        Scheduler on_model(real, emulated);
        Store plan = Store::Plan(cfg);
        DeviceSet null(Spec(Backend::kNull, 4));
        Scheduler on_null(plan, null);
        for (int step = 1; step <= 2; ++step) {
          const StepReport m =
              on_model.Step(GradientSet::Synthetic(real, real.step() + 1, topk), Options(mode));
          const StepReport p = on_null.Step(GradientSet::Planned(plan, topk), Options(mode));
          ExpectSameStep(m, p, ctx + " step " + std::to_string(step));
        }
        EXPECT_EQ(plan.step(), real.step()) << ctx;
        EXPECT_EQ(plan.slot(), real.slot()) << ctx;
      }
    }
  }
}

// The traffic of one step from docs/runtime.md, computed from the store's subgroups alone.
struct Traffic {
  uint64_t S = 0, G = 0, L = 0, K = 0, V = 0;
};

Traffic Formulas(const Store& s, double topk) {
  const StoreConfig& c = s.config();
  Traffic t;
  t.V = s.vars().size();
  const uint64_t eb = DTypeBytes(c.grad);
  for (const Subgroup& g : s.AllSubgroups()) {
    t.S += (4ull * g.n + 4095) / 4096 * 4096;
    if (topk > 0) {
      t.G += 4ull * (hls::NumBlocks(g.n) + 1) + uint64_t{TopKCount(g.n, topk)} * (2 + eb);
    }
    ++t.K;
  }
  if (topk == 0) t.G = c.params * eb;
  t.L = c.out != DType::kFp32 ? c.params * 2 : 0;
  return t;
}

void ExpectFormulas(const StepReport& r, const Traffic& t, UpdateMode mode,
                    const std::string& ctx) {
  if (mode == UpdateMode::kSmart) {
    EXPECT_EQ(r.bytes[Link::kSsdToFpga], t.V * t.S) << ctx;
    EXPECT_EQ(r.bytes[Link::kFpgaToSsd], t.V * t.S) << ctx;
    EXPECT_EQ(r.bytes[Link::kHostToDevice], t.G) << ctx;
    EXPECT_EQ(r.bytes[Link::kDeviceToHost], t.L + 64 * t.K) << ctx;
    EXPECT_EQ(r.bytes[Link::kNvmeToHost], 0u) << ctx;
    EXPECT_EQ(r.bytes[Link::kHostToNvme], 0u) << ctx;
  } else {
    EXPECT_EQ(r.bytes[Link::kSsdToFpga], 0u) << ctx;
    EXPECT_EQ(r.bytes[Link::kFpgaToSsd], 0u) << ctx;
    EXPECT_EQ(r.bytes[Link::kHostToDevice], 0u) << ctx;
    EXPECT_EQ(r.bytes[Link::kDeviceToHost], 0u) << ctx;
    EXPECT_EQ(r.bytes[Link::kNvmeToHost], t.V * t.S) << ctx;
    EXPECT_EQ(r.bytes[Link::kHostToNvme], t.V * t.S) << ctx;
  }
  EXPECT_EQ(r.subgroups, t.K) << ctx;
}

// (b) A planned step's byte counters equal the traffic formulas, for a model no test could
// hold on disk (2e9 parameters on 8 devices, AdamW).
TEST(NullDevice, ByteCountersEqualTrafficFormulas) {
  const StoreConfig cfg =
      Config(Optimizer::kAdamW, 2000000011, 8, 4u << 20, DType::kFp16, DType::kFp16);
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    for (double topk : {0.0, 0.01}) {
      const std::string ctx = std::string(UpdateModeName(mode)) + " topk " + std::to_string(topk);
      Store plan = Store::Plan(cfg);
      DeviceSet null(Spec(Backend::kNull, cfg.devices));
      Scheduler sched(plan, null);
      const GradientSet g = GradientSet::Planned(plan, topk);
      const Traffic t = Formulas(plan, topk);
      EXPECT_EQ(g.TransferBytes(), t.G) << ctx;
      const StepReport r = sched.Step(g, Options(mode));
      ExpectFormulas(r, t, mode, ctx);
      EXPECT_GT(r.virtual_seconds, 0.0) << ctx;
      // The shared link of SmartUpdate carries 1M + 1M (plus status words) dense, the
      // baseline's 6M + 6M (AdamW: three fp32 variables through the host), M = 2P.
      if (topk == 0 && mode == UpdateMode::kSmart) {
        EXPECT_EQ(r.bytes.Shared(), 2 * cfg.params * 2 + 64 * t.K) << ctx;
      }
    }
  }
}

// (c) A plan is the same on every run: fresh stores and devices, two steps each, identical
// reports (virtual seconds to the last bit).
TEST(NullDevice, PlansAreDeterministic) {
  const StoreConfig cfg =
      Config(Optimizer::kAdamW, 300000007, 6, 1u << 20, DType::kFp16, DType::kFp16);
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    for (double topk : {0.0, 0.02}) {
      std::vector<std::string> runs;
      for (int run = 0; run < 3; ++run) {
        Store plan = Store::Plan(cfg);
        DeviceSet null(Spec(Backend::kNull, cfg.devices));
        Scheduler sched(plan, null);
        std::string all;
        for (int step = 0; step < 2; ++step) {
          all += Reproducible(sched.Step(GradientSet::Planned(plan, topk), Options(mode))) + "\n";
        }
        runs.push_back(all);
      }
      EXPECT_EQ(runs[1], runs[0]) << UpdateModeName(mode) << " topk " << topk;
      EXPECT_EQ(runs[2], runs[0]) << UpdateModeName(mode) << " topk " << topk;
    }
  }
}

uint64_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

// (d) The scale the planner is for: a 33e9-parameter model (AdamW, fp16 gradients and copy) on
// 10 devices with the sizing policy's subgroups, SmartUpdate dense and Top-K and the baseline,
// in bounded memory (the process's peak RSS, whatever ran before in it). Nothing here asserts
// on time.
TEST(NullDevice, ThirtyThreeBillionParametersOnTenDevicesInBoundedMemory) {
  StoreConfig cfg = Config(Optimizer::kAdamW, 33000000000ull, 10, 0, DType::kFp16, DType::kFp16);
  // What `csdkit init` picks: the size that fits 4 GiB, capped at 4 Mi elements.
  cfg.subgroup_elems = DefaultSubgroup(uint64_t{4} << 30, cfg.hyper, cfg.grad, cfg.out,
                                       (cfg.params + cfg.devices - 1) / cfg.devices);
  Store plan = Store::Plan(cfg);
  DeviceSpec spec = Spec(Backend::kNull, cfg.devices);
  spec.device_mem = uint64_t{4} << 30;
  DeviceSet null(spec);
  Scheduler sched(plan, null);
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    for (double topk : {0.0, 0.01}) {
      const std::string ctx = std::string(UpdateModeName(mode)) + " topk " + std::to_string(topk);
      const Traffic t = Formulas(plan, topk);
      const StepReport r = sched.Step(GradientSet::Planned(plan, topk), Options(mode));
      ExpectFormulas(r, t, mode, ctx);
      EXPECT_GT(r.virtual_seconds, 0.0) << ctx;
      std::printf("33e9 params, 10 devices, %s: %llu subgroups, %.3f virtual s, %.3f wall s\n",
                  ctx.c_str(), static_cast<unsigned long long>(r.subgroups), r.virtual_seconds,
                  r.seconds);
    }
  }
  EXPECT_EQ(plan.step(), 4);
  const uint64_t rss = PeakRssBytes();
  std::printf("peak RSS %.1f MiB\n", rss / 1048576.0);
  EXPECT_LT(rss, uint64_t{1} << 30) << "peak RSS " << rss << " bytes";
}

// The CRC of zeros without memory equals the CRC over a zero-filled buffer, at every length
// around the powers of two and at the subgroup sizes a store uses.
TEST(NullDevice, CrcOfZerosMatchesAZeroBuffer) {
  AlignedBuffer zeros(1u << 22);  // zero-filled
  std::vector<uint64_t> lens = {0, 1, 2, 3, 7, 64, 4095, 4096, 4097, 65536 * 4, 12345 * 4,
                                (1u << 22)};
  for (unsigned b = 1; b < 22; ++b) {
    lens.push_back((uint64_t{1} << b) - 1);
    lens.push_back((uint64_t{1} << b) + 1);
  }
  for (uint64_t len : lens) {
    char msg[96];
    std::snprintf(msg, sizeof msg, "len %llu: EXP=0x%08x GOT=0x%08x",
                  static_cast<unsigned long long>(len), Crc32(zeros.data(), len),
                  Crc32OfZeros(len));
    EXPECT_EQ(Crc32OfZeros(len), Crc32(zeros.data(), len)) << msg;
  }
}

// A reserved range costs no memory and is never a copyable buffer.
TEST(NullDevice, ReservedRangesHoldNoBytes) {
  AlignedBuffer r = AlignedBuffer::Reserve(uint64_t{1} << 40);  // 1 TiB of address space
  EXPECT_TRUE(r.reserved());
  EXPECT_GE(r.size(), uint64_t{1} << 40);
  EXPECT_NE(r.data(), nullptr);
  EXPECT_THROW(r.Clone(), std::logic_error);
  AlignedBuffer moved = std::move(r);
  EXPECT_TRUE(moved.reserved());
  EXPECT_FALSE(r.reserved());
}

// The THPeligible flag /proc/self/smaps reports for the mapping that holds p ("" when no
// mapping does or the kernel reports no such flag).
std::string ThpEligible(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool in = false;
  for (std::string line; std::getline(f, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      in = lo <= a && a < hi;
    } else if (in && line.rfind("THPeligible:", 0) == 0) {
      return line.substr(line.find_first_not_of(' ', 12));
    }
  }
  return "";
}

// Buffers of a huge page or more are advised for transparent huge pages unless asked for 4 KiB
// pages (bench kernel --pages 4k), which are advised against them: the kernel's view of each
// mapping says so.
TEST(AlignedBufferPages, TheAdviceFollowsThePageKind) {
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "transparent huge pages are off on this machine ('" << mode << "')";
  }
  AlignedBuffer huge(8u << 20);
  AlignedBuffer small(8u << 20, AlignedBuffer::Pages::kSmall);
  if (ThpEligible(huge.data()).empty()) GTEST_SKIP() << "/proc/self/smaps has no THPeligible";
  EXPECT_EQ(ThpEligible(huge.data()), "1");
  EXPECT_EQ(ThpEligible(small.data()), "0");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.data()) % (2u << 20), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % AlignedBuffer::kAlign, 0u);
  EXPECT_EQ(small.size(), size_t{8} << 20);
}

// The null device checks what a device checks: capacity, ownership, ranges, O_DIRECT alignment
// and a launch's footprint; it counts bytes per link and reads as zeros.
TEST(NullDevice, ChecksLikeADeviceAndCountsBytes) {
  emu::NullOptions o;
  o.capacity = 1 << 20;
  emu::NullDevice dev(o), other(o);
  EXPECT_THROW(dev.Alloc((1 << 20) + 1, BufferRole::kState), CapacityError);
  DeviceBufferPtr b = dev.Alloc(8192, BufferRole::kState);
  EXPECT_EQ(dev.allocated(), 8192u);
  DeviceBufferPtr foreign = other.Alloc(4096, BufferRole::kState);
  aio::File none;
  EXPECT_THROW(dev.P2PRead(none, 0, *b, 0, 4096 * 3), std::out_of_range);
  EXPECT_THROW(dev.P2PRead(none, 100, *b, 0, 4096), std::invalid_argument);
  EXPECT_THROW(dev.P2PWrite(none, 0, *b, 0, 100), std::invalid_argument);
  EXPECT_THROW(dev.HostToDevice(nullptr, *foreign, 0, 16), std::invalid_argument);
  EXPECT_THROW(dev.CopyWithin(*b, 0, *b, 100, 200), std::invalid_argument);
  dev.P2PRead(none, 4096, *b, 0, 8192).Wait();
  dev.P2PWrite(none, 0, *b, 4096, 4096).Wait();
  dev.HostToDevice(nullptr, *b, 10, 100);
  dev.DeviceToHost(*b, 0, nullptr, 64);
  dev.HostRead(none, 0, nullptr, 4096).Wait();
  dev.HostWrite(none, 8192, nullptr, 4096 * 2).Wait();
  const LinkBytes lb = dev.bytes();
  EXPECT_EQ(lb[Link::kSsdToFpga], 8192u);
  EXPECT_EQ(lb[Link::kFpgaToSsd], 4096u);
  EXPECT_EQ(lb[Link::kHostToDevice], 100u);
  EXPECT_EQ(lb[Link::kDeviceToHost], 64u);
  EXPECT_EQ(lb[Link::kNvmeToHost], 4096u);
  EXPECT_EQ(lb[Link::kHostToNvme], 8192u);
  EXPECT_EQ(dev.Crc32(*b, 0, 8192), Crc32OfZeros(8192));
  // A launch whose buffers are smaller than its footprint is refused, as on a card.
  DeviceLaunch l;
  l.theta = l.m = l.v = l.grad = l.out16 = l.status = dev.Alloc(4096, BufferRole::kStream);
  GradSpec gs;
  const KernelLaunch k = MakeLaunch(OptimizerConfig::Defaults(Optimizer::kAdamW), gs, 1);
  l.SetScalars(100000, 0, k);
  EXPECT_THROW(dev.LaunchUpdate(l), std::out_of_range);
  l.SetScalars(512, 0, k);
  uint32_t status[16] = {1, 2, 3};
  EXPECT_EQ(dev.LaunchUpdate(l, status), 0u);
  EXPECT_EQ(status[0], 0u);
  b.reset();
  EXPECT_EQ(dev.allocated(), 4096u);
}

// Each buffer of a launch has one role: the optimizer state is P2P state, the rest streams.
TEST(BufferRoles, LaunchBuffersHaveTheirRoles) {
  std::string roles;
  DeviceLaunch l;
  l.ForEachBuffer([&](const hls::ArgInfo& a, DeviceBufferPtr&) {
    roles += std::string(a.name) + "=" + BufferRoleName(UpdateBufferRole(a)) + " ";
  });
  EXPECT_EQ(roles,
            "theta=state m=state v=state grad=stream sp_idx=stream sp_blk=stream out16=stream "
            "status=stream m_absmax=state v_absmax=state ");
  EXPECT_THROW(UpdateBufferRole(hls::kUpdateArgs[update_arg::n]), std::invalid_argument);
}

// P2P into or out of a stream buffer is refused on the emulated and the null device alike,
// naming the device, the operation and both roles, before anything is counted; host transfers
// and device copies take either role and count as before.
TEST(BufferRoles, StreamBuffersRefuseP2POnEmulatedAndNullDevices) {
  for (Backend backend : {Backend::kModel, Backend::kNull}) {
    SCOPED_TRACE(BackendName(backend));
    DeviceSet set(Spec(backend, 1));
    Device& dev = set[0];
    DeviceBufferPtr stream = dev.Alloc(8192, BufferRole::kStream);
    DeviceBufferPtr state = dev.Alloc(8192, BufferRole::kState);
    aio::File file;
    if (set.moves_data()) file = aio::File::Create(TestDir("roles.bin"));
    const std::string who = dev.Describe();
    for (bool read : {true, false}) {
      try {
        if (read) {
          dev.P2PRead(file, 0, *stream, 0, 4096).Wait();
        } else {
          dev.P2PWrite(file, 0, *stream, 0, 4096).Wait();
        }
        ADD_FAILURE() << "P2P " << (read ? "read into" : "write from") << " a stream buffer "
                      << "was accepted";
      } catch (const std::invalid_argument& e) {
        const std::string m = e.what();
        const std::string op = read ? "P2P read" : "P2P write";
        EXPECT_NE(m.find(op + " on " + who), std::string::npos) << m;
        EXPECT_NE(m.find("expected a state buffer, found a stream buffer"), std::string::npos) << m;
      }
    }
    EXPECT_EQ(dev.bytes()[Link::kSsdToFpga] + dev.bytes()[Link::kFpgaToSsd], 0u);
    // The state buffer takes the same transfers.
    dev.P2PWrite(file, 0, *state, 0, 4096).Wait();
    dev.P2PRead(file, 0, *state, 4096, 4096).Wait();
    std::vector<uint8_t> in(8192), out(8192);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
    dev.HostToDevice(in.data(), *stream, 0, 8192);
    dev.CopyWithin(*stream, 100, *state, 200, 5000);
    dev.CopyWithin(*state, 200, *stream, 3000, 5000);
    dev.DeviceToHost(*stream, 0, out.data(), 8192);
    if (set.moves_data()) {
      std::vector<uint8_t> exp = in;
      std::memcpy(exp.data() + 3000, in.data() + 100, 5000);
      EXPECT_EQ(out, exp);
    }
    const LinkBytes b = dev.bytes();
    EXPECT_EQ(b[Link::kSsdToFpga], 4096u);
    EXPECT_EQ(b[Link::kFpgaToSsd], 4096u);
    EXPECT_EQ(b[Link::kHostToDevice], 8192u);
    EXPECT_EQ(b[Link::kDeviceToHost], 8192u);
  }
}

// Null devices and planning stores go together; everything else is refused with what was
// expected.
TEST(NullDevice, PlanningStoresAndNullDevicesGoTogether) {
  const StoreConfig cfg =
      Config(Optimizer::kAdamW, 4 * 65536, 2, 65536, DType::kFp16, DType::kFp16);
  Store plan = Store::Plan(cfg);
  EXPECT_TRUE(plan.planning());
  EXPECT_THROW(plan.Verify(), std::logic_error);
  DeviceSet emulated(Spec(Backend::kModel, 2));
  EXPECT_THROW({ Scheduler s(plan, emulated); }, std::invalid_argument);
  Store real = Store::Create(TestDir("together/real"), cfg);
  DeviceSet null(Spec(Backend::kNull, 2));
  EXPECT_THROW({ Scheduler s(real, null); }, std::invalid_argument);
  // A planned gradient never reaches devices that would read it.
  Scheduler on_model(real, emulated);
  EXPECT_THROW(on_model.Step(GradientSet::Planned(real, 0.0), Options(UpdateMode::kSmart)),
               std::invalid_argument);
  EXPECT_EQ(real.step(), 0);
  // A planning copy of a real store plans its next step and leaves it alone.
  Store copy = real.PlanCopy();
  Scheduler on_null(copy, null);
  const StepReport r = on_null.Step(GradientSet::Planned(copy, 0.0), Options(UpdateMode::kSmart));
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(copy.step(), 1);
  EXPECT_EQ(real.step(), 0);
  EXPECT_EQ(testing::CommittedStep(real.dir()), 0);
  EXPECT_EQ(ParseBackend("null"), Backend::kNull);
  EXPECT_STREQ(BackendName(Backend::kNull), "null");
}

}  // namespace
}  // namespace csdkit
