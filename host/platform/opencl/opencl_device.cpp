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
  // Host transfers of stream buffers go through their own in-order queue, so that a gradient
  // upload need not wait behind another worker's kernel on `queue`; they are blocking, which
  // orders them against launches and copies without events.
  cl_command_queue dma = nullptr;
  bool xilinx = false;
  std::string desc;
  std::mutex mu;  // queue (launches, copies, mapping of state buffers), kernel arguments
  cl_mem dummy = nullptr;  // bound to pointer arguments a launch does not use

  explicit Impl(const OpenClOptions& o) : opt(o) {}
};

/// A device buffer: the cl_mem and, for a state buffer while the host owns it, its mapped
/// pointer (the base's host view). A stream buffer is never mapped: only the DMA hooks reach it.
class OpenClDevice::ClBuffer final : public MappedBuffer {
 public:
  ClBuffer(OpenClDevice* dev, uint64_t size, BufferRole role)
      : MappedBuffer(dev, size, role, /*host_mapped=*/role == BufferRole::kState),
        impl_(dev->impl_.get()) {}
  ~ClBuffer() override {
    if (mem == nullptr) return;
    if (host() != nullptr) {
      clEnqueueUnmapMemObject(impl_->queue, mem, host(), 0, nullptr, nullptr);
      clFinish(impl_->queue);
    }
    clReleaseMemObject(mem);
  }
  /// Maps a state buffer for the host (blocking); nothing for a stream buffer.
  void Map() {
    if (!host_mapped()) return;
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
  /// Hands a mapped buffer to the device (enqueued on the launch queue); nothing otherwise.
  void Unmap() {
    if (host() == nullptr) return;
    Check(clEnqueueUnmapMemObject(impl_->queue, mem, host(), 0, nullptr, nullptr),
          "clEnqueueUnmapMemObject");
    set_host(nullptr);
  }

  cl_mem mem = nullptr;
  AlignedBuffer backing;  // backing store of a state buffer off Xilinx (CL_MEM_USE_HOST_PTR)

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
  d.dma = clCreateCommandQueue(d.ctx, d.device, 0, &e);
  Check(e, "clCreateCommandQueue (host transfers) on " + d.desc);

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
  if (d.dma) clFinish(d.dma);
  if (d.dummy) clReleaseMemObject(d.dummy);
  if (d.kernel) clReleaseKernel(d.kernel);
  if (d.program) clReleaseProgram(d.program);
  if (d.dma) clReleaseCommandQueue(d.dma);
  if (d.queue) clReleaseCommandQueue(d.queue);
  if (d.ctx) clReleaseContext(d.ctx);
}

std::string OpenClDevice::Describe() const {
  return "OpenCL device " + std::to_string(impl_->opt.index) + " (" + impl_->desc + ")";
}
bool OpenClDevice::xilinx() const { return impl_->xilinx; }

std::shared_ptr<HostMappedDevice::MappedBuffer> OpenClDevice::NewBuffer(uint64_t bytes,
                                                                        BufferRole role) {
  Impl& d = *impl_;
  auto b = std::make_shared<ClBuffer>(this, bytes, role);
  const std::string what = "clCreateBuffer of a " + std::to_string(bytes) + "-byte " +
                           BufferRoleName(role) + " buffer on " + d.desc;
  cl_int e = CL_SUCCESS;
  if (role == BufferRole::kStream) {
    // Ordinary device memory, never mapped: the DMA engine moves its bytes (WriteUnmapped,
    // ReadUnmapped), zeroed on the device.
    b->mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    Check(e, what);
    const cl_uint zero = 0;
    Check(clEnqueueFillBuffer(d.dma, b->mem, &zero, sizeof zero, 0, bytes, 0, nullptr, nullptr),
          "clEnqueueFillBuffer (zeroing) of a stream buffer on " + d.desc);
    Check(clFinish(d.dma), "clFinish on " + d.desc);
    return b;
  }
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
  Check(e, what);
  b->Map();
  return b;
}

void OpenClDevice::WriteUnmapped(MappedBuffer& dst, uint64_t offset, const void* src,
                                 uint64_t len) {
  if (len == 0) return;  // OpenCL refuses empty transfers; there is nothing to move
  Check(clEnqueueWriteBuffer(impl_->dma, static_cast<ClBuffer&>(dst).mem, CL_TRUE, offset, len,
                             src, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer of " + std::to_string(len) + " bytes on " + impl_->desc);
}

void OpenClDevice::ReadUnmapped(const MappedBuffer& src, uint64_t offset, void* dst, uint64_t len) {
  if (len == 0) return;
  Check(clEnqueueReadBuffer(impl_->dma, static_cast<const ClBuffer&>(src).mem, CL_TRUE, offset,
                            len, dst, 0, nullptr, nullptr),
        "clEnqueueReadBuffer of " + std::to_string(len) + " bytes on " + impl_->desc);
}

void OpenClDevice::DeviceCopy(const MappedBuffer& src, uint64_t src_offset, MappedBuffer& dst,
                              uint64_t dst_offset, uint64_t len) {
  if (len == 0) return;
  Impl& d = *impl_;
  // A copy engine's DDR-to-DDR copy, for every pair of roles: a mapped (state) buffer is handed
  // to the device around it as around a launch, so no byte goes through a host mapping.
  auto& s = const_cast<ClBuffer&>(static_cast<const ClBuffer&>(src));
  auto& t = static_cast<ClBuffer&>(dst);
  std::lock_guard<std::mutex> lock(d.mu);
  s.Unmap();
  t.Unmap();
  const cl_int e = clEnqueueCopyBuffer(d.queue, s.mem, t.mem, src_offset, dst_offset, len, 0,
                                       nullptr, nullptr);
  const cl_int f = clFinish(d.queue);
  s.Map();
  if (&t != &s) t.Map();
  Check(e, "clEnqueueCopyBuffer of " + std::to_string(len) + " bytes on " + d.desc);
  Check(f, "clFinish on " + d.desc);
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
  // The kernel owns its buffers while it runs: the mapped (state) ones are handed over; stream
  // buffers are never mapped.
  for (ClBuffer* cb : used) cb->Unmap();
  const size_t one = 1;
  cl_int e = clEnqueueNDRangeKernel(d.queue, d.kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr);
  cl_int f = clFinish(d.queue);
  for (ClBuffer* cb : used) cb->Map();
  Check(e, "clEnqueueNDRangeKernel csd_update on " + d.desc);
  Check(f, "clFinish on " + d.desc);
  uint32_t words[hls::kWordBytes / 4];
  if (bufs.status->host_mapped()) {
    std::memcpy(words, bufs.status->host(), hls::kWordBytes);
  } else {
    ReadUnmapped(*bufs.status, 0, words, hls::kWordBytes);
  }
  if (status16 != nullptr) std::memcpy(status16, words, hls::kWordBytes);
  return words[hls::kStatusError];
}

}  // namespace csdkit
