#include "csdkit/platform/host_mapped_device.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

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

DeviceBufferPtr HostMappedDevice::Alloc(uint64_t bytes) {
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
    std::shared_ptr<MappedBuffer> b = NewBuffer(rounded);
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

uint8_t* HostMappedDevice::Span(const DeviceBuffer& b, uint64_t offset, uint64_t len,
                                const char* what) const {
  MappedBuffer& mb = Own(b, what);
  if (offset > b.size() || len > b.size() - offset) {
    std::ostringstream os;
    os << what << " on " << Describe() << ": expected [offset, offset + len) inside the "
       << b.size() << "-byte buffer, found offset " << offset << " and len " << len;
    throw std::out_of_range(os.str());
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
  uint8_t* p = Span(dst, dst_offset, len, "P2P read");
  aio::IoTicket t = engine_.ReadAsync(file, file_offset, p, len);
  Count(Link::kSsdToFpga, len, vc);
  return t;
}

aio::IoTicket HostMappedDevice::P2PWrite(const aio::File& file, uint64_t file_offset,
                                         const DeviceBuffer& src, uint64_t src_offset,
                                         uint64_t len, VirtualClock* vc) {
  const uint8_t* p = Span(src, src_offset, len, "P2P write");
  aio::IoTicket t = engine_.WriteAsync(file, file_offset, p, len);
  Count(Link::kFpgaToSsd, len, vc);
  return t;
}

void HostMappedDevice::HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset,
                                    uint64_t len, VirtualClock* vc) {
  std::memcpy(Span(dst, dst_offset, len, "host-to-device copy"), src, len);
  Count(Link::kHostToDevice, len, vc);
}

void HostMappedDevice::DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst,
                                    uint64_t len, VirtualClock* vc) {
  std::memcpy(dst, Span(src, src_offset, len, "device-to-host copy"), len);
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
  return csdkit::Crc32(Span(b, offset, len, "device CRC"), len);
}

void HostMappedDevice::CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                                  uint64_t dst_offset, uint64_t len) {
  const uint8_t* s = Span(src, src_offset, len, "device copy source");
  uint8_t* d = Span(dst, dst_offset, len, "device copy destination");
  if (len > 0 && s < d + len && d < s + len) {
    throw std::invalid_argument("device copy on " + Describe() + ": source and destination "
                                "overlap");
  }
  std::memcpy(d, s, len);
}

LinkBytes HostMappedDevice::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace csdkit
