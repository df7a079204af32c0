#include "io_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/aio/file.h"
#include "csdkit/aio/io_error.h"

extern char** environ;

namespace csdkit::bench {

namespace {

namespace fs = std::filesystem;

constexpr double kTargetRatio = 0.9;
constexpr uint64_t kHugePage = uint64_t{2} << 20;  // the x86-64 THP size
// Largest buffer (queue_depth * block_size) a configuration may ask for.
constexpr uint64_t kMaxBuffer = uint64_t{1} << 30;
constexpr unsigned kMaxReps = 1000;
// Median device request sizes of engine and fio further apart than this factor get a note.
constexpr double kUnequalRequests = 1.5;

double Gbps(uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Trim(std::string s, size_t max = 2000) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Best(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// ---- the machine: huge-page settings and the block device under the file ----

// The selected word of a sysfs choice file ("always [madvise] never" -> "madvise"), or "".
std::string SysfsChoice(const std::string& path) {
  const std::string s = ReadText(path);
  const size_t a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos || b < a ? ""
                                                                   : s.substr(a + 1, b - a - 1);
}

// A "Name:  value" field of /proc/meminfo (kB fields in kB), or -1.
long long MeminfoField(const std::string& name) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, name.size() + 1, name + ":") == 0) {
      return std::atoll(line.c_str() + name.size() + 1);
    }
  }
  return -1;
}

struct HugetlbPool {
  uint64_t page_size = 0;  // bytes (Hugepagesize)
  long long free_pages = -1;
  std::vector<std::string> mounts;  // hugetlbfs mount points
};

HugetlbPool ReadHugetlbPool() {
  HugetlbPool p;
  const long long kb = MeminfoField("Hugepagesize");
  p.page_size = kb > 0 ? static_cast<uint64_t>(kb) * 1024 : 0;
  p.free_pages = MeminfoField("HugePages_Free");
  std::ifstream in("/proc/mounts");
  std::string dev, mnt, type;
  std::string rest;
  while (in >> dev >> mnt >> type && std::getline(in, rest)) {
    if (type == "hugetlbfs") p.mounts.push_back(mnt);
  }
  return p;
}

// Completed requests and 512-byte sectors of the block device holding the file, from its sysfs
// `stat`. The counts are per device, so other I/O on the same disk is included.
struct DeviceCounts {
  uint64_t read_ios = 0, read_sectors = 0, write_ios = 0, write_sectors = 0;
};

class BlockDevice {
 public:
  explicit BlockDevice(const std::string& file) {
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) return;
    const std::string dir = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                            std::to_string(minor(st.st_dev));
    if (::access((dir + "/stat").c_str(), R_OK) != 0) return;
    stat_path_ = dir + "/stat";
    std::error_code ec;
    name_ = fs::canonical(dir, ec).filename().string();
    // A partition's request limits are its disk's.
    const std::string queue = fs::exists(dir + "/queue", ec) ? dir + "/queue" : dir + "/../queue";
    max_segments_ = ReadText(queue + "/max_segments");
    max_sectors_kb_ = ReadText(queue + "/max_sectors_kb");
  }

  bool ok() const { return !stat_path_.empty(); }

  DeviceCounts Read() const {
    DeviceCounts c;
    if (!ok()) return c;
    std::istringstream in(ReadText(stat_path_));
    uint64_t merges = 0, ticks = 0;
    in >> c.read_ios >> merges >> c.read_sectors >> ticks >> c.write_ios >> merges >>
        c.write_sectors;
    return c;
  }

  nlohmann::json ToJson() const {
    if (!ok()) {
      return {{"available", false},
              {"note",
               "no readable /sys/dev/block/<major>:<minor>/stat for the file's device "
               "(e.g. overlay or network filesystem): request counts are not reported"}};
    }
    return {{"available", true},
            {"name", name_},
            {"stat", stat_path_},
            {"max_segments", Trim(max_segments_)},
            {"max_sectors_kb", Trim(max_sectors_kb_)},
            {"note",
             "device counts include all I/O on this device during a measurement: other "
             "programs', and for fio its whole run, start-up included"}};
  }

 private:
  std::string stat_path_, name_, max_segments_, max_sectors_kb_;
};

// ---- the engine's buffer ----

const char* BufferKind(bool huge) {
  return huge ? "transparent huge pages: anonymous mmap, 2 MiB aligned, MADV_HUGEPAGE"
              : "4 KiB pages: anonymous mmap, MADV_NOHUGEPAGE";
}

// An anonymous private mapping holding `bytes`, advised for 4 KiB pages (MADV_NOHUGEPAGE) or for
// transparent huge pages (2 MiB aligned and rounded, MADV_HUGEPAGE). With `fill`, written once
// (every page faulted in); without, untouched, so the first transfers into it fault its pages in.
// The bench makes a new one for every engine measurement and fills it for writes only, which is
// what fio does with its buffer in each run (fio fills write buffers before the job starts; its
// read jobs show about one minor fault per 4 KiB of buffer): both tools sample the page
// allocator alike and pay the same faults.
class PageBuffer {
 public:
  PageBuffer(uint64_t bytes, bool huge, bool fill) : bytes_(bytes) {
    const uint64_t advised = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    map_len_ = huge ? advised + kHugePage : (bytes + 4095) / 4096 * 4096;
    map_ = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map_ == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t p = reinterpret_cast<uintptr_t>(map_);
    data_ = reinterpret_cast<uint8_t*>(huge ? (p + kHugePage - 1) / kHugePage * kHugePage : p);
    if (::madvise(data_, huge ? advised : map_len_, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
      advice_error_ = std::string(huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE") +
                      " refused: " + aio::ErrnoText(errno);
    }
    for (uint64_t i = 0; fill && i + 8 <= bytes_; i += 8) {
      const uint64_t v = i * 0x9e3779b97f4a7c15ull;
      std::memcpy(data_ + i, &v, 8);
    }
  }
  ~PageBuffer() {
    if (map_ != MAP_FAILED) ::munmap(map_, map_len_);
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() { return data_; }
  uint64_t size() const { return bytes_; }
  const std::string& advice_error() const { return advice_error_; }

  // Bytes of the buffer's mappings that are backed by transparent huge pages (AnonHugePages of
  // /proc/self/smaps, summed over the mappings that overlap the buffer).
  uint64_t HugePageBytes() const {
    std::ifstream in("/proc/self/smaps");
    std::string line;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(data_), hi = lo + bytes_;
    bool inside = false;
    uint64_t kb = 0;
    while (std::getline(in, line)) {
      unsigned long a = 0, b = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &a, &b) == 2 && line.find(':') > line.find(' ')) {
        inside = a < hi && b > lo;
      } else if (inside && line.compare(0, 14, "AnonHugePages:") == 0) {
        kb += std::strtoull(line.c_str() + 14, nullptr, 10);
      }
    }
    return std::min<uint64_t>(kb * 1024, bytes_);
  }

  // Mean number of physically contiguous runs per `block` bytes of the buffer: the scatter-gather
  // segments one request of that size needs before the device's limits (max_segments) apply.
  // From /proc/self/pagemap; -1 when the kernel hides frame numbers (no CAP_SYS_ADMIN) or when
  // `block` is not a multiple of 4096.
  double RunsPerBlock(uint64_t block) const {
    constexpr uint64_t kPage = 4096, kPfnMask = (uint64_t{1} << 55) - 1;
    if (block % kPage != 0 || bytes_ < block) return -1;
    const uint64_t pages = bytes_ / kPage;
    std::vector<uint64_t> entries(pages);
    const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(data_) / kPage * 8);
    const ssize_t n = ::pread(fd, entries.data(), pages * 8, at);
    ::close(fd);
    if (n != static_cast<ssize_t>(pages * 8)) return -1;
    for (uint64_t& e : entries) {
      if ((e >> 63) == 0 || (e & kPfnMask) == 0) return -1;  // not present, or hidden
      e &= kPfnMask;
    }
    const uint64_t per_block = block / kPage, blocks = pages / per_block;
    uint64_t runs = 0;
    for (uint64_t k = 0; k < blocks; ++k) {
      runs += 1;
      for (uint64_t i = k * per_block + 1; i < (k + 1) * per_block; ++i) {
        if (entries[i] != entries[i - 1] + 1) ++runs;
      }
    }
    return static_cast<double>(runs) / blocks;
  }

 private:
  uint64_t bytes_ = 0;
  void* map_ = MAP_FAILED;
  uint64_t map_len_ = 0;
  uint8_t* data_ = nullptr;
  std::string advice_error_;
};

double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// One timed measurement of one tool in one direction.
struct Sample {
  double gbps = 0;
  double cpu_seconds = 0;
  uint64_t device_requests = 0;
  uint64_t device_bytes = 0;
  // Engine only: the buffer's huge-page bytes and physically contiguous runs per block (-1:
  // unknown).
  uint64_t huge_page_bytes = 0;
  double runs_per_block = -1;
};

void SetDeviceDelta(const DeviceCounts& a, const DeviceCounts& b, bool write, Sample* s) {
  s->device_requests = write ? b.write_ios - a.write_ios : b.read_ios - a.read_ios;
  s->device_bytes =
      512 * (write ? b.write_sectors - a.write_sectors : b.read_sectors - a.read_sectors);
}

// The samples of one tool in one direction, in rep order.
struct Series {
  std::vector<Sample> samples;

  std::vector<double> Gbps() const {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.gbps);
    return v;
  }
  double MedianGbps() const { return Median(Gbps()); }
  double MedianRequestKib() const {
    std::vector<double> v;
    for (const Sample& s : samples) {
      if (s.device_requests > 0) v.push_back(s.device_bytes / 1024.0 / s.device_requests);
    }
    return Median(v);
  }
  double BestGbps() const { return Best(Gbps()); }

  nlohmann::json ToJson(bool with_device, bool engine) const {
    std::vector<double> cpu, reqs, kib, runs;
    uint64_t huge_min = UINT64_MAX;
    for (const Sample& s : samples) {
      cpu.push_back(s.cpu_seconds);
      reqs.push_back(static_cast<double>(s.device_requests));
      kib.push_back(s.device_requests > 0 ? s.device_bytes / 1024.0 / s.device_requests : 0.0);
      if (s.runs_per_block >= 0) runs.push_back(s.runs_per_block);
      huge_min = std::min(huge_min, s.huge_page_bytes);
    }
    nlohmann::json j = {{"GBps", Gbps()},
                        {"median_GBps", MedianGbps()},
                        {"best_GBps", BestGbps()},
                        {"cpu_seconds_median", Median(cpu)}};
    if (with_device) {
      j["device_requests"] = reqs;
      j["device_request_KiB"] = kib;
      j["device_request_KiB_median"] = Median(kib);
    }
    if (engine && !samples.empty()) {
      j["buffer_huge_page_bytes_min"] = huge_min;
      if (runs.size() == samples.size()) {
        j["buffer_contiguous_runs_per_block"] = runs;
        j["buffer_contiguous_runs_per_block_median"] = Median(runs);
      }
    }
    return j;
  }
};

// Times the engine over the whole file through a new buffer of `buffer_bytes`: one batch of
// requests of buffer_bytes (the last one shorter), all on that buffer, so the engine cycles
// through it as fio cycles through its iodepth * bs buffer.
Sample TimeEngine(aio::Engine& engine, const aio::File& file, bool huge, uint64_t buffer_bytes,
                  uint64_t size, bool write, const BlockDevice& dev, std::string* advice_error) {
  PageBuffer buf(buffer_bytes, huge, write);
  if (advice_error != nullptr && advice_error->empty()) *advice_error = buf.advice_error();
  Sample s;
  std::vector<aio::IoRequest> requests;
  for (uint64_t off = 0; off < size; off += buf.size()) {
    aio::IoRequest q;
    q.op = write ? aio::IoOp::kWrite : aio::IoOp::kRead;
    q.file = &file;
    q.offset = off;
    q.buf = buf.data();
    q.len = std::min(buf.size(), size - off);
    requests.push_back(q);
  }
  const DeviceCounts d0 = dev.Read();
  const double c0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  engine.Submit(std::move(requests)).Wait();
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  s.cpu_seconds = CpuSeconds() - c0;
  SetDeviceDelta(d0, dev.Read(), write, &s);
  s.gbps = Gbps(size, dt.count());
  // Every page of the buffer is present now.
  s.huge_page_bytes = buf.HugePageBytes();
  s.runs_per_block = buf.RunsPerBlock(engine.config().block_size);
  return s;
}

// ---- fio ----

// The fio executable, or "" when it cannot be found.
std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct ProgramRun {
  int status = -1;  // exit code, or -1 if it did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs argv (no shell), stdout captured through a pipe, stderr through a new file of a unique
// name in `scratch`, removed afterwards.
ProgramRun RunProgram(const std::vector<std::string>& argv, const std::string& scratch) {
  ProgramRun r;
  std::string err_path = scratch + "/csdkit_io_bench.stderr.XXXXXX";
  const int err_fd = ::mkostemp(err_path.data(), O_CLOEXEC);
  if (err_fd < 0) {
    r.err = "cannot create a file for fio's stderr in " + scratch + ": " + aio::ErrnoText(errno);
    return r;
  }
  int pipe_fd[2];
  if (::pipe2(pipe_fd, O_CLOEXEC) != 0) {
    r.err = "pipe: " + aio::ErrnoText(errno);
    ::close(err_fd);
    ::unlink(err_path.c_str());
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fd[1]);
  if (rc != 0) {
    ::close(pipe_fd[0]);
    ::close(err_fd);
    ::unlink(err_path.c_str());
    r.err = "cannot start " + argv[0] + ": " + aio::ErrnoText(rc);
    return r;
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(pipe_fd[0], buf, sizeof(buf));
    if (n > 0) {
      r.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ::close(err_fd);
  r.err = ReadText(err_path);
  ::unlink(err_path.c_str());
  return r;
}

// How fio gets its buffer in one configuration.
struct FioBuffer {
  std::vector<std::string> options;  // fio command-line options
  std::string kind;                  // in words, for the JSON
  std::string unavailable;           // why fio cannot run this configuration ("" if it can)
};

// One fio job, sequential, on the engine's file: same block size, queue depth and bytes, one
// job. Checks that fio ran with direct=1, without error, and moved exactly `size` bytes.
Sample RunFio(const std::string& fio, const std::string& file, bool write, const FioBuffer& mem,
              const IoBenchOptions& o, const std::string& scratch, const BlockDevice& dev,
              std::vector<std::string>* command, std::string* version, std::string* error) {
  const std::string rw = write ? "write" : "read";
  std::vector<std::string> argv = {fio,
                                   "--name=csdkit_io_" + rw,
                                   "--filename=" + file,
                                   "--ioengine=libaio",
                                   "--direct=1",
                                   "--rw=" + rw,
                                   "--bs=" + std::to_string(o.block_size),
                                   "--iodepth=" + std::to_string(o.queue_depth),
                                   "--numjobs=1",
                                   "--size=" + std::to_string(o.size),
                                   "--output-format=json"};
  argv.insert(argv.end(), mem.options.begin(), mem.options.end());
  *command = argv;
  Sample s;
  const DeviceCounts d0 = dev.Read();
  const ProgramRun run = RunProgram(argv, scratch);
  SetDeviceDelta(d0, dev.Read(), write, &s);
  // fio may print notes before the JSON document.
  const size_t start = run.out.find('{');
  const nlohmann::json j = nlohmann::json::parse(
      start == std::string::npos ? std::string() : run.out.substr(start), nullptr, false);
  const bool parsed = !j.is_discarded() && j.contains("jobs") && j["jobs"].is_array() &&
                      !j["jobs"].empty() && j["jobs"][0].contains(rw);
  const std::string what = "fio --rw=" + rw + " " + Trim(mem.options.empty() ? "" : mem.options[0]);
  if (run.status != 0 || (parsed && j["jobs"][0].value("error", 0) != 0)) {
    *error = what + " failed (exit status " + std::to_string(run.status) +
             "): " + Trim(run.err.empty() ? run.out : run.err);
    return s;
  }
  if (!parsed) {
    *error = "cannot parse fio's JSON output for " + what + ": " + Trim(run.out, 500);
    return s;
  }
  const nlohmann::json& job = j["jobs"][0];
  const nlohmann::json opts = job.value("job options", nlohmann::json::object());
  if (opts.value("direct", "") != "1") {
    *error = what + " did not report direct=1 among its job options: " + opts.dump();
    return s;
  }
  const nlohmann::json& d = job[rw];
  const uint64_t io_bytes = d.value("io_bytes", uint64_t{0});
  const double runtime_ms = d.value("runtime", 0.0);
  if (io_bytes != o.size || runtime_ms <= 0) {
    *error = what + " moved " + std::to_string(io_bytes) + " bytes in " +
             std::to_string(runtime_ms) + " ms; expected " + std::to_string(o.size) + " bytes";
    return s;
  }
  s.gbps = Gbps(io_bytes, runtime_ms / 1e3);
  s.cpu_seconds = (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) / 100 * runtime_ms / 1e3;
  *version = j.value("fio version", "");
  return s;
}

// ---- configurations ----

struct Configuration {
  std::string name;
  bool huge = false;
  std::string advice_error;  // from madvise on the engine's buffer
  FioBuffer fio;
  std::string fio_error;
  std::vector<std::string> fio_read_command, fio_write_command;
  Series engine_read, engine_write, fio_read, fio_write;
};

FioBuffer FioBufferFor(bool huge, const HugetlbPool& pool, uint64_t buffer_bytes) {
  FioBuffer f;
  if (!huge) {
    f.options = {"--iomem=malloc"};
    f.kind =
        "iomem=malloc (fio's default): heap memory, 4 KiB pages unless the system's THP "
        "mode is 'always'";
    return f;
  }
  const uint64_t page = pool.page_size != 0 ? pool.page_size : kHugePage;
  f.options = {"--iomem=mmaphuge", "--hugepage-size=" + std::to_string(page)};
  f.kind = "iomem=mmaphuge: anonymous mmap(MAP_HUGETLB) of hugetlb pool pages of " +
           std::to_string(page) +
           " bytes (fio has no transparent-huge-page buffer option; its huge-page modes "
           "iomem=shmhuge and iomem=mmaphuge both need the hugetlb pool)";
  // fio rounds its iodepth * bs buffer (plus alignment slack) up to whole huge pages.
  const long long need = static_cast<long long>((buffer_bytes + 4096 + page - 1) / page);
  if (pool.free_pages < need) {
    f.unavailable =
        "fio's huge-page buffers need " + std::to_string(need) + " free hugetlb pages of " +
        std::to_string(page) +
        " bytes; this machine has HugePages_Free = " + std::to_string(pool.free_pages) + " and " +
        (pool.mounts.empty() ? std::string("no hugetlbfs mount")
                             : std::to_string(pool.mounts.size()) + " hugetlbfs mount(s)") +
        ". An administrator can reserve pages with /proc/sys/vm/nr_hugepages; the bench does "
        "not change system settings, so fio is not run for this configuration";
  }
  return f;
}

void Progress(const IoBenchOptions& o, const std::string& line) {
  if (o.progress) std::fprintf(stderr, "io bench: %s\n", line.c_str());
}

// Removes what the bench created, on every exit path.
struct Cleanup {
  std::string file, dir;
  bool keep_file = false;
  ~Cleanup() {
    std::error_code ec;
    if (!keep_file && !file.empty()) fs::remove(file, ec);
    if (!keep_file && !dir.empty()) fs::remove(dir, ec);  // only if empty
  }
};

void CheckOptions(const IoBenchOptions& o) {
  const auto bad = [](const std::string& option, const std::string& expected,
                      const std::string& found) {
    throw std::invalid_argument("io bench: " + option + ": expected " + expected + ", found " +
                                found);
  };
  if (o.block_size < aio::AioConfig::kMinBlockSize ||
      o.block_size > aio::AioConfig::kMaxBlockSize ||
      o.block_size % aio::AioConfig::kBlockSizeGranule != 0) {
    bad("--block-size", "a multiple of 512 from 512 to 1G (1073741824) bytes",
        std::to_string(o.block_size));
  }
  if (o.queue_depth < 1 || o.queue_depth > aio::AioConfig::kMaxQueueDepth) {
    bad("--queue-depth", "from 1 to " + std::to_string(aio::AioConfig::kMaxQueueDepth),
        std::to_string(o.queue_depth));
  }
  if (o.intra_op_parallelism < 1 ||
      o.intra_op_parallelism > aio::AioConfig::kMaxIntraOpParallelism) {
    bad("--threads", "from 1 to " + std::to_string(aio::AioConfig::kMaxIntraOpParallelism),
        std::to_string(o.intra_op_parallelism));
  }
  if (o.size == 0 || o.size % o.block_size != 0) {
    bad("--size",
        "a positive multiple of --block-size (" + std::to_string(o.block_size) + "), e.g. " +
            std::to_string((o.size / o.block_size + 1) * o.block_size),
        std::to_string(o.size));
  }
  if (o.queue_depth * o.block_size > kMaxBuffer) {
    bad("--queue-depth * --block-size (the buffer of each tool)",
        "at most 1G (" + std::to_string(kMaxBuffer) + ") bytes",
        std::to_string(o.queue_depth) + " * " + std::to_string(o.block_size) + " = " +
            std::to_string(o.queue_depth * o.block_size));
  }
  if (o.reps < 1 || o.reps > kMaxReps) {
    bad("--reps", "from 1 to " + std::to_string(kMaxReps), std::to_string(o.reps));
  }
  if (o.pages != "4k" && o.pages != "thp" && o.pages != "both") {
    bad("--pages", "one of 4k, thp, both", "'" + o.pages + "'");
  }
  if (o.fio.empty()) bad("--fio", "a program name or path", "\"\"");
}

}  // namespace

nlohmann::json IoBench(const IoBenchOptions& o) {
  CheckOptions(o);
  aio::AioConfig config;
  config.block_size = o.block_size;
  config.queue_depth = o.queue_depth;
  config.intra_op_parallelism = o.intra_op_parallelism;
  config.single_submit = o.single_submit;
  config.overlap_events = o.overlap_events;
  config.Validate();

  Cleanup cleanup;
  cleanup.keep_file = o.keep_file;
  std::string dir = o.dir;
  if (dir.empty()) {
    std::string tmpl = (fs::current_path() / "csdkit_io_bench.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("io bench: cannot create a directory under " +
                               fs::current_path().string() + ": " + aio::ErrnoText(errno) +
                               "; give one with --dir");
    }
    dir = tmpl;
    cleanup.dir = dir;
  } else if (!fs::is_directory(dir)) {
    throw std::invalid_argument("io bench: --dir: expected an existing directory, found '" + dir +
                                "' (missing or not a directory); create it first");
  }
  // A new file of a unique name: nothing that was there before is opened for writing.
  std::string path = (fs::path(dir) / "csdkit_io_bench.XXXXXX.dat").string();
  const int fd = ::mkostemps(path.data(), 4, O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("io bench: cannot create a file in " + dir + ": " +
                             aio::ErrnoText(errno));
  }
  ::close(fd);
  cleanup.file = path;
  aio::File file = aio::File::Open(path, aio::OpenMode::kReadWrite);  // explains no O_DIRECT
  if (o.block_size % file.offset_alignment() != 0) {
    throw std::invalid_argument(
        "io bench: --block-size: expected a multiple of the direct-I/O alignment of " + dir + " (" +
        std::to_string(file.offset_alignment()) + " bytes), found " + std::to_string(o.block_size));
  }
  file.Allocate(o.size);
  const BlockDevice dev(path);
  const HugetlbPool pool = ReadHugetlbPool();
  const uint64_t buffer_bytes = uint64_t{o.queue_depth} * o.block_size;

  std::vector<Configuration> configs;
  for (const bool huge : {false, true}) {
    if (o.pages == (huge ? "4k" : "thp")) continue;
    Configuration c;
    c.name = huge ? "thp" : "4k_pages";
    c.huge = huge;
    c.fio = FioBufferFor(huge, pool, buffer_bytes);
    configs.push_back(std::move(c));
  }

  aio::Engine engine(config);
  // Write the whole file once, untimed, so both tools then read and overwrite allocated,
  // written blocks (no unwritten-extent conversion in the timed runs, and a file of exactly
  // --size bytes, which fio uses as it is instead of laying it out).
  Progress(o, "preparing " + path + " (" + std::to_string(o.size) + " bytes)");
  TimeEngine(engine, file, false, buffer_bytes, o.size, true, dev, nullptr);
  engine.ResetCounters();

  const std::string fio = FindProgram(o.fio);
  std::string fio_version;

  // Rep by rep, every configuration and direction; within each engine/fio pair the tool that goes
  // first alternates from rep to rep, so neither one always runs first.
  for (unsigned rep = 0; rep < o.reps; ++rep) {
    for (Configuration& c : configs) {
      for (const bool write : {false, true}) {
        const char* dir_name = write ? "write" : "read";
        for (int turn = 0; turn < 2; ++turn) {
          const bool engine_turn = (turn == 0) == (rep % 2 == 0);
          std::string line = "rep " + std::to_string(rep) + " " + c.name + " " + dir_name + ": ";
          if (engine_turn) {
            const Sample s =
                TimeEngine(engine, file, c.huge, buffer_bytes, o.size, write, dev, &c.advice_error);
            (write ? c.engine_write : c.engine_read).samples.push_back(s);
            Progress(o, line + "engine " + std::to_string(s.gbps) + " GB/s");
          } else if (!fio.empty() && c.fio.unavailable.empty() && c.fio_error.empty()) {
            const Sample s = RunFio(fio, path, write, c.fio, o, dir, dev,
                                    write ? &c.fio_write_command : &c.fio_read_command,
                                    &fio_version, &c.fio_error);
            if (c.fio_error.empty()) {
              (write ? c.fio_write : c.fio_read).samples.push_back(s);
              Progress(o, line + "fio " + std::to_string(s.gbps) + " GB/s");
            } else {
              Progress(o, line + "fio failed: " + c.fio_error);
            }
          }
        }
      }
    }
  }

  nlohmann::json out;
  out["bench"] = "io";
  out["file"] = path;
  out["alignment"] = {{"memory", file.memory_alignment()},
                      {"offset", file.offset_alignment()},
                      {"from_statx", file.alignment_from_statx()}};
  out["size_bytes"] = o.size;
  out["config"] = config.ToJson();
  out["reps"] = o.reps;
  out["units"] = "GB/s, 1 GB = 1e9 bytes";
  out["same_for_both_tools"] = {
      {"file", path},
      {"bytes_per_measurement", o.size},
      {"block_size", o.block_size},
      {"queue_depth", o.queue_depth},
      {"direct", true},
      {"buffer_bytes", buffer_bytes},
      {"buffer_lifecycle",
       "a new buffer for every measurement, filled before writes and untouched before reads "
       "(its pages are faulted in by the first transfers), as fio does in each run"},
      {"order",
       "per rep: each configuration, read then write; engine first on even reps, fio "
       "first on odd reps"}};
  const std::string thp_enabled = SysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled");
  out["system"] = {{"thp_enabled", thp_enabled},
                   {"thp_defrag", SysfsChoice("/sys/kernel/mm/transparent_hugepage/defrag")},
                   {"hugetlb",
                    {{"page_size", pool.page_size},
                     {"free_pages", pool.free_pages},
                     {"hugetlbfs_mounts", pool.mounts}}},
                   {"block_device", dev.ToJson()}};
  nlohmann::json fio_json = {{"available", !fio.empty()}};
  if (fio.empty()) {
    fio_json["note"] =
        "fio (" + o.fio + ") " +
        (o.fio.find('/') != std::string::npos ? "is not an executable file" : "not found in PATH") +
        "; install it (scripts/setup) for the comparison";
  } else {
    fio_json["path"] = fio;
    if (!fio_version.empty()) fio_json["version"] = fio_version;
  }
  out["fio"] = fio_json;

  nlohmann::json cfgs = nlohmann::json::array();
  for (const Configuration& c : configs) {
    nlohmann::json j;
    j["name"] = c.name;
    nlohmann::json buffer = {{"kind", BufferKind(c.huge)}, {"bytes", buffer_bytes}};
    if (!c.advice_error.empty()) buffer["advice_error"] = c.advice_error;
    if (c.huge) {
      uint64_t least = buffer_bytes;
      for (const Series* e : {&c.engine_read, &c.engine_write}) {
        for (const Sample& s : e->samples) least = std::min(least, s.huge_page_bytes);
      }
      if (least < buffer_bytes) {
        buffer["note"] = "some measurements had only " + std::to_string(least) + " of " +
                         std::to_string(buffer_bytes) +
                         " buffer bytes in transparent huge pages (THP mode '" + thp_enabled +
                         "', or no free 2 MiB blocks)";
      }
    }
    j["engine"] = {{"buffer", buffer},
                   {"read", c.engine_read.ToJson(dev.ok(), true)},
                   {"write", c.engine_write.ToJson(dev.ok(), true)}};
    nlohmann::json f = {{"buffer", {{"kind", c.fio.kind}, {"options", c.fio.options}}}};
    const bool fio_ran = !fio.empty() && c.fio.unavailable.empty() && c.fio_error.empty();
    if (fio.empty()) {
      f["ran"] = false;
      f["reason"] = "fio not found";
    } else if (!c.fio.unavailable.empty()) {
      f["ran"] = false;
      f["reason"] = c.fio.unavailable;
    } else if (!c.fio_error.empty()) {
      f["ran"] = false;
      f["error"] = c.fio_error;
    } else {
      f["ran"] = true;
      f["read"] = c.fio_read.ToJson(dev.ok(), false);
      f["write"] = c.fio_write.ToJson(dev.ok(), false);
    }
    if (!c.fio_read_command.empty()) f["read_command"] = c.fio_read_command;
    if (!c.fio_write_command.empty()) f["write_command"] = c.fio_write_command;
    j["fio"] = f;
    if (fio_ran) {
      const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
      nlohmann::json r, meets;
      for (const bool write : {false, true}) {
        const Series& e = write ? c.engine_write : c.engine_read;
        const Series& g = write ? c.fio_write : c.fio_read;
        const double median = ratio(e.MedianGbps(), g.MedianGbps());
        nlohmann::json d = {{"median", median}, {"best", ratio(e.BestGbps(), g.BestGbps())}};
        // The virtual or real disk's throughput follows the size of the requests it receives,
        // which with 4 KiB pages depends on how physically contiguous each tool's buffer
        // happened to be: flag runs where the two tools got very different request sizes.
        if (dev.ok()) {
          const double ke = e.MedianRequestKib(), kf = g.MedianRequestKib();
          if (ke > 0 && kf > 0 && std::max(ke, kf) > kUnequalRequests * std::min(ke, kf)) {
            d["note"] = "the device received requests of " + std::to_string(ke) +
                        " KiB (engine) and " + std::to_string(kf) +
                        " KiB (fio), medians: the buffers' physical contiguity differed (or other "
                        "I/O on the disk was counted), and the ratio shows that as much as the "
                        "tools";
          }
        }
        r[write ? "write" : "read"] = d;
        meets[write ? "write" : "read"] = median >= kTargetRatio;
      }
      j["ratio_engine_over_fio"] = r;
      j["meets_target"] = meets;
    }
    cfgs.push_back(j);
  }
  out["configurations"] = cfgs;
  out["target_ratio"] = kTargetRatio;
  out["target_on"] = "median ratio, per configuration and direction";
  if (configs.size() == 2) {
    // What huge pages alone change for the engine: its thp medians over its 4k_pages medians.
    out["engine_thp_over_4k_pages"] = {
        {"read", configs[0].engine_read.MedianGbps() > 0
                     ? configs[1].engine_read.MedianGbps() / configs[0].engine_read.MedianGbps()
                     : 0.0},
        {"write", configs[0].engine_write.MedianGbps() > 0
                      ? configs[1].engine_write.MedianGbps() / configs[0].engine_write.MedianGbps()
                      : 0.0}};
  }
  out["engine_counters"] = engine.counters().ToJson();
  if (o.intra_op_parallelism > 1) {
    out["note"] = "the engine ran " + std::to_string(o.intra_op_parallelism) + " workers with " +
                  std::to_string(o.queue_depth) +
                  " requests in flight each; fio runs one job with that queue depth";
  }
  if (o.keep_file) out["kept_file"] = path;
  return out;
}

}  // namespace csdkit::bench
