// A model store's state out and in (state_io.h) and the store's one-writer lock: export equals
// the committed shard files; an import commits the state it brings at its step number (any
// parity), a step from it equals a step from a store created with that state, bad imports
// are refused before anything is written, a second writer (same process or another) and a
// reader beside a writer are refused, readers share.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/runtime/gradients.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/system/device_set.h"
#include "test_dir.h"

namespace csdkit {
namespace {

using testing::TestDir;

ParamLayout Layout() {
  return ParamLayout({{"a", 70001, 0}, {"b", 333, 0}, {"c", 90000, 1}});
}

StoreConfig Config(Optimizer opt) {
  StoreConfig c;
  c.devices = 2;
  c.hyper = OptimizerConfig::Defaults(opt);
  c.grad = DType::kFp32;
  c.out = DType::kFp32;
  c.loss_scale = 1.0;
  c.subgroup_elems = 65536;
  return c;
}

std::vector<std::vector<float>> Tensors(const ParamLayout& l, uint64_t seed, float lo, float hi) {
  std::vector<std::vector<float>> t;
  SplitMix64 r{seed};
  for (const TensorSpec& s : l.tensors()) {
    t.emplace_back(s.numel);
    for (float& x : t.back()) x = r.Uniform(lo, hi);
  }
  return t;
}

std::vector<float> Packed(const std::vector<std::vector<float>>& t) {
  std::vector<float> p;
  for (const auto& x : t) p.insert(p.end(), x.begin(), x.end());
  return p;
}

template <typename T>
std::vector<const T*> Ptrs(const std::vector<std::vector<float>>& t) {
  std::vector<const T*> p;
  for (const auto& x : t) p.push_back(reinterpret_cast<const T*>(x.data()));
  return p;
}

std::vector<std::vector<float>> Export(const Store& s, const std::string& var) {
  const ParamLayout& l = *s.layout();
  std::vector<std::vector<float>> out;
  std::vector<float*> dst;
  for (const TensorSpec& t : l.tensors()) out.emplace_back(t.numel, -1.0f);
  for (auto& x : out) dst.push_back(x.data());
  ExportState(s, var, dst);
  return out;
}

void ExpectSameBits(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    ASSERT_EQ(a[t].size(), b[t].size());
    for (size_t i = 0; i < a[t].size(); ++i) {
      ASSERT_EQ(hls::F2U(a[t][i]), hls::F2U(b[t][i]))
          << what << ": tensor " << t << " element " << i << " expected 0x" << std::hex
          << hls::F2U(a[t][i]) << " found 0x" << hls::F2U(b[t][i]);
    }
  }
}

StepReport OneStep(Store& s, const std::vector<std::vector<float>>& g) {
  DeviceSpec spec;
  spec.count = s.config().devices;
  DeviceSet dev(spec);
  Scheduler sch(s, dev);
  return sch.Step(GradientSet::Gather(s, Ptrs<void>(g)), StepOptions());
}

TEST(StateIo, ExportIsTheCommittedState) {
  const ParamLayout l = Layout();
  const StoreConfig c = Config(Optimizer::kAdamW);
  const auto w = Tensors(l, 1, -1, 1);
  Store s = Store::CreateForModel(TestDir("export"), c, l, {c.hyper, c.hyper}, Packed(w).data(),
                                  DType::kFp32);
  ExpectSameBits(w, Export(s, "theta"), "theta at step 0");
  const auto zero = Tensors(l, 0, 0, 0);
  ExpectSameBits(zero, Export(s, "m"), "m at step 0");
  OneStep(s, Tensors(l, 2, -1, 1));
  // m after one AdamW step is (1 - beta1) g, non-zero everywhere the gradient is.
  const auto m = Export(s, "m");
  EXPECT_NE(hls::F2U(m[2][5]), 0u);
  // A nullptr destination is skipped; an unknown variable and a wrong count are refused.
  std::vector<float> only(333);
  ExportState(s, "v", {nullptr, only.data(), nullptr});
  EXPECT_THROW(ExportState(s, "momentum", {nullptr, only.data(), nullptr}), std::invalid_argument);
  EXPECT_THROW(ExportState(s, "m", {only.data()}), std::invalid_argument);
  // A corrupt subgroup is named.
  const std::string f = s.FilePath(1, 1, s.slot());
  {
    std::fstream x(f, std::ios::in | std::ios::out | std::ios::binary);
    x.seekp(12);
    x.put('\x77');
  }
  try {
    Export(s, "m");
    ADD_FAILURE() << "exported a corrupt subgroup";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(StateIo, ImportCommitsTheStateAtItsStep) {
  const ParamLayout l = Layout();
  for (Optimizer opt : {Optimizer::kAdamW, Optimizer::kAdagrad, Optimizer::kSgd, Optimizer::kLion}) {
    StoreConfig c = Config(opt);
    if (opt == Optimizer::kSgd) c.hyper.momentum = 0.9;
    const std::string name = OptimizerName(opt);
    const auto w = Tensors(l, 3, -1, 1), m = Tensors(l, 4, -0.1f, 0.1f),
               v = Tensors(l, 5, 0, 0.01f), g = Tensors(l, 6, -1, 1);
    Store s = Store::CreateForModel(TestDir("import_" + name), c, l, {c.hyper, c.hyper},
                                    Packed(Tensors(l, 7, -1, 1)).data(), DType::kFp32);
    const bool has_m = std::count(s.vars().begin(), s.vars().end(), "m") > 0;
    const bool has_v = std::count(s.vars().begin(), s.vars().end(), "v") > 0;
    // Step 7 (odd) then 10 (even): the slot alternates whatever the step's parity.
    for (int64_t step : {7, 10}) {
      StateImport in;
      in.step = step;
      in.theta = Ptrs<void>(w);
      if (has_m) in.m = Ptrs<float>(m);
      if (has_v) in.v = Ptrs<float>(v);
      const unsigned before = s.slot();
      ImportState(s, in);
      EXPECT_EQ(s.step(), step) << name;
      EXPECT_NE(s.slot(), before) << name;
      s.Verify();
    }
    ExpectSameBits(w, Export(s, "theta"), name + " theta");
    if (has_m) ExpectSameBits(m, Export(s, "m"), name + " m");
    if (has_v) ExpectSameBits(v, Export(s, "v"), name + " v");
    // Reopened: the manifest names the imported step and slot.
    const unsigned slot = s.slot();
    const std::string dir = s.dir();
    { Store closing = std::move(s); }  // releases the writer lock
    s = Store::Open(dir, l);
    EXPECT_EQ(s.step(), 10) << name;
    EXPECT_EQ(s.slot(), slot) << name;
    // The next step is step 11 of that state: equal to a store that reached step 10 by
    // importing into a fresh store (the bias correction uses the imported step).
    OneStep(s, g);
    EXPECT_EQ(s.step(), 11);
    Store r = Store::CreateForModel(TestDir("import_ref_" + name), c, l, {c.hyper, c.hyper},
                                    Packed(w).data(), DType::kFp32);
    StateImport in;
    in.step = 10;
    in.theta = {nullptr, nullptr, nullptr};  // kept: they are w already
    if (has_m) in.m = Ptrs<float>(m);
    if (has_v) in.v = Ptrs<float>(v);
    ImportState(r, in);
    OneStep(r, g);
    for (const std::string& var : s.vars()) {
      ExpectSameBits(Export(r, var), Export(s, var), name + " " + var + " after step 11");
    }
  }
}

TEST(StateIo, BadImportsWriteNothing) {
  const ParamLayout l = Layout();
  const StoreConfig c = Config(Optimizer::kAdamW);
  const auto w = Tensors(l, 8, -1, 1);
  Store s = Store::CreateForModel(TestDir("import_bad"), c, l, {c.hyper, c.hyper},
                                  Packed(w).data(), DType::kFp32);
  const auto manifest = [&] {
    std::ifstream f(s.dir() + "/manifest.json");
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string before = manifest();
  auto refused = [&](StateImport in, const std::string& must) {
    try {
      ImportState(s, in);
      ADD_FAILURE() << "accepted an import; expected an error containing '" << must << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(must), std::string::npos) << e.what();
    }
    EXPECT_EQ(manifest(), before);
    EXPECT_EQ(s.step(), 0);
  };
  StateImport ok;
  ok.step = 3;
  ok.theta = Ptrs<void>(w);
  StateImport x = ok;
  x.step = -1;
  refused(x, "step");
  x = ok;
  x.theta.pop_back();
  refused(x, "theta");
  auto nan = Tensors(l, 9, 0, 1);
  nan[2][77] = std::nanf("");
  x = ok;
  x.m = Ptrs<float>(nan);
  refused(x, "m of tensor 'c': expected finite values, found element 77");
  auto neg = Tensors(l, 9, 0, 1);
  neg[1][3] = -1e-30f;
  x = ok;
  x.v = Ptrs<float>(neg);
  refused(x, "v of tensor 'b': expected finite values >= 0, found element 3");
  StoreConfig plain_sgd = Config(Optimizer::kSgd);
  plain_sgd.hyper.momentum = 0;
  Store sgd = Store::CreateForModel(TestDir("import_bad_sgd"), plain_sgd, l,
                                    {plain_sgd.hyper, plain_sgd.hyper}, Packed(w).data(),
                                    DType::kFp32);
  x = ok;
  x.m = Ptrs<float>(w);
  try {
    ImportState(sgd, x);
    ADD_FAILURE() << "imported m into an SGD store without momentum";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("keeps no 'm' (it keeps theta)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sgd.step(), 0);
}

TEST(StoreLock, OneWriterOrManyReaders) {
  const ParamLayout l = Layout();
  const StoreConfig c = Config(Optimizer::kAdamW);
  const std::string d = TestDir("lock");
  auto refused = [&](StoreAccess a, const std::string& must) {
    try {
      Store::Open(d, a);
      ADD_FAILURE() << "opened a locked store";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(must), std::string::npos) << e.what();
    }
  };
  {
    Store w = Store::CreateForModel(d, c, l, {c.hyper, c.hyper},
                                    Packed(Tensors(l, 1, -1, 1)).data(), DType::kFp32);
    refused(StoreAccess::kWrite, "one writer per store");
    refused(StoreAccess::kWrite,
            "found it in use by a writer (pid " + std::to_string(::getpid()) + ": ");
    refused(StoreAccess::kRead, "no writer");
    // Another process is refused too.
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        Store::Open(d);
        _exit(0);
      } catch (const StoreError&) {
        _exit(7);
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "status " << status;
    // A moved-from store does not drop the lock; its new owner holds it.
    Store moved = std::move(w);
    refused(StoreAccess::kWrite, "one writer per store");
  }
  // Released with the Store: readers share, a writer waits for them to go.
  {
    Store r1 = Store::Open(d, StoreAccess::kRead), r2 = Store::Open(d, l, StoreAccess::kRead);
    r1.Verify();
    EXPECT_EQ(Export(r2, "m").size(), 3u);
    refused(StoreAccess::kWrite, "found it in use by 2 readers (pid " +
                                     std::to_string(::getpid()) + ": ");
    StateImport in;
    in.theta = {nullptr, nullptr, nullptr};
    EXPECT_THROW(ImportState(r2, in), std::invalid_argument);
    EXPECT_THROW(r1.Commit(r1.EmptyChecksums()), std::logic_error);
  }
  {
    Store again = Store::Open(d, l);
    EXPECT_EQ(again.step(), 0);
  }
  // A writer killed with SIGKILL leaves no lock behind; while it lives it is named.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Store held = Store::Open(d);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  refused(StoreAccess::kWrite, "in use by a writer (pid " + std::to_string(child) + ": ");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  Store after = Store::Open(d, l);
  EXPECT_EQ(after.step(), 0);
}

}  // namespace
}  // namespace csdkit
