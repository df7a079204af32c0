// The null device: a SmartSSD that moves no bytes and computes nothing, for planning. It
// implements the whole device interface with the checks a real device makes — allocations
// against a capacity, buffer ownership and ranges, 4096-byte alignment of NVMe transfers, a
// launch's buffers against its footprint, the role of a P2P transfer's buffer — counts every
// transfer's bytes per link exactly as the emulated device does, and records every transfer and
// launch on the link model in virtual time with the same sizes (emu/.../link_model.h). The
// unchanged scheduler therefore runs on it and produces the schedule the kit executes, with the
// byte counters and virtual seconds an emulated device reports for the same configuration, at
// any model size.
//
// DESIGN: NO DATA, ANYWHERE. A plan of a 33e9-parameter model must not hold 33e9 of anything.
//  - Device memory is an allocation size only (a DeviceBuffer with no storage behind it), so
//    capacity checks and sizing behave as on a card and cost nothing.
//  - The memory reads as zeros: nothing is ever written into it, so Crc32 is the CRC-32 of
//    `len` zero bytes (Crc32OfZeros, computed without memory) and a launch's status word is
//    zero (no error).
//  - NVMe files are never opened or read: P2P and host transfers take the store's aio::File
//    only as a name. A planning store (Store::Plan, host/runtime) holds no files at all and
//    records, per subgroup, the CRC of zeros the device will report: the scheduler's checks of
//    loaded state pass, its commit stays in memory.
//  - Host pointers (gradients in, weights out) are never dereferenced: planned gradients and
//    the scheduler's weight copy of a planning store are address reservations with no memory
//    (AlignedBuffer::Reserve) that would fault if touched.
// Transfers complete at once (their tickets are ready); virtual time is the link model's.
// Constructed by the device set (host/system, backend null).
#ifndef CSDKIT_EMU_NULL_DEVICE_H_
#define CSDKIT_EMU_NULL_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "csdkit/emu/link_model.h"
#include "csdkit/platform/device.h"

namespace csdkit::emu {

struct NullOptions {
  unsigned index = 0;                     // device number (link model, messages)
  uint64_t capacity = uint64_t{4} << 30;  // device memory a card would have
  std::shared_ptr<LinkModel> links;       // optional (without one only bytes are counted)
};

class NullDevice final : public Device {
 public:
  explicit NullDevice(const NullOptions& o);
  ~NullDevice() override;

  std::string Describe() const override;
  uint64_t capacity() const override { return opt_.capacity; }
  uint64_t allocated() const override { return allocated_.load(); }
  DeviceBufferPtr Alloc(uint64_t bytes, BufferRole role) override;

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
  uint32_t LaunchUpdate(const DeviceLaunch& l, uint32_t* status16 = nullptr,
                        VirtualClock* vc = nullptr) override;
  uint32_t Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) override;
  void CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                  uint64_t dst_offset, uint64_t len) override;
  LinkBytes bytes() const override;

  /// NVMe transfers must be aligned to this (the emulated device's O_DIRECT alignment).
  static constexpr uint64_t kIoAlign = 4096;

 private:
  class Buffer;
  // Checks that `b` is this device's and [offset, offset + len) lies inside it; returns it.
  const Buffer& CheckRange(const DeviceBuffer& b, uint64_t offset, uint64_t len,
                           const char* what) const;
  void CheckIo(uint64_t file_offset, uint64_t len, const char* what) const;
  void Count(Link l, uint64_t bytes, VirtualClock* vc);

  NullOptions opt_;
  std::atomic<uint64_t> allocated_{0};
  mutable std::mutex mu_;  // bytes_
  LinkBytes bytes_;
};

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_NULL_DEVICE_H_
