// The libaio storage engine: moves bytes between O_DIRECT files and host memory with a sliding
// window of requests in flight per worker thread.
//
//   csdkit::aio::Engine engine(csdkit::aio::AioConfig::FromJson(ds_config["aio"]));
//   auto file = csdkit::aio::File::Create(dir + "/exp_avg.bin");
//   csdkit::AlignedBuffer buf(bytes);
//   engine.Write(file, 0, buf.data(), bytes);             // blocking
//   csdkit::aio::IoTicket t = engine.ReadAsync(file, 0, buf.data(), bytes);
//   ... compute ...
//   t.Wait();                                             // throws IoError on failure
//
// Each request is cut into blocks of AioConfig::block_size; a request of several blocks is split
// into intra_op_parallelism contiguous parts, one per worker; each worker keeps up to
// queue_depth blocks in flight on its own io context. Every completion is checked: a short
// transfer is continued from where it stopped, the end of the file on a read becomes a
// ShortReadError (or a byte count, for ReadUpTo), a negative result becomes an IoError naming
// the file, offset, length and errno. After an error a worker stops submitting, waits for what
// it has in flight (the kernel may still be writing into the caller's buffer) and then reports.
#ifndef CSDKIT_AIO_AIO_ENGINE_H_
#define CSDKIT_AIO_AIO_ENGINE_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/file.h"
#include "csdkit/aio/io_context.h"
#include "csdkit/aio/io_error.h"

namespace csdkit::aio {

enum class IoOp { kRead, kWrite };

/// One transfer between [offset, offset + len) of `*file` and [buf, buf + len). buf must be
/// aligned to file->memory_alignment(), offset and len to file->offset_alignment(). The file and
/// the buffer must stay alive until the transfer's ticket is waited for.
struct IoRequest {
  IoOp op = IoOp::kRead;
  const File* file = nullptr;
  uint64_t offset = 0;
  void* buf = nullptr;  // source of a write (only read), destination of a read
  uint64_t len = 0;
  /// Reads only: reaching the end of the file is not an error; the ticket reports how many
  /// bytes were read.
  bool allow_short_read = false;
};

/// What an engine moved. Bytes count data delivered to or from the caller's buffers once (a
/// remainder resubmitted after a short transfer is not counted twice); requests count iocbs
/// that completed, successfully or not.
struct IoCounters {
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  uint64_t read_requests = 0;
  uint64_t write_requests = 0;
  uint64_t short_transfers_resubmitted = 0;  // remainders resubmitted after a short transfer
  uint64_t partial_submits = 0;              // io_submit calls that accepted fewer than asked
  uint64_t submit_retries = 0;               // io_submit calls retried after EAGAIN or EINTR
  uint64_t errors = 0;                       // requests or calls that ended in an IoError

  IoCounters& operator+=(const IoCounters& o);
  nlohmann::json ToJson() const;
};

namespace detail {
struct Batch;
}

/// The pending result of Engine::Submit. Movable, not copyable. Destroying a ticket whose
/// transfers are still running waits for them (the kernel may be using the buffers); an error
/// nobody collected with Wait() is then printed on stderr rather than lost.
class IoTicket {
 public:
  IoTicket() = default;
  explicit IoTicket(std::shared_ptr<detail::Batch> batch);
  ~IoTicket();
  IoTicket(IoTicket&&) noexcept = default;
  IoTicket& operator=(IoTicket&& o) noexcept;
  IoTicket(const IoTicket&) = delete;
  IoTicket& operator=(const IoTicket&) = delete;

  /// A ticket that is already complete, for transfers that were done (or, on the null device,
  /// only counted) without the engine: Wait() returns `bytes`.
  static IoTicket Completed(std::vector<uint64_t> bytes);

  /// False for a default-constructed or moved-from ticket.
  bool valid() const { return batch_ != nullptr; }
  /// True when every transfer of the batch has finished (successfully or not).
  bool Ready() const;
  /// Blocks until the batch has finished. Returns the bytes transferred per request (equal to
  /// len, except reads with allow_short_read that hit the end of the file). Throws the batch's
  /// first error (IoError, ShortReadError, ...); calling it again returns or throws the same.
  std::vector<uint64_t> Wait();

 private:
  std::shared_ptr<detail::Batch> batch_;
  bool collected_ = false;
};

/// Thread-safe: several threads may submit to one engine; their batches queue per worker.
class Engine {
 public:
  /// Starts config.intra_op_parallelism workers, each with an io context of queue_depth
  /// events. Throws std::invalid_argument on a bad config, IoError if io_setup fails.
  explicit Engine(const AioConfig& config = AioConfig(),
                  std::shared_ptr<KernelAio> kernel = LibaioKernel());
  /// Finishes the batches already submitted, then stops the workers.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Reads exactly len bytes. Throws ShortReadError at end of file, IoError on failure,
  /// AlignmentError (before anything is submitted) on a misaligned buffer, offset or length.
  void Read(const File& file, uint64_t offset, void* buf, uint64_t len);
  /// Reads up to len bytes; returns how many were read before the end of the file.
  uint64_t ReadUpTo(const File& file, uint64_t offset, void* buf, uint64_t len);
  /// Writes exactly len bytes (extending the file if needed). Throws like Read.
  void Write(const File& file, uint64_t offset, const void* buf, uint64_t len);

  /// Queues a batch and returns at once. Every request is checked first: a bad one throws
  /// (AlignmentError, IoError for a read-only file, std::invalid_argument) and nothing of the
  /// batch is submitted. The requests of one batch run concurrently; batches run in order.
  IoTicket Submit(std::vector<IoRequest> requests);
  IoTicket ReadAsync(const File& file, uint64_t offset, void* buf, uint64_t len);
  IoTicket WriteAsync(const File& file, uint64_t offset, const void* buf, uint64_t len);

  /// A snapshot of the counters (since construction or the last ResetCounters()).
  IoCounters counters() const;
  void ResetCounters();
  const AioConfig& config() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_AIO_ENGINE_H_
