#include "csdkit/emu/emu_device.h"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/xclbin.h"

namespace csdkit::emu {

RtlMemory ParseRtlMemory(const std::string& s) {
  if (s == "ideal") return RtlMemory::kIdeal;
  if (s == "ddr") return RtlMemory::kDdr;
  if (s == "stress") return RtlMemory::kStress;
  throw std::invalid_argument("memory timing: expected ideal, ddr or stress, found '" + s + "'");
}

#ifndef CSDKIT_HAVE_RTL
// Without Verilator at configure time (or with CSDKIT_WITH_RTL=OFF) there is no RTL model in
// the build: say so.
bool RtlAvailable() { return false; }
RtlLaunchStats RunRtlLaunch(const std::vector<RtlRegion>&, const UpdateLaunch<uint64_t>&,
                            const RtlOptions&) {
  throw std::runtime_error("this build has no Verilated RTL (Verilator was not found when it "
                           "was configured, or CSDKIT_WITH_RTL was OFF; run scripts/setup and "
                           "rebuild)");
}
nlohmann::json RtlUnitLatencies() { return nlohmann::json::object(); }
#endif

/// Device memory of the emulated device: 4096-aligned host memory standing in for FPGA DDR,
/// for either role. The role is recorded, and P2P on a stream buffer is refused as on a card,
/// where a stream buffer has no P2P address.
class EmulatedSmartSsd::Buffer final : public MappedBuffer {
 public:
  Buffer(EmulatedSmartSsd* dev, uint64_t bytes, BufferRole role)
      : MappedBuffer(dev, bytes, role, /*host_mapped=*/true),
        mem_(static_cast<std::size_t>(bytes)) {
    set_host(mem_.data());
  }

 private:
  AlignedBuffer mem_;
};

EmulatedSmartSsd::EmulatedSmartSsd(const EmuOptions& o)
    : HostMappedDevice(o.index, o.capacity, o.aio, o.aio_kernel), opt_(o) {
  if (!o.xclbin.empty()) {
#ifdef CSDKIT_HAVE_XCLBIN
    XclbinExpectation ex;
    ex.platform = kEmulatedSmartSsdPlatform;
    CheckXclbin(o.xclbin, ex);
#else
    throw std::invalid_argument(
        "emulated SmartSSD: expected to load and check the xclbin '" + o.xclbin + "', but this "
        "build has no xclbin support (XRT's xclbin API was not found at configure time: install "
        "libxrt-dev and uuid-dev and rebuild, or give no xclbin)");
#endif
  }
  if (o.backend == Backend::kRtl && !RtlAvailable()) {
    throw std::invalid_argument(
        "backend rtl: expected a build with the Verilated updater RTL, found none in this build "
        "(Verilator was not found at configure time, or CSDKIT_WITH_RTL was OFF; use --backend "
        "model)");
  }
}

EmulatedSmartSsd::~EmulatedSmartSsd() = default;

std::string EmulatedSmartSsd::Describe() const {
  std::ostringstream os;
  os << "emulated SmartSSD " << opt_.index << " (backend "
     << (opt_.backend == Backend::kModel ? "model" : "rtl") << ", " << (capacity() >> 20)
     << " MiB device memory)";
  return os.str();
}

std::shared_ptr<HostMappedDevice::MappedBuffer> EmulatedSmartSsd::NewBuffer(uint64_t bytes,
                                                                            BufferRole role) {
  return std::make_shared<Buffer>(this, bytes, role);
}

void EmulatedSmartSsd::OnTransfer(Link l, uint64_t bytes, VirtualClock* vc) {
  if (opt_.links) opt_.links->BookTransfer(opt_.index, l, bytes, vc);
}

uint32_t EmulatedSmartSsd::LaunchUpdate(const DeviceLaunch& l, uint32_t* status16,
                                        VirtualClock* vc) {
  // Every buffer the launch may touch must be large enough for it (the kernel itself cannot
  // check sizes; a device driver would refuse such a launch the same way).
  const UpdateLaunch<MappedBuffer*> bufs = Resolve(l);
  const UpdateLaunch<hls::Word*> words =
      bufs.Map<hls::Word*>([](const hls::ArgInfo&, MappedBuffer* b) {
        return b != nullptr ? reinterpret_cast<hls::Word*>(b->host()) : nullptr;
      });
  if (opt_.backend == Backend::kModel) {
    InvokeUpdate(words);
  } else {
    // The RTL reads and writes the device buffers through its AXI masters: device address =
    // host address of the emulated DDR, each buffer one region of the memory map.
    std::vector<RtlRegion> regions;
    bufs.ForEachBuffer([&](const hls::ArgInfo& a, MappedBuffer* b) {
      if (b == nullptr) return;
      for (const RtlRegion& r : regions)
        if (r.host == b->host()) return;
      regions.push_back({reinterpret_cast<uint64_t>(b->host()), b->size(), b->host(), a.name});
    });
    const UpdateLaunch<uint64_t> regs = words.Map<uint64_t>(
        [](const hls::ArgInfo&, hls::Word* p) { return reinterpret_cast<uint64_t>(p); });
    const RtlLaunchStats st = RunRtlLaunch(regions, regs, opt_.rtl);
    std::lock_guard<std::mutex> lock(mu_);
    last_rtl_ = st;
  }
  const uint32_t* st = reinterpret_cast<const uint32_t*>(words.status);
  if (status16 != nullptr) std::memcpy(status16, st, hls::kWordBytes);
  if (opt_.links) opt_.links->BookKernel(opt_.index, LaunchMemoryTraffic(l.mode, l.n, l.nnz), vc);
  return st[hls::kStatusError];
}

RtlLaunchStats EmulatedSmartSsd::last_rtl_launch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_rtl_;
}

}  // namespace csdkit::emu
