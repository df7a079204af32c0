#include "csdkit/platform/opencl_device.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <CL/cl_ext_xilinx.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/xclbin.h"

// The SPIR binary of hls/kernels/csd_update_cl.cpp, embedded at build time.
extern const unsigned char kCsdUpdateSpir[];
extern const unsigned long kCsdUpdateSpirSize;

namespace csdkit {

namespace {

std::string ClError(cl_int e) { return "OpenCL error " + std::to_string(e); }

void Check(cl_int e, const std::string& what) {
  if (e != CL_SUCCESS) throw std::runtime_error(what + ": " + ClError(e));
}

std::string PlatformName(cl_platform_id p) {
  size_t n = 0;
  clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, CL_PLATFORM_NAME, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceName(cl_device_id d) {
  size_t n = 0;
  clGetDeviceInfo(d, CL_DEVICE_NAME, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, CL_DEVICE_NAME, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

unsigned OpenClDeviceCount(const std::string& platform) {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return 0;
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  for (cl_platform_id p : ps) {
    if (!platform.empty() && PlatformName(p).find(platform) == std::string::npos) continue;
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) == CL_SUCCESS && nd > 0) return nd;
  }
  return 0;
}

bool OpenClAvailable(std::string* why) {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    if (why) *why = "no OpenCL platform (install pocl-opencl-icd, or XRT for a Xilinx card)";
    return false;
  }
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  for (cl_platform_id p : ps) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) == CL_SUCCESS && nd > 0) return true;
  }
  if (why) *why = "OpenCL platforms without devices";
  return false;
}

class OpenClDevice::Impl {
 public:
  OpenClOptions opt;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  bool xilinx = false;
  std::string desc;
  std::mutex mu;  // queue, kernel arguments
  cl_mem dummy = nullptr;  // bound to pointer arguments a launch does not use

  explicit Impl(const OpenClOptions& o) : opt(o) {}
};

/// A device buffer: the cl_mem and, while the host owns it, its mapped pointer (the base's
/// host view).
class OpenClDevice::ClBuffer final : public MappedBuffer {
 public:
  ClBuffer(OpenClDevice* dev, uint64_t size) : MappedBuffer(dev, size), impl_(dev->impl_.get()) {}
  ~ClBuffer() override {
    if (mem == nullptr) return;
    if (host() != nullptr) {
      clEnqueueUnmapMemObject(impl_->queue, mem, host(), 0, nullptr, nullptr);
      clFinish(impl_->queue);
    }
    clReleaseMemObject(mem);
  }
  void Map() {
    cl_int e = CL_SUCCESS;
    void* p = clEnqueueMapBuffer(impl_->queue, mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                 size(), 0, nullptr, nullptr, &e);
    Check(e, "clEnqueueMapBuffer");
    set_host(static_cast<uint8_t*>(p));
    if (!impl_->xilinx && host() != backing.data()) {
      throw std::runtime_error("OpenCL device " + impl_->desc + ": expected the mapped pointer "
                               "of a CL_MEM_USE_HOST_PTR buffer to be its host memory, found "
                               "another address (O_DIRECT transfers need that aligned memory)");
    }
    if ((reinterpret_cast<uintptr_t>(host()) & 4095u) != 0) {
      throw std::runtime_error("OpenCL device " + impl_->desc + ": mapped buffer not "
                               "4096-aligned; O_DIRECT transfers into it would fail");
    }
  }
  void Unmap() {
    if (host() == nullptr) return;
    Check(clEnqueueUnmapMemObject(impl_->queue, mem, host(), 0, nullptr, nullptr),
          "clEnqueueUnmapMemObject");
    set_host(nullptr);
  }

  cl_mem mem = nullptr;
  AlignedBuffer backing;  // backing store on non-Xilinx platforms (CL_MEM_USE_HOST_PTR)

 private:
  Impl* impl_;
};

OpenClDevice::OpenClDevice(const OpenClOptions& o)
    : HostMappedDevice(o.index, o.capacity, o.aio), impl_(std::make_unique<Impl>(o)) {
  Impl& d = *impl_;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    throw std::runtime_error("OpenCL: expected a platform through the ICD loader, found none "
                             "(install pocl-opencl-icd, or XRT for a Xilinx card)");
  }
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  std::string seen;
  for (cl_platform_id p : ps) {
    const std::string name = PlatformName(p);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!o.platform.empty() && name.find(o.platform) == std::string::npos) continue;
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd <= o.device) {
      continue;
    }
    std::vector<cl_device_id> ds(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
    d.platform = p;
    d.device = ds[o.device];
    d.xilinx = name.find("Xilinx") != std::string::npos;
    d.desc = name + " / " + DeviceName(d.device);
    break;
  }
  if (d.device == nullptr) {
    throw std::runtime_error("OpenCL: expected a platform matching '" + o.platform +
                             "' with a device " + std::to_string(o.device) + ", found: " + seen);
  }
  // The numeric contract needs IEEE single precision with subnormals and correctly rounded
  // division and square root.
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(d.device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, nullptr);
  if (!d.xilinx && (!(fp & CL_FP_DENORM) || !(fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ||
                    !(fp & CL_FP_ROUND_TO_NEAREST))) {
    throw std::runtime_error("OpenCL device " + d.desc + ": expected binary32 with denormals, "
                             "round-to-nearest and correctly rounded divide/sqrt, found a "
                             "device without them (results would not be bit-exact)");
  }
  cl_ulong mem = 0;
  clGetDeviceInfo(d.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
  if (o.capacity == 0) set_capacity(mem);
  cl_int e = CL_SUCCESS;
  d.ctx = clCreateContext(nullptr, 1, &d.device, nullptr, nullptr, &e);
  Check(e, "clCreateContext on " + d.desc);
  d.queue = clCreateCommandQueue(d.ctx, d.device, 0, &e);
  Check(e, "clCreateCommandQueue on " + d.desc);

  std::vector<unsigned char> bin;
  std::string options;
  if (d.xilinx) {
    if (o.xclbin.empty()) {
      throw std::runtime_error("OpenCL device " + d.desc + " is a Xilinx card: expected "
                               "--xclbin FILE (built by flows/), found none");
    }
    // The same load-and-check step as the emulated devices: the xclbin must hold csd_update with
    // the argument table's arguments and offsets, for the SmartSSD platform.
    XclbinExpectation ex;
    ex.platform = kSmartSsdPlatform;
    CheckXclbin(o.xclbin, ex);
    std::ifstream f(o.xclbin, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read xclbin '" + o.xclbin + "'");
    bin.assign(std::istreambuf_iterator<char>(f), {});
  } else {
    if (!o.xclbin.empty()) {
      throw std::runtime_error("OpenCL device " + d.desc + " is not a Xilinx card: expected no "
                               "--xclbin (this device runs the kernel built from csd_update.cpp "
                               "as SPIR), found '" + o.xclbin + "'");
    }
    bin.assign(kCsdUpdateSpir, kCsdUpdateSpir + kCsdUpdateSpirSize);
    options = "-x spir -spir-std=1.2 -cl-fp32-correctly-rounded-divide-sqrt";
  }
  const unsigned char* bp = bin.data();
  const size_t blen = bin.size();
  cl_int st = CL_SUCCESS;
  d.program = clCreateProgramWithBinary(d.ctx, 1, &d.device, &blen, &bp, &st, &e);
  Check(e, "clCreateProgramWithBinary on " + d.desc);
  e = clBuildProgram(d.program, 1, &d.device, options.c_str(), nullptr, nullptr);
  if (e != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(d.program, d.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(d.program, d.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    throw std::runtime_error("building the csd_update program on " + d.desc + " failed (" +
                             ClError(e) + "): " + log);
  }
  d.kernel = clCreateKernel(d.program, d.xilinx ? "csd_update" : "csd_update_cl", &e);
  Check(e, "clCreateKernel csd_update on " + d.desc);
  // A small buffer for pointer arguments a launch does not use.
  static AlignedBuffer* const dummy_host = new AlignedBuffer(4096);
  d.dummy = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | (d.xilinx ? 0 : CL_MEM_USE_HOST_PTR), 4096,
                           d.xilinx ? nullptr : dummy_host->data(), &e);
  Check(e, "clCreateBuffer");
}

OpenClDevice::~OpenClDevice() {
  Impl& d = *impl_;
  if (d.queue) clFinish(d.queue);
  if (d.dummy) clReleaseMemObject(d.dummy);
  if (d.kernel) clReleaseKernel(d.kernel);
  if (d.program) clReleaseProgram(d.program);
  if (d.queue) clReleaseCommandQueue(d.queue);
  if (d.ctx) clReleaseContext(d.ctx);
}

std::string OpenClDevice::Describe() const {
  return "OpenCL device " + std::to_string(impl_->opt.index) + " (" + impl_->desc + ")";
}
bool OpenClDevice::xilinx() const { return impl_->xilinx; }

std::shared_ptr<HostMappedDevice::MappedBuffer> OpenClDevice::NewBuffer(uint64_t bytes) {
  Impl& d = *impl_;
  auto b = std::make_shared<ClBuffer>(this, bytes);
  cl_int e = CL_SUCCESS;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.xilinx) {
    // A P2P buffer: host-mappable device memory that the NVMe device can DMA into.
    cl_mem_ext_ptr_t ext{};
    ext.flags = XCL_MEM_EXT_P2P_BUFFER;
    b->mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | CL_MEM_EXT_PTR_XILINX, bytes, &ext, &e);
  } else {
    b->backing = AlignedBuffer(bytes);
    b->mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes,
                            b->backing.data(), &e);
  }
  Check(e, "clCreateBuffer of " + std::to_string(bytes) + " bytes on " + d.desc);
  b->Map();
  return b;
}

uint32_t OpenClDevice::LaunchUpdate(const DeviceLaunch& l, uint32_t* status16, VirtualClock*) {
  Impl& d = *impl_;
  // The launch's buffers, checked against its footprint (refused here, as a driver would).
  const UpdateLaunch<MappedBuffer*> bufs = Resolve(l);
  std::vector<ClBuffer*> used;
  std::lock_guard<std::mutex> lock(d.mu);
  bufs.ForEachArg([&](const hls::ArgInfo& a, auto field) {
    if constexpr (std::is_same_v<decltype(field), MappedBuffer*>) {
      cl_mem m = d.dummy;
      if (field != nullptr) {
        auto* cb = static_cast<ClBuffer*>(field);
        m = cb->mem;
        if (std::find(used.begin(), used.end(), cb) == used.end()) used.push_back(cb);
      }
      Check(clSetKernelArg(d.kernel, a.index, sizeof(cl_mem), &m), "clSetKernelArg");
    } else {
      const cl_uint v = field;
      Check(clSetKernelArg(d.kernel, a.index, sizeof(cl_uint), &v), "clSetKernelArg");
    }
  });
  // The kernel owns its buffers while it runs.
  for (ClBuffer* cb : used) cb->Unmap();
  const size_t one = 1;
  cl_int e = clEnqueueNDRangeKernel(d.queue, d.kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr);
  cl_int f = clFinish(d.queue);
  for (ClBuffer* cb : used) cb->Map();
  Check(e, "clEnqueueNDRangeKernel csd_update on " + d.desc);
  Check(f, "clFinish on " + d.desc);
  const uint32_t* words = reinterpret_cast<const uint32_t*>(bufs.status->host());
  if (status16 != nullptr) std::memcpy(status16, words, hls::kWordBytes);
  return words[hls::kStatusError];
}

}  // namespace csdkit
