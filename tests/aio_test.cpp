// The libaio storage engine (host/aio): data round trips over block sizes, queue depths and
// submission modes; alignment refused before submission; end of file on reads; every failure
// the kernel can report, injected under the engine, reported or completed (never ignored); and
// DeepSpeed `aio` configuration parsing.
//
// Files are created under CSDKIT_AIO_TEST_DIR (environment, else the build tree): O_DIRECT
// needs a disk-backed filesystem.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/aio/fault_injection.h"
#include "csdkit/aio/file.h"
#include "csdkit/aio/io_error.h"
#include "csdkit/platform/aligned_buffer.h"

namespace csdkit::aio {
namespace {

using nlohmann::json;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string TestRoot() {
  const char* env = std::getenv("CSDKIT_AIO_TEST_DIR");
  return env != nullptr && *env != '\0' ? env : CSDKIT_AIO_TEST_DIR;
}

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::filesystem::create_directories(TestRoot());
    std::string tmpl = TestRoot() + "/aio_test.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "cannot create a directory under " << TestRoot() << ": " << ErrnoText(errno);
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic bytes: splitmix64 of (seed, 8-byte index).
void Fill(uint8_t* p, uint64_t len, uint64_t seed) {
  for (uint64_t i = 0; i < len; i += 8) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, std::min<uint64_t>(8, len - i));
  }
}

// Byte-exact comparison; on a mismatch, the first differing offset and bytes in hex.
::testing::AssertionResult SameBytes(const uint8_t* expected, const uint8_t* actual, uint64_t len,
                                     uint64_t seed) {
  if (std::memcmp(expected, actual, len) == 0) return ::testing::AssertionSuccess();
  uint64_t i = 0;
  while (expected[i] == actual[i]) ++i;
  char msg[160];
  std::snprintf(msg, sizeof(msg),
                "seed %" PRIu64 ": first mismatch at byte 0x%" PRIx64 " of 0x%" PRIx64
                ": EXP=0x%02x GOT=0x%02x",
                seed, i, len, expected[i], actual[i]);
  return ::testing::AssertionFailure() << msg;
}

// The alignment unit of a file: every offset, length and buffer cut must be a multiple of it.
uint64_t Unit(const File& f) { return std::max(f.memory_alignment(), f.offset_alignment()); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Base fixture: a temp dir, checked once for O_DIRECT support so a tmpfs TMPDIR gives one clear
// failure instead of many obscure ones.
class AioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      File probe = File::Create(dir_.File("probe"));
      unit_ = Unit(probe);
    } catch (const IoError& e) {
      FAIL() << "the test directory " << TestRoot()
             << " cannot be used for O_DIRECT; set CSDKIT_AIO_TEST_DIR to a directory on a "
                "disk-backed filesystem (ext4, xfs). Error: "
             << e.what();
    }
  }

  TempDir dir_;
  uint64_t unit_ = 4096;
};

// ---------------------------------------------------------------------------------------------
// Configuration (DeepSpeed's `aio` block).

TEST(AioConfigTest, DefaultsAreDeepSpeeds) {
  const AioConfig c;
  EXPECT_EQ(c.block_size, 1048576u);
  EXPECT_EQ(c.queue_depth, 8u);
  EXPECT_EQ(c.intra_op_parallelism, 1u);
  EXPECT_FALSE(c.single_submit);
  EXPECT_TRUE(c.overlap_events);
  EXPECT_EQ(AioConfig::FromJson(json::object()), c);
}

TEST(AioConfigTest, ParsesAFullBlock) {
  const json j = json::parse(R"({"block_size": 262144, "queue_depth": 32,
      "intra_op_parallelism": 4, "single_submit": true, "overlap_events": false})");
  const AioConfig c = AioConfig::FromJson(j);
  EXPECT_EQ(c.block_size, 262144u);
  EXPECT_EQ(c.queue_depth, 32u);
  EXPECT_EQ(c.intra_op_parallelism, 4u);
  EXPECT_TRUE(c.single_submit);
  EXPECT_FALSE(c.overlap_events);
  EXPECT_EQ(AioConfig::FromJson(c.ToJson()), c);  // round trip
}

TEST(AioConfigTest, ThreadCountIsAnAliasOfIntraOpParallelism) {
  EXPECT_EQ(AioConfig::FromJson({{"thread_count", 3}}).intra_op_parallelism, 3u);
  EXPECT_EQ(
      AioConfig::FromJson({{"thread_count", 2}, {"intra_op_parallelism", 2}}).intra_op_parallelism,
      2u);
  try {
    AioConfig::FromJson({{"thread_count", 2}, {"intra_op_parallelism", 4}});
    FAIL() << "conflicting aliases accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "thread_count")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "intra_op_parallelism")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "(2)") && Contains(e.what(), "(4)")) << e.what();
  }
}

TEST(AioConfigTest, UnknownKeyIsRefusedWithTheAcceptedOnes) {
  try {
    AioConfig::FromJson({{"queue_size", 8}});
    FAIL() << "unknown key accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "\"queue_size\"")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "queue_depth")) << e.what();
  }
}

TEST(AioConfigTest, WrongTypesAreRefused) {
  const std::vector<json> bad = {{{"queue_depth", "8"}},    {{"queue_depth", 8.0}},
                                 {{"block_size", nullptr}}, {{"block_size", json::array()}},
                                 {{"single_submit", 1}},    {{"overlap_events", "true"}},
                                 {{"thread_count", true}},  {{"intra_op_parallelism", 1.5}}};
  for (const json& j : bad) {
    try {
      AioConfig::FromJson(j);
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(Contains(e.what(), "found")) << e.what();
      EXPECT_TRUE(Contains(e.what(), j.begin().key())) << e.what();
    }
  }
  EXPECT_THROW(AioConfig::FromJson(json::array()), std::invalid_argument);
  EXPECT_THROW(AioConfig::FromJson(8), std::invalid_argument);
}

TEST(AioConfigTest, OutOfRangeValuesAreRefused) {
  const std::vector<json> bad = {{{"queue_depth", 0}},
                                 {{"queue_depth", -1}},
                                 {{"queue_depth", 100000}},
                                 {{"block_size", 100}},
                                 {{"block_size", 1000}},  // not a multiple of 512
                                 {{"block_size", uint64_t{1} << 40}},
                                 {{"intra_op_parallelism", 0}},
                                 {{"thread_count", 1000}}};
  for (const json& j : bad) {
    try {
      AioConfig::FromJson(j);
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(Contains(e.what(), j.begin().key())) << e.what();
    }
  }
  // The same limits apply to a config built in C++.
  AioConfig c;
  c.queue_depth = 0;
  EXPECT_THROW(c.Validate(), std::invalid_argument);
  EXPECT_THROW(Engine{c}, std::invalid_argument);
}

TEST(AioConfigTest, UseGdsOnlyAsFalse) {
  EXPECT_EQ(AioConfig::FromJson({{"use_gds", false}}), AioConfig());
  try {
    AioConfig::FromJson({{"use_gds", true}});
    FAIL() << "use_gds true accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(Contains(e.what(), "use_gds")) << e.what();
  }
}

TEST(AioConfigTest, TakesTheBlockOfAWholeDeepSpeedConfig) {
  const json ds = json::parse(R"({
    "train_batch_size": 16,
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}},
    "aio": {"block_size": 131072, "queue_depth": 16, "thread_count": 2,
            "single_submit": false, "overlap_events": true}})");
  const AioConfig c = AioConfig::FromDeepSpeedConfig(ds);
  EXPECT_EQ(c.block_size, 131072u);
  EXPECT_EQ(c.queue_depth, 16u);
  EXPECT_EQ(c.intra_op_parallelism, 2u);
  EXPECT_EQ(AioConfig::FromDeepSpeedConfig({{"train_batch_size", 8}}), AioConfig());
  EXPECT_THROW(AioConfig::FromDeepSpeedConfig({{"aio", 5}}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Files.

TEST_F(AioTest, CreatedFilesAreOwnerOnly) {
  const mode_t old = ::umask(0);  // nothing masked: the mode is what the engine asked for
  const std::string path = dir_.File("state.bin");
  { File f = File::Create(path); }
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(AioTest, AlignmentComesFromStatxOrIs4096) {
  File f = File::Create(dir_.File("a"));
  std::printf("alignment: memory %u, offset %u, from statx: %d\n", f.memory_alignment(),
              f.offset_alignment(), f.alignment_from_statx());
  for (uint32_t a : {f.memory_alignment(), f.offset_alignment()}) {
    EXPECT_TRUE(a >= 1 && (a & (a - 1)) == 0) << a;
  }
  if (!f.alignment_from_statx()) {
    EXPECT_EQ(f.memory_alignment(), 4096u);
    EXPECT_EQ(f.offset_alignment(), 4096u);
  }
  FileOptions o;
  o.min_alignment = 4096;
  File g = File::Open(dir_.File("a"), OpenMode::kReadWrite, o);
  EXPECT_EQ(g.memory_alignment(), 4096u);
  EXPECT_EQ(g.offset_alignment(), 4096u);
}

TEST_F(AioTest, BadOpensAreReported) {
  try {
    File::Open(dir_.File("missing"), OpenMode::kReadOnly);
    FAIL() << "opened a missing file";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_TRUE(Contains(e.what(), dir_.File("missing"))) << e.what();
  }
  FileOptions o;
  o.min_alignment = 3000;
  EXPECT_THROW(File::Create(dir_.File("x"), o), std::invalid_argument);
  std::filesystem::create_directory(dir_.File("d"));
  EXPECT_THROW(File::Open(dir_.File("d"), OpenMode::kReadOnly), IoError);
}

// tmpfs: recent kernels (>= 6.6) accept O_DIRECT there without reporting an alignment (the
// 4096 fallback applies); older ones refuse the open, which must say what to do.
TEST(AioFileTest, TmpfsIsUsableOrRefusedClearly) {
  if (::access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "no writable /dev/shm";
  std::string tmpl = "/dev/shm/csdkit_aio_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/f";
  try {
    File f = File::Create(path);
    Engine engine;
    AlignedBuffer out(2 * f.offset_alignment()), in(out.size());
    Fill(out.data(), out.size(), 3);
    engine.Write(f, 0, out.data(), out.size());
    engine.Read(f, 0, in.data(), in.size());
    EXPECT_TRUE(SameBytes(out.data(), in.data(), out.size(), 3));
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_number(), EINVAL) << e.what();
    EXPECT_TRUE(Contains(e.what(), "direct I/O")) << e.what();
    EXPECT_TRUE(Contains(e.what(), path)) << e.what();
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a refused open left the file behind";
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

// ---------------------------------------------------------------------------------------------
// Round trips over block sizes, queue depths and modes.

struct RoundTripCase {
  const char* name;
  uint64_t block_size;
  uint32_t queue_depth;
  uint32_t threads;
  bool single_submit;
  bool overlap_events;
};

// Names the case in test listings (instead of a hex dump of the struct).
void PrintTo(const RoundTripCase& c, std::ostream* os) { *os << c.name; }

class RoundTripTest : public AioTest, public ::testing::WithParamInterface<RoundTripCase> {};

TEST_P(RoundTripTest, WriteThenReadBack) {
  const RoundTripCase& p = GetParam();
  AioConfig c;
  c.block_size = p.block_size;
  c.queue_depth = p.queue_depth;
  c.intra_op_parallelism = p.threads;
  c.single_submit = p.single_submit;
  c.overlap_events = p.overlap_events;
  if (c.block_size % unit_ != 0) {
    GTEST_SKIP() << "block size " << c.block_size << " is not a multiple of this filesystem's "
                 << "alignment " << unit_;
  }
  Engine engine(c);
  File f = File::Create(dir_.File("rt.bin"));
  const uint64_t bs = c.block_size, u = unit_;
  // Lengths that are and are not multiples of the block size (always of the alignment).
  const std::vector<uint64_t> lengths = {u, bs, bs + u, 3 * bs - u, 9 * bs + 7 * u};
  const uint64_t offset = 3 * u;
  uint64_t seed = 1;
  for (uint64_t len : lengths) {
    SCOPED_TRACE("length " + std::to_string(len));
    AlignedBuffer out(len), in(len);
    Fill(out.data(), len, seed);
    engine.ResetCounters();
    engine.Write(f, offset, out.data(), len);
    engine.Read(f, offset, in.data(), len);
    EXPECT_TRUE(SameBytes(out.data(), in.data(), len, seed));
    const IoCounters n = engine.counters();
    EXPECT_EQ(n.write_bytes, len);
    EXPECT_EQ(n.read_bytes, len);
    // One request per block, or more when a request is split across workers.
    EXPECT_GE(n.write_requests, (len + bs - 1) / bs);
    EXPECT_EQ(n.read_requests, n.write_requests);
    EXPECT_EQ(n.short_transfers_resubmitted, 0u);
    EXPECT_EQ(n.errors, 0u);
    ++seed;
  }
  EXPECT_GE(f.Size(), offset + lengths.back());
}

INSTANTIATE_TEST_SUITE_P(
    Configs, RoundTripTest,
    ::testing::Values(RoundTripCase{"bs512_qd1", 512, 1, 1, false, true},
                      RoundTripCase{"bs4k_qd1", 4 * kKiB, 1, 1, false, true},
                      RoundTripCase{"bs4k_qd4", 4 * kKiB, 4, 1, false, true},
                      RoundTripCase{"bs4k_qd32", 4 * kKiB, 32, 1, false, true},
                      RoundTripCase{"bs12k_qd3", 12 * kKiB, 3, 1, false, true},
                      RoundTripCase{"bs64k_qd1", 64 * kKiB, 1, 1, false, true},
                      RoundTripCase{"bs64k_qd8", 64 * kKiB, 8, 1, false, true},
                      RoundTripCase{"bs64k_qd128", 64 * kKiB, 128, 1, false, true},
                      RoundTripCase{"bs1m_qd2", kMiB, 2, 1, false, true},
                      RoundTripCase{"bs1m_qd16", kMiB, 16, 1, false, true},
                      RoundTripCase{"bs64k_qd8_threads2", 64 * kKiB, 8, 2, false, true},
                      RoundTripCase{"bs64k_qd4_threads4", 64 * kKiB, 4, 4, false, true},
                      RoundTripCase{"bs1m_qd8_threads3", kMiB, 8, 3, false, true},
                      RoundTripCase{"bs64k_qd8_single_submit", 64 * kKiB, 8, 1, true, true},
                      RoundTripCase{"bs64k_qd8_lockstep", 64 * kKiB, 8, 1, false, false},
                      RoundTripCase{"bs4k_qd5_single_lockstep", 4 * kKiB, 5, 1, true, false},
                      RoundTripCase{"bs64k_qd3_threads2_single_lockstep", 64 * kKiB, 3, 2, true,
                                    false}),
    [](const ::testing::TestParamInfo<RoundTripCase>& i) { return std::string(i.param.name); });

TEST_F(AioTest, BatchOfRequestsOnSeveralFilesRunsAsync) {
  AioConfig c;
  c.block_size = 64 * kKiB;
  c.queue_depth = 16;
  c.intra_op_parallelism = 2;
  Engine engine(c);
  constexpr int kFiles = 3;
  std::vector<File> files;
  std::vector<AlignedBuffer> out, in;
  std::vector<IoRequest> writes, reads;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back(File::Create(dir_.File("f" + std::to_string(i))));
    const uint64_t len = (i + 1) * 200 * kKiB;
    out.emplace_back(len);
    in.emplace_back(len);
    Fill(out.back().data(), len, 100 + i);
  }
  for (int i = 0; i < kFiles; ++i) {
    const uint64_t len = (i + 1) * 200 * kKiB;
    writes.push_back({IoOp::kWrite, &files[i], 0, out[i].data(), len});
    reads.push_back({IoOp::kRead, &files[i], 0, in[i].data(), len});
  }
  IoTicket w = engine.Submit(writes);
  std::vector<uint64_t> bytes = w.Wait();
  ASSERT_EQ(bytes.size(), static_cast<size_t>(kFiles));
  for (int i = 0; i < kFiles; ++i) EXPECT_EQ(bytes[i], (i + 1) * 200 * kKiB);
  IoTicket r = engine.Submit(reads);
  volatile uint64_t overlap = 0;  // work done while the reads are in flight
  for (int i = 0; i < 100000; ++i) overlap = overlap + i;
  r.Wait();
  EXPECT_TRUE(r.Ready());
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_TRUE(SameBytes(out[i].data(), in[i].data(), (i + 1) * 200 * kKiB, 100 + i));
  }
  // Two tickets in flight at once, collected in reverse order.
  IoTicket a = engine.ReadAsync(files[0], 0, in[0].data(), 200 * kKiB);
  IoTicket b = engine.ReadAsync(files[1], 0, in[1].data(), 400 * kKiB);
  EXPECT_EQ(b.Wait()[0], 400 * kKiB);
  EXPECT_EQ(a.Wait()[0], 200 * kKiB);
}

TEST_F(AioTest, ZeroLengthRequestsAreNoOps) {
  Engine engine;
  File f = File::Create(dir_.File("z"));
  engine.Write(f, 0, nullptr, 0);
  EXPECT_EQ(engine.ReadUpTo(f, 0, nullptr, 0), 0u);
  EXPECT_TRUE(engine.Submit({}).Wait().empty());
  EXPECT_EQ(engine.counters().write_requests, 0u);
}

// ---------------------------------------------------------------------------------------------
// Alignment: refused before submission, the message naming what is wrong.

TEST_F(AioTest, MisalignedBufferOffsetAndLengthAreRefused) {
  Engine engine;
  FileOptions o;
  o.min_alignment = 4096;  // a known requirement, whatever the filesystem reports
  const std::string path = dir_.File("m.bin");
  File f = File::Create(path, o);
  AlignedBuffer buf(64 * kKiB);
  engine.Write(f, 0, buf.data(), 64 * kKiB);

  struct Case {
    const char* what;
    uint8_t* buf;
    uint64_t offset, len;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"buffer", buf.data() + 512, 0, 4096, "buffer address 0x"},
      {"offset", buf.data(), 4097, 4096, "offset 4097 is not a multiple of 4096"},
      {"length", buf.data(), 4096, 4000, "length 4000 is not a multiple of 4096"},
  };
  for (const Case& k : cases) {
    for (IoOp op : {IoOp::kRead, IoOp::kWrite}) {
      SCOPED_TRACE(std::string(k.what) + (op == IoOp::kRead ? " read" : " write"));
      try {
        engine.Submit({{op, &f, k.offset, k.buf, k.len}}).Wait();
        ADD_FAILURE() << "misaligned " << k.what << " accepted";
      } catch (const AlignmentError& e) {
        const std::string m = e.what();
        EXPECT_TRUE(Contains(m, k.expect)) << m;
        EXPECT_TRUE(Contains(m, path)) << m;
        EXPECT_TRUE(Contains(m, "offset " + std::to_string(k.offset))) << m;
        EXPECT_TRUE(Contains(m, "length " + std::to_string(k.len))) << m;
        char addr[32];
        std::snprintf(addr, sizeof(addr), "%p", static_cast<void*>(k.buf));
        EXPECT_TRUE(Contains(m, addr)) << m << " (address " << addr << ")";
        EXPECT_EQ(e.error_number(), EINVAL);
        EXPECT_EQ(e.path(), path);
        EXPECT_EQ(e.offset(), k.offset);
        EXPECT_EQ(e.length(), k.len);
        EXPECT_EQ(e.address(), reinterpret_cast<uintptr_t>(k.buf));
        EXPECT_EQ(e.memory_alignment(), 4096u);
        EXPECT_EQ(e.offset_alignment(), 4096u);
      }
    }
  }
  EXPECT_EQ(engine.counters().read_requests, 0u);  // nothing reached the kernel
}

TEST_F(AioTest, MisalignedAgainstWhatTheFilesystemReports) {
  Engine engine;
  File f = File::Create(dir_.File("m2.bin"));
  AlignedBuffer buf(8192);
  if (f.memory_alignment() > 1) {
    EXPECT_THROW(engine.Write(f, 0, buf.data() + 1, f.offset_alignment()), AlignmentError);
  }
  EXPECT_THROW(engine.Write(f, 1, buf.data(), f.offset_alignment()), AlignmentError);
  EXPECT_THROW(engine.Write(f, 0, buf.data(), f.offset_alignment() + 1), AlignmentError);
}

TEST_F(AioTest, BlockSizeMustBeAMultipleOfTheFilesAlignment) {
  AioConfig c;
  c.block_size = 512;
  Engine engine(c);
  FileOptions o;
  o.min_alignment = 4096;
  File f = File::Create(dir_.File("b.bin"), o);
  AlignedBuffer buf(8192);
  try {
    engine.Write(f, 0, buf.data(), 8192);
    FAIL() << "block size 512 accepted on a 4096-aligned file";
  } catch (const AlignmentError& e) {
    EXPECT_TRUE(Contains(e.what(), "block_size 512")) << e.what();
  }
}

TEST_F(AioTest, WritingAReadOnlyFileIsRefused) {
  Engine engine;
  { File f = File::Create(dir_.File("ro")); }
  File f = File::Open(dir_.File("ro"), OpenMode::kReadOnly);
  AlignedBuffer buf(4096);
  try {
    engine.Write(f, 0, buf.data(), 4096);
    FAIL() << "wrote to a read-only file";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_number(), EBADF);
    EXPECT_TRUE(Contains(e.what(), "read-only")) << e.what();
  }
}

// The kernel's own answer to a misaligned request, let through on purpose (assume_alignment 1):
// -EINVAL in io_event.res, which must become an IoError.
TEST_F(AioTest, KernelEinvalInTheCompletionIsReported) {
  Engine engine;
  FileOptions o;
  o.assume_alignment = 1;
  File f = File::Create(dir_.File("k.bin"), o);
  AlignedBuffer buf(2 * 4096);
  try {
    engine.Write(f, 1, buf.data() + 1, 4095);
    ADD_FAILURE() << "the kernel accepted a misaligned O_DIRECT write (filesystem without "
                     "alignment rules?)";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_number(), EINVAL) << e.what();
    EXPECT_TRUE(Contains(e.what(), "EINVAL")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "aligned")) << e.what();
  }
  EXPECT_EQ(engine.counters().errors, 1u);
}

// ---------------------------------------------------------------------------------------------
// End of file.

TEST_F(AioTest, ShortReadAtEndOfFileIsReported) {
  for (uint32_t threads : {1u, 3u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    AioConfig c;
    c.block_size = 4 * unit_;
    c.intra_op_parallelism = threads;
    Engine engine(c);
    File f = File::Create(dir_.File("eof.bin"));
    const uint64_t written = 5 * unit_;
    AlignedBuffer out(written), in(16 * unit_);
    Fill(out.data(), written, 7);
    engine.Write(f, 0, out.data(), written);

    // The file ends on an aligned boundary, in the middle of the request.
    try {
      engine.Read(f, 0, in.data(), 16 * unit_);
      FAIL() << "short read not reported";
    } catch (const ShortReadError& e) {
      EXPECT_EQ(e.bytes_read(), written);
      EXPECT_EQ(e.length(), 16 * unit_);
      EXPECT_TRUE(Contains(e.what(), "found only " + std::to_string(written))) << e.what();
      EXPECT_TRUE(Contains(e.what(), f.path())) << e.what();
    }
    EXPECT_EQ(engine.ReadUpTo(f, 0, in.data(), 16 * unit_), written);
    EXPECT_TRUE(SameBytes(out.data(), in.data(), written, 7));

    // The file ends off the alignment (ftruncate to an odd size).
    const uint64_t odd = 3 * unit_ + 123;
    f.Truncate(odd);
    std::memset(in.data(), 0, in.size());
    EXPECT_EQ(engine.ReadUpTo(f, 0, in.data(), 16 * unit_), odd);
    EXPECT_TRUE(SameBytes(out.data(), in.data(), odd, 7));
    EXPECT_THROW(engine.Read(f, unit_, in.data(), 4 * unit_), ShortReadError);
    // Starting at or past the end: nothing.
    EXPECT_EQ(engine.ReadUpTo(f, 4 * unit_, in.data(), unit_), 0u);
    EXPECT_EQ(engine.ReadUpTo(f, 64 * unit_, in.data(), unit_), 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// Faults injected under the engine.

class FaultTest : public AioTest {
 protected:
  void SetUp() override {
    AioTest::SetUp();
    faults_ = std::make_shared<FaultInjectingKernelAio>();
  }

  // Writes `len` through an engine on the fault layer; the expected outcome is up to the test.
  std::unique_ptr<Engine> MakeEngine(uint64_t block_size, uint32_t queue_depth,
                                     uint32_t threads = 1, bool single_submit = false,
                                     bool overlap_events = true) {
    AioConfig c;
    c.block_size = block_size;
    c.queue_depth = queue_depth;
    c.intra_op_parallelism = threads;
    c.single_submit = single_submit;
    c.overlap_events = overlap_events;
    return std::make_unique<Engine>(c, faults_);
  }

  std::shared_ptr<FaultInjectingKernelAio> faults_;
};

// An injected errno in io_event.res on the k-th request is reported with the file, the offset
// and length of that request and the errno — on reads and writes, in every submission mode.
TEST_F(FaultTest, InjectedResultErrorsAreReported) {
  struct Mode {
    uint32_t threads;
    bool single_submit, overlap_events;
  };
  for (int err : {EIO, ENOSPC, EINVAL}) {
    for (const Mode& m :
         {Mode{1, false, true}, Mode{1, true, true}, Mode{1, false, false}, Mode{2, false, true}}) {
      for (IoOp op : {IoOp::kWrite, IoOp::kRead}) {
        SCOPED_TRACE(ErrnoText(err) + (op == IoOp::kRead ? " read" : " write") + " threads " +
                     std::to_string(m.threads) + " single " + std::to_string(m.single_submit) +
                     " overlap " + std::to_string(m.overlap_events));
        faults_ = std::make_shared<FaultInjectingKernelAio>();
        auto engine = MakeEngine(4 * unit_, 4, m.threads, m.single_submit, m.overlap_events);
        File f = File::Create(dir_.File("e.bin"));
        const uint64_t len = 32 * unit_;
        AlignedBuffer buf(len);
        if (op == IoOp::kRead) engine->Write(f, 0, buf.data(), len);
        const uint64_t k = faults_->stats().requests + 5;
        faults_->FailRequest(k, err);
        try {
          engine->Submit({{op, &f, 0, buf.data(), len}}).Wait();
          ADD_FAILURE() << "injected error ignored";
        } catch (const ShortReadError& e) {
          ADD_FAILURE() << "reported as a short read: " << e.what();
        } catch (const IoError& e) {
          EXPECT_EQ(e.error_number(), err) << e.what();
          EXPECT_EQ(e.path(), f.path());
          EXPECT_EQ(e.length(), 4 * unit_) << e.what();
          EXPECT_EQ(e.offset() % (4 * unit_), 0u) << e.what();
          EXPECT_TRUE(Contains(e.what(), f.path())) << e.what();
          EXPECT_TRUE(Contains(e.what(), ErrnoText(err))) << e.what();
          EXPECT_TRUE(Contains(e.what(), "offset " + std::to_string(e.offset()))) << e.what();
        }
        EXPECT_EQ(faults_->stats().failed_requests, 1u);
        EXPECT_EQ(engine->counters().errors, 1u);
        // The engine is usable afterwards: nothing left in flight, nothing stuck.
        engine->Write(f, 0, buf.data(), len);
      }
    }
  }
}

TEST_F(FaultTest, InjectedEioOnTheKthRequestNamesThatRequest) {
  auto engine = MakeEngine(unit_, 1);  // one request at a time: request k is block k
  File f = File::Create(dir_.File("k.bin"));
  AlignedBuffer buf(10 * unit_);
  faults_->FailRequest(6, EIO);
  try {
    engine->Write(f, 0, buf.data(), 10 * unit_);
    FAIL() << "EIO ignored";
  } catch (const IoError& e) {
    EXPECT_EQ(e.offset(), 6 * unit_) << e.what();
    EXPECT_EQ(e.length(), unit_) << e.what();
    EXPECT_EQ(e.error_number(), EIO);
  }
  // Blocks before the failed one were written, nothing after it was submitted.
  EXPECT_EQ(engine->counters().write_bytes, 6 * unit_);
  EXPECT_EQ(faults_->stats().requests, 7u);
}

// Every request comes back short: the engine continues each one until complete, and the data
// read back is right.
TEST_F(FaultTest, ShortTransfersAreCompleted) {
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "lockstep");
    faults_ = std::make_shared<FaultInjectingKernelAio>();
    auto engine = MakeEngine(8 * unit_, 4, 2, false, overlap);
    File f = File::Create(dir_.File("s.bin"));
    const uint64_t len = 37 * unit_;
    AlignedBuffer out(len), in(len);
    Fill(out.data(), len, 11);
    faults_->ShortenRequest(0, 3 * unit_, 1);  // every request moves at most 3 units
    engine->Write(f, 0, out.data(), len);
    engine->Read(f, 0, in.data(), len);
    EXPECT_TRUE(SameBytes(out.data(), in.data(), len, 11));
    const IoCounters n = engine->counters();
    EXPECT_GT(n.short_transfers_resubmitted, 0u);
    EXPECT_EQ(n.short_transfers_resubmitted, faults_->stats().short_requests);
    EXPECT_EQ(n.write_bytes, len);
    EXPECT_EQ(n.read_bytes, len);
    EXPECT_EQ(f.Size(), len);
  }
}

// A single short transfer on the k-th request only.
TEST_F(FaultTest, OneShortTransferIsCompleted) {
  auto engine = MakeEngine(16 * unit_, 8);
  File f = File::Create(dir_.File("s1.bin"));
  const uint64_t len = 64 * unit_;
  AlignedBuffer out(len), in(len);
  Fill(out.data(), len, 12);
  engine->Write(f, 0, out.data(), len);
  faults_->ShortenRequest(faults_->stats().requests + 2, unit_);
  engine->Read(f, 0, in.data(), len);
  EXPECT_TRUE(SameBytes(out.data(), in.data(), len, 12));
  EXPECT_EQ(engine->counters().short_transfers_resubmitted, 1u);
  EXPECT_EQ(faults_->stats().short_requests, 1u);
}

// io_submit accepts fewer iocbs than asked: the rest is resubmitted.
TEST_F(FaultTest, PartialSubmitsAreCompleted) {
  for (long accept : {1L, 3L}) {
    SCOPED_TRACE("accept " + std::to_string(accept));
    faults_ = std::make_shared<FaultInjectingKernelAio>();
    auto engine = MakeEngine(unit_, 16);
    File f = File::Create(dir_.File("p.bin"));
    const uint64_t len = 50 * unit_;
    AlignedBuffer out(len), in(len);
    Fill(out.data(), len, 13);
    faults_->PartialSubmit(0, accept, 1);  // every call
    engine->Write(f, 0, out.data(), len);
    engine->Read(f, 0, in.data(), len);
    EXPECT_TRUE(SameBytes(out.data(), in.data(), len, 13));
    EXPECT_GT(faults_->stats().partial_submits, 0u);
    EXPECT_EQ(engine->counters().partial_submits, faults_->stats().partial_submits);
  }
}

// EAGAIN from io_submit is transient: retried until accepted.
TEST_F(FaultTest, SubmitEagainIsRetried) {
  auto engine = MakeEngine(unit_, 8);
  File f = File::Create(dir_.File("a.bin"));
  const uint64_t len = 20 * unit_;
  AlignedBuffer out(len), in(len);
  Fill(out.data(), len, 14);
  faults_->FailSubmit(0, EAGAIN, 2);  // every other call
  engine->Write(f, 0, out.data(), len);
  engine->Read(f, 0, in.data(), len);
  EXPECT_TRUE(SameBytes(out.data(), in.data(), len, 14));
  EXPECT_GT(faults_->stats().failed_submits, 0u);
  EXPECT_EQ(engine->counters().submit_retries, faults_->stats().failed_submits);
}

// Any other io_submit error is reported.
TEST_F(FaultTest, SubmitErrorsAreReported) {
  for (int err : {EBADF, EINVAL, ENOMEM}) {
    SCOPED_TRACE(ErrnoText(err));
    faults_ = std::make_shared<FaultInjectingKernelAio>();
    auto engine = MakeEngine(unit_, 4);
    File f = File::Create(dir_.File("se.bin"));
    AlignedBuffer buf(16 * unit_);
    faults_->FailSubmit(2, err);
    try {
      engine->Write(f, 0, buf.data(), 16 * unit_);
      ADD_FAILURE() << "io_submit error ignored";
    } catch (const IoError& e) {
      EXPECT_EQ(e.error_number(), err) << e.what();
      EXPECT_TRUE(Contains(e.what(), "io_submit")) << e.what();
      EXPECT_TRUE(Contains(e.what(), f.path())) << e.what();
    }
    engine->Write(f, 0, buf.data(), 16 * unit_);  // usable afterwards
  }
}

// All faults at once, on many requests, with several workers: the data is still right when no
// fault is an error, and the first error is reported when one is.
TEST_F(FaultTest, MixedFaultsWithSeveralWorkers) {
  auto engine = MakeEngine(4 * unit_, 8, 3);
  File f = File::Create(dir_.File("mix.bin"));
  const uint64_t len = 200 * unit_;
  AlignedBuffer out(len), in(len);
  Fill(out.data(), len, 15);
  faults_->ShortenRequest(1, unit_, 3);
  faults_->PartialSubmit(0, 2, 2);
  faults_->FailSubmit(1, EAGAIN, 5);
  engine->Write(f, 0, out.data(), len);
  engine->Read(f, 0, in.data(), len);
  EXPECT_TRUE(SameBytes(out.data(), in.data(), len, 15));
  faults_->FailRequest(faults_->stats().requests + 40, EIO);
  EXPECT_THROW(engine->Read(f, 0, in.data(), len), IoError);
  EXPECT_EQ(faults_->stats().failed_requests, 1u);
}

// A ticket dropped without Wait() still waits for its transfers and prints its error.
TEST_F(FaultTest, AnUncollectedErrorIsPrintedNotLost) {
  auto engine = MakeEngine(unit_, 4);
  File f = File::Create(dir_.File("u.bin"));
  AlignedBuffer buf(8 * unit_);
  faults_->FailRequest(3, EIO);
  ::testing::internal::CaptureStderr();
  { IoTicket t = engine->WriteAsync(f, 0, buf.data(), 8 * unit_); }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(Contains(err, "nobody collected")) << err;
  EXPECT_TRUE(Contains(err, "EIO")) << err;
}

}  // namespace
}  // namespace csdkit::aio
