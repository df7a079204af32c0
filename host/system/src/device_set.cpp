#include "csdkit/system/device_set.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "csdkit/emu/emu_device.h"
#include "csdkit/emu/null_device.h"
#include "csdkit/platform/opencl_device.h"
#include "csdkit/platform/xclbin.h"

// Backends a build may lack (the top-level CMakeLists.txt's options): CSDKIT_HAVE_OPENCL (the
// OpenCL backend) and CSDKIT_HAVE_XCLBIN (XRT's xclbin API, for the emulated xclbin).

namespace csdkit {

Backend ParseBackend(const std::string& s) {
  if (s == "model") return Backend::kModel;
  if (s == "rtl") return Backend::kRtl;
  if (s == "opencl") return Backend::kOpenCl;
  if (s == "null") return Backend::kNull;
  throw std::invalid_argument("backend: expected model, rtl, opencl or null, found '" + s + "'");
}

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kModel: return "model";
    case Backend::kRtl: return "rtl";
    case Backend::kOpenCl: return "opencl";
    case Backend::kNull: return "null";
  }
  return "?";
}

DeviceSet::DeviceSet(const DeviceSpec& spec) : spec_(spec) {
  if (spec.count == 0) {
    throw std::invalid_argument("devices: expected at least 1 device, found 0");
  }
  if (spec.backend == Backend::kOpenCl) {
#ifndef CSDKIT_HAVE_OPENCL
    throw std::invalid_argument(
        "backend 'opencl': this build has no OpenCL (configure with the OpenCL headers and ICD "
        "loader, XRT's headers and clang, e.g. Debian's ocl-icd-opencl-dev, libxrt-dev and "
        "clang-14; or use --backend model)");
#else
    // OpenCL devices have their own time: no link model. A platform with fewer devices than
    // the set (PoCL's one CPU device) serves several set devices with the same OpenCL device.
    const unsigned avail = OpenClDeviceCount(spec.platform);
    if (avail == 0) {
      throw std::runtime_error(
          "backend opencl: expected an OpenCL platform" +
          (spec.platform.empty() ? std::string() : " matching '" + spec.platform + "'") +
          " with devices, found none (install pocl-opencl-icd, or XRT for a Xilinx card)");
    }
    for (unsigned k = 0; k < spec.count; ++k) {
      OpenClOptions o;
      o.index = spec.first + k;
      o.device = spec.count > 1 && spec.first + k >= avail ? (spec.first + k) % avail
                                                           : spec.first + k;
      o.platform = spec.platform;
      o.xclbin = spec.xclbin;
      o.capacity = spec.device_mem;
      o.aio = spec.aio;
      devices_.push_back(std::make_unique<OpenClDevice>(o));
    }
    return;
#endif
  }
  if (spec.device_mem == 0) {
    throw std::invalid_argument("device memory: expected a size in bytes for emulated and null "
                                "devices, found 0");
  }
  if (spec.link_model) links_ = std::make_shared<emu::LinkModel>(spec.links, spec.first + spec.count);
  if (spec.backend == Backend::kNull) {
    // Planning devices: no xclbin to load, no storage engine, no memory behind buffers.
    for (unsigned k = 0; k < spec.count; ++k) {
      emu::NullOptions o;
      o.index = spec.first + k;
      o.capacity = spec.device_mem;
      o.links = links_;
      devices_.push_back(std::make_unique<emu::NullDevice>(o));
    }
    return;
  }
  // Emulated devices load and check an xclbin as cards do: the one given, or the emulated
  // SmartSSD's, generated into a private temporary directory that is gone when this returns.
  // A build without XRT can neither write nor check one: its emulated devices run the kernel
  // without the load check, and refuse an xclbin given to them (emu_device.cpp).
  std::string xclbin = spec.xclbin;
  struct TempDir {
    std::string path;
    ~TempDir() {
      if (path.empty()) return;
      ::unlink((path + "/csd_update.emu.xclbin").c_str());
      ::rmdir(path.c_str());
    }
  } tmp;
#ifdef CSDKIT_HAVE_XCLBIN
  if (xclbin.empty() && spec.emulation_xclbin) {
    const char* env = std::getenv("TMPDIR");
    std::string tmpl = std::string(env && *env ? env : "/tmp") + "/csdkit-emu-xclbin.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("emulated SmartSSD: cannot create a temporary directory for its "
                               "xclbin ('" + tmpl + "', from $TMPDIR or /tmp): " +
                               std::strerror(errno));
    }
    tmp.path = tmpl;
    xclbin = tmp.path + "/csd_update.emu.xclbin";
    EmulationXclbinOptions xo;
    xo.target = spec.backend == Backend::kRtl ? "hw_emu" : "sw_emu";
    WriteEmulationXclbin(xclbin, xo);
  }
#endif
  for (unsigned k = 0; k < spec.count; ++k) {
    emu::EmuOptions o;
    o.index = spec.first + k;
    o.capacity = spec.device_mem;
    o.backend = spec.backend == Backend::kRtl ? emu::Backend::kRtl : emu::Backend::kModel;
    o.aio = spec.aio;
    o.aio_kernel = spec.aio_kernel;
    o.links = links_;
    o.xclbin = xclbin;
    o.rtl = spec.rtl;
    devices_.push_back(std::make_unique<emu::EmulatedSmartSsd>(o));
  }
}

DeviceSet::~DeviceSet() = default;

double DeviceSet::VirtualHorizon() const { return links_ ? links_->Horizon() : 0.0; }

void DeviceSet::ResetVirtualTime() {
  if (links_) links_->Reset();
}

void DeviceSet::BookHostCompute(uint64_t bytes, VirtualClock* vc) {
  if (links_) links_->BookHost(bytes, vc);
}

emu::EmulatedSmartSsd* DeviceSet::emulated(unsigned k) const {
  return dynamic_cast<emu::EmulatedSmartSsd*>(devices_.at(k).get());
}

OpenClDevice* DeviceSet::opencl(unsigned k) const {
#ifdef CSDKIT_HAVE_OPENCL
  return dynamic_cast<OpenClDevice*>(devices_.at(k).get());
#else
  (void)devices_.at(k);
  return nullptr;
#endif
}

std::string DeviceSet::Describe() const {
  std::string s;
  for (const auto& d : devices_) s += d->Describe() + "\n";
  return s;
}

}  // namespace csdkit
