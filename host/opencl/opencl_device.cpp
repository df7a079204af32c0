#include "csdkit/opencl_device.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <CL/cl_ext_xilinx.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "csdkit/aligned_buffer.h"
#include "csdkit/checksum.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/hls/word.h"
#include "csdkit/xclbin.h"

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

/// A device buffer: the cl_mem and, while the host owns it, its mapped pointer.
class ClBuffer final : public DeviceBuffer {
 public:
  ClBuffer(OpenClDevice::Impl* owner, uint64_t size) : DeviceBuffer(size), owner_(owner) {}
  ~ClBuffer() override;
  OpenClDevice::Impl* owner_;
  cl_mem mem = nullptr;
  AlignedBuffer host;       // backing store on non-Xilinx platforms (CL_MEM_USE_HOST_PTR)
  uint8_t* mapped = nullptr;  // host view; nullptr while the kernel owns the buffer
};

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
  uint64_t capacity = 0;
  std::atomic<uint64_t> allocated{0};
  aio::Engine engine;
  std::mutex mu;  // queue, kernel arguments, counters
  LinkBytes bytes;
  cl_mem dummy = nullptr;  // bound to pointer arguments a launch does not use

  explicit Impl(const OpenClOptions& o) : opt(o), engine(o.aio) {}

  void Map(ClBuffer& b) {
    cl_int e = CL_SUCCESS;
    void* p = clEnqueueMapBuffer(queue, b.mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, b.size(),
                                 0, nullptr, nullptr, &e);
    Check(e, "clEnqueueMapBuffer");
    b.mapped = static_cast<uint8_t*>(p);
    if (!xilinx && b.mapped != b.host.data()) {
      throw std::runtime_error("OpenCL device " + desc + ": expected the mapped pointer of a "
                               "CL_MEM_USE_HOST_PTR buffer to be its host memory, found another "
                               "address (O_DIRECT transfers need that aligned memory)");
    }
    if ((reinterpret_cast<uintptr_t>(b.mapped) & 4095u) != 0) {
      throw std::runtime_error("OpenCL device " + desc + ": mapped buffer not 4096-aligned; "
                               "O_DIRECT transfers into it would fail");
    }
  }
  void Unmap(ClBuffer& b) {
    if (b.mapped == nullptr) return;
    Check(clEnqueueUnmapMemObject(queue, b.mem, b.mapped, 0, nullptr, nullptr),
          "clEnqueueUnmapMemObject");
    b.mapped = nullptr;
  }
  ClBuffer& Own(const DeviceBuffer& b, const char* what) {
    auto* cb = dynamic_cast<const ClBuffer*>(&b);
    if (cb == nullptr || cb->owner_ != this) {
      throw std::invalid_argument(std::string(what) + ": buffer does not belong to " + desc);
    }
    return const_cast<ClBuffer&>(*cb);
  }
  uint8_t* Span(const DeviceBuffer& b, uint64_t off, uint64_t len, const char* what) {
    ClBuffer& cb = Own(b, what);
    if (off > b.size() || len > b.size() - off) {
      std::ostringstream os;
      os << what << " on " << desc << ": expected [offset, offset + len) inside the " << b.size()
         << "-byte buffer, found offset " << off << " and len " << len;
      throw std::out_of_range(os.str());
    }
    if (cb.mapped == nullptr) throw std::logic_error(std::string(what) + ": buffer not mapped");
    return cb.mapped + off;
  }
  void Count(Link l, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    bytes[l] += n;
  }
};

ClBuffer::~ClBuffer() {
  if (mem != nullptr) {
    if (mapped != nullptr) {
      clEnqueueUnmapMemObject(owner_->queue, mem, mapped, 0, nullptr, nullptr);
      clFinish(owner_->queue);
    }
    clReleaseMemObject(mem);
  }
  owner_->allocated -= size();
}

OpenClDevice::OpenClDevice(const OpenClOptions& o) : impl_(std::make_unique<Impl>(o)) {
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
  d.capacity = o.capacity ? o.capacity : mem;
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
uint64_t OpenClDevice::capacity() const { return impl_->capacity; }
uint64_t OpenClDevice::allocated() const { return impl_->allocated.load(); }
bool OpenClDevice::xilinx() const { return impl_->xilinx; }

DeviceBufferPtr OpenClDevice::Alloc(uint64_t bytes) {
  Impl& d = *impl_;
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  uint64_t cur = d.allocated.load();
  do {
    if (cur + rounded > d.capacity) {
      std::ostringstream os;
      os << d.desc << ": cannot allocate " << rounded << " bytes of device memory: expected at "
         << "most " << (d.capacity - cur) << " free bytes (capacity " << d.capacity << ")";
      throw CapacityError(os.str());
    }
  } while (!d.allocated.compare_exchange_weak(cur, cur + rounded));
  auto b = std::make_shared<ClBuffer>(impl_.get(), rounded);
  cl_int e = CL_SUCCESS;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.xilinx) {
    // A P2P buffer: host-mappable device memory that the NVMe device can DMA into.
    cl_mem_ext_ptr_t ext{};
    ext.flags = XCL_MEM_EXT_P2P_BUFFER;
    b->mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | CL_MEM_EXT_PTR_XILINX, rounded, &ext, &e);
  } else {
    b->host = AlignedBuffer(rounded);
    b->mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, rounded,
                            b->host.data(), &e);
  }
  Check(e, "clCreateBuffer of " + std::to_string(rounded) + " bytes on " + d.desc);
  d.Map(*b);
  return b;
}

aio::IoTicket OpenClDevice::P2PRead(const aio::File& file, uint64_t off, DeviceBuffer& dst,
                                    uint64_t dst_off, uint64_t len, VirtualClock*) {
  uint8_t* p = impl_->Span(dst, dst_off, len, "P2P read");
  aio::IoTicket t = impl_->engine.ReadAsync(file, off, p, len);
  impl_->Count(Link::kSsdToFpga, len);
  return t;
}

aio::IoTicket OpenClDevice::P2PWrite(const aio::File& file, uint64_t off, const DeviceBuffer& src,
                                     uint64_t src_off, uint64_t len, VirtualClock*) {
  const uint8_t* p = impl_->Span(src, src_off, len, "P2P write");
  aio::IoTicket t = impl_->engine.WriteAsync(file, off, p, len);
  impl_->Count(Link::kFpgaToSsd, len);
  return t;
}

void OpenClDevice::HostToDevice(const void* src, DeviceBuffer& dst, uint64_t off, uint64_t len,
                                VirtualClock*) {
  std::memcpy(impl_->Span(dst, off, len, "host-to-device copy"), src, len);
  impl_->Count(Link::kHostToDevice, len);
}

void OpenClDevice::DeviceToHost(const DeviceBuffer& src, uint64_t off, void* dst, uint64_t len,
                                VirtualClock*) {
  std::memcpy(dst, impl_->Span(src, off, len, "device-to-host copy"), len);
  impl_->Count(Link::kDeviceToHost, len);
}

aio::IoTicket OpenClDevice::HostRead(const aio::File& file, uint64_t off, void* dst, uint64_t len,
                                     VirtualClock*) {
  aio::IoTicket t = impl_->engine.ReadAsync(file, off, dst, len);
  impl_->Count(Link::kNvmeToHost, len);
  return t;
}

aio::IoTicket OpenClDevice::HostWrite(const aio::File& file, uint64_t off, const void* src,
                                      uint64_t len, VirtualClock*) {
  aio::IoTicket t = impl_->engine.WriteAsync(file, off, src, len);
  impl_->Count(Link::kHostToNvme, len);
  return t;
}

uint32_t OpenClDevice::LaunchUpdate(const UpdateBuffersDev& b, uint32_t n, uint32_t nnz,
                                    const KernelLaunch& k, uint32_t* status16, VirtualClock*) {
  Impl& d = *impl_;
  hls::Mode md{};
  const bool mode_ok = hls::DecodeMode(k.mode, &md);
  const bool sparse = mode_ok && md.sparse;
  const uint64_t eb = mode_ok ? DTypeBytes(md.grad) : 4;
  const uint64_t wb = hls::kWordBytes;
  // Sizes the kernel will touch, as the argument table's buffers (a launch that does not fit
  // is refused here, as a driver would).
  const DeviceBufferPtr ptrs[8] = {b.theta, b.m, b.v, b.grad, b.sp_idx, b.sp_blk, b.out16, b.status};
  const uint64_t need[8] = {
      hls::WordsFor(n, 4) * wb,
      mode_ok && hls::UsesM(md) ? hls::WordsFor(n, 4) * wb : 0,
      mode_ok && hls::UsesV(md) ? hls::WordsFor(n, 4) * wb : 0,
      hls::WordsFor(sparse ? nnz : n, eb) * wb,
      sparse ? hls::WordsFor(nnz, 2) * wb : 0,
      sparse ? hls::WordsFor(hls::NumBlocks(n) + 1ull, 4) * wb : 0,
      mode_ok && md.out != DType::kFp32 ? hls::WordsFor(n, 2) * wb : 0,
      wb};
  std::vector<ClBuffer*> used;
  std::lock_guard<std::mutex> lock(d.mu);
  unsigned arg = 0;
  for (unsigned i = 0; i < 8; ++i, ++arg) {
    cl_mem m = d.dummy;
    if (need[i] > 0) {
      if (!ptrs[i]) {
        throw std::invalid_argument(std::string("launch: missing buffer ") +
                                    hls::kUpdateArgs[i].name);
      }
      ClBuffer& cb = d.Own(*ptrs[i], "launch");
      if (cb.size() < need[i]) {
        throw std::out_of_range(std::string("launch: buffer ") + hls::kUpdateArgs[i].name +
                                ": expected at least " + std::to_string(need[i]) +
                                " bytes, found " + std::to_string(cb.size()));
      }
      m = cb.mem;
      if (std::find(used.begin(), used.end(), &cb) == used.end()) used.push_back(&cb);
    }
    Check(clSetKernelArg(d.kernel, arg, sizeof(cl_mem), &m), "clSetKernelArg");
  }
  const hls::Scalars& s = k.scalars;
  const uint32_t scalars[13] = {n,       nnz,    k.mode, s.unscale, s.lr,  s.beta1, s.omb1,
                                s.beta2, s.omb2, s.eps,  s.wd,      s.c1,  s.c2};
  for (unsigned i = 0; i < 13; ++i, ++arg) {
    Check(clSetKernelArg(d.kernel, arg, sizeof(cl_uint), &scalars[i]), "clSetKernelArg");
  }
  // The kernel owns its buffers while it runs.
  for (ClBuffer* cb : used) d.Unmap(*cb);
  const size_t one = 1;
  cl_int e = clEnqueueNDRangeKernel(d.queue, d.kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr);
  cl_int f = clFinish(d.queue);
  for (ClBuffer* cb : used) d.Map(*cb);
  Check(e, "clEnqueueNDRangeKernel csd_update on " + d.desc);
  Check(f, "clFinish on " + d.desc);
  ClBuffer& st = d.Own(*b.status, "launch");
  const uint32_t* words = reinterpret_cast<const uint32_t*>(st.mapped);
  if (status16 != nullptr) std::memcpy(status16, words, wb);
  return words[hls::kStatusError];
}

uint32_t OpenClDevice::Crc32(const DeviceBuffer& b, uint64_t off, uint64_t len) {
  const uint8_t* p = impl_->Span(b, off, len, "device CRC");
  return csdkit::Crc32(p, len);
}

LinkBytes OpenClDevice::bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->bytes;
}

}  // namespace csdkit
