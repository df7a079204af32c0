// The emulated SmartSSD: device memory with a capacity, peer-to-peer transfers between the
// device's NVMe namespace (a directory of O_DIRECT files) and that memory through the libaio
// engine with no host bounce buffer, host transfers, the updater kernel run by a backend, a
// device-side CRC, per-link byte counters and an optional link model in virtual time.
#ifndef CSDKIT_EMU_EMU_DEVICE_H_
#define CSDKIT_EMU_EMU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/device.h"
#include "csdkit/emu/link_model.h"
#include "csdkit/emu/rtl_kernel.h"

namespace csdkit::emu {

/// Which implementation of the kernel the emulated device runs.
enum class Backend {
  kModel,  // the L2 kernel compiled for the host (hls/kernels), bit-accurate
  kRtl,    // the Verilated RTL through the AXI harness (not in this build yet)
};
Backend ParseBackend(const std::string& s);
const char* BackendName(Backend b);

struct EmuOptions {
  unsigned index = 0;                   // device number (for the link model and messages)
  uint64_t capacity = uint64_t{4} << 30;  // device memory: 4 GiB, as on a SmartSSD
  Backend backend = Backend::kModel;
  aio::AioConfig aio;                   // the device's storage engine
  std::shared_ptr<LinkModel> links;     // optional virtual-time model (shared by all devices)
  /// The "bitstream" to load: an xclbin that must describe csd_update (the argument table) for
  /// the emulated SmartSSD platform, checked as a card's would be ("" = none).
  std::string xclbin;
  /// Backend rtl: memory timing behind the kernel's AXI bundles, seed, optional FST trace.
  RtlOptions rtl;
};

class EmulatedSmartSsd final : public Device {
 public:
  /// Throws std::invalid_argument for a backend this build does not have.
  explicit EmulatedSmartSsd(const EmuOptions& o);
  ~EmulatedSmartSsd() override;

  std::string Describe() const override;
  uint64_t capacity() const override { return opt_.capacity; }
  uint64_t allocated() const override { return allocated_.load(); }
  DeviceBufferPtr Alloc(uint64_t bytes) override;

  aio::IoTicket P2PRead(const aio::File& file, uint64_t file_offset, DeviceBuffer& dst,
                        uint64_t dst_offset, uint64_t len, VirtualClock* vc = nullptr) override;
  aio::IoTicket P2PWrite(const aio::File& file, uint64_t file_offset, const DeviceBuffer& src,
                         uint64_t src_offset, uint64_t len, VirtualClock* vc = nullptr) override;
  void HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset, uint64_t len,
                    VirtualClock* vc = nullptr) override;
  void DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst, uint64_t len,
                    VirtualClock* vc = nullptr) override;
  aio::IoTicket HostRead(const aio::File& file, uint64_t file_offset, void* dst, uint64_t len,
                         VirtualClock* vc = nullptr) override;
  aio::IoTicket HostWrite(const aio::File& file, uint64_t file_offset, const void* src,
                          uint64_t len, VirtualClock* vc = nullptr) override;
  uint32_t LaunchUpdate(const UpdateBuffersDev& b, uint32_t n, uint32_t nnz,
                        const KernelLaunch& k, uint32_t* status16 = nullptr, VirtualClock* vc = nullptr) override;
  uint32_t Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) override;
  LinkBytes bytes() const override;

  /// Storage-engine counters of this device (requests, short transfers, ...).
  aio::IoCounters io_counters() const { return engine_.counters(); }
  /// Backend rtl: the statistics of the last launch (cycles, bytes per bundle).
  RtlLaunchStats last_rtl_launch() const;

  class Buffer;
  friend class Buffer;

 private:
  void Count(Link l, uint64_t bytes, VirtualClock* vc);
  uint8_t* Span(const DeviceBuffer& b, uint64_t offset, uint64_t len, const char* what) const;

  EmuOptions opt_;
  aio::Engine engine_;
  std::atomic<uint64_t> allocated_{0};
  mutable std::mutex mu_;
  LinkBytes bytes_;
  RtlLaunchStats last_rtl_;
};

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_EMU_DEVICE_H_
