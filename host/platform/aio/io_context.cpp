#include "csdkit/aio/io_context.h"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "csdkit/aio/io_error.h"

namespace csdkit::aio {

namespace {

class Libaio : public KernelAio {
 public:
  // libaio's wrappers return -errno themselves (errno is left untouched).
  int Setup(int max_events, io_context_t* ctx) override { return io_setup(max_events, ctx); }
  int Submit(io_context_t ctx, long nr, iocb** iocbs) override { return io_submit(ctx, nr, iocbs); }
  int GetEvents(io_context_t ctx, long min_nr, long nr, io_event* events,
                timespec* timeout) override {
    return io_getevents(ctx, min_nr, nr, events, timeout);
  }
  int Destroy(io_context_t ctx) override { return io_destroy(ctx); }
};

std::string ReadProcValue(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v)) return "?";
  return v;
}

}  // namespace

std::shared_ptr<KernelAio> LibaioKernel() {
  static const std::shared_ptr<KernelAio> kernel = std::make_shared<Libaio>();
  return kernel;
}

IoContext::IoContext(std::shared_ptr<KernelAio> kernel, int max_events)
    : kernel_(std::move(kernel)), max_events_(max_events) {
  const int rc = kernel_->Setup(max_events_, &ctx_);
  if (rc < 0) {
    std::string msg =
        "aio: io_setup(" + std::to_string(max_events_) + ") failed: " + ErrnoText(-rc);
    if (rc == -EAGAIN) {
      msg += ". The system-wide limit of in-flight AIO requests is reached (fs.aio-max-nr = " +
             ReadProcValue("/proc/sys/fs/aio-max-nr") +
             ", in use fs.aio-nr = " + ReadProcValue("/proc/sys/fs/aio-nr") +
             "); lower queue_depth or intra_op_parallelism, or raise the limit with "
             "`sysctl fs.aio-max-nr=<n>`";
    } else if (rc == -ENOSYS) {
      msg += ". This kernel has no native AIO (CONFIG_AIO is off)";
    }
    ctx_ = nullptr;
    throw IoError(msg, "", 0, 0, -rc);
  }
}

IoContext::~IoContext() {
  if (ctx_ != nullptr) {
    const int rc = kernel_->Destroy(ctx_);
    if (rc < 0) {
      std::fprintf(stderr, "csdkit aio: io_destroy failed: %s\n", ErrnoText(-rc).c_str());
    }
  }
}

void IoContext::Reset() {
  if (ctx_ != nullptr) {
    const int rc = kernel_->Destroy(ctx_);
    ctx_ = nullptr;
    if (rc < 0) {
      throw IoError("aio: io_destroy failed while resetting an io context: " + ErrnoText(-rc), "",
                    0, 0, -rc);
    }
  }
  const int rc = kernel_->Setup(max_events_, &ctx_);
  if (rc < 0) {
    ctx_ = nullptr;
    throw IoError("aio: io_setup(" + std::to_string(max_events_) +
                      ") failed while resetting an io context: " + ErrnoText(-rc),
                  "", 0, 0, -rc);
  }
}

}  // namespace csdkit::aio
