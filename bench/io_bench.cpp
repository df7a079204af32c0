#include "io_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/aio/file.h"
#include "csdkit/aio/io_error.h"
#include "csdkit/platform/aligned_buffer.h"

extern char** environ;

namespace csdkit::bench {

namespace {

namespace fs = std::filesystem;

constexpr double kTargetRatio = 0.9;
// The engine's buffer: the whole file up to this size, else reused chunk by chunk.
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;

double Gbps(uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

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

// Runs argv (no shell), stdout captured through a pipe, stderr through a file in `scratch`.
ProgramRun RunProgram(const std::vector<std::string>& argv, const std::string& scratch) {
  ProgramRun r;
  int pipe_fd[2];
  if (::pipe2(pipe_fd, O_CLOEXEC) != 0) {
    r.err = "pipe: " + aio::ErrnoText(errno);
    return r;
  }
  const std::string err_path = scratch + "/fio.stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fd[1]);
  if (rc != 0) {
    ::close(pipe_fd[0]);
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
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove(err_path, ec);
  return r;
}

std::string Trim(std::string s, size_t max = 2000) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

struct FioResult {
  bool ok = false;
  double gbps = 0;
  std::string version;
  std::string error;
};

// One fio job, sequential, on the engine's file: same block size and queue depth, one job.
FioResult RunFio(const std::string& fio, const std::string& file, const std::string& rw,
                 const IoBenchOptions& o, const std::string& scratch,
                 std::vector<std::string>* command) {
  const std::vector<std::string> argv = {fio,
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
  if (command != nullptr) *command = argv;
  FioResult f;
  const ProgramRun run = RunProgram(argv, scratch);
  if (run.status != 0) {
    f.error = "fio --rw=" + rw + " failed (exit status " + std::to_string(run.status) +
              "): " + Trim(run.err.empty() ? run.out : run.err);
    return f;
  }
  // fio may print notes before the JSON document.
  const size_t start = run.out.find('{');
  nlohmann::json j = nlohmann::json::parse(
      start == std::string::npos ? std::string() : run.out.substr(start), nullptr, false);
  const char* dir = rw == "read" ? "read" : "write";
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty() || !j["jobs"][0].contains(dir)) {
    f.error = "cannot parse fio's JSON output for --rw=" + rw + ": " + Trim(run.out, 500);
    return f;
  }
  const nlohmann::json& d = j["jobs"][0][dir];
  const uint64_t io_bytes = d.value("io_bytes", uint64_t{0});
  const uint64_t runtime_ms = d.value("runtime", uint64_t{0});
  const uint64_t bw_bytes = d.value("bw_bytes", uint64_t{0});
  if (io_bytes != o.size) {
    f.error = "fio --rw=" + rw + " moved " + std::to_string(io_bytes) + " bytes instead of " +
              std::to_string(o.size);
    return f;
  }
  f.gbps = bw_bytes > 0 ? bw_bytes / 1e9 : Gbps(io_bytes, runtime_ms / 1e3);
  f.version = j.value("fio version", "");
  f.ok = true;
  return f;
}

// Times the engine over the whole file, chunk by chunk through one buffer.
double TimeEngine(aio::Engine& engine, const aio::File& file, AlignedBuffer& buf, uint64_t size,
                  bool write) {
  const uint64_t chunk = std::min<uint64_t>(size, kMaxChunk);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < size; off += chunk) {
    const uint64_t len = std::min(chunk, size - off);
    if (write) {
      engine.Write(file, off, buf.data(), len);
    } else {
      engine.Read(file, off, buf.data(), len);
    }
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  return Gbps(size, dt.count());
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
    if (!keep_file && !dir.empty()) fs::remove(dir, ec);
  }
};

}  // namespace

nlohmann::json IoBench(const IoBenchOptions& o) {
  aio::AioConfig config;
  config.block_size = o.block_size;
  config.queue_depth = o.queue_depth;
  config.intra_op_parallelism = o.intra_op_parallelism;
  config.single_submit = o.single_submit;
  config.overlap_events = o.overlap_events;
  config.Validate();
  if (o.size == 0 || o.size % o.block_size != 0) {
    throw std::invalid_argument(
        "io bench: the file size must be a positive multiple of the "
        "block size (" +
        std::to_string(o.block_size) + "), found " + std::to_string(o.size) + "; e.g. --size " +
        std::to_string((o.size / o.block_size + 1) * o.block_size));
  }
  if (o.reps == 0) throw std::invalid_argument("io bench: reps must be at least 1, found 0");

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
    throw std::invalid_argument("io bench: --dir " + dir +
                                " is not an existing directory; create it first");
  }
  const std::string path = (fs::path(dir) / "csdkit_io_bench.dat").string();

  aio::File file = aio::File::Create(path);  // explains a filesystem without O_DIRECT
  cleanup.file = path;
  file.Allocate(o.size);
  aio::Engine engine(config);
  AlignedBuffer buf(std::min<uint64_t>(o.size, kMaxChunk));
  for (uint64_t i = 0; i < buf.size(); i += 8) {
    const uint64_t v = i * 0x9e3779b97f4a7c15ull;
    std::memcpy(buf.data() + i, &v, 8);
  }
  // Write the whole file once, untimed, so both tools then overwrite allocated, written blocks
  // (no unwritten-extent conversion in the timed runs).
  Progress(o, "preparing " + path + " (" + std::to_string(o.size) + " bytes)");
  TimeEngine(engine, file, buf, o.size, true);
  engine.ResetCounters();

  const std::string fio = FindProgram(o.fio);
  nlohmann::json fio_json = {{"available", !fio.empty()}};
  if (fio.empty()) {
    fio_json["note"] = "fio (" + o.fio +
                       ") not found in PATH; install it (scripts/setup) for "
                       "the comparison";
  }

  double engine_read = 0, engine_write = 0, fio_read = 0, fio_write = 0;
  std::string fio_error, fio_version;
  std::vector<std::string> read_cmd, write_cmd;
  // Interleaved, so a drift of the device (thermal, other load) hits both tools alike.
  for (unsigned rep = 0; rep < o.reps; ++rep) {
    const double er = TimeEngine(engine, file, buf, o.size, false);
    engine_read = std::max(engine_read, er);
    Progress(o, "rep " + std::to_string(rep) + ": engine read " + std::to_string(er) + " GB/s");
    if (!fio.empty() && fio_error.empty()) {
      const FioResult f = RunFio(fio, path, "read", o, dir, &read_cmd);
      if (f.ok) {
        fio_read = std::max(fio_read, f.gbps);
        fio_version = f.version;
        Progress(o,
                 "rep " + std::to_string(rep) + ": fio read " + std::to_string(f.gbps) + " GB/s");
      } else {
        fio_error = f.error;
      }
    }
    const double ew = TimeEngine(engine, file, buf, o.size, true);
    engine_write = std::max(engine_write, ew);
    Progress(o, "rep " + std::to_string(rep) + ": engine write " + std::to_string(ew) + " GB/s");
    if (!fio.empty() && fio_error.empty()) {
      const FioResult f = RunFio(fio, path, "write", o, dir, &write_cmd);
      if (f.ok) {
        fio_write = std::max(fio_write, f.gbps);
        Progress(o,
                 "rep " + std::to_string(rep) + ": fio write " + std::to_string(f.gbps) + " GB/s");
      } else {
        fio_error = f.error;
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
  out["units"] = "GB/s, 1 GB = 1e9 bytes, best of reps";
  out["engine"] = {{"read_GBps", engine_read},
                   {"write_GBps", engine_write},
                   {"counters", engine.counters().ToJson()}};
  if (!fio.empty()) {
    fio_json["path"] = fio;
    fio_json["read_command"] = read_cmd;
    fio_json["write_command"] = write_cmd;
    if (!fio_error.empty()) {
      fio_json["error"] = fio_error;
    } else {
      fio_json["version"] = fio_version;
      fio_json["read_GBps"] = fio_read;
      fio_json["write_GBps"] = fio_write;
      const double rr = fio_read > 0 ? engine_read / fio_read : 0;
      const double rw = fio_write > 0 ? engine_write / fio_write : 0;
      out["ratio"] = {{"read", rr}, {"write", rw}};
      out["target_ratio"] = kTargetRatio;
      out["meets_target"] = {{"read", rr >= kTargetRatio}, {"write", rw >= kTargetRatio}};
    }
  }
  out["fio"] = fio_json;
  if (o.intra_op_parallelism > 1) {
    out["note"] = "the engine ran " + std::to_string(o.intra_op_parallelism) + " workers with " +
                  std::to_string(o.queue_depth) +
                  " requests in flight each; fio runs one job with that queue depth";
  }
  if (o.keep_file) out["kept_file"] = path;
  return out;
}

}  // namespace csdkit::bench
