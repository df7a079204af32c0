#include "csdkit/emu/emu_device.h"

#include <zlib.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "csd_update.h"
#include "csdkit/aligned_buffer.h"
#include "csdkit/checksum.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/hls/word.h"
#include "csdkit/xclbin.h"

namespace csdkit::emu {

RtlMemory ParseRtlMemory(const std::string& s) {
  if (s == "ideal") return RtlMemory::kIdeal;
  if (s == "ddr") return RtlMemory::kDdr;
  if (s == "stress") return RtlMemory::kStress;
  throw std::invalid_argument("memory timing: expected ideal, ddr or stress, found '" + s + "'");
}

#ifndef CSDKIT_HAVE_RTL
// Without Verilator at configure time there is no RTL model in the build: say so.
bool RtlAvailable() { return false; }
RtlLaunchStats RunRtlLaunch(const std::vector<RtlRegion>&,
                            const std::vector<std::pair<std::string, uint64_t>>&,
                            const RtlOptions&) {
  throw std::runtime_error("this build has no Verilated RTL (Verilator was not found when it "
                           "was configured; run scripts/setup and rebuild)");
}
nlohmann::json RtlUnitLatencies() { return nlohmann::json::object(); }
#endif

Backend ParseBackend(const std::string& s) {
  if (s == "model") return Backend::kModel;
  if (s == "rtl") return Backend::kRtl;
  throw std::invalid_argument("backend: expected model or rtl, found '" + s + "'");
}

const char* BackendName(Backend b) { return b == Backend::kModel ? "model" : "rtl"; }

/// Device memory of the emulated device: 4096-aligned host memory standing in for FPGA DDR.
class EmulatedSmartSsd::Buffer final : public DeviceBuffer {
 public:
  Buffer(EmulatedSmartSsd* dev, uint64_t bytes)
      : DeviceBuffer(bytes), dev_(dev), mem_(static_cast<std::size_t>(bytes)) {}
  ~Buffer() override { dev_->allocated_ -= size(); }
  uint8_t* data() { return mem_.data(); }
  const EmulatedSmartSsd* owner() const { return dev_; }

 private:
  EmulatedSmartSsd* dev_;
  AlignedBuffer mem_;
};

EmulatedSmartSsd::EmulatedSmartSsd(const EmuOptions& o) : opt_(o), engine_(o.aio) {
  if (!o.xclbin.empty()) {
    XclbinExpectation ex;
    ex.platform = kEmulatedSmartSsdPlatform;
    CheckXclbin(o.xclbin, ex);
  }
#ifndef CSDKIT_HAVE_RTL
  if (o.backend == Backend::kRtl) {
    throw std::invalid_argument(
        "backend rtl: expected a build with the Verilated updater RTL, found none in this build "
        "(Verilator was not found at configure time; use --backend model)");
  }
#endif
}

EmulatedSmartSsd::~EmulatedSmartSsd() = default;

std::string EmulatedSmartSsd::Describe() const {
  std::ostringstream os;
  os << "emulated SmartSSD " << opt_.index << " (backend " << BackendName(opt_.backend) << ", "
     << (opt_.capacity >> 20) << " MiB device memory)";
  return os.str();
}

DeviceBufferPtr EmulatedSmartSsd::Alloc(uint64_t bytes) {
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  uint64_t cur = allocated_.load();
  do {
    if (cur + rounded > opt_.capacity) {
      std::ostringstream os;
      os << "device " << opt_.index << ": cannot allocate " << rounded
         << " bytes of device memory: expected at most " << (opt_.capacity - cur)
         << " free bytes, found a request for " << rounded << " (capacity " << opt_.capacity
         << ", allocated " << cur << "); use smaller subgroups or a larger --device-mem";
      throw CapacityError(os.str());
    }
  } while (!allocated_.compare_exchange_weak(cur, cur + rounded));
  try {
    return std::make_shared<Buffer>(this, rounded);
  } catch (...) {
    allocated_ -= rounded;
    throw;
  }
}

uint8_t* EmulatedSmartSsd::Span(const DeviceBuffer& b, uint64_t offset, uint64_t len,
                                const char* what) const {
  const auto* eb = dynamic_cast<const Buffer*>(&b);
  if (eb == nullptr || eb->owner() != this) {
    throw std::invalid_argument(std::string(what) + ": buffer does not belong to device " +
                                std::to_string(opt_.index));
  }
  if (offset > b.size() || len > b.size() - offset) {
    std::ostringstream os;
    os << what << " on device " << opt_.index << ": expected [offset, offset + len) inside the "
       << b.size() << "-byte buffer, found offset " << offset << " and len " << len;
    throw std::out_of_range(os.str());
  }
  return const_cast<Buffer*>(eb)->data() + offset;
}

void EmulatedSmartSsd::Count(Link l, uint64_t bytes, VirtualClock* vc) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[l] += bytes;
  }
  if (opt_.links) opt_.links->BookTransfer(opt_.index, l, bytes, vc);
}

aio::IoTicket EmulatedSmartSsd::P2PRead(const aio::File& file, uint64_t file_offset,
                                        DeviceBuffer& dst, uint64_t dst_offset, uint64_t len,
                                        VirtualClock* vc) {
  uint8_t* p = Span(dst, dst_offset, len, "P2P read");
  aio::IoTicket t = engine_.ReadAsync(file, file_offset, p, len);
  Count(Link::kSsdToFpga, len, vc);
  return t;
}

aio::IoTicket EmulatedSmartSsd::P2PWrite(const aio::File& file, uint64_t file_offset,
                                         const DeviceBuffer& src, uint64_t src_offset,
                                         uint64_t len, VirtualClock* vc) {
  const uint8_t* p = Span(src, src_offset, len, "P2P write");
  aio::IoTicket t = engine_.WriteAsync(file, file_offset, p, len);
  Count(Link::kFpgaToSsd, len, vc);
  return t;
}

void EmulatedSmartSsd::HostToDevice(const void* src, DeviceBuffer& dst, uint64_t dst_offset,
                                    uint64_t len, VirtualClock* vc) {
  std::memcpy(Span(dst, dst_offset, len, "host-to-device copy"), src, len);
  Count(Link::kHostToDevice, len, vc);
}

void EmulatedSmartSsd::DeviceToHost(const DeviceBuffer& src, uint64_t src_offset, void* dst,
                                    uint64_t len, VirtualClock* vc) {
  std::memcpy(dst, Span(src, src_offset, len, "device-to-host copy"), len);
  Count(Link::kDeviceToHost, len, vc);
}

aio::IoTicket EmulatedSmartSsd::HostRead(const aio::File& file, uint64_t file_offset, void* dst,
                                         uint64_t len, VirtualClock* vc) {
  aio::IoTicket t = engine_.ReadAsync(file, file_offset, dst, len);
  Count(Link::kNvmeToHost, len, vc);
  return t;
}

aio::IoTicket EmulatedSmartSsd::HostWrite(const aio::File& file, uint64_t file_offset,
                                          const void* src, uint64_t len, VirtualClock* vc) {
  aio::IoTicket t = engine_.WriteAsync(file, file_offset, src, len);
  Count(Link::kHostToNvme, len, vc);
  return t;
}

uint32_t EmulatedSmartSsd::LaunchUpdate(const UpdateBuffersDev& b, uint32_t n, uint32_t nnz,
                                        const KernelLaunch& k, uint32_t* status16,
                                        VirtualClock* vc) {
  hls::Mode md{};
  const bool mode_ok = hls::DecodeMode(k.mode, &md);
  // Every buffer the launch may touch must be large enough for it (the kernel itself cannot
  // check sizes; a device driver would refuse such a launch the same way).
  auto need = [&](const DeviceBufferPtr& p, uint64_t bytes, const char* name) -> hls::Word* {
    if (bytes == 0) return p ? reinterpret_cast<hls::Word*>(Span(*p, 0, 0, name)) : nullptr;
    if (!p) throw std::invalid_argument(std::string("launch: missing buffer ") + name);
    return reinterpret_cast<hls::Word*>(Span(*p, 0, bytes, name));
  };
  const uint64_t wb = hls::kWordBytes;
  const uint64_t eb = mode_ok ? DTypeBytes(md.grad) : 4;
  const bool sparse = mode_ok && md.sparse;
  hls::Word* theta = need(b.theta, hls::WordsFor(n, 4) * wb, "theta");
  hls::Word* m = need(b.m, mode_ok && hls::UsesM(md) ? hls::WordsFor(n, 4) * wb : 0, "m");
  hls::Word* v = need(b.v, mode_ok && hls::UsesV(md) ? hls::WordsFor(n, 4) * wb : 0, "v");
  hls::Word* grad = need(b.grad, hls::WordsFor(sparse ? nnz : n, eb) * wb, "grad");
  hls::Word* idx = need(b.sp_idx, sparse ? hls::WordsFor(nnz, 2) * wb : 0, "sp_idx");
  hls::Word* blk =
      need(b.sp_blk, sparse ? hls::WordsFor(hls::NumBlocks(n) + 1ull, 4) * wb : 0, "sp_blk");
  hls::Word* out = need(b.out16, mode_ok && md.out != DType::kFp32 ? hls::WordsFor(n, 2) * wb : 0,
                        "out16");
  hls::Word* status = need(b.status, wb, "status");
  const hls::Scalars& s = k.scalars;
  if (opt_.backend == Backend::kModel) {
    csd_update(theta, m, v, grad, idx, blk, out, status, n, nnz, k.mode, s.unscale, s.lr,
               s.beta1, s.omb1, s.beta2, s.omb2, s.eps, s.wd, s.c1, s.c2);
  } else {
#ifdef CSDKIT_HAVE_RTL
    // The RTL reads and writes the device buffers through its AXI masters: device address =
    // host address of the emulated DDR, each buffer one region of the memory map.
    std::vector<RtlRegion> regions;
    const DeviceBufferPtr* bufs[8] = {&b.theta, &b.m,     &b.v,     &b.grad,
                                      &b.sp_idx, &b.sp_blk, &b.out16, &b.status};
    const hls::Word* ptrs[8] = {theta, m, v, grad, idx, blk, out, status};
    for (int i = 0; i < 8; ++i) {
      if (ptrs[i] == nullptr || !*bufs[i]) continue;
      bool seen = false;
      for (const RtlRegion& r : regions) seen |= r.host == static_cast<const void*>(ptrs[i]);
      if (seen) continue;
      regions.push_back({reinterpret_cast<uint64_t>(ptrs[i]), (*bufs[i])->size(),
                         const_cast<hls::Word*>(ptrs[i]), hls::kUpdateArgs[i].name});
    }
    auto addr = [](const hls::Word* p) { return reinterpret_cast<uint64_t>(p); };
    const std::vector<std::pair<std::string, uint64_t>> args = {
        {"theta", addr(theta)},   {"m", addr(m)},           {"v", addr(v)},
        {"grad", addr(grad)},     {"sp_idx", addr(idx)},    {"sp_blk", addr(blk)},
        {"out16", addr(out)},     {"status", addr(status)}, {"n", n},
        {"nnz", nnz},             {"mode", k.mode},         {"unscale", s.unscale},
        {"lr", s.lr},             {"beta1", s.beta1},       {"omb1", s.omb1},
        {"beta2", s.beta2},       {"omb2", s.omb2},         {"eps", s.eps},
        {"wd", s.wd},             {"c1", s.c1},             {"c2", s.c2}};
    const RtlLaunchStats st = RunRtlLaunch(regions, args, opt_.rtl);
    std::lock_guard<std::mutex> lock(mu_);
    last_rtl_ = st;
#endif
  }
  const uint32_t* st = reinterpret_cast<const uint32_t*>(status);
  if (status16 != nullptr) std::memcpy(status16, st, wb);
  if (opt_.links) {
    // DDR traffic of the launch: state read and written, gradient read, copy written.
    uint64_t ddr = 8ull * n;
    if (mode_ok && hls::UsesM(md)) ddr += 8ull * n;
    if (mode_ok && hls::UsesV(md)) ddr += 8ull * n;
    ddr += sparse ? (2 + eb) * static_cast<uint64_t>(nnz) : eb * n;
    if (mode_ok && md.out != DType::kFp32) ddr += 2ull * n;
    opt_.links->BookKernel(opt_.index, ddr, vc);
  }
  return st[hls::kStatusError];
}

uint32_t EmulatedSmartSsd::Crc32(const DeviceBuffer& b, uint64_t offset, uint64_t len) {
  const uint8_t* p = Span(b, offset, len, "device CRC");
  return csdkit::Crc32(p, len);
}

RtlLaunchStats EmulatedSmartSsd::last_rtl_launch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_rtl_;
}

LinkBytes EmulatedSmartSsd::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace csdkit::emu
