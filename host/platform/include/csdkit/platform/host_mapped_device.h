// The part of a device that the emulated SmartSSD and the OpenCL device share. State buffers
// (BufferRole::kState) are device memory that the host can address while it is mapped (emulated
// DDR; an OpenCL P2P or host-pointer buffer's mapping), so that P2P transfers are libaio
// O_DIRECT reads and writes straight into that memory. A backend may keep stream buffers
// (BufferRole::kStream) without any host mapping (an OpenCL card's ordinary device buffers):
// their host transfers and copies then go through the backend's DMA hooks (WriteUnmapped,
// ReadUnmapped, DeviceCopy). Here: allocation against a capacity, the ownership, range and role
// checks, the libaio engine, per-link byte counters, and the check of a launch's buffers
// against its footprint. A backend keeps only its buffers (NewBuffer, with their map/unmap),
// its DMA hooks and its launch.
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
  DeviceBufferPtr Alloc(uint64_t bytes, BufferRole role) final;

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
  /// Device memory of a host-mapped device, with the role it was allocated for.
  class MappedBuffer : public DeviceBuffer {
   public:
    ~MappedBuffer() override;
    /// The host's view of the buffer: null for a buffer that is not host-mapped, and while the
    /// device owns a mapped one (an OpenCL buffer unmapped around a launch).
    uint8_t* host() const { return host_; }
    /// True when the host reaches the buffer through host() between launches; false when only
    /// the backend's DMA hooks reach it (never a kState buffer: P2P needs the mapping).
    bool host_mapped() const { return host_mapped_; }
    BufferRole role() const { return role_; }
    const HostMappedDevice* owner() const { return owner_; }

   protected:
    MappedBuffer(HostMappedDevice* owner, uint64_t size, BufferRole role, bool host_mapped)
        : DeviceBuffer(size), owner_(owner), role_(role), host_mapped_(host_mapped) {}
    void set_host(uint8_t* p) { host_ = p; }

   private:
    friend class HostMappedDevice;
    HostMappedDevice* owner_;
    BufferRole role_;
    bool host_mapped_;
    uint8_t* host_ = nullptr;
    bool counted_ = false;  // its bytes are in the owner's allocation count (set by Alloc)
  };

  /// `index`: the device number; `capacity`: device memory in bytes.
  /// `kernel`: the kernel interface of the storage engine (libaio; tests put a fault injector
  /// here).
  HostMappedDevice(unsigned index, uint64_t capacity, const aio::AioConfig& aio,
                   std::shared_ptr<aio::KernelAio> kernel = aio::LibaioKernel());
  void set_capacity(uint64_t bytes) { capacity_ = bytes; }

  /// Creates a zeroed buffer of `bytes` (a multiple of 4096) for `role`. A kState buffer must
  /// be host-mapped (P2P transfers are O_DIRECT I/O on its host view).
  virtual std::shared_ptr<MappedBuffer> NewBuffer(uint64_t bytes, BufferRole role) = 0;
  /// Called for every transfer after it is counted (the emulated device books it on its link
  /// model). The default does nothing.
  virtual void OnTransfer(Link l, uint64_t bytes, VirtualClock* vc);

  /// The backend's DMA hooks for a buffer that is not host-mapped: bytes from host memory into
  /// [offset, offset + len) of `dst`, or from `src` into host memory; both return when the
  /// bytes have arrived. The base has checked ownership and range, and counts the bytes on the
  /// link afterwards exactly as for a mapped buffer. The defaults throw std::logic_error: only
  /// a backend that creates such buffers reaches them, and it overrides both.
  virtual void WriteUnmapped(MappedBuffer& dst, uint64_t offset, const void* src, uint64_t len);
  virtual void ReadUnmapped(const MappedBuffer& src, uint64_t offset, void* dst, uint64_t len);
  /// A copy within device memory, ranges checked and not overlapping. The default copies
  /// between host views (both buffers host-mapped; std::logic_error otherwise); a backend with
  /// buffers that are not, or with a copy engine of its own, overrides it.
  virtual void DeviceCopy(const MappedBuffer& src, uint64_t src_offset, MappedBuffer& dst,
                          uint64_t dst_offset, uint64_t len);

  /// `b` as this device's buffer; throws std::invalid_argument if it belongs to another device.
  MappedBuffer& Own(const DeviceBuffer& b, const char* what) const;
  /// `b` as this device's buffer, with [offset, offset + len) inside it (std::out_of_range).
  MappedBuffer& Range(const DeviceBuffer& b, uint64_t offset, uint64_t len,
                      const char* what) const;
  /// The host address of [offset, offset + len) of `b`, range-checked; std::logic_error when
  /// the buffer has no host view now (not host-mapped, or a launch owns it).
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
