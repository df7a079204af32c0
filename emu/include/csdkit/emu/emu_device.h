// The emulated SmartSSD: device memory with a capacity (host memory standing in for FPGA DDR),
// peer-to-peer transfers between the device's NVMe namespace (a directory of O_DIRECT files)
// and that memory through the libaio engine with no host bounce buffer, host transfers, the
// updater kernel run by a backend (the host model or the Verilated RTL), a device-side CRC,
// per-link byte counters and an optional link model in virtual time. Everything but the
// buffers and the launch is the host-mapped device base (csdkit/platform/host_mapped_device.h).
// Constructed by the device set (host/system).
#ifndef CSDKIT_EMU_EMU_DEVICE_H_
#define CSDKIT_EMU_EMU_DEVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/emu/link_model.h"
#include "csdkit/emu/rtl_kernel.h"
#include "csdkit/platform/host_mapped_device.h"

namespace csdkit::emu {

/// Which implementation of the kernel the emulated device runs.
enum class Backend {
  kModel,  // the L2 kernel compiled for the host (hls/kernels), bit-accurate
  kRtl,    // the Verilated RTL through the AXI harness (builds configured with Verilator)
};

struct EmuOptions {
  unsigned index = 0;                   // device number (for the link model and messages)
  uint64_t capacity = uint64_t{4} << 30;  // device memory: 4 GiB, as on a SmartSSD
  Backend backend = Backend::kModel;
  aio::AioConfig aio;                   // the device's storage engine
  std::shared_ptr<aio::KernelAio> aio_kernel;  // its kernel interface (null: libaio)
  std::shared_ptr<LinkModel> links;     // optional virtual-time model (shared by all devices)
  /// The "bitstream" to load: an xclbin that must describe csd_update (the argument table) for
  /// the emulated SmartSSD platform, checked as a card's would be ("" = none).
  std::string xclbin;
  /// Backend rtl: memory timing behind the kernel's AXI bundles, seed, optional FST trace.
  RtlOptions rtl;
};

class EmulatedSmartSsd final : public HostMappedDevice {
 public:
  /// Throws std::invalid_argument for a backend this build does not have.
  explicit EmulatedSmartSsd(const EmuOptions& o);
  ~EmulatedSmartSsd() override;

  std::string Describe() const override;
  uint32_t LaunchUpdate(const DeviceLaunch& l, uint32_t* status16 = nullptr,
                        VirtualClock* vc = nullptr) override;

  /// Backend rtl: the statistics of the last launch (cycles, bytes per bundle).
  RtlLaunchStats last_rtl_launch() const;

 private:
  class Buffer;
  std::shared_ptr<MappedBuffer> NewBuffer(uint64_t bytes, BufferRole role) override;
  void OnTransfer(Link l, uint64_t bytes, VirtualClock* vc) override;

  EmuOptions opt_;
  mutable std::mutex mu_;  // last_rtl_
  RtlLaunchStats last_rtl_;
};

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_EMU_DEVICE_H_
