#include "csdkit/emu/null_device.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit::emu {

/// Device memory of the null device: a size and a role, counted against the capacity while it
/// lives.
class NullDevice::Buffer final : public DeviceBuffer {
 public:
  Buffer(NullDevice* owner, uint64_t bytes, BufferRole role)
      : DeviceBuffer(bytes), owner_(owner), role_(role) {}
  ~Buffer() override { owner_->allocated_ -= size(); }
  const NullDevice* owner() const { return owner_; }
  BufferRole role() const { return role_; }
  /// The status word a launch wrote into this buffer (the only bytes a null device keeps:
  /// the runtime reads it back and checks it as it checks a card's).
  std::array<uint32_t, hls::kLanes>* word() const { return word_.get(); }
  void set_word(const std::array<uint32_t, hls::kLanes>& w) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!word_) word_ = std::make_unique<std::array<uint32_t, hls::kLanes>>();
    *word_ = w;
  }

 private:
  NullDevice* owner_;
  BufferRole role_;
  std::mutex mu_;
  std::unique_ptr<std::array<uint32_t, hls::kLanes>> word_;
};

NullDevice::NullDevice(const NullOptions& o) : opt_(o) {}

NullDevice::~NullDevice() = default;

std::string NullDevice::Describe() const {
  std::ostringstream os;
  os << "null device " << opt_.index << " (planning: no data, " << (opt_.capacity >> 20)
     << " MiB device memory)";
  return os.str();
}

DeviceBufferPtr NullDevice::Alloc(uint64_t bytes, BufferRole role) {
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  uint64_t cur = allocated_.load();
  do {
    if (cur + rounded > opt_.capacity) {
      std::ostringstream os;
      os << Describe() << ": cannot allocate " << rounded << " bytes of device memory: expected "
         << "at most " << (opt_.capacity - cur) << " free bytes, found a request for " << rounded
         << " (capacity " << opt_.capacity << ", allocated " << cur
         << "); use smaller subgroups or a larger --device-mem";
      throw CapacityError(os.str());
    }
  } while (!allocated_.compare_exchange_weak(cur, cur + rounded));
  return std::make_shared<Buffer>(this, rounded, role);
}

const NullDevice::Buffer& NullDevice::CheckRange(const DeviceBuffer& b, uint64_t offset,
                                                 uint64_t len, const char* what) const {
  const auto* nb = dynamic_cast<const Buffer*>(&b);
  if (nb == nullptr || nb->owner() != this) {
    throw std::invalid_argument(std::string(what) + ": buffer does not belong to " + Describe());
  }
  if (offset > b.size() || len > b.size() - offset) {
    std::ostringstream os;
    os << what << " on " << Describe() << ": expected [offset, offset + len) inside the "
       << b.size() << "-byte buffer, found offset " << offset << " and len " << len;
    throw std::out_of_range(os.str());
  }
  return *nb;
}

void NullDevice::CheckIo(uint64_t file_offset, uint64_t len, const char* what) const {
  if (file_offset % kIoAlign != 0 || len % kIoAlign != 0) {
    std::ostringstream os;
    os << what << " on " << Describe() << ": expected a file offset and length that are "
       << "multiples of " << kIoAlign << " (O_DIRECT), found offset " << file_offset
       << " and length " << len;
    throw std::invalid_argument(os.str());
  }
}

void NullDevice::Count(Link l, uint64_t bytes, VirtualClock* vc) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[l] += bytes;
  }
  if (opt_.links) opt_.links->BookTransfer(opt_.index, l, bytes, vc);
}

aio::IoTicket NullDevice::P2PRead(const aio::File&, uint64_t file_offset, DeviceBuffer& dst,
                                  uint64_t dst_offset, uint64_t len, VirtualClock* vc) {
  RequireP2PRole(CheckRange(dst, dst_offset, len, "P2P read").role(), Describe(), "P2P read");
  CheckIo(file_offset, len, "P2P read");
  Count(Link::kSsdToFpga, len, vc);
  return aio::IoTicket::Completed({len});
}

aio::IoTicket NullDevice::P2PWrite(const aio::File&, uint64_t file_offset,
                                   const DeviceBuffer& src, uint64_t src_offset, uint64_t len,
                                   VirtualClock* vc) {
  RequireP2PRole(CheckRange(src, src_offset, len, "P2P write").role(), Describe(), "P2P write");
  CheckIo(file_offset, len, "P2P write");
  Count(Link::kFpgaToSsd, len, vc);
  return aio::IoTicket::Completed({len});
}

void NullDevice::HostToDevice(const void*, DeviceBuffer& dst, uint64_t dst_offset, uint64_t len,
                              VirtualClock* vc) {
  CheckRange(dst, dst_offset, len, "host-to-device copy");
  Count(Link::kHostToDevice, len, vc);
}

void NullDevice::DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst,
                              uint64_t len, VirtualClock* vc) {
  const Buffer& b = CheckRange(src, src_offset, len, "device-to-host copy");
  // A status word a launch wrote comes back as written; nothing else has bytes to copy.
  if (const auto* w = b.word(); w && src_offset < sizeof *w) {
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(w->data()) + src_offset,
                std::min<uint64_t>(len, sizeof *w - src_offset));
  }
  Count(Link::kDeviceToHost, len, vc);
}

aio::IoTicket NullDevice::HostRead(const aio::File&, uint64_t file_offset, void*, uint64_t len,
                                   VirtualClock* vc) {
  CheckIo(file_offset, len, "host read");
  Count(Link::kNvmeToHost, len, vc);
  return aio::IoTicket::Completed({len});
}

aio::IoTicket NullDevice::HostWrite(const aio::File&, uint64_t file_offset, const void*,
                                    uint64_t len, VirtualClock* vc) {
  CheckIo(file_offset, len, "host write");
  Count(Link::kHostToNvme, len, vc);
  return aio::IoTicket::Completed({len});
}

uint32_t NullDevice::LaunchUpdate(const DeviceLaunch& l, uint32_t* status16, VirtualClock* vc) {
  // The same refusal as a driver's (and the emulated device's): every buffer the launch may
  // touch must be there and large enough.
  const UpdateFootprint need = LaunchFootprint(l.mode, l.n, l.nnz);
  l.ForEachBuffer([&](const hls::ArgInfo& a, const DeviceBufferPtr& p) {
    const uint64_t bytes = need[a.index];
    if (!p) {
      if (bytes == 0) return;
      throw std::invalid_argument(std::string("launch on ") + Describe() + ": missing buffer " +
                                  a.name + " (expected " + std::to_string(bytes) + " bytes)");
    }
    CheckRange(*p, 0, 0, "launch");
    if (p->size() < bytes) {
      throw std::out_of_range(std::string("launch on ") + Describe() + ": buffer " + a.name +
                              ": expected at least " + std::to_string(bytes) + " bytes, found " +
                              std::to_string(p->size()));
    }
  });
  // The status word a successful launch over all-zero state reports (the null device's state
  // reads as zeros, as a planning store's checksums say): every element counted, the CRC lanes
  // of n zero words for the state the optimizer uses, nothing non-finite.
  std::array<uint32_t, hls::kLanes> st{};
  hls::Mode md{};
  if (!hls::DecodeMode(l.mode, &md)) {
    st[hls::kStatusError] = hls::kErrBadMode;
  } else {
    // The bytes as stored: binary32 (or q8-bf16's bf16) theta; a moment's binary32 values, or
    // its codes followed by its absmax values (zeros: absmax +0, codes 0).
    const bool q8 = hls::IsQ8(md.state);
    const uint64_t n = l.n;
    const uint32_t theta = Crc32OfZeros((md.state == hls::StateFmt::kQ8Bf16 ? 2 : 4) * n);
    const uint32_t moment = Crc32OfZeros(q8 ? n + 4 * (n / hls::kQ8Block) : 4 * n);
    st[hls::kStatusElems] = l.n;
    st[hls::kStatusNnz] = md.sparse ? l.nnz : 0u;
    st[hls::kStatusCrcThetaIn] = st[hls::kStatusCrcThetaOut] = theta;
    if (hls::UsesM(md)) st[hls::kStatusCrcMIn] = st[hls::kStatusCrcMOut] = moment;
    if (hls::UsesV(md)) st[hls::kStatusCrcVIn] = st[hls::kStatusCrcVOut] = moment;
    st[hls::kStatusNonFinitePos] = hls::kStatusNoPosition;
  }
  st[hls::kStatusMagic] = hls::kStatusMagicValue;
  if (l.status) static_cast<Buffer&>(*l.status).set_word(st);
  if (status16 != nullptr) std::memcpy(status16, st.data(), hls::kWordBytes);
  if (opt_.links) opt_.links->BookKernel(opt_.index, LaunchMemoryTraffic(l.mode, l.n, l.nnz), vc);
  return st[hls::kStatusError];
}

uint32_t NullDevice::Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) {
  CheckRange(b, offset, len, "device CRC");
  return Crc32OfZeros(len);
}

void NullDevice::CopyWithin(const DeviceBuffer& src, uint64_t src_offset, DeviceBuffer& dst,
                            uint64_t dst_offset, uint64_t len) {
  CheckRange(src, src_offset, len, "device copy source");
  CheckRange(dst, dst_offset, len, "device copy destination");
  if (len > 0 && &src == &dst && src_offset < dst_offset + len && dst_offset < src_offset + len) {
    throw std::invalid_argument("device copy on " + Describe() + ": source and destination "
                                "overlap");
  }
}

LinkBytes NullDevice::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace csdkit::emu
