#include "csdkit/platform/host_mapped_device.h"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "csdkit/platform/checksum.h"

namespace csdkit {

HostMappedDevice::HostMappedDevice(unsigned index, uint64_t capacity, const aio::AioConfig& aio,
                                   std::shared_ptr<aio::KernelAio> kernel)
    : index_(index),
      capacity_(capacity),
      engine_(aio, kernel ? std::move(kernel) : aio::LibaioKernel()) {}

HostMappedDevice::~HostMappedDevice() = default;

HostMappedDevice::MappedBuffer::~MappedBuffer() {
  if (counted_) owner_->allocated_ -= size();
}

void HostMappedDevice::OnTransfer(Link, uint64_t, VirtualClock*) {}

void HostMappedDevice::WriteUnmapped(MappedBuffer&, uint64_t, const void*, uint64_t) {
  throw std::logic_error(Describe() + ": a buffer that is not host-mapped, and no DMA path to "
                         "write it (the backend created it without overriding WriteUnmapped)");
}

void HostMappedDevice::ReadUnmapped(const MappedBuffer&, uint64_t, void*, uint64_t) {
  throw std::logic_error(Describe() + ": a buffer that is not host-mapped, and no DMA path to "
                         "read it (the backend created it without overriding ReadUnmapped)");
}

void HostMappedDevice::DeviceCopy(const MappedBuffer& src, uint64_t src_offset, MappedBuffer& dst,
                                  uint64_t dst_offset, uint64_t len) {
  const uint8_t* s = Span(src, src_offset, len, "device copy source");
  std::memcpy(Span(dst, dst_offset, len, "device copy destination"), s, len);
}

DeviceBufferPtr HostMappedDevice::Alloc(uint64_t bytes, BufferRole role) {
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  uint64_t cur = allocated_.load();
  do {
    if (cur + rounded > capacity_) {
      std::ostringstream os;
      os << Describe() << ": cannot allocate " << rounded << " bytes of device memory: expected "
         << "at most " << (capacity_ - cur) << " free bytes, found a request for " << rounded
         << " (capacity " << capacity_ << ", allocated " << cur
         << "); use smaller subgroups or a larger --device-mem";
      throw CapacityError(os.str());
    }
  } while (!allocated_.compare_exchange_weak(cur, cur + rounded));
  try {
    std::shared_ptr<MappedBuffer> b = NewBuffer(rounded, role);
    if (b->role() != role || (role == BufferRole::kState && !b->host_mapped())) {
      throw std::logic_error(Describe() + ": expected NewBuffer to return a " +
                             BufferRoleName(role) + " buffer" +
                             (role == BufferRole::kState ? " with a host mapping" : "") +
                             ", found a " + BufferRoleName(b->role()) + " buffer " +
                             (b->host_mapped() ? "with" : "without") + " one");
    }
    b->counted_ = true;
    return b;
  } catch (...) {
    allocated_ -= rounded;
    throw;
  }
}

HostMappedDevice::MappedBuffer& HostMappedDevice::Own(const DeviceBuffer& b,
                                                      const char* what) const {
  const auto* mb = dynamic_cast<const MappedBuffer*>(&b);
  if (mb == nullptr || mb->owner() != this) {
    throw std::invalid_argument(std::string(what) + ": buffer does not belong to " + Describe());
  }
  return const_cast<MappedBuffer&>(*mb);
}

HostMappedDevice::MappedBuffer& HostMappedDevice::Range(const DeviceBuffer& b, uint64_t offset,
                                                        uint64_t len, const char* what) const {
  MappedBuffer& mb = Own(b, what);
  if (offset > b.size() || len > b.size() - offset) {
    std::ostringstream os;
    os << what << " on " << Describe() << ": expected [offset, offset + len) inside the "
       << b.size() << "-byte buffer, found offset " << offset << " and len " << len;
    throw std::out_of_range(os.str());
  }
  return mb;
}

uint8_t* HostMappedDevice::Span(const DeviceBuffer& b, uint64_t offset, uint64_t len,
                                const char* what) const {
  MappedBuffer& mb = Range(b, offset, len, what);
  if (!mb.host_mapped()) {
    throw std::logic_error(std::string(what) + " on " + Describe() + ": the " +
                           BufferRoleName(mb.role()) + " buffer has no host mapping");
  }
  if (mb.host() == nullptr) {
    throw std::logic_error(std::string(what) + " on " + Describe() +
                           ": the buffer is not mapped for the host (a launch owns it)");
  }
  return mb.host() + offset;
}

UpdateLaunch<HostMappedDevice::MappedBuffer*> HostMappedDevice::Resolve(
    const DeviceLaunch& l) const {
  const UpdateFootprint need = LaunchFootprint(l.mode, l.n, l.nnz);
  return l.Map<MappedBuffer*>([&](const hls::ArgInfo& a, const DeviceBufferPtr& p) {
    const uint64_t bytes = need[a.index];
    if (!p) {
      if (bytes == 0) return static_cast<MappedBuffer*>(nullptr);
      throw std::invalid_argument(std::string("launch on ") + Describe() +
                                  ": missing buffer " + a.name + " (expected " +
                                  std::to_string(bytes) + " bytes)");
    }
    MappedBuffer& mb = Own(*p, "launch");
    if (mb.size() < bytes) {
      throw std::out_of_range(std::string("launch on ") + Describe() + ": buffer " + a.name +
                              ": expected at least " + std::to_string(bytes) +
                              " bytes, found " + std::to_string(mb.size()));
    }
    return &mb;
  });
}

void HostMappedDevice::Count(Link l, uint64_t bytes, VirtualClock* vc) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[l] += bytes;
  }
  OnTransfer(l, bytes, vc);
}

aio::IoTicket HostMappedDevice::P2PRead(const aio::File& file, uint64_t file_offset,
                                        DeviceBuffer& dst, uint64_t dst_offset, uint64_t len,
                                        VirtualClock* vc) {
  RequireP2PRole(Own(dst, "P2P read").role(), Describe(), "P2P read");
  uint8_t* p = Span(dst, dst_offset, len, "P2P read");
  aio::IoTicket t = engine_.ReadAsync(file, file_offset, p, len);
  Count(Link::kSsdToFpga, len, vc);
  return t;
}

aio::IoTicket HostMappedDevice::P2PWrite(const aio::File& file, uint64_t file_offset,
                                         const DeviceBuffer& src, uint64_t src_offset,
                                         uint64_t len, VirtualClock* vc) {
  RequireP2PRole(Own(src, "P2P write").role(), Describe(), "P2P write");
  const uint8_t* p = Span(src, src_offset, len, "P2P write");
  aio::IoTicket t = engine_.WriteAsync(file, file_offset, p, len);
  Count(Link::kFpgaToSsd, len, vc);
  return t;
}

void HostMappedDevice::HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset,
                                    uint64_t len, VirtualClock* vc) {
  MappedBuffer& mb = Range(dst, dst_offset, len, "host-to-device copy");
  if (mb.host_mapped()) {
    std::memcpy(Span(dst, dst_offset, len, "host-to-device copy"), src, len);
  } else {
    WriteUnmapped(mb, dst_offset, src, len);
  }
  Count(Link::kHostToDevice, len, vc);
}

void HostMappedDevice::DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst,
                                    uint64_t len, VirtualClock* vc) {
  const MappedBuffer& mb = Range(src, src_offset, len, "device-to-host copy");
  if (mb.host_mapped()) {
    std::memcpy(dst, Span(src, src_offset, len, "device-to-host copy"), len);
  } else {
    ReadUnmapped(mb, src_offset, dst, len);
  }
  Count(Link::kDeviceToHost, len, vc);
}

aio::IoTicket HostMappedDevice::HostRead(const aio::File& file, uint64_t file_offset, void* dst,
                                         uint64_t len, VirtualClock* vc) {
  aio::IoTicket t = engine_.ReadAsync(file, file_offset, dst, len);
  Count(Link::kNvmeToHost, len, vc);
  return t;
}

aio::IoTicket HostMappedDevice::HostWrite(const aio::File& file, uint64_t file_offset,
                                          const void* src, uint64_t len, VirtualClock* vc) {
  aio::IoTicket t = engine_.WriteAsync(file, file_offset, src, len);
  Count(Link::kHostToNvme, len, vc);
  return t;
}

uint32_t HostMappedDevice::Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) {
  const MappedBuffer& mb = Range(b, offset, len, "device CRC");
  if (mb.host_mapped()) return csdkit::Crc32(Span(b, offset, len, "device CRC"), len);
  // A buffer without a host mapping is read back for its CRC (the runtime asks only for the
  // state's, which is always mapped); the bytes are not counted, as the interface promises.
  std::vector<uint8_t> bytes(len);
  ReadUnmapped(mb, offset, bytes.data(), len);
  return csdkit::Crc32(bytes.data(), len);
}

void HostMappedDevice::CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                                  uint64_t dst_offset, uint64_t len) {
  const MappedBuffer& s = Range(src, src_offset, len, "device copy source");
  MappedBuffer& d = Range(dst, dst_offset, len, "device copy destination");
  // Distinct buffers never share memory, so only a copy within one buffer can overlap.
  if (len > 0 && &s == &d && src_offset < dst_offset + len && dst_offset < src_offset + len) {
    throw std::invalid_argument("device copy on " + Describe() + ": source and destination "
                                "overlap");
  }
  DeviceCopy(s, src_offset, d, dst_offset, len);
}

LinkBytes HostMappedDevice::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace csdkit
