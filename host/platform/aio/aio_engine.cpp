// The libaio engine. Kept as one file (about 750 lines) on purpose: the batch state, the
// submitting workers, the completion reaping and the ticket share private types (detail::Batch,
// ErrorRecord) and one invariant — every request's completion is accounted exactly once, and a
// batch is never freed while the kernel may still write into its buffers — which is easiest to
// review in one place.
#include "csdkit/aio/aio_engine.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace csdkit::aio {

// ---------------------------------------------------------------------------------------------
// Shared state of one submitted batch.

namespace detail {

// An error as data. Workers record it; each Wait() throws a fresh exception built from it on the
// caller's thread, so no exception object is shared between threads.
struct ErrorRecord {
  enum class Kind { kIo, kShortRead, kOther };
  Kind kind = Kind::kIo;
  std::string message;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
  int error_number = 0;
  uint64_t bytes_read = 0;

  static ErrorRecord From(const IoError& e) {
    return {Kind::kIo, e.what(), e.path(), e.offset(), e.length(), e.error_number(), 0};
  }

  [[noreturn]] void Throw() const {
    switch (kind) {
      case Kind::kIo:
        throw IoError(message, path, offset, length, error_number);
      case Kind::kShortRead:
        throw ShortReadError(message, path, offset, length, bytes_read);
      case Kind::kOther:
        break;
    }
    throw std::runtime_error(message);
  }
};

struct Batch {
  explicit Batch(std::vector<IoRequest> reqs)
      : requests(std::move(reqs)), eof(new std::atomic<uint64_t>[requests.size()]) {
    for (size_t i = 0; i < requests.size(); ++i) eof[i].store(kNoEof, std::memory_order_relaxed);
  }

  static constexpr uint64_t kNoEof = std::numeric_limits<uint64_t>::max();

  // Keeps the first error; later ones are only counted (in the engine's counters).
  void Fail(ErrorRecord e) {
    failed.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    if (!has_error) {
      error = std::move(e);
      has_error = true;
    }
  }

  // Lowers the end-of-file offset seen for request r.
  void RecordEof(uint32_t r, uint64_t at) {
    uint64_t cur = eof[r].load(std::memory_order_relaxed);
    while (at < cur && !eof[r].compare_exchange_weak(cur, at, std::memory_order_relaxed)) {
    }
  }

  // Called once by each worker that had a share of the batch; the last one finishes it.
  void TaskDone() {
    std::unique_lock<std::mutex> lock(mu);
    if (--tasks_left == 0) Finish(lock);
  }

  // Per-request byte counts; a read that met the end of the file without allow_short_read
  // becomes the batch's error (unless another error came first).
  void Finish(std::unique_lock<std::mutex>& lock) {
    bytes.resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const IoRequest& q = requests[i];
      const uint64_t end = q.offset + q.len;
      const uint64_t e = eof[i].load(std::memory_order_relaxed);
      bytes[i] = e < end ? e - q.offset : q.len;
      if (e < end && !q.allow_short_read && !has_error) {
        uint64_t size = 0;
        bool have_size = false;
        try {
          size = q.file->Size();
          have_size = true;
        } catch (const IoError&) {
        }
        std::ostringstream msg;
        msg << "aio: short read of '" << q.file->path() << "': expected " << q.len
            << " bytes at offset " << q.offset << ", found only " << bytes[i]
            << " before the end of the file";
        if (have_size) msg << " (file size " << size << ")";
        msg << ". The file is shorter than the data it should hold (truncated, or never fully "
               "written) or the offset/length is wrong; use Engine::ReadUpTo to read up to the "
               "end of a file";
        error = {
            ErrorRecord::Kind::kShortRead, msg.str(), q.file->path(), q.offset, q.len, 0, bytes[i]};
        has_error = true;
      }
    }
    done = true;
    lock.unlock();
    cv.notify_all();
  }

  std::vector<IoRequest> requests;
  std::unique_ptr<std::atomic<uint64_t>[]> eof;  // per request; kNoEof when none was seen
  std::atomic<bool> failed{false};

  std::mutex mu;
  std::condition_variable cv;
  unsigned tasks_left = 0;
  bool done = false;
  bool has_error = false;
  ErrorRecord error;  // the first one
  std::vector<uint64_t> bytes;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Counters.

IoCounters& IoCounters::operator+=(const IoCounters& o) {
  read_bytes += o.read_bytes;
  write_bytes += o.write_bytes;
  read_requests += o.read_requests;
  write_requests += o.write_requests;
  short_transfers_resubmitted += o.short_transfers_resubmitted;
  partial_submits += o.partial_submits;
  submit_retries += o.submit_retries;
  errors += o.errors;
  return *this;
}

nlohmann::json IoCounters::ToJson() const {
  return {{"read_bytes", read_bytes},
          {"write_bytes", write_bytes},
          {"read_requests", read_requests},
          {"write_requests", write_requests},
          {"short_transfers_resubmitted", short_transfers_resubmitted},
          {"partial_submits", partial_submits},
          {"submit_retries", submit_retries},
          {"errors", errors}};
}

namespace {

struct AtomicCounters {
  std::atomic<uint64_t> read_bytes{0}, write_bytes{0}, read_requests{0}, write_requests{0},
      short_transfers_resubmitted{0}, partial_submits{0}, submit_retries{0}, errors{0};

  static void Add(std::atomic<uint64_t>& c, uint64_t v) {
    c.fetch_add(v, std::memory_order_relaxed);
  }
  IoCounters Snapshot() const {
    IoCounters s;
    s.read_bytes = read_bytes.load(std::memory_order_relaxed);
    s.write_bytes = write_bytes.load(std::memory_order_relaxed);
    s.read_requests = read_requests.load(std::memory_order_relaxed);
    s.write_requests = write_requests.load(std::memory_order_relaxed);
    s.short_transfers_resubmitted = short_transfers_resubmitted.load(std::memory_order_relaxed);
    s.partial_submits = partial_submits.load(std::memory_order_relaxed);
    s.submit_retries = submit_retries.load(std::memory_order_relaxed);
    s.errors = errors.load(std::memory_order_relaxed);
    return s;
  }
  void Reset() {
    for (auto* c : {&read_bytes, &write_bytes, &read_requests, &write_requests,
                    &short_transfers_resubmitted, &partial_submits, &submit_retries, &errors}) {
      c->store(0, std::memory_order_relaxed);
    }
  }
};

const char* OpName(IoOp op) { return op == IoOp::kRead ? "read" : "write"; }

std::string Hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string AlignmentSource(const File& f) {
  return f.alignment_from_statx() ? "reported by statx STATX_DIOALIGN"
                                  : "the default, or set by FileOptions";
}

// What to do about a failed request, by errno.
std::string Advice(int err, const File& f) {
  switch (err) {
    case EINVAL:
      return "The kernel refused the request. With O_DIRECT this means the buffer, offset or "
             "length is not aligned as the filesystem needs (assumed here: buffers to " +
             std::to_string(f.memory_alignment()) + ", offsets and lengths to " +
             std::to_string(f.offset_alignment()) + ", " + AlignmentSource(f) +
             "), or that the filesystem does not support direct I/O; use a disk-backed "
             "filesystem (ext4, xfs) and aligned buffers (csdkit::AlignedBuffer)";
    case ENOSPC:
      return "The filesystem holding the file is full; free space or use another directory "
             "(File::Allocate reserves the space up front, so this surfaces before training)";
    case EDQUOT:
      return "The disk quota is exhausted; free space or raise the quota";
    case EIO:
      return "The device reported an I/O error; check the kernel log (dmesg) and the device's "
             "health, the data in this range cannot be trusted";
    case EBADF:
      return "The file descriptor is not valid for this operation (closed while in use, or "
             "opened without write access)";
    case EFBIG:
      return "The write goes past the largest file size this filesystem allows";
    case EAGAIN:
      return "The kernel is out of AIO resources; lower queue_depth or intra_op_parallelism";
    default:
      return "";
  }
}

constexpr int kMaxWriteStalls = 3;           // completions in a row that wrote nothing
constexpr int kMaxIdleSubmitRetries = 1000;  // EAGAIN with nothing in flight, 1 ms apart

}  // namespace

// ---------------------------------------------------------------------------------------------
// Worker: one thread, one io context, a sliding window of queue_depth requests.

namespace {

struct Slice {
  uint32_t request;
  uint64_t begin;  // file offsets
  uint64_t end;
};

struct Task {
  std::shared_ptr<detail::Batch> batch;
  std::vector<Slice> slices;
};

struct Block {
  iocb cb;
  uint32_t request = 0;
  uint64_t begin = 0;         // file offset of the block's first byte
  uint64_t end = 0;           // one past its last byte
  uint64_t done = 0;          // [begin, done) has been transferred
  uint64_t submitted_at = 0;  // file offset of the request in flight for this block
  int stalls = 0;             // completions in a row without progress
};

class Worker {
 public:
  Worker(const AioConfig& config, std::shared_ptr<KernelAio> kernel, AtomicCounters* counters)
      : config_(config),
        counters_(counters),
        ctx_(std::move(kernel), static_cast<int>(config.queue_depth)),
        blocks_(config.queue_depth),
        events_(config.queue_depth) {
    thread_ = std::thread([this] { Loop(); });
  }

  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void Enqueue(Task t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(t));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and nothing left to do
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        Run(t);
      } catch (const std::exception& e) {
        // Only allocation failures get here; requests may still be in flight, and destroying
        // the context waits for them, so the caller's buffers are released safe.
        detail::ErrorRecord r;
        r.kind = detail::ErrorRecord::Kind::kOther;
        r.message = std::string("aio: worker failed: ") + e.what();
        Fail(*t.batch, std::move(r));
        if (inflight_ > 0) {
          try {
            ctx_.Reset();
          } catch (const IoError&) {
            // ctx_ is left !ok(); the next task resets it again and reports if that fails.
          }
          inflight_ = 0;
        }
      }
      t.batch->TaskDone();
    }
  }

  void Fail(detail::Batch& batch, detail::ErrorRecord e) {
    AtomicCounters::Add(counters_->errors, 1);
    batch.Fail(std::move(e));
    stop_batch_ = true;
  }

  void FailIo(detail::Batch& batch, const Block& b, int err, const std::string& what) {
    const IoRequest& q = batch.requests[b.request];
    const uint64_t len = b.end - b.submitted_at;
    std::string msg = "aio: " + std::string(OpName(q.op)) + " of '" + q.file->path() +
                      "' at offset " + std::to_string(b.submitted_at) + ", length " +
                      std::to_string(len) + " (part of a request for offset " +
                      std::to_string(q.offset) + ", length " + std::to_string(q.len) + ") " + what;
    if (err != 0) {
      msg += ": " + ErrnoText(err);
      const std::string advice = Advice(err, *q.file);
      if (!advice.empty()) msg += ". " + advice;
    }
    Fail(batch, {detail::ErrorRecord::Kind::kIo, msg, q.file->path(), b.submitted_at, len, err});
  }

  // Cut points are multiples of `unit` from the request's start, so every piece keeps both the
  // buffer's and the file's alignment.
  static uint64_t Unit(const File& f) {
    return std::max(f.memory_alignment(), f.offset_alignment());
  }

  void Prepare(detail::Batch& batch, Block* b) {
    const IoRequest& q = batch.requests[b->request];
    const uint64_t unit = Unit(*q.file);
    b->submitted_at = q.offset + (b->done - q.offset) / unit * unit;
    char* buf = static_cast<char*>(q.buf) + (b->submitted_at - q.offset);
    const size_t count = static_cast<size_t>(b->end - b->submitted_at);
    const long long at = static_cast<long long>(b->submitted_at);
    if (q.op == IoOp::kRead) {
      io_prep_pread(&b->cb, q.file->fd(), buf, count, at);
    } else {
      io_prep_pwrite(&b->cb, q.file->fd(), buf, count, at);
    }
    b->cb.data = b;
    pending_.push_back(&b->cb);
  }

  void Release(Block* b) { free_.push_back(b); }

  void Run(Task& t) {
    detail::Batch& batch = *t.batch;
    stop_batch_ = false;
    if (!ctx_.ok()) {
      try {
        ctx_.Reset();
      } catch (const IoError& e) {
        Fail(batch, detail::ErrorRecord::From(e));
        return;
      }
    }
    free_.clear();
    for (Block& b : blocks_) free_.push_back(&b);
    pending_.clear();
    inflight_ = 0;
    idle_retries_ = 0;

    size_t slice = 0;
    uint64_t next = t.slices.empty() ? 0 : t.slices[0].begin;
    for (;;) {
      if (batch.failed.load(std::memory_order_relaxed)) stop_batch_ = true;
      // Fill the window: in overlap mode whenever a slot is free, in lockstep mode only once
      // the previous window has completed entirely.
      if (!stop_batch_ && (config_.overlap_events || inflight_ == 0)) {
        while (!free_.empty() && slice < t.slices.size()) {
          const Slice& s = t.slices[slice];
          // A read whose file is known to end before this point has nothing more to fetch.
          if (batch.requests[s.request].op == IoOp::kRead &&
              batch.eof[s.request].load(std::memory_order_relaxed) <= next) {
            if (++slice < t.slices.size()) next = t.slices[slice].begin;
            continue;
          }
          Block* b = free_.back();
          free_.pop_back();
          b->request = s.request;
          b->begin = b->done = next;
          b->end = std::min(next + config_.block_size, s.end);
          b->stalls = 0;
          next = b->end;
          if (next == s.end && ++slice < t.slices.size()) next = t.slices[slice].begin;
          Prepare(batch, b);
        }
      }
      if (stop_batch_) {
        for (iocb* cb : pending_) Release(static_cast<Block*>(cb->data));
        pending_.clear();
      }
      if (!pending_.empty()) SubmitPending(batch);
      if (inflight_ == 0) {
        if (pending_.empty() && (stop_batch_ || slice == t.slices.size())) break;
        continue;  // pending requests the kernel could not take yet (EAGAIN): retry
      }
      Reap(batch);
    }
  }

  void SubmitPending(detail::Batch& batch) {
    size_t head = 0;
    while (head < pending_.size()) {
      const long n = config_.single_submit ? 1 : static_cast<long>(pending_.size() - head);
      const int rc = ctx_.Submit(n, &pending_[head]);
      if (rc > 0) {
        inflight_ += rc;
        head += static_cast<size_t>(rc);
        idle_retries_ = 0;
        if (rc < n) AtomicCounters::Add(counters_->partial_submits, 1);
        continue;
      }
      if (rc == 0 || rc == -EAGAIN || rc == -EINTR) {
        // Transient: the kernel is short of resources. With requests in flight, reaping some
        // frees them; with none, wait a little and try again, for a bounded time.
        AtomicCounters::Add(counters_->submit_retries, 1);
        if (inflight_ > 0) break;
        if (++idle_retries_ <= kMaxIdleSubmitRetries) {
          if (rc != -EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
      }
      const Block& b = *static_cast<const Block*>(pending_[head]->data);
      FailIo(batch, b, rc < 0 ? -rc : EAGAIN,
             rc == -EAGAIN || rc == 0
                 ? "could not be submitted: io_submit kept refusing it with nothing in flight"
                 : "could not be submitted (io_submit failed)");
      for (size_t i = head; i < pending_.size(); ++i) {
        Release(static_cast<Block*>(pending_[i]->data));
      }
      head = pending_.size();
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(head));
  }

  void Reap(detail::Batch& batch) {
    const long min_nr = config_.overlap_events ? 1 : inflight_;
    const int rc =
        ctx_.GetEvents(min_nr, static_cast<long>(events_.size()), events_.data(), nullptr);
    if (rc == -EINTR) return;
    if (rc < 0) {
      // The state of the requests in flight is unknown: destroy the context (which waits for
      // them, so no buffer is written after we return) and start a fresh one.
      const IoRequest& q = batch.requests.front();
      Fail(batch, {detail::ErrorRecord::Kind::kIo,
                   "aio: io_getevents failed with " + std::to_string(inflight_) +
                       " requests in flight: " + ErrnoText(-rc) +
                       ". The outcome of those requests is unknown; the io context was reset "
                       "and the batch is reported as failed",
                   q.file->path(), q.offset, q.len, -rc});
      inflight_ = 0;
      free_.clear();
      for (Block& b : blocks_) free_.push_back(&b);
      pending_.clear();
      try {
        ctx_.Reset();
      } catch (const IoError& e) {
        Fail(batch, detail::ErrorRecord::From(e));
      }
      return;
    }
    for (int i = 0; i < rc; ++i) Complete(batch, events_[i]);
  }

  void Complete(detail::Batch& batch, const io_event& ev) {
    --inflight_;
    Block* b = static_cast<Block*>(ev.data);
    const IoRequest& q = batch.requests[b->request];
    const bool read = q.op == IoOp::kRead;
    AtomicCounters::Add(read ? counters_->read_requests : counters_->write_requests, 1);
    const long res = static_cast<long>(ev.res);
    if (res < 0) {
      FailIo(batch, *b, static_cast<int>(-res), "failed (io_event.res)");
      Release(b);
      return;
    }
    const uint64_t asked = b->end - b->submitted_at;
    if (static_cast<uint64_t>(res) > asked) {
      FailIo(batch, *b, EIO,
             "completed with more bytes than asked (" + std::to_string(res) + " > " +
                 std::to_string(asked) + "), which the kernel never does; treated as corrupt");
      Release(b);
      return;
    }
    const uint64_t reached = b->submitted_at + static_cast<uint64_t>(res);
    if (reached > b->done) {
      AtomicCounters::Add(read ? counters_->read_bytes : counters_->write_bytes, reached - b->done);
      b->done = reached;
      b->stalls = 0;
    } else if (read) {
      // Nothing new: the file ends at b->done (a 0-byte read, or a re-read of the unaligned
      // tail that stopped at the same place).
      batch.RecordEof(b->request, b->done);
      Release(b);
      return;
    } else if (++b->stalls >= kMaxWriteStalls) {
      FailIo(batch, *b, EIO,
             "made no progress: " + std::to_string(kMaxWriteStalls) +
                 " completions in a row wrote 0 new bytes");
      Release(b);
      return;
    }
    if (b->done == b->end || stop_batch_) {
      Release(b);
      return;
    }
    // A short transfer: continue from where it stopped (from the last aligned position; the
    // bytes between it and b->done are transferred again, which changes nothing).
    AtomicCounters::Add(counters_->short_transfers_resubmitted, 1);
    Prepare(batch, b);
  }

  const AioConfig config_;
  AtomicCounters* counters_;
  IoContext ctx_;
  std::vector<Block> blocks_;
  std::vector<io_event> events_;
  std::vector<Block*> free_;
  std::vector<iocb*> pending_;  // prepared, not yet accepted by io_submit
  long inflight_ = 0;
  int idle_retries_ = 0;
  bool stop_batch_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Engine.

class Engine::Impl {
 public:
  Impl(const AioConfig& config, std::shared_ptr<KernelAio> kernel) : config_(config) {
    config_.Validate();
    if (!kernel) throw std::invalid_argument("aio: Engine needs a KernelAio (got nullptr)");
    workers_.reserve(config_.intra_op_parallelism);
    for (uint32_t i = 0; i < config_.intra_op_parallelism; ++i) {
      workers_.push_back(std::make_unique<Worker>(config_, kernel, &counters_));
    }
  }

  IoTicket Submit(std::vector<IoRequest> requests) {
    for (const IoRequest& q : requests) Check(q);
    auto batch = std::make_shared<detail::Batch>(std::move(requests));

    // Split each request into blocks and the blocks into up to P contiguous parts; consecutive
    // requests start on consecutive workers so a batch of small requests spreads out.
    const uint32_t p = static_cast<uint32_t>(workers_.size());
    std::vector<std::vector<Slice>> shares(p);
    uint32_t next_worker = 0;
    for (uint32_t r = 0; r < batch->requests.size(); ++r) {
      const IoRequest& q = batch->requests[r];
      if (q.len == 0) continue;
      const uint64_t blocks = (q.len + config_.block_size - 1) / config_.block_size;
      const uint64_t parts = std::min<uint64_t>(p, blocks);
      for (uint64_t k = 0; k < parts; ++k) {
        const uint64_t b0 = blocks * k / parts, b1 = blocks * (k + 1) / parts;
        const uint64_t begin = q.offset + b0 * config_.block_size;
        const uint64_t end = std::min(q.offset + b1 * config_.block_size, q.offset + q.len);
        shares[next_worker].push_back({r, begin, end});
        next_worker = (next_worker + 1) % p;
      }
    }
    unsigned tasks = 0;
    for (const auto& s : shares) tasks += s.empty() ? 0 : 1;
    {
      std::unique_lock<std::mutex> lock(batch->mu);
      batch->tasks_left = tasks;
      if (tasks == 0) batch->Finish(lock);
    }
    for (uint32_t w = 0; w < p; ++w) {
      if (!shares[w].empty()) workers_[w]->Enqueue(Task{batch, std::move(shares[w])});
    }
    return IoTicket(batch);
  }

  // Refuses, before anything is submitted, what the kernel would refuse or what would corrupt
  // memory: no file, a read-only file for a write, a null buffer, a range past 2^63, and any
  // misalignment of buffer, offset, length or block size.
  void Check(const IoRequest& q) const {
    const char* op = OpName(q.op);
    if (q.file == nullptr || !q.file->is_open()) {
      throw std::invalid_argument(std::string("aio: a ") + op +
                                  " request needs an open File, found " +
                                  (q.file == nullptr ? "nullptr" : "a closed File"));
    }
    const File& f = *q.file;
    if (q.op == IoOp::kWrite && !f.writable()) {
      throw IoError("aio: cannot write to '" + f.path() +
                        "': it was opened read-only; open it with OpenMode::kReadWrite or "
                        "kCreate",
                    f.path(), q.offset, q.len, EBADF);
    }
    if (q.len == 0) return;
    if (q.buf == nullptr) {
      throw std::invalid_argument("aio: " + std::string(op) + " of '" + f.path() + "' at offset " +
                                  std::to_string(q.offset) + ", length " + std::to_string(q.len) +
                                  " has a null buffer");
    }
    constexpr uint64_t kMaxOffset = uint64_t{1} << 62;
    if (q.offset > kMaxOffset || q.len > kMaxOffset) {
      throw std::invalid_argument("aio: " + std::string(op) + " of '" + f.path() + "': offset " +
                                  std::to_string(q.offset) + " + length " + std::to_string(q.len) +
                                  " is past the largest file offset");
    }
    const uintptr_t addr = reinterpret_cast<uintptr_t>(q.buf);
    const uint32_t ma = f.memory_alignment(), oa = f.offset_alignment();
    std::vector<std::string> bad;
    if (addr % ma != 0) {
      bad.push_back("buffer address " + Hex(addr) + " is not a multiple of " + std::to_string(ma) +
                    " (it is " + std::to_string(addr % ma) + " past one)");
    }
    if (q.offset % oa != 0) {
      bad.push_back("offset " + std::to_string(q.offset) + " is not a multiple of " +
                    std::to_string(oa));
    }
    if (q.len % oa != 0) {
      bad.push_back("length " + std::to_string(q.len) + " is not a multiple of " +
                    std::to_string(oa));
    }
    const uint64_t unit = std::max(ma, oa);
    if (config_.block_size % unit != 0) {
      bad.push_back("the engine's block_size " + std::to_string(config_.block_size) +
                    " is not a multiple of " + std::to_string(unit));
    }
    if (bad.empty()) return;
    std::string msg = "aio: misaligned " + std::string(op) + " of '" + f.path() + "' (offset " +
                      std::to_string(q.offset) + ", length " + std::to_string(q.len) + ", buffer " +
                      Hex(addr) + "): ";
    for (size_t i = 0; i < bad.size(); ++i) msg += (i ? "; " : "") + bad[i];
    msg += ". O_DIRECT on this file needs buffers aligned to " + std::to_string(ma) +
           " bytes and offsets and lengths that are multiples of " + std::to_string(oa) + " (" +
           AlignmentSource(f) + "). Use csdkit::AlignedBuffer (4096-aligned) and pad offsets, " +
           "lengths and block_size to a multiple of " + std::to_string(unit) + ".";
    throw AlignmentError(msg, f.path(), q.offset, q.len, addr, ma, oa);
  }

  AioConfig config_;
  AtomicCounters counters_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

Engine::Engine(const AioConfig& config, std::shared_ptr<KernelAio> kernel)
    : impl_(std::make_unique<Impl>(config, std::move(kernel))) {}

Engine::~Engine() = default;

void Engine::Read(const File& file, uint64_t offset, void* buf, uint64_t len) {
  ReadAsync(file, offset, buf, len).Wait();
}

uint64_t Engine::ReadUpTo(const File& file, uint64_t offset, void* buf, uint64_t len) {
  IoRequest q{IoOp::kRead, &file, offset, buf, len, true};
  return Submit({q}).Wait()[0];
}

void Engine::Write(const File& file, uint64_t offset, const void* buf, uint64_t len) {
  WriteAsync(file, offset, buf, len).Wait();
}

IoTicket Engine::Submit(std::vector<IoRequest> requests) {
  return impl_->Submit(std::move(requests));
}

IoTicket Engine::ReadAsync(const File& file, uint64_t offset, void* buf, uint64_t len) {
  return Submit({IoRequest{IoOp::kRead, &file, offset, buf, len, false}});
}

IoTicket Engine::WriteAsync(const File& file, uint64_t offset, const void* buf, uint64_t len) {
  // The engine never writes through the pointer of a write request.
  return Submit({IoRequest{IoOp::kWrite, &file, offset, const_cast<void*>(buf), len, false}});
}

IoCounters Engine::counters() const { return impl_->counters_.Snapshot(); }
void Engine::ResetCounters() { impl_->counters_.Reset(); }
const AioConfig& Engine::config() const { return impl_->config_; }

// ---------------------------------------------------------------------------------------------
// IoTicket.

IoTicket::IoTicket(std::shared_ptr<detail::Batch> batch) : batch_(std::move(batch)) {}

IoTicket IoTicket::Completed(std::vector<uint64_t> bytes) {
  auto b = std::make_shared<detail::Batch>(std::vector<IoRequest>(bytes.size()));
  b->bytes = std::move(bytes);
  b->done = true;
  return IoTicket(std::move(b));
}

namespace {
// Waits for a ticket nobody waited on; an error it carries is printed, not dropped silently.
void Abandon(const std::shared_ptr<detail::Batch>& batch) {
  std::unique_lock<std::mutex> lock(batch->mu);
  batch->cv.wait(lock, [&] { return batch->done; });
  if (!batch->has_error) return;
  std::fprintf(stderr, "csdkit aio: an I/O error nobody collected with IoTicket::Wait(): %s\n",
               batch->error.message.c_str());
}
}  // namespace

IoTicket::~IoTicket() {
  if (batch_ && !collected_) Abandon(batch_);
}

IoTicket& IoTicket::operator=(IoTicket&& o) noexcept {
  if (this != &o) {
    if (batch_ && !collected_) Abandon(batch_);
    batch_ = std::move(o.batch_);
    collected_ = o.collected_;
    o.collected_ = false;
  }
  return *this;
}

bool IoTicket::Ready() const {
  if (!batch_) return false;
  std::lock_guard<std::mutex> lock(batch_->mu);
  return batch_->done;
}

std::vector<uint64_t> IoTicket::Wait() {
  if (!batch_) throw std::logic_error("aio: IoTicket::Wait on an empty ticket");
  std::unique_lock<std::mutex> lock(batch_->mu);
  batch_->cv.wait(lock, [&] { return batch_->done; });
  collected_ = true;
  if (batch_->has_error) batch_->error.Throw();
  return batch_->bytes;
}

}  // namespace csdkit::aio
