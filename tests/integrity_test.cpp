// Integrity of a step from the kernel's status word (issue 14): the state a launch reads is
// checked against the manifest by the kernel's input CRC lanes, the manifest's new checksums
// are its output CRC lanes, and the divergence guard refuses a step that would store NaN or
// infinity. Each refusal leaves the store byte for byte as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "test_dir.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;
using testing::CommittedStep;
using testing::TestDir;

StoreConfig Config(uint64_t params, unsigned devices) {
  StoreConfig c;
  c.params = params;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(Optimizer::kAdamW);
  c.grad = DType::kFp16;
  c.out = DType::kFp16;
  c.loss_scale = 256.0;
  c.subgroup_elems = 65536;
  c.seed = 11;
  return c;
}

// The files of a store that a refused step must leave alone: all but the state files of the
// slot that is not committed (a refused step may have written some of its subgroups there; they
// are not committed and the next step rewrites them).
bool Kept(const Store& s, const std::string& path) {
  return path.find("." + std::to_string(1 - s.slot()) + ".bin") == std::string::npos;
}

// Every file of the store, by path, with its bytes.
std::vector<std::pair<std::string, std::string>> Snapshot(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> r;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    r.emplace_back(e.path().string(), std::string((std::istreambuf_iterator<char>(f)), {}));
  }
  std::sort(r.begin(), r.end());
  return r;
}

// One device of the set as the scheduler sees it, with a fault: before the launch (or, on the
// baseline's path, after a host read completes) one bit of one state variable flips, as a
// memory error or a stray write on the card would flip it.
class FlippingDevice final : public Device {
 public:
  FlippingDevice(Device& inner, std::string var, uint64_t element, unsigned bit)
      : in_(inner), var_(std::move(var)), element_(element), bit_(bit) {}
  std::atomic<bool> armed{true};  // the devices' workers launch from two threads

  std::string Describe() const override { return in_.Describe(); }
  uint64_t capacity() const override { return in_.capacity(); }
  uint64_t allocated() const override { return in_.allocated(); }
  DeviceBufferPtr Alloc(uint64_t bytes, BufferRole role) override { return in_.Alloc(bytes, role); }
  aio::IoTicket P2PRead(const aio::File& f, uint64_t off, DeviceBuffer& dst, uint64_t dst_off,
                        uint64_t len, VirtualClock* vc) override {
    return in_.P2PRead(f, off, dst, dst_off, len, vc);
  }
  aio::IoTicket P2PWrite(const aio::File& f, uint64_t off, const DeviceBuffer& src,
                         uint64_t src_off, uint64_t len, VirtualClock* vc) override {
    return in_.P2PWrite(f, off, src, src_off, len, vc);
  }
  void HostToDevice(const void* src, DeviceBuffer& dst, uint64_t off, uint64_t len,
                    VirtualClock* vc) override {
    in_.HostToDevice(src, dst, off, len, vc);
  }
  void DeviceToHost(const DeviceBuffer& src, uint64_t off, void* dst, uint64_t len,
                    VirtualClock* vc) override {
    in_.DeviceToHost(src, off, dst, len, vc);
  }
  aio::IoTicket HostRead(const aio::File& f, uint64_t off, void* dst, uint64_t len,
                         VirtualClock* vc) override {
    aio::IoTicket t = in_.HostRead(f, off, dst, len, vc);
    // The baseline reads each variable's subgroup into a host buffer: flip the bit there once
    // the read of the chosen variable's first subgroup has landed.
    if (f.path().find("/" + var_ + ".") != std::string::npos && off == 0 && armed.exchange(false)) {
      std::vector<uint64_t> got = t.Wait();
      static_cast<uint8_t*>(dst)[element_ * 4 + bit_ / 8] ^= uint8_t(1u << (bit_ % 8));
      ++flips;
      return aio::IoTicket::Completed(std::move(got));
    }
    return t;
  }
  aio::IoTicket HostWrite(const aio::File& f, uint64_t off, const void* src, uint64_t len,
                          VirtualClock* vc) override {
    return in_.HostWrite(f, off, src, len, vc);
  }
  uint32_t LaunchUpdate(const DeviceLaunch& l, uint32_t* status16, VirtualClock* vc) override {
    if (armed.exchange(false)) {
      const DeviceBufferPtr& b = var_ == "theta" ? l.theta : var_ == "m" ? l.m : l.v;
      uint32_t w = 0;
      in_.DeviceToHost(*b, element_ * 4, &w, 4, nullptr);
      w ^= 1u << bit_;
      in_.HostToDevice(&w, *b, element_ * 4, 4, nullptr);
      ++flips;
    }
    return in_.LaunchUpdate(l, status16, vc);
  }
  uint32_t Crc32(const DeviceBuffer& b, uint64_t off, uint64_t len) override {
    return in_.Crc32(b, off, len);
  }
  void CopyWithin(const DeviceBuffer& src, uint64_t so, DeviceBuffer& dst, uint64_t doff,
                  uint64_t len) override {
    in_.CopyWithin(src, so, dst, doff, len);
  }
  LinkBytes bytes() const override { return in_.bytes(); }
  std::atomic<int> flips{0};

 private:
  Device& in_;
  std::string var_;
  uint64_t element_;
  unsigned bit_;
};

// The device set with device `k` replaced by a FlippingDevice.
class FaultyGroup final : public DeviceGroup {
 public:
  FaultyGroup(DeviceSet& set, unsigned k, std::unique_ptr<FlippingDevice> f)
      : set_(set), k_(k), f_(std::move(f)) {}
  unsigned size() const override { return set_.size(); }
  Device& device(unsigned k) const override { return k == k_ ? *f_ : set_.device(k); }
  bool has_link_model() const override { return set_.has_link_model(); }
  bool moves_data() const override { return set_.moves_data(); }
  double VirtualHorizon() const override { return set_.VirtualHorizon(); }
  void ResetVirtualTime() override { set_.ResetVirtualTime(); }
  void BookHostCompute(uint64_t bytes, VirtualClock* vc) override {
    set_.BookHostCompute(bytes, vc);
  }
  FlippingDevice& faulty() { return *f_; }

 private:
  DeviceSet& set_;
  unsigned k_;
  std::unique_ptr<FlippingDevice> f_;
};

DeviceSpec Spec(const Store& s) {
  DeviceSpec d;
  d.count = s.config().devices;
  d.device_mem = uint64_t{1} << 30;
  return d;
}

StepReport OneStep(Store& s, Scheduler& rt, UpdateMode mode, double clip = 1.0,
                   bool allow = false) {
  StepOptions o;
  o.mode = mode;
  o.host_threads = 2;
  o.clip_coef = clip;
  o.allow_nonfinite = allow;
  return rt.Step(GradientSet::Synthetic(s, s.step() + 1, 0.0), o);
}

// A bit flipped in device memory between the load and the launch (smart), or in host memory
// between the read and the host's update (baseline), is caught by the kernel's input CRC: the
// step fails naming the file and subgroup, nothing is committed, and the next step (no fault)
// runs from the intact store.
TEST(Integrity, BitFlipBetweenLoadAndLaunchIsRefusedAndTheStoreKept) {
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    for (const std::string var : {"theta", "m", "v"}) {
      const std::string ctx = std::string(UpdateModeName(mode)) + " " + var;
      const std::string dir = TestDir(std::string("flip-") + UpdateModeName(mode) + "-" + var);
      Store s = Store::Create(dir, Config(300000, 2));
      DeviceSet set(Spec(s));
      {
        Scheduler warm(s, set);
        OneStep(s, warm, mode);  // m and v are non-zero from here on
      }
      const auto before = Snapshot(dir);
      FaultyGroup group(set, 1, std::make_unique<FlippingDevice>(set.device(1), var, 12345, 17));
      Scheduler rt(s, group);
      try {
        OneStep(s, rt, mode);
        ADD_FAILURE() << ctx << ": a step over a flipped state bit was committed";
      } catch (const StoreError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("is corrupt"), std::string::npos) << ctx << ": " << msg;
        EXPECT_NE(msg.find("dev1/" + var + "."), std::string::npos) << ctx << ": " << msg;
        // (the baseline's flip is in subgroup 0; the smart one in the first launch on device 1)
        const bool sg0 = msg.find(" subgroup 0:") != std::string::npos;
        EXPECT_TRUE(mode == UpdateMode::kSmart || sg0) << ctx << ": " << msg;
        EXPECT_NE(msg.find("nothing was committed"), std::string::npos) << ctx << ": " << msg;
      }
      EXPECT_EQ(group.faulty().flips, 1) << ctx;
      EXPECT_EQ(s.step(), 1) << ctx;
      EXPECT_EQ(CommittedStep(dir), 1) << ctx;
      // The committed slot and the manifest are untouched.
      const auto after = Snapshot(dir);
      ASSERT_EQ(before.size(), after.size()) << ctx;
      for (size_t i = 0; i < before.size(); ++i) {
        if (Kept(s, before[i].first)) {
          EXPECT_TRUE(before[i] == after[i]) << ctx << ": " << before[i].first << " changed";
        }
      }
      s.Verify();
      EXPECT_EQ(OneStep(s, rt, mode).step, 2) << ctx;  // the fault fired once; now clean
      s.Verify();
    }
  }
}

// The manifest's checksums after a step are the kernel's output CRC lanes: they equal a host
// CRC of what was written (Verify reads every subgroup back), in both modes.
TEST(Integrity, CommittedChecksumsAreTheKernelsOutputCrcs) {
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    Store s = Store::Create(TestDir(std::string("crc-") + UpdateModeName(mode)),
                            Config(400000, 3));
    DeviceSet set(Spec(s));
    Scheduler rt(s, set);
    for (int i = 0; i < 3; ++i) OneStep(s, rt, mode);
    EXPECT_NO_THROW(s.Verify()) << UpdateModeName(mode);
  }
}

// A step whose outputs overflow binary32 (finite gradients and a finite clip coefficient whose
// product is not) is refused by the divergence guard, naming the device, subgroup and first
// element, and the store keeps its previous step; allowed, it commits, and the element named is
// the first non-finite one of that subgroup in the committed state.
TEST(Integrity, OverflowingStepIsRefusedNamingTheFirstElement) {
  const std::string dir = TestDir("diverge");
  Store s = Store::Create(dir, Config(300000, 2));
  DeviceSet set(Spec(s));
  Scheduler rt(s, set);
  OneStep(s, rt, UpdateMode::kSmart);
  const auto before = Snapshot(dir);
  std::string named;
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    try {
      OneStep(s, rt, mode, 1e39);
      ADD_FAILURE() << UpdateModeName(mode) << ": an overflowing step was committed";
    } catch (const DivergenceError& e) {
      named = e.what();
      EXPECT_NE(named.find("non-finite"), std::string::npos) << named;
      EXPECT_NE(named.find("store keeps step 1"), std::string::npos) << named;
      EXPECT_NE(named.find("allow_nonfinite"), std::string::npos) << named;
    }
    EXPECT_EQ(CommittedStep(dir), 1);
    const auto after = Snapshot(dir);
    for (size_t i = 0; i < before.size(); ++i) {
      if (Kept(s, before[i].first)) {
        EXPECT_TRUE(before[i] == after[i]) << before[i].first << " changed";
      }
    }
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(named, m,
                                std::regex("device ([0-9]+) subgroup ([0-9]+).*first at "
                                           "subgroup element ([0-9]+), parameter ([0-9]+)")))
      << named;
  const unsigned d = std::stoul(m[1]), sgi = std::stoul(m[2]);
  const uint64_t pos = std::stoull(m[3]), param = std::stoull(m[4]);
  const Subgroup sg = s.Subgroups(d).at(sgi);
  EXPECT_EQ(param, s.shards()[d].begin + sg.begin + pos);

  const StepReport r = OneStep(s, rt, UpdateMode::kSmart, 1e39, /*allow=*/true);
  EXPECT_EQ(r.step, 2);
  EXPECT_GT(r.nonfinite_values, 0u);
  EXPECT_EQ(CommittedStep(dir), 2);
  // The committed state: count the non-finite words over all subgroups, and find the first
  // one of the named subgroup.
  uint64_t total = 0, first = UINT64_MAX;
  for (unsigned dev = 0; dev < s.config().devices; ++dev) {
    for (unsigned v = 0; v < s.vars().size(); ++v) {
      std::ifstream f(s.FilePath(dev, v, s.slot()), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(f)), {});
      for (const Subgroup& g : s.Subgroups(dev)) {
        for (uint32_t i = 0; i < g.n; ++i) {
          uint32_t w;
          std::memcpy(&w, bytes.data() + g.file_offset() + 4ull * i, 4);
          if ((w & 0x7f800000u) != 0x7f800000u) continue;
          ++total;
          if (dev == d && g.index == sgi && i < first) first = i;
        }
      }
    }
  }
  EXPECT_EQ(total, r.nonfinite_values);
  EXPECT_EQ(first, pos) << named;
}

}  // namespace
}  // namespace csdkit
