#include "p2p_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include "csdkit/aio/file.h"

namespace csdkit::bench {

nlohmann::json P2pBench(const P2pBenchOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(o.dir);
  const std::string path = o.dir + "/p2p_bench_" + std::to_string(o.device.first) + ".bin";
  aio::FileOptions fo;
  fo.min_alignment = 4096;
  aio::File f = aio::File::Create(path, fo);
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
  if (!o.keep) fs::remove(path);
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
