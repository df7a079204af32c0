// The OpenCL backend: the device interface on an OpenCL 1.2 device through the ICD loader.
//
// On a Xilinx platform (a SmartSSD with XRT) the kernel comes from the xclbin
// (clCreateProgramWithBinary); on any other platform (PoCL on the CPU in CI) it is the same
// csd_update.cpp compiled as C++ for OpenCL into a SPIR binary at build time
// (hls/kernels/csd_update_cl.cpp).
//
// Buffers by role (docs/opencl.md, "Buffers and P2P"):
//  - kState: on Xilinx a P2P buffer (CL_MEM_EXT_PTR_XILINX + XCL_MEM_EXT_P2P_BUFFER), elsewhere
//    CL_MEM_USE_HOST_PTR over 4096-aligned host memory; mapped for the host between launches,
//    so the libaio engine reads and writes it with O_DIRECT (P2P), and unmapped while the
//    kernel or a device copy uses it.
//  - kStream: an ordinary device buffer (CL_MEM_READ_WRITE, no host pointer), never mapped;
//    host transfers are blocking clEnqueueWriteBuffer / clEnqueueReadBuffer (the DMA engine),
//    a CRC reads it back with clEnqueueReadBuffer.
// Device copies of either role are clEnqueueCopyBuffer. Constructed by the device set
// (host/system).
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
  std::shared_ptr<MappedBuffer> NewBuffer(uint64_t bytes, BufferRole role) override;
  void WriteUnmapped(MappedBuffer& dst, uint64_t offset, const void* src, uint64_t len) override;
  void ReadUnmapped(const MappedBuffer& src, uint64_t offset, void* dst, uint64_t len) override;
  void DeviceCopy(const MappedBuffer& src, uint64_t src_offset, MappedBuffer& dst,
                  uint64_t dst_offset, uint64_t len) override;

  std::unique_ptr<Impl> impl_;
};

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_OPENCL_DEVICE_H_
