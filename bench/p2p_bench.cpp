#include "p2p_bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "csdkit/aio/file.h"
#include "csdkit/runtime/work_dir.h"

namespace csdkit::bench {
namespace {

// The free space the bench leaves on the file system of --dir, whatever --bytes asks for.
constexpr uint64_t kKeepFree = uint64_t{64} << 20;

// What this command created: its file and the directories it made (--dir and missing parents),
// removed again when it ends — after a measurement as after any failure. Nothing else is touched.
struct Created {
  std::string file;
  std::vector<std::string> dirs;  // outermost first
  ~Created() {
    if (!file.empty()) ::unlink(file.c_str());
    for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) ::rmdir(d->c_str());
  }
};

void CheckOptions(const P2pBenchOptions& o) {
  // Whole 4 KiB pages: the alignment of the P2P path and of the emulated device's O_DIRECT files.
  if (o.bytes == 0 || o.bytes % 4096 != 0) {
    throw std::invalid_argument("--bytes: expected a positive multiple of 4096 (whole 4 KiB "
                                "pages, the P2P transfer unit), found " + std::to_string(o.bytes));
  }
  if (o.block_sizes.empty() || o.queue_depths.empty()) {
    throw std::invalid_argument("--block-size/--queue-depth: expected at least one of each, "
                                "found none");
  }
  for (uint64_t bs : o.block_sizes) {
    if (bs == 0 || bs % 4096 != 0) {
      throw std::invalid_argument("--block-size: expected positive multiples of 4096, found " +
                                  std::to_string(bs));
    }
  }
  for (uint32_t qd : o.queue_depths) {
    if (qd == 0 || qd > 4096) {
      throw std::invalid_argument("--queue-depth: expected depths in [1, 4096], found " +
                                  std::to_string(qd));
    }
  }
}

// --dir: an existing directory, or created here (with its missing parents, recorded in `made`).
void PrepareDir(const std::string& dir, Created* made) {
  if (dir.empty()) throw std::invalid_argument("--dir: expected a directory, found \"\"");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw std::invalid_argument("--dir: expected a directory (the device's NVMe namespace), "
                                  "found '" + dir + "', which is not a directory");
    }
    return;
  }
  try {
    CreateMissingDirs(dir, &made->dirs);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--dir: ") + e.what());
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw std::invalid_argument("--dir: expected a directory at '" + dir + "', found none");
  }
}

}  // namespace

nlohmann::json P2pBench(const P2pBenchOptions& o) {
  CheckOptions(o);
  Created made;
  PrepareDir(o.dir, &made);
  // Room for the file, checked before a byte is reserved: a request larger than the free space
  // is refused instead of filling the file system.
  struct statvfs vfs {};
  if (::statvfs(o.dir.c_str(), &vfs) != 0) {
    throw std::runtime_error("--dir: cannot read the free space of '" + o.dir + "': " +
                             std::strerror(errno));
  }
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (o.bytes > avail || avail - o.bytes < kKeepFree) {
    throw std::invalid_argument(
        "--bytes: expected at most " + std::to_string(avail > kKeepFree ? avail - kKeepFree : 0) +
        " bytes (the free space of '" + o.dir + "', " + std::to_string(avail) + " bytes, less " +
        std::to_string(kKeepFree >> 20) + " MiB kept free), found " + std::to_string(o.bytes));
  }
  // A new file of a unique name, created exclusively: nothing that was there is opened.
  std::string path = o.dir + "/p2p_bench_" + std::to_string(o.device.first) + ".XXXXXX.bin";
  const int fd = ::mkostemps(path.data(), 4, O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("--dir: cannot create a file in '" + o.dir + "': " +
                             std::strerror(errno));
  }
  ::close(fd);
  made.file = path;
  aio::FileOptions fo;
  fo.min_alignment = 4096;
  aio::File f = aio::File::Open(path, aio::OpenMode::kReadWrite, fo);
  f.Allocate(o.bytes);
  nlohmann::json rows = nlohmann::json::array();
  for (uint64_t bs : o.block_sizes) {
    for (uint32_t qd : o.queue_depths) {
      aio::AioConfig ac;
      ac.block_size = bs;
      ac.queue_depth = qd;
      DeviceSpec spec = o.device;
      spec.count = 1;
      spec.aio = ac;
      if (spec.backend != Backend::kOpenCl) spec.device_mem = o.bytes + (uint64_t{64} << 20);
      DeviceSet devices(spec);
      Device& dev = devices[0];
      DeviceBufferPtr buf = dev.Alloc(o.bytes, BufferRole::kState);  // P2P source and sink
      double best_w = 1e30, best_r = 1e30;
      for (unsigned r = 0; r < o.reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        dev.P2PWrite(f, 0, *buf, 0, o.bytes).Wait();
        f.Sync();
        best_w = std::min(best_w, std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - t0).count());
        t0 = std::chrono::steady_clock::now();
        dev.P2PRead(f, 0, *buf, 0, o.bytes).Wait();
        best_r = std::min(best_r, std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - t0).count());
      }
      rows.push_back({{"block_size", bs},
                      {"queue_depth", qd},
                      {"ssd_to_device_gbs", o.bytes / best_r / 1e9},
                      {"device_to_ssd_gbs", o.bytes / best_w / 1e9}});
    }
  }
  f.Close();
  return {{"benchmark", "p2p"},
          {"device", o.device.first},
          {"backend", o.device.backend == Backend::kOpenCl
                          ? "OpenCL device (mapped buffers via libaio)"
                          : "emulated SmartSSD (NVMe directory <-> device memory via libaio)"},
          {"bytes", o.bytes},
          {"reps", o.reps},
          {"note", "device_to_ssd includes fdatasync"},
          {"results", rows}};
}

}  // namespace csdkit::bench
