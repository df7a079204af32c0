// Hostile use of stores and commands (issue 25, "reliability, round three"): what a user who
// deletes, links, nests, fills or runs things twice can do to the kit, each case run as the user
// would run it — the csdkit command — and checked for the promise of docs/reliability.md:
//
//  - one writer per store: the lock is the store directory itself, so deleting or replacing a
//    file inside (the old `lock` file) admits no second writer; a refusal names who really holds
//    the store (writer or readers) and never a process that is gone;
//  - a store's files never lead outside it: symbolic links in the store's place are refused,
//    never written through; nothing but the store's own files is written into it;
//  - JSON depth is bounded: a manifest, problem.json or --ds-config nested 80,000 deep is
//    refused naming the file, not a stack overflow; a directory where a JSON file belongs too;
//  - a command writes only what it creates, removes all of it on failure, and never deletes or
//    overwrites what it did not create (p2p-bench's file, kernel --dump, run, bench step);
//  - output that cannot be written after a commit says the step was committed.
//
// Concurrent cases stop one process at a named point (CSDKIT_TEST_PAUSE) while the other runs:
// deterministic, not a race won by luck.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.h"
#include "csdkit/runtime/store.h"
#include "test_dir.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;
using testing::CliProcess;
using testing::CliResult;
using testing::RunCsdkit;

// A fresh, existing directory for a test (its logs and stores go inside).
std::string TestDir(const std::string& name) {
  const std::string d = testing::TestDir(name);
  std::filesystem::create_directories(d);
  return d;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A small store made by the command: 2 devices, 200,000 AdamW parameters.
void Init(const std::string& dir) {
  const CliResult r = RunCsdkit({"init", "--dir", dir, "--devices", "2", "--params", "200000"},
                                dir + ".init.log");
  ASSERT_EQ(r.status, 0) << r.out;
}

CliResult Csdkit(const std::vector<std::string>& args, const std::string& log) {
  return RunCsdkit(args, log, std::chrono::seconds(120));
}

// The slot file of (device 0, theta) that the committed step does not use.
std::string UncommittedThetaSlot(const std::string& dir) {
  std::ifstream f(dir + "/manifest.json");
  const unsigned slot = nlohmann::json::parse(f).at("slot").get<unsigned>();
  return dir + "/dev0/theta." + std::to_string(1 - slot) + ".bin";
}

// ---------------------------------------------------------------------------------------------
// One writer per store.

// A writer stopped just before its commit; the old lock file deleted (what a user does to a
// "stale" lock) and replaced: a second writer is still refused, naming the first by pid and
// command line, and the first commits; the store verifies. (Today's main admitted the second
// writer and the committed slot was found corrupt.)
TEST(StoreLock, DeletingTheLockFileAdmitsNoSecondWriter) {
  const std::string d = TestDir("lock_deleted");
  Init(d + "/s");
  CliProcess first({"step", "--dir", d + "/s", "--steps", "2"}, d + "/first.log", "store-commit");
  ASSERT_TRUE(first.WaitStopped()) << "the writer did not stop at 'store-commit': "
                                   << first.Output();
  std::error_code ec;
  fs::remove(d + "/s/lock", ec);
  WriteFile(d + "/s/lock", "");
  const CliResult second = Csdkit({"step", "--dir", d + "/s", "--topk", "0.01"}, d + "/2.log");
  EXPECT_EQ(second.status, 2) << second.out;
  EXPECT_TRUE(Has(second.out, "found it in use by a writer (pid " + std::to_string(first.pid()) +
                                  ": "))
      << second.out;
  EXPECT_TRUE(Has(second.out, "step --dir")) << second.out;
  first.Continue();
  ASSERT_EQ(first.Wait(), 0) << first.Output();
  const CliResult info = Csdkit({"info", "--dir", d + "/s", "--verify"}, d + "/info.log");
  EXPECT_EQ(info.status, 0) << info.out;
  EXPECT_EQ(testing::CommittedStep(d + "/s"), 2);
}

// The store moved away and another directory put in its place while a writer runs: the writer
// refuses to commit (it no longer owns what the path names).
TEST(StoreLock, ACommitNeverFollowsALostLock) {
  const std::string d = TestDir("lock_moved");
  Init(d + "/s");
  CliProcess w({"step", "--dir", d + "/s"}, d + "/w.log", "store-commit");
  ASSERT_TRUE(w.WaitStopped()) << w.Output();
  fs::rename(d + "/s", d + "/moved");
  fs::create_directory(d + "/s");
  w.Continue();
  EXPECT_EQ(w.Wait(), 2) << w.Output();
  EXPECT_TRUE(Has(w.Output(), "expected the directory this writer locked, found another one"))
      << w.Output();
  EXPECT_TRUE(Has(w.Output(), "nothing committed")) << w.Output();
  EXPECT_TRUE(fs::is_empty(d + "/s"));
  EXPECT_EQ(testing::CommittedStep(d + "/moved"), 0);
}

// A writer SIGKILLed before its commit, then a reader holds the store: a writer's refusal names
// the reader — this test process — and not the dead writer (today's main named the dead pid
// from the lock file's stale line).
TEST(StoreLock, TheRefusalNamesTheRealHolder) {
  const std::string d = TestDir("lock_holder");
  Init(d + "/s");
  CliProcess dead({"step", "--dir", d + "/s"}, d + "/dead.log", "store-commit");
  ASSERT_TRUE(dead.WaitStopped()) << dead.Output();
  const pid_t dead_pid = dead.pid();
  dead.Kill();
  const Store reader = Store::Open(d + "/s", StoreAccess::kRead);
  const CliResult r = Csdkit({"step", "--dir", d + "/s"}, d + "/w.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "found it in use by 1 reader (pid " + std::to_string(::getpid()) + ": "))
      << r.out;
  EXPECT_FALSE(Has(r.out, "pid " + std::to_string(dead_pid))) << r.out;
  EXPECT_FALSE(Has(r.out, "writer (")) << r.out;
}

// ---------------------------------------------------------------------------------------------
// A store's files never lead outside it.

// The uncommitted slot replaced by a symbolic link to a user's file: the step is refused naming
// the file, and the user's file keeps its bytes (today's main overwrote it with theta). A `lock`
// link to another file is not touched either (today's main truncated its target).
TEST(StoreFiles, SymbolicLinksAreRefusedNotFollowed) {
  const std::string d = TestDir("symlinks");
  Init(d + "/s");
  WriteFile(d + "/precious", "the user's own bytes\n");
  WriteFile(d + "/precious-lock", "another file of the user\n");
  const std::string slot = UncommittedThetaSlot(d + "/s");
  fs::remove(slot);
  fs::create_symlink(d + "/precious", slot);
  std::error_code ec;
  fs::remove(d + "/s/lock", ec);
  fs::create_symlink(d + "/precious-lock", d + "/s/lock");
  const CliResult r = Csdkit({"step", "--dir", d + "/s"}, d + "/step.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, slot + "'")) << r.out;
  EXPECT_TRUE(Has(r.out, "found a symbolic link")) << r.out;
  EXPECT_EQ(ReadFile(d + "/precious"), "the user's own bytes\n");
  EXPECT_EQ(ReadFile(d + "/precious-lock"), "another file of the user\n");
  EXPECT_EQ(testing::CommittedStep(d + "/s"), 0);
}

// A step writes nothing into the store but its state (no emulation xclbin, which today's main
// rewrote with mode 0644), and a file of that name a user put there is left alone; every file
// the store has is its own, mode 0600.
TEST(StoreFiles, AStepWritesOnlyTheStoresOwnFiles) {
  const std::string d = TestDir("own_files");
  Init(d + "/s");
  ASSERT_EQ(Csdkit({"step", "--dir", d + "/s"}, d + "/1.log").status, 0);
  EXPECT_FALSE(fs::exists(d + "/s/csd_update.emu.xclbin"));
  WriteFile(d + "/s/csd_update.emu.xclbin", "not an xclbin\n");
  const CliResult r = Csdkit({"step", "--dir", d + "/s"}, d + "/2.log");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ReadFile(d + "/s/csd_update.emu.xclbin"), "not an xclbin\n");
  fs::remove(d + "/s/csd_update.emu.xclbin");
  for (const auto& e : fs::recursive_directory_iterator(d + "/s")) {
    if (!e.is_regular_file()) continue;
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
  }
}

// ---------------------------------------------------------------------------------------------
// Bounded JSON.

std::string Deep(size_t n) { return std::string(n, '[') + std::string(n, ']'); }

// A manifest whose committed_step is an array 80,000 deep (160 KB): info, info --verify, step
// and a reader in this process refuse it naming the manifest (today's main overflowed the stack
// in a recursive copy: SIGSEGV).
TEST(BoundedJson, ADeeplyNestedManifestIsRefused) {
  const std::string d = TestDir("deep_manifest");
  Init(d + "/s");
  std::string text = ReadFile(d + "/s/manifest.json");
  const size_t at = text.find("\"committed_step\":");
  ASSERT_NE(at, std::string::npos);
  const size_t end = text.find_first_of(",}", at);
  text = text.substr(0, at) + "\"committed_step\": " + Deep(80000) + text.substr(end);
  WriteFile(d + "/s/manifest.json", text);
  const std::string want = "/s/manifest.json': expected JSON nested at most 64 levels deep";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", "--dir", d + "/s"},
        std::vector<std::string>{"info", "--dir", d + "/s", "--verify"},
        std::vector<std::string>{"step", "--dir", d + "/s"}}) {
    const CliResult r = Csdkit(args, d + "/cmd.log");
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.out;
    EXPECT_TRUE(Has(r.out, want)) << r.out;
  }
  try {
    Store::Open(d + "/s", StoreAccess::kRead);
    ADD_FAILURE() << "opened a store with a manifest nested 80,000 deep";
  } catch (const StoreError& e) {
    EXPECT_TRUE(Has(e.what(), want)) << e.what();
  }
}

// problem.json nested 80,000 deep, and --ds-config nested as deep: refused naming the file.
TEST(BoundedJson, DeepProblemJsonAndDsConfigAreRefused) {
  const std::string d = TestDir("deep_inputs");
  const CliResult dump =
      Csdkit({"kernel", "--n", "100", "--dump", d + "/golden"}, d + "/dump.log");
  ASSERT_EQ(dump.status, 0) << dump.out;
  WriteFile(d + "/golden/problem.json", Deep(80000));
  CliResult r = Csdkit({"kernel", "--replay", d + "/golden"}, d + "/replay.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "/golden/problem.json': expected JSON nested at most 64 levels deep"))
      << r.out;
  WriteFile(d + "/ds.json", "{\"aio\": " + Deep(80000) + "}");
  r = Csdkit({"kernel", "--n", "100", "--ds-config", d + "/ds.json"}, d + "/ds.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "--ds-config (a DeepSpeed JSON config): '" + d +
                             "/ds.json': expected JSON nested at most 64 levels deep"))
      << r.out;
}

// A directory where a JSON file belongs (manifest.json, --ds-config): the file or option is
// named with what was expected and what was found (today: "basic_filebuf::underflow error").
TEST(BoundedJson, ADirectoryWhereAJsonFileBelongs) {
  const std::string d = TestDir("json_dirs");
  Init(d + "/s");
  fs::rename(d + "/s/manifest.json", d + "/manifest.saved");
  fs::create_directory(d + "/s/manifest.json");
  CliResult r = Csdkit({"info", "--dir", d + "/s"}, d + "/info.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "/s/manifest.json': expected a regular JSON file, found a directory"))
      << r.out;
  EXPECT_FALSE(Has(r.out, "basic_filebuf")) << r.out;
  r = Csdkit({"kernel", "--n", "100", "--ds-config", d}, d + "/ds.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "--ds-config (a DeepSpeed JSON config): '" + d +
                             "': expected a regular JSON file, found a directory"))
      << r.out;
}

// ---------------------------------------------------------------------------------------------
// Commands write only what they create.

// p2p-bench: a file of the name today's main used (p2p_bench_0.bin) keeps its bytes; refusals
// (--bytes 0, 1, 4097, more than the free space, --dir naming a file) come before anything is
// created and leave nothing; a successful run leaves nothing either.
TEST(Commands, P2pBenchTouchesNothingItDidNotCreate) {
  const std::string d = TestDir("p2p");
  fs::create_directories(d + "/nvme");
  WriteFile(d + "/nvme/p2p_bench_0.bin", "a user's file\n");
  const auto listing = [&](const std::string& dir) {
    std::vector<std::string> v;
    if (fs::exists(dir)) {
      for (const auto& e : fs::recursive_directory_iterator(dir)) v.push_back(e.path().string());
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto before = listing(d);
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(d.c_str(), &vfs), 0);
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const std::string too_many = std::to_string((free_bytes / 4096 + 1024) * 4096);
  const std::string nvme = d + "/nvme";
  const struct {
    std::string dir, bytes, expect;
  } refusals[] = {
      {nvme, "0", "--bytes: expected a positive multiple of 4096"},
      {nvme, "1", "--bytes: expected a positive multiple of 4096"},
      {nvme, "4097", "--bytes: expected a positive multiple of 4096"},
      {nvme, too_many, "--bytes: expected at most "},
      {d + "/new/sub", too_many, "--bytes: expected at most "},
      {nvme + "/p2p_bench_0.bin", "4194304", "--dir: expected a directory"},
  };
  for (const auto& c : refusals) {
    const CliResult r =
        Csdkit({"p2p-bench", "--dir", c.dir, "--bytes", c.bytes}, d + "/../p2p.log");
    EXPECT_EQ(r.status, 2) << c.dir << " " << c.bytes << ": " << r.out;
    EXPECT_TRUE(Has(r.out, c.expect)) << r.out;
    EXPECT_EQ(listing(d), before) << c.dir << " " << c.bytes;
  }
  const CliResult ok = Csdkit({"p2p-bench", "--dir", d + "/nvme", "--bytes", "4194304",
                               "--block-size", "1048576", "--queue-depth", "4", "--reps", "1"},
                              d + "/../p2p.log");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(listing(d), before);
  EXPECT_EQ(ReadFile(d + "/nvme/p2p_bench_0.bin"), "a user's file\n");
}

// kernel --dump into a directory with files in it is refused before anything runs (as step
// --dump-launches is); the files keep their bytes.
TEST(Commands, KernelDumpWritesOverNothing) {
  const std::string d = TestDir("dump");
  fs::create_directories(d + "/golden");
  WriteFile(d + "/golden/theta.in.bin", "mine\n");
  const CliResult r =
      Csdkit({"kernel", "--n", "100", "--dump", d + "/golden"}, d + "/dump.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(Has(r.out, "--dump: expected a new or empty directory, found '" + d +
                             "/golden' with files in it"))
      << r.out;
  EXPECT_EQ(ReadFile(d + "/golden/theta.in.bin"), "mine\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d + "/golden"), fs::directory_iterator()), 1);
}

// run and bench step into a/b/c that fail (a subgroup the store refuses) leave none of the
// directories they made; a file given as --dir is named as the option's value.
TEST(Commands, FailuresRemoveTheDirectoriesTheyMade) {
  const std::string d = TestDir("workdirs");
  fs::create_directories(d);
  CliResult r = Csdkit({"run", "--dir", d + "/a/b/c", "--params", "200000", "--devices", "1",
                        "--steps", "1", "--subgroup", "1000"},
                       d + "/../run.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_FALSE(fs::exists(d + "/a")) << r.out;
  r = Csdkit({"bench", "step", "--dir", d + "/x/y", "--params", "200000", "--devices", "1",
              "--subgroup", "1000"},
             d + "/../bench.log");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_FALSE(fs::exists(d + "/x")) << r.out;
  WriteFile(d + "/afile", "x");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--dir", d + "/afile"},
        std::vector<std::string>{"bench", "step", "--dir", d + "/afile"},
        std::vector<std::string>{"p2p-bench", "--dir", d + "/afile"}}) {
    r = Csdkit(args, d + "/../afile.log");
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.out;
    EXPECT_TRUE(Has(r.out, "--dir: expected ")) << r.out;
    EXPECT_TRUE(Has(r.out, "'" + d + "/afile', which is not a directory")) << r.out;
  }
  EXPECT_EQ(ReadFile(d + "/afile"), "x");
}

// Output that cannot be written after a step committed: the error says the step was committed
// and at which step, so a script that retries does not assume it was not.
TEST(Commands, UnwritableOutputSaysTheStepWasCommitted) {
  const std::string d = TestDir("dev_full");
  Init(d + "/s");
  const int rc = std::system(("'" + std::string(CSDKIT_CLI) + "' step --dir '" + d +
                              "/s' --json > /dev/full 2> '" + d + "/err.log'")
                                 .c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  const std::string err = ReadFile(d + "/err.log");
  EXPECT_TRUE(Has(err, "cannot write the output")) << err;
  EXPECT_TRUE(Has(err, "/s' is at committed step 1")) << err;
  EXPECT_EQ(testing::CommittedStep(d + "/s"), 1);
}

// What an init killed before its first commit leaves (device directories, no manifest) is
// described as an interrupted creation with the way to clear it, by info, step and init.
TEST(Commands, AnInterruptedCreationIsNamed) {
  const std::string d = TestDir("interrupted");
  Init(d + "/s");
  fs::remove(d + "/s/manifest.json");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", "--dir", d + "/s"},
        std::vector<std::string>{"step", "--dir", d + "/s"},
        std::vector<std::string>{"init", "--dir", d + "/s", "--params", "200000"}}) {
    const CliResult r = Csdkit(args, d + "/cmd.log");
    EXPECT_EQ(r.status, 2) << args[0] << ": " << r.out;
    EXPECT_TRUE(Has(r.out, "found an interrupted creation")) << args[0] << ": " << r.out;
    EXPECT_TRUE(Has(r.out, "rm -r '" + d + "/s'")) << args[0] << ": " << r.out;
  }
}

}  // namespace
}  // namespace csdkit
