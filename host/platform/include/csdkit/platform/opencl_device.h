// The OpenCL backend: the device interface on an OpenCL 1.2 device through the ICD loader.
//
// On a Xilinx platform (a SmartSSD with XRT) the kernel comes from the xclbin
// (clCreateProgramWithBinary) and device buffers are P2P buffers (CL_MEM_EXT_PTR_XILINX +
// XCL_MEM_EXT_P2P_BUFFER) whose mapped pointers the libaio engine reads and writes with O_DIRECT.
// On any other platform (PoCL on the CPU in CI) the kernel is the same csd_update.cpp compiled
// as C++ for OpenCL into a SPIR binary at build time (hls/kernels/csd_update_cl.cpp), and device
// buffers are CL_MEM_USE_HOST_PTR over 4096-aligned host memory, so the same O_DIRECT path works.
//
// Buffers stay mapped for the host between launches (P2P transfers, host copies and CRCs go
// through the mapped pointer: the host-mapped device base) and are unmapped while the kernel
// runs. Constructed by the device set (host/system).
#ifndef CSDKIT_PLATFORM_OPENCL_DEVICE_H_
#define CSDKIT_PLATFORM_OPENCL_DEVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/platform/host_mapped_device.h"

namespace csdkit {

struct OpenClOptions {
  unsigned index = 0;                 // device number (messages, counters)
  std::string platform;               // substring of the platform name ("" = first with a device)
  unsigned device = 0;                // device index within the platform
  std::string xclbin;                 // required on a Xilinx platform
  uint64_t capacity = 0;              // 0: CL_DEVICE_GLOBAL_MEM_SIZE
  aio::AioConfig aio;
};

/// Devices of the first platform matching `platform` ("" = any) that has devices; 0 if none.
unsigned OpenClDeviceCount(const std::string& platform);

/// True when an OpenCL platform with at least one device is present (tests skip otherwise).
bool OpenClAvailable(std::string* why);

class OpenClDevice final : public HostMappedDevice {
 public:
  /// Throws std::runtime_error naming the platform/device/build failure and what to do.
  explicit OpenClDevice(const OpenClOptions& o);
  ~OpenClDevice() override;

  std::string Describe() const override;
  uint32_t LaunchUpdate(const DeviceLaunch& l, uint32_t* status16 = nullptr,
                        VirtualClock* vc = nullptr) override;

  /// True on a Xilinx (XRT) platform.
  bool xilinx() const;

  class Impl;

 private:
  class ClBuffer;
  std::shared_ptr<MappedBuffer> NewBuffer(uint64_t bytes) override;

  std::unique_ptr<Impl> impl_;
};

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_OPENCL_DEVICE_H_
