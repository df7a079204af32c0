// The device interface: what the runtime needs from one computational storage device (a
// SmartSSD's FPGA with its DDR and its NVMe namespace), whatever runs behind it — the emulated
// device (emu/, backends model and rtl) or an OpenCL device (a card with its xclbin, or PoCL).
// The runtime (store, SmartUpdate scheduler) talks to devices only through this header; the
// device set (host/system) is the one place that constructs them.
#ifndef CSDKIT_PLATFORM_DEVICE_H_
#define CSDKIT_PLATFORM_DEVICE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "csdkit/aio/aio_engine.h"
#include "csdkit/aio/file.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

/// The links whose bytes the runtime counts. The first four belong to the offloaded path, the
/// last two to the baseline (states through host memory).
enum class Link : unsigned {
  kSsdToFpga = 0,  // device-internal P2P read: NVMe -> FPGA DDR
  kFpgaToSsd,      // device-internal P2P write: FPGA DDR -> NVMe
  kHostToDevice,   // shared PCIe link, host memory -> FPGA DDR
  kDeviceToHost,   // shared PCIe link, FPGA DDR -> host memory
  kNvmeToHost,     // shared PCIe link, NVMe -> host memory (baseline)
  kHostToNvme,     // shared PCIe link, host memory -> NVMe (baseline)
};
constexpr unsigned kNumLinks = 6;
const char* LinkName(Link l);
/// True for the links that cross the host's shared PCIe uplink.
bool IsSharedLink(Link l);

/// Bytes moved per link.
struct LinkBytes {
  std::array<uint64_t, kNumLinks> bytes{};
  uint64_t& operator[](Link l) { return bytes[static_cast<unsigned>(l)]; }
  uint64_t operator[](Link l) const { return bytes[static_cast<unsigned>(l)]; }
  LinkBytes& operator+=(const LinkBytes& o);
  LinkBytes operator-(const LinkBytes& o) const;
  /// Sum over the links that cross the shared uplink.
  uint64_t Shared() const;
  nlohmann::json ToJson() const;
};

/// A worker of the runtime in virtual time. Every device operation may be given the issuing
/// worker's clock: a device with a link model then records the operation, in the worker's own
/// order, on the links it uses; the link model schedules the recorded operations of all
/// workers in virtual-time order when the step's time is asked for (see
/// emu/.../link_model.h), so the result does not depend on how the threads interleaved.
/// `worker` names the worker (unique among the clocks of one step: the scheduler numbers them);
/// `now` is the worker's own delay outside the link model, added before its next operation.
struct VirtualClock {
  unsigned worker = 0;
  double now = 0.0;
};

/// Device memory too small for what was asked.
class CapacityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A region of device memory. Owned by the device that allocated it; released when the last
/// handle goes away.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  virtual ~DeviceBuffer() = default;
  uint64_t size() const { return size_; }

 protected:
  explicit DeviceBuffer(uint64_t size) : size_(size) {}

 private:
  uint64_t size_ = 0;
};
using DeviceBufferPtr = std::shared_ptr<DeviceBuffer>;

/// One csd_update launch over device buffers (a buffer the launch does not touch may be null).
using DeviceLaunch = UpdateLaunch<DeviceBufferPtr>;

/// What a device buffer is for, fixed when it is allocated. On a card the two roles are
/// different kinds of memory object (docs/opencl.md, "Buffers and P2P"); every backend, the
/// emulated and null devices included, refuses a P2P transfer on a stream buffer, so a wrong
/// role shows up in emulation and not first on hardware.
enum class BufferRole {
  /// Device memory that P2P transfers read and write: NVMe <-> device over the device's private
  /// path (on a SmartSSD, its internal PCIe switch). Optimizer state (theta, m, v) and the
  /// scheduler's P2P scratch buffer. It may also take host transfers, launches and copies.
  kState,
  /// Device memory that only host transfers (HostToDevice / DeviceToHost, moved by the device's
  /// DMA engine over the shared link), launches, copies and CRCs touch; never P2P. Gradients,
  /// the sparse index and block streams, the low-precision weights, the status word.
  kStream,
};
/// "state" or "stream".
const char* BufferRoleName(BufferRole r);

/// The role of each csd_update buffer argument: kState for the optimizer state the store keeps
/// on NVMe (theta, m, v), kStream for the rest (grad, sp_idx, sp_blk, out16, status). `a` must
/// be a buffer argument of the table (std::invalid_argument otherwise). THE one place the
/// roles of a launch's buffers are decided: the scheduler, the self-test, golden and the CLI
/// allocate with it.
BufferRole UpdateBufferRole(const hls::ArgInfo& a);

/// The backends' one refusal of a P2P transfer (`op`) on a buffer of role `found` that is not
/// kState: throws std::invalid_argument naming the operation, the device (`device`: its
/// Describe()), the role expected and the role found, and what to do.
void RequireP2PRole(BufferRole found, const std::string& device, const char* op);

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string Describe() const = 0;
  /// Device memory in bytes and what is currently allocated.
  virtual uint64_t capacity() const = 0;
  virtual uint64_t allocated() const = 0;
  /// Allocates `bytes` of device memory (4096-aligned, zeroed) for `role`. Throws CapacityError
  /// saying how much was asked, how much is free and the capacity.
  virtual DeviceBufferPtr Alloc(uint64_t bytes, BufferRole role) = 0;

  /// Peer-to-peer transfers between the device's NVMe namespace and its memory: no host
  /// memory in between. Offsets and length must meet the file's direct-I/O alignment. The
  /// device buffer must be a kState buffer (std::invalid_argument naming the device, the
  /// operation and the roles otherwise). The ticket completes when the data has arrived.
  virtual aio::IoTicket P2PRead(const aio::File& file, uint64_t file_offset, DeviceBuffer& dst,
                                uint64_t dst_offset, uint64_t len,
                                VirtualClock* vc = nullptr) = 0;
  virtual aio::IoTicket P2PWrite(const aio::File& file, uint64_t file_offset,
                                 const DeviceBuffer& src, uint64_t src_offset, uint64_t len,
                                 VirtualClock* vc = nullptr) = 0;

  /// Transfers over the shared PCIe link, into or out of a buffer of either role.
  virtual void HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset,
                            uint64_t len, VirtualClock* vc = nullptr) = 0;
  virtual void DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst,
                            uint64_t len, VirtualClock* vc = nullptr) = 0;

  /// The device's NVMe namespace read or written by the host (the baseline path), over the
  /// shared link into host memory (4096-aligned, as O_DIRECT needs).
  virtual aio::IoTicket HostRead(const aio::File& file, uint64_t file_offset, void* dst,
                                 uint64_t len, VirtualClock* vc = nullptr) = 0;
  virtual aio::IoTicket HostWrite(const aio::File& file, uint64_t file_offset, const void* src,
                                  uint64_t len, VirtualClock* vc = nullptr) = 0;

  /// Runs the updater kernel on device buffers; blocks until done. Every buffer must hold at
  /// least LaunchFootprint(mode, n, nnz) bytes (refused with std::out_of_range otherwise, as a
  /// driver would). Returns the kernel's error bits (0 = success) and copies the status word
  /// into `status16` (16 x uint32) if given.
  virtual uint32_t LaunchUpdate(const DeviceLaunch& l, uint32_t* status16 = nullptr,
                                VirtualClock* vc = nullptr) = 0;

  /// CRC-32 (zlib polynomial) of a region of device memory, computed on the device (no bytes
  /// cross any link and none are counted): how the runtime checksums state it never sees.
  virtual uint32_t Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) = 0;

  /// Copies bytes within device memory (a DDR-to-DDR copy on the device: no link is crossed,
  /// nothing is counted). Ranges are checked (std::out_of_range) and may not overlap.
  virtual void CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                          uint64_t dst_offset, uint64_t len) = 0;

  /// Bytes moved per link since construction.
  virtual LinkBytes bytes() const = 0;
};

/// The devices that serve the shards of one store (device k serves shard k), with the virtual
/// clocks of their link model when they have one. Implemented by the device set (host/system).
class DeviceGroup {
 public:
  virtual ~DeviceGroup() = default;
  virtual unsigned size() const = 0;
  virtual Device& device(unsigned k) const = 0;
  /// True when transfers and launches are booked on a link model in virtual time.
  virtual bool has_link_model() const = 0;
  /// False for null devices (planning): they count and book transfers but hold no data, and
  /// run only on a planning store (Store::Plan).
  virtual bool moves_data() const = 0;
  /// The latest virtual end of anything booked since the last ResetVirtualTime (0 without a
  /// link model).
  virtual double VirtualHorizon() const = 0;
  /// Starts a new virtual-time window at 0 (a new step).
  virtual void ResetVirtualTime() = 0;
  /// Books host computation that streams `bytes` through host memory (the baseline's CPU
  /// update) on the worker's clock, at the link model's host update rate. Without a link model
  /// nothing is booked.
  virtual void BookHostCompute(uint64_t bytes, VirtualClock* vc) = 0;
  /// Bytes per link summed over the devices.
  LinkBytes bytes() const;
};

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_DEVICE_H_
