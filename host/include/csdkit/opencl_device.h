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
// through the mapped pointer) and are unmapped while the kernel runs.
#ifndef CSDKIT_OPENCL_DEVICE_H_
#define CSDKIT_OPENCL_DEVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/device.h"

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

class OpenClDevice final : public Device {
 public:
  /// Throws std::runtime_error naming the platform/device/build failure and what to do.
  explicit OpenClDevice(const OpenClOptions& o);
  ~OpenClDevice() override;

  std::string Describe() const override;
  uint64_t capacity() const override;
  uint64_t allocated() const override;
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

  /// True on a Xilinx (XRT) platform.
  bool xilinx() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace csdkit

#endif  // CSDKIT_OPENCL_DEVICE_H_
