// The engine's only door to the kernel: the four libaio calls it makes (io_setup, io_submit,
// io_getevents, io_destroy) behind a small interface. The default implementation is libaio
// itself; tests put a fault-injecting implementation in between (fault_injection.h) to prove
// that every failure the kernel can report is handled.
#ifndef CSDKIT_AIO_IO_CONTEXT_H_
#define CSDKIT_AIO_IO_CONTEXT_H_

#include <libaio.h>

#include <memory>

namespace csdkit::aio {

/// The kernel AIO calls, with libaio's conventions: each returns >= 0 on success and -errno on
/// failure (never -1 with errno). Implementations must be safe to call from several threads for
/// different contexts; one context is only ever used by one thread at a time.
class KernelAio {
 public:
  virtual ~KernelAio() = default;
  /// io_setup: a context able to hold `max_events` requests in flight.
  virtual int Setup(int max_events, io_context_t* ctx) = 0;
  /// io_submit: queues iocbs[0..nr); returns how many were queued (possibly fewer than nr:
  /// the caller resubmits the rest) or -errno if none was.
  virtual int Submit(io_context_t ctx, long nr, iocb** iocbs) = 0;
  /// io_getevents: waits for at least min_nr completions (or the timeout; nullptr = forever)
  /// and stores up to nr of them; returns how many, or -errno.
  virtual int GetEvents(io_context_t ctx, long min_nr, long nr, io_event* events,
                        timespec* timeout) = 0;
  /// io_destroy: cancels what it can, waits for the rest, frees the context.
  virtual int Destroy(io_context_t ctx) = 0;
};

/// libaio (the real kernel). One shared instance; stateless.
std::shared_ptr<KernelAio> LibaioKernel();

/// One io context, owned: set up in the constructor, destroyed in the destructor (io_destroy
/// waits for requests still in flight, so buffers are never written after it returns).
class IoContext {
 public:
  /// Throws IoError if io_setup fails; on EAGAIN the message names /proc/sys/fs/aio-max-nr.
  IoContext(std::shared_ptr<KernelAio> kernel, int max_events);
  ~IoContext();
  IoContext(const IoContext&) = delete;
  IoContext& operator=(const IoContext&) = delete;

  int Submit(long nr, iocb** iocbs) { return kernel_->Submit(ctx_, nr, iocbs); }
  int GetEvents(long min_nr, long nr, io_event* events, timespec* timeout) {
    return kernel_->GetEvents(ctx_, min_nr, nr, events, timeout);
  }
  /// Destroys and sets up the context again: the way out when io_getevents itself fails and
  /// the state of the requests in flight is unknown (destroy waits for them).
  void Reset();

  /// False after a Reset() that failed: the next use must Reset() again.
  bool ok() const { return ctx_ != nullptr; }
  int max_events() const { return max_events_; }
  KernelAio& kernel() { return *kernel_; }

 private:
  std::shared_ptr<KernelAio> kernel_;
  int max_events_;
  io_context_t ctx_ = nullptr;
};

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_IO_CONTEXT_H_
