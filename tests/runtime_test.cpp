// The runtime: SmartUpdate and the baseline give bit-identical state; byte counters equal the
// traffic formulas; overflow changes nothing; broken stores are refused with a clear message;
// device memory is enforced; a step killed at any instant leaves step t or t+1, and the next
// step from there matches an uninterrupted run bit for bit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "test_dir.h"
#include "csdkit/aio/fault_injection.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;

using testing::TestDir;

// Emulated SmartSSDs with the link model (the device set) and a scheduler on them.
DeviceSpec Devices(const Store& s, uint64_t mem) {
  DeviceSpec d;
  d.count = s.config().devices;
  d.device_mem = mem;
  return d;
}

struct System {
  DeviceSet devices;
  std::unique_ptr<Scheduler> rt;
  System(Store& s, uint64_t mem = uint64_t{1} << 30) : devices(Devices(s, mem)) {
    rt = std::make_unique<Scheduler>(s, devices);
  }
};

StoreConfig Config(Optimizer opt, uint64_t params, unsigned devices, uint32_t subgroup,
                   DType grad = DType::kFp16, DType out = DType::kFp16) {
  StoreConfig c;
  c.params = params;
  c.devices = devices;
  c.hyper = OptimizerConfig::Defaults(opt);
  if (opt == Optimizer::kAdagrad) c.hyper.initial_accumulator_value = 0.1;
  c.grad = grad;
  c.out = out;
  c.loss_scale = grad == DType::kFp16 ? 256.0 : 1.0;
  c.subgroup_elems = subgroup;
  c.seed = 7;
  return c;
}

StepReport RunSteps(Store& s, System& sys, UpdateMode mode, int steps, double topk) {
  StepReport last;
  for (int i = 0; i < steps; ++i) {
    const GradientSet g = GradientSet::Synthetic(s, s.step() + 1, topk);
    StepOptions o;
    o.mode = mode;
    o.host_threads = 2;
    last = sys.rt->Step(g, o);
  }
  return last;
}

// Compares the committed slots of two stores byte for byte, file by file.
void ExpectSameState(const Store& a, const Store& b, const std::string& ctx) {
  ASSERT_EQ(a.step(), b.step()) << ctx;
  for (unsigned d = 0; d < a.config().devices; ++d) {
    for (unsigned v = 0; v < a.vars().size(); ++v) {
      std::ifstream fa(a.FilePath(d, v, a.slot()), std::ios::binary);
      std::ifstream fb(b.FilePath(d, v, b.slot()), std::ios::binary);
      const std::string sa((std::istreambuf_iterator<char>(fa)), {});
      const std::string sb((std::istreambuf_iterator<char>(fb)), {});
      ASSERT_EQ(sa.size(), sb.size()) << ctx;
      if (sa != sb) {
        size_t i = 0;
        while (sa[i] == sb[i]) ++i;
        char msg[128];
        uint32_t ea = 0, eb = 0;
        std::memcpy(&ea, sa.data() + i / 4 * 4, 4);
        std::memcpy(&eb, sb.data() + i / 4 * 4, 4);
        std::snprintf(msg, sizeof msg, "device %u %s element %zu: EXP=0x%08x GOT=0x%08x", d,
                      a.vars()[v].c_str(), i / 4, ea, eb);
        FAIL() << ctx << ": " << msg;
      }
      for (uint32_t j = 0; j < a.Subgroups(d).size(); ++j) {
        ASSERT_EQ(a.checksum(d, v, j), b.checksum(d, v, j)) << ctx;
      }
    }
  }
}

struct EquivCase {
  Optimizer opt;
  unsigned devices;
  uint64_t params;
  uint32_t subgroup;
  double topk;
  DType grad, out;
};

TEST(Runtime, SmartEqualsBaselineBitForBit) {
  const EquivCase cases[] = {
      {Optimizer::kAdamW, 1, 65536 * 2, 65536, 0.0, DType::kFp16, DType::kFp16},  // divides
      {Optimizer::kAdamW, 3, 400003, 65536, 0.0, DType::kFp16, DType::kFp16},     // does not
      {Optimizer::kAdam, 8, 1000001, 131072, 0.0, DType::kBf16, DType::kBf16},
      {Optimizer::kSgd, 2, 300007, 65536, 0.05, DType::kFp32, DType::kFp32},      // sparse
      {Optimizer::kAdagrad, 5, 777777, 65536, 0.01, DType::kFp16, DType::kBf16},
      {Optimizer::kLion, 4, 262147, 196608, 0.0, DType::kFp32, DType::kFp16},
      {Optimizer::kAdamW, 2, 200001, 65536, 0.1, DType::kBf16, DType::kFp16},     // sparse
  };
  int i = 0;
  for (const EquivCase& c : cases) {
    const std::string ctx = std::string("case ") + std::to_string(i) + " " +
                            OptimizerName(c.opt) + " devices=" + std::to_string(c.devices) +
                            " params=" + std::to_string(c.params) +
                            " topk=" + std::to_string(c.topk);
    const StoreConfig cfg = Config(c.opt, c.params, c.devices, c.subgroup, c.grad, c.out);
    Store a = Store::Create(TestDir("equiv/a" + std::to_string(i)), cfg);
    Store b = Store::Create(TestDir("equiv/b" + std::to_string(i)), cfg);
    System sa(a), sb(b);
    ASSERT_NO_THROW(RunSteps(a, sa, UpdateMode::kSmart, 3, c.topk)) << ctx;
    ASSERT_NO_THROW(RunSteps(b, sb, UpdateMode::kBaseline, 3, c.topk)) << ctx;
    ExpectSameState(a, b, ctx);
    if (cfg.out != DType::kFp32) {
      EXPECT_TRUE(sa.rt->weights16().SameBytes(sb.rt->weights16())) << ctx << ": weights16";
    }
    a.Verify();
    b.Verify();
    ++i;
  }
}

// Bytes per step, exactly (docs/runtime.md): V state variables, io(n) = 4n rounded up to 4096.
TEST(Runtime, ByteCountersEqualTrafficFormulas) {
  for (double topk : {0.0, 0.02}) {
    const StoreConfig cfg = Config(Optimizer::kAdamW, 500001, 3, 65536);
    Store s = Store::Create(TestDir("bytes/s" + std::to_string(topk > 0)), cfg);
    System sys(s);
    uint64_t io = 0;
    for (const Subgroup& g : s.AllSubgroups()) io += g.io_bytes();
    const uint64_t V = s.vars().size(), sgs = s.AllSubgroups().size();
    const GradientSet g1 = GradientSet::Synthetic(s, 1, topk);
    StepOptions o;
    const StepReport smart = sys.rt->Step(g1, o);
    EXPECT_EQ(smart.bytes[Link::kSsdToFpga], V * io);
    EXPECT_EQ(smart.bytes[Link::kFpgaToSsd], V * io);
    EXPECT_EQ(smart.bytes[Link::kHostToDevice], g1.TransferBytes());
    if (topk == 0.0) {
      EXPECT_EQ(g1.TransferBytes(), cfg.params * 2);
    }
    EXPECT_EQ(smart.bytes[Link::kDeviceToHost], cfg.params * 2 + 64 * sgs);
    EXPECT_EQ(smart.bytes[Link::kNvmeToHost] + smart.bytes[Link::kHostToNvme], 0u);
    o.mode = UpdateMode::kBaseline;
    const StepReport base = sys.rt->Step(GradientSet::Synthetic(s, 2, topk), o);
    EXPECT_EQ(base.bytes[Link::kNvmeToHost], V * io);
    EXPECT_EQ(base.bytes[Link::kHostToNvme], V * io);
    EXPECT_EQ(base.bytes[Link::kSsdToFpga] + base.bytes[Link::kFpgaToSsd] +
                  base.bytes[Link::kHostToDevice] + base.bytes[Link::kDeviceToHost],
              0u);
    EXPECT_GT(smart.virtual_seconds, 0.0);
    EXPECT_GT(base.virtual_seconds, 0.0);
  }
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

TEST(Runtime, OverflowStepChangesNothingOnDisk) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 200000, 2, 65536);
  Store s = Store::Create(TestDir("overflow"), cfg);
  System sys(s);
  RunSteps(s, sys, UpdateMode::kSmart, 1, 0.0);
  std::vector<std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(s.dir()))
    if (e.is_regular_file()) before.push_back(ReadAll(e.path()));
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    for (double topk : {0.0, 0.01}) {
      const GradientSet g = GradientSet::Synthetic(s, 2, topk, /*poison=*/123457);
      StepOptions o;
      o.mode = mode;
      const StepReport r = sys.rt->Step(g, o);
      EXPECT_TRUE(r.skipped);
      EXPECT_NE(r.skip_reason.find("non-finite"), std::string::npos) << r.skip_reason;
      EXPECT_EQ(r.bytes.Shared() + r.bytes[Link::kSsdToFpga] + r.bytes[Link::kFpgaToSsd], 0u);
    }
  }
  EXPECT_EQ(s.step(), 1);
  std::vector<std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(s.dir()))
    if (e.is_regular_file()) after.push_back(ReadAll(e.path()));
  EXPECT_TRUE(before == after) << "an overflowing step changed bytes on disk";
}

void ExpectStoreError(const std::string& dir, const std::string& must_contain) {
  try {
    Store s = Store::Open(dir);
    s.Verify();
    ADD_FAILURE() << "store accepted; expected an error containing '" << must_contain << "'";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(must_contain), std::string::npos) << e.what();
  }
}

TEST(Runtime, BrokenStoresAreRefusedWithClearErrors) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 150000, 2, 65536);
  auto fresh = [&](const std::string& n) {
    Store::Create(TestDir("broken/" + n), cfg);
    return std::string(CSDKIT_TEST_DIR) + "/broken/" + n;
  };
  ExpectStoreError(std::string(CSDKIT_TEST_DIR) + "/broken/none", "expected a directory");
  std::string d = fresh("nomanifest");
  fs::remove(d + "/manifest.json");
  ExpectStoreError(d, "manifest.json");
  d = fresh("badjson");
  std::ofstream(d + "/manifest.json") << "{ not json";
  ExpectStoreError(d, "expected JSON, found invalid JSON");
  // The manifest proves itself: any edit of a value (here lr, and the seed by one digit) or a
  // format from before the checksum is refused, naming the checksum.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"lr\": 0.001", "\"lr\": 0.002"}, {"\"seed\": 7", "\"seed\": 8"},
           {"\"committed_step\": 0", "\"committed_step\": 1"}}) {
    d = fresh("edited");
    std::ifstream in(d + "/manifest.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << text;
    text.replace(at, from.size(), to);
    std::ofstream(d + "/manifest.json", std::ios::trunc) << text;
    ExpectStoreError(d, "expected manifest_crc");
  }
  // A lost or cut file of the slot that is not committed is made again by a writer (a reader
  // does not need it): the committed state stays usable.
  d = fresh("lost_uncommitted");
  fs::remove(d + "/dev1/m.1.bin");
  fs::resize_file(d + "/dev0/v.1.bin", 100);
  {
    Store r = Store::Open(d, StoreAccess::kRead);
    r.Verify();
  }
  {
    Store w = Store::Open(d);
    System sys(w);
    RunSteps(w, sys, UpdateMode::kSmart, 1, 0.0);
    EXPECT_EQ(w.step(), 1);
  }
  EXPECT_EQ(Store::Open(d, StoreAccess::kRead).step(), 1);
  d = fresh("missingfile");
  fs::remove(d + "/dev1/m.0.bin");
  ExpectStoreError(d, "dev1/m.0.bin");
  d = fresh("truncated");
  fs::resize_file(d + "/dev0/v.0.bin", 4096);
  ExpectStoreError(d, "truncated: expected");
  d = fresh("swapped");
  {
    const std::string other = fresh("other");
    fs::copy_file(other + "/dev1/device.json", d + "/dev1/device.json",
                  fs::copy_options::overwrite_existing);
  }
  ExpectStoreError(d, "expected device 1 of store");
  d = fresh("corrupt");
  {
    std::fstream f(d + "/dev1/theta.0.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(70000 * 4 + 2);
    f.put('\x5a');
  }
  ExpectStoreError(d, "is corrupt");
  // A step on a corrupt store stops before committing anything.
  Store s = Store::Open(d);
  System sys(s);
  for (UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    StepOptions o;
    o.mode = mode;
    EXPECT_THROW(sys.rt->Step(GradientSet::Synthetic(s, 1, 0.0), o), StoreError);
    EXPECT_EQ(testing::CommittedStep(d), 0);
  }
}

// Edits that keep the manifest's checksum right (a tool that rewrites it, or a bug of our own)
// still meet the same range and type checks as `csdkit init`'s input: integers must be
// integers in range, hyper-parameters finite as binary32, one CRC-32 per subgroup.
TEST(Runtime, ManifestFieldsAreCheckedEvenUnderAValidChecksum) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 150000, 2, 65536);
  const std::string d = TestDir("manifest_fields");
  Store::Create(d, cfg);
  nlohmann::json good;
  std::ifstream(d + "/manifest.json") >> good;
  EXPECT_EQ(Store::FromManifest(good, "m").step(), 0);
  using J = nlohmann::json;
  const std::vector<std::pair<std::function<void(J&)>, std::string>> edits = {
      {[](J& j) { j["config"]["devices"] = 2.7; }, "field 'devices': expected an integer"},
      {[](J& j) { j["config"]["devices"] = 0; }, "field 'devices': expected an integer in [1, 256]"},
      {[](J& j) { j["config"]["params"] = 2000000.5; }, "field 'params'"},
      {[](J& j) { j["config"]["params"] = -1; }, "field 'params'"},
      {[](J& j) { j["config"]["params"] = uint64_t{1} << 50; }, "[1, 1099511627776]"},
      {[](J& j) { j["config"]["params"] = "150000"; }, "field 'params'"},
      {[](J& j) { j["config"]["seed"] = -7; }, "field 'seed'"},
      {[](J& j) { j["config"]["subgroup_elems"] = 65537; }, "multiple of 65536"},
      {[](J& j) { j["config"]["hyper"]["lr"] = 1e39; }, "lr: expected a value finite as binary32"},
      {[](J& j) { j["config"]["hyper"]["beta2"] = 1.5; }, "beta2"},
      {[](J& j) { j["config"]["loss_scale"] = 1e-39; }, "loss scale"},
      {[](J& j) { j["config"]["grad"] = "fp8"; }, "fp8"},
      {[](J& j) { j["committed_step"] = -3; }, "field 'committed_step'"},
      {[](J& j) { j["committed_step"] = 1.5; }, "field 'committed_step'"},
      {[](J& j) { j["slot"] = 2; }, "field 'slot': expected an integer in [0, 1]"},
      {[](J& j) { j["shards"][1]["begin"] = 75000.0; }, "field 'begin'"},
      {[](J& j) { j["checksums"][0]["m"][0] = uint64_t{1} << 32; }, "expected CRC-32 values"},
      {[](J& j) { j["checksums"][0]["m"][0] = -1; }, "expected CRC-32 values"},
      {[](J& j) { j["checksums"][1]["v"].push_back(0); }, "expected a list of 2 subgroups"},
      {[](J& j) { j["checksums"][1]["v"] = 0; }, "expected a list of 2 subgroups"},
      {[](J& j) { j["vars"] = {"theta", "m"}; }, "state variables"},
      {[](J& j) { j.erase("store_id"); }, "expected a field 'store_id'"},
      {[](J& j) { j = J::array(); }, "expected a JSON object"},
  };
  for (const auto& [edit, expected] : edits) {
    J j = good;
    edit(j);
    if (j.is_object()) j["manifest_crc"] = Store::ManifestCrc(j);
    try {
      Store::FromManifest(j, "m");
      ADD_FAILURE() << "accepted " << j.dump() << "; expected '" << expected << "'";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  // The same check on the store itself (`step`, `info`, `info --verify` open it alike).
  J j = good;
  j["config"]["devices"] = 2.7;
  j["manifest_crc"] = Store::ManifestCrc(j);
  std::ofstream(d + "/manifest.json", std::ios::trunc) << j.dump(2);
  ExpectStoreError(d, "field 'devices': expected an integer");
}

TEST(Runtime, DeviceMemoryIsEnforced) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 1 << 20, 1, 1 << 20);
  Store s = Store::Create(TestDir("capacity"), cfg);
  System sys(s, 8u << 20);  // 8 MiB cannot hold two 1Mi-element subgroups
  try {
    sys.rt->Step(GradientSet::Synthetic(s, 1, 0.0), StepOptions());
    FAIL() << "expected a CapacityError";
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::CommittedStep(s.dir()), 0);
  EXPECT_THROW(SubgroupForMemory(1 << 20, cfg.hyper, cfg.grad, cfg.out, 1 << 20),
               std::invalid_argument);
}

// The commit stage at which the child of KilledAtEachCommitStage kills itself.
const char* g_kill_stage = nullptr;
void KillAt(const char* stage) {
  if (g_kill_stage != nullptr && std::string(stage) == g_kill_stage) raise(SIGKILL);
}

// `init` creates a store only where it overwrites nothing, and a creation that fails removes
// what it made (and only that): a directory it created goes, an empty one it was given stays
// empty. The failure is a file-size limit (RLIMIT_FSIZE) hit while the shards are allocated,
// in a child process.
TEST(Runtime, CreateRefusesNonEmptyDirectoriesAndUndoesFailures) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 1 << 20, 2, 65536);
  const std::string d = TestDir("create/nonempty");
  fs::create_directories(d);
  std::ofstream(d + "/notes.txt") << "a user's file\n";
  try {
    Store::Create(d, cfg);
    ADD_FAILURE() << "created a store in a non-empty directory";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("found 'notes.txt' in it"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  for (const bool given : {false, true}) {
    const std::string f = TestDir(std::string("create/fail_") + (given ? "given" : "made"));
    if (given) fs::create_directories(f);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl {};
      rl.rlim_cur = rl.rlim_max = 1 << 20;  // a shard file of 2 MiB cannot be allocated
      setrlimit(RLIMIT_FSIZE, &rl);
      try {
        Store::Create(f, cfg);
        _exit(0);
      } catch (const std::exception&) {
        _exit(7);
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "status " << status;
    if (given) {
      EXPECT_TRUE(fs::is_directory(f));
      EXPECT_TRUE(fs::is_empty(f)) << "a failed creation left files in " << f;
    } else {
      EXPECT_FALSE(fs::exists(f)) << "a failed creation left " << f;
    }
  }
}

// Once the manifest is renamed the step is committed: a failure after that (here injected at the
// "renamed" stage, standing for a failed directory sync) is a durability warning in the report,
// not an error — the store is at the new step and a retry would step twice.
TEST(Runtime, FailureAfterTheRenameIsAWarningNotAnError) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 150000, 2, 65536);
  const std::string d = TestDir("durability");
  Store s = Store::Create(d, cfg);
  System sys(s);
  Store::commit_hook = [](const char* stage) {
    if (std::string(stage) == "renamed") throw std::runtime_error("injected: fsync of the directory failed");
  };
  StepReport r;
  EXPECT_NO_THROW(r = sys.rt->Step(GradientSet::Synthetic(s, 1, 0.0), StepOptions()));
  Store::commit_hook = nullptr;
  EXPECT_EQ(s.step(), 1);
  EXPECT_EQ(testing::CommittedStep(d), 1);
  EXPECT_NE(r.warning.find("step 1 is committed, but may not survive a power loss: injected"),
            std::string::npos) << r.warning;
  EXPECT_EQ(r.ToJson()["warning"], r.warning);
  EXPECT_FALSE(fs::exists(d + "/manifest.json.tmp"));
  const StepReport next = sys.rt->Step(GradientSet::Synthetic(s, 2, 0.0), StepOptions());
  EXPECT_TRUE(next.warning.empty()) << next.warning;
  EXPECT_EQ(s.step(), 2);
}

// A commit lands only on the manifest its writer opened: one replaced behind the writer's back
// (here: a restore of the step-0 manifest while the writer is at step 1) is refused, nothing
// committed.
TEST(Runtime, CommitRefusesAManifestChangedBehindTheWriter) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 150000, 2, 65536);
  const std::string d = TestDir("stale_manifest");
  Store s = Store::Create(d, cfg);
  fs::copy_file(d + "/manifest.json", d + "/step0.json");
  System sys(s);
  RunSteps(s, sys, UpdateMode::kSmart, 1, 0.0);
  fs::copy_file(d + "/step0.json", d + "/manifest.json", fs::copy_options::overwrite_existing);
  try {
    sys.rt->Step(GradientSet::Synthetic(s, 2, 0.0), StepOptions());
    ADD_FAILURE() << "committed over a manifest changed behind the writer";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("expected its manifest at committed step 1 (slot 1)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::CommittedStep(d), 0);
}

// The fault matrix: every I/O request of one small step (SmartUpdate and the baseline), in
// turn, failed with EIO, failed with ENOSPC, or cut short. The engine continues a short
// transfer, so that step commits; a failed request fails the step with nothing committed. In
// every case the store reopens at step 1 or 2 with valid checksums, and stepping on from there
// ends equal, byte for byte, to the uninterrupted run's step 2.
TEST(Runtime, FaultAtEveryIoRequestOfAStep) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 150000, 2, 65536);
  for (const UpdateMode mode : {UpdateMode::kSmart, UpdateMode::kBaseline}) {
    const std::string tag = mode == UpdateMode::kSmart ? "smart" : "baseline";
    Store ref = Store::Create(TestDir("faults/ref_" + tag), cfg);
    {
      System sys(ref);
      RunSteps(ref, sys, mode, 2, 0.0);
    }
    // Step 1 without faults, then step 2 under `arm`; returns whether step 2 threw, and the
    // requests of step 1 and of step 2 (requests are numbered over the injector's life).
    auto run = [&](const std::string& d,
                   const std::function<void(aio::FaultInjectingKernelAio&)>& arm,
                   uint64_t* step1_requests, uint64_t* step2_requests) {
      Store s = Store::Create(d, cfg);
      auto faults = std::make_shared<aio::FaultInjectingKernelAio>();
      DeviceSpec spec = Devices(s, uint64_t{1} << 30);
      spec.aio_kernel = faults;
      DeviceSet devices(spec);
      Scheduler rt(s, devices);
      StepOptions o;
      o.mode = mode;
      o.host_threads = 2;
      rt.Step(GradientSet::Synthetic(s, 1, 0.0), o);
      const uint64_t before = faults->stats().requests;
      arm(*faults);
      bool threw = false;
      try {
        rt.Step(GradientSet::Synthetic(s, 2, 0.0), o);
      } catch (const std::exception&) {
        threw = true;
      }
      if (step1_requests != nullptr) *step1_requests = before;
      if (step2_requests != nullptr) *step2_requests = faults->stats().requests - before;
      return threw;
    };
    uint64_t base = 0, n = 0;
    ASSERT_FALSE(run(TestDir("faults/count_" + tag), [](aio::FaultInjectingKernelAio&) {}, &base,
                     &n));
    ASSERT_GT(n, 10u) << "a step of this store makes more requests";
    int failed = 0, committed = 0;
    for (uint64_t i = 0; i < n; ++i) {
      for (int kind = 0; kind < 3; ++kind) {
        const std::string d = TestDir("faults/" + tag + "_" + std::to_string(i) + "_" +
                                      std::to_string(kind));
        // Request i of step 2 (the i-th the engines accept; step 1's come first).
        const bool threw = run(d, [&](aio::FaultInjectingKernelAio& f) {
          if (kind == 0) f.FailRequest(base + i, EIO);
          if (kind == 1) f.FailRequest(base + i, ENOSPC);
          if (kind == 2) f.ShortenRequest(base + i, 4096);
        }, nullptr, nullptr);
        Store s = Store::Open(d);
        s.Verify();
        const std::string ctx = tag + " request " + std::to_string(i) + " kind " +
                                std::to_string(kind);
        ASSERT_TRUE(s.step() == 1 || s.step() == 2) << ctx;
        EXPECT_EQ(threw, s.step() == 1) << ctx << ": a failed step must commit nothing";
        (threw ? failed : committed) += 1;
        if (s.step() == 1) {
          System sys(s);
          RunSteps(s, sys, mode, 1, 0.0);
        }
        ExpectSameState(ref, s, ctx);
      }
    }
    std::printf("%s: %llu requests per step x 3 faults: %d steps failed cleanly, %d committed\n",
                tag.c_str(), static_cast<unsigned long long>(n), failed, committed);
    EXPECT_GT(failed, 0);
  }
}

// Deterministic kills inside the commit protocol: after the data is synced, after the new
// manifest is written (not renamed), right after the rename.
TEST(Runtime, KilledAtEachCommitStage) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 300000, 2, 65536);
  const char* stages[] = {"synced", "tmp_written", "renamed"};
  const int64_t expect_step[] = {1, 1, 2};  // after one committed step, killed in the second
  for (int i = 0; i < 3; ++i) {
    const std::string d = TestDir(std::string("crash/stage_") + stages[i]);
    {
      Store s = Store::Create(d, cfg);
      System sys(s);
      RunSteps(s, sys, UpdateMode::kSmart, 1, 0.0);
    }
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      g_kill_stage = stages[i];
      Store::commit_hook = KillAt;
      try {
        Store s = Store::Open(d);
        System sys(s);
        RunSteps(s, sys, UpdateMode::kSmart, 1, 0.0);
      } catch (...) {
      }
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << stages[i];
    Store s = Store::Open(d);
    EXPECT_EQ(s.step(), expect_step[i]) << "killed at " << stages[i];
    s.Verify();
  }
}

// Crash consistency: a child runs steps and is SIGKILLed at a random instant; the store must
// reopen at step t or t+1 with valid checksums, and one more step from there must equal the
// same step of an uninterrupted run.
TEST(Runtime, KilledStepLeavesStepTOrTPlusOne) {
  const StoreConfig cfg = Config(Optimizer::kAdamW, 600000, 2, 65536);
  // Reference: uninterrupted steps 1..3.
  Store ref = Store::Create(TestDir("crash/ref"), cfg);
  std::vector<std::string> ref_state;  // committed files after step t
  {
    System sys(ref);
    for (int t = 1; t <= 3; ++t) RunSteps(ref, sys, t % 2 ? UpdateMode::kSmart : UpdateMode::kBaseline, 1, 0.0);
  }
  std::mt19937_64 rng(12345);
  int saw[2] = {0, 0};
  const int kTrials = 12;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string d = TestDir("crash/t" + std::to_string(trial));
    { Store::Create(d, cfg); }
    const UpdateMode mode = trial % 2 ? UpdateMode::kBaseline : UpdateMode::kSmart;
    const int delay_us = static_cast<int>(rng() % 60000);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        Store s = Store::Open(d);
        System sys(s);
        for (;;) RunSteps(s, sys, mode, 1, 0.0);  // until killed
      } catch (...) {
      }
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child ended on its own (status " << status << ")";
    Store s = Store::Open(d);
    s.Verify();  // the committed slot is intact
    const int64_t t = s.step();
    ++saw[t > 0];
    // One more step from wherever it stopped matches the uninterrupted run (if within it).
    if (t < 3) {
      System sys(s);
      RunSteps(s, sys, (t + 1) % 2 ? UpdateMode::kSmart : UpdateMode::kBaseline, 1, 0.0);
      Store r = Store::Create(TestDir("crash/r" + std::to_string(trial)), cfg);
      System rs(r);
      for (int k = 1; k <= t + 1; ++k)
        RunSteps(r, rs, k % 2 ? UpdateMode::kSmart : UpdateMode::kBaseline, 1, 0.0);
      ExpectSameState(r, s, "trial " + std::to_string(trial));
    }
  }
  std::printf("killed %d steps: %d reopened at step 0, %d after committing >= 1 step\n",
              kTrials, saw[0], saw[1]);
}

}  // namespace
}  // namespace csdkit
