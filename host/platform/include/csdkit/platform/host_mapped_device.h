// The part of a device that the emulated SmartSSD and the OpenCL device share: device memory
// that the host can address while it is mapped (emulated DDR; an OpenCL buffer's mapping), so
// that P2P transfers are libaio O_DIRECT reads and writes straight into that memory, host
// transfers are copies, and the CRC runs over it. Here: allocation against a capacity, the
// ownership and range checks, the libaio engine, per-link byte counters, and the check of a
// launch's buffers against its footprint. A backend keeps only its buffers (NewBuffer, with
// their map/unmap) and its launch.
#ifndef CSDKIT_PLATFORM_HOST_MAPPED_DEVICE_H_
#define CSDKIT_PLATFORM_HOST_MAPPED_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/aio_engine.h"
#include "csdkit/platform/device.h"

namespace csdkit {

class HostMappedDevice : public Device {
 public:
  ~HostMappedDevice() override;

  uint64_t capacity() const final { return capacity_; }
  uint64_t allocated() const final { return allocated_.load(); }
  DeviceBufferPtr Alloc(uint64_t bytes) final;

  aio::IoTicket P2PRead(const aio::File& file, uint64_t file_offset, DeviceBuffer& dst,
                        uint64_t dst_offset, uint64_t len, VirtualClock* vc = nullptr) final;
  aio::IoTicket P2PWrite(const aio::File& file, uint64_t file_offset, const DeviceBuffer& src,
                         uint64_t src_offset, uint64_t len, VirtualClock* vc = nullptr) final;
  void HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset, uint64_t len,
                    VirtualClock* vc = nullptr) final;
  void DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst, uint64_t len,
                    VirtualClock* vc = nullptr) final;
  aio::IoTicket HostRead(const aio::File& file, uint64_t file_offset, void* dst, uint64_t len,
                         VirtualClock* vc = nullptr) final;
  aio::IoTicket HostWrite(const aio::File& file, uint64_t file_offset, const void* src,
                          uint64_t len, VirtualClock* vc = nullptr) final;
  uint32_t Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) final;
  void CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                  uint64_t dst_offset, uint64_t len) final;
  LinkBytes bytes() const final;

  /// Storage-engine counters of this device (requests, short transfers, ...).
  aio::IoCounters io_counters() const { return engine_.counters(); }
  /// The device number given at construction (messages, link model).
  unsigned index() const { return index_; }

 protected:
  /// Device memory of a host-mapped device. `host()` is the host's view of it, null while the
  /// device owns it (an OpenCL buffer unmapped around a launch).
  class MappedBuffer : public DeviceBuffer {
   public:
    ~MappedBuffer() override;
    uint8_t* host() const { return host_; }
    const HostMappedDevice* owner() const { return owner_; }

   protected:
    MappedBuffer(HostMappedDevice* owner, uint64_t size) : DeviceBuffer(size), owner_(owner) {}
    void set_host(uint8_t* p) { host_ = p; }

   private:
    friend class HostMappedDevice;
    HostMappedDevice* owner_;
    uint8_t* host_ = nullptr;
    bool counted_ = false;  // its bytes are in the owner's allocation count (set by Alloc)
  };

  /// `index`: the device number; `capacity`: device memory in bytes.
  /// `kernel`: the kernel interface of the storage engine (libaio; tests put a fault injector
  /// here).
  HostMappedDevice(unsigned index, uint64_t capacity, const aio::AioConfig& aio,
                   std::shared_ptr<aio::KernelAio> kernel = aio::LibaioKernel());
  void set_capacity(uint64_t bytes) { capacity_ = bytes; }

  /// Creates a mapped buffer of `bytes` (a multiple of 4096) of the backend.
  virtual std::shared_ptr<MappedBuffer> NewBuffer(uint64_t bytes) = 0;
  /// Called for every transfer after it is counted (the emulated device books it on its link
  /// model). The default does nothing.
  virtual void OnTransfer(Link l, uint64_t bytes, VirtualClock* vc);

  /// `b` as this device's buffer; throws std::invalid_argument if it belongs to another device.
  MappedBuffer& Own(const DeviceBuffer& b, const char* what) const;
  /// The host address of [offset, offset + len) of `b`, range-checked (std::out_of_range).
  uint8_t* Span(const DeviceBuffer& b, uint64_t offset, uint64_t len, const char* what) const;
  /// The launch's buffers as this device's, each checked to hold the launch's footprint
  /// (LaunchFootprint); null where the launch gives none and needs none.
  UpdateLaunch<MappedBuffer*> Resolve(const DeviceLaunch& l) const;

 private:
  void Count(Link l, uint64_t bytes, VirtualClock* vc);

  unsigned index_;
  uint64_t capacity_;
  std::atomic<uint64_t> allocated_{0};
  aio::Engine engine_;
  mutable std::mutex mu_;  // bytes_
  LinkBytes bytes_;
};

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_HOST_MAPPED_DEVICE_H_
