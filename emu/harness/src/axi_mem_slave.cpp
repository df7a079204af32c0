#include "csdkit/emu/harness/axi_mem_slave.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace csdkit {
namespace emu {

namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr unsigned kAxiMaxBeats = 256;
constexpr uint64_t kBurstIncr = 1;

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

}  // namespace

AxiSlaveOptions AxiSlaveOptions::Ideal() { return AxiSlaveOptions(); }

AxiSlaveOptions AxiSlaveOptions::Ddr(uint64_t seed) {
  AxiSlaveOptions o;
  o.seed = seed;
  o.rd_latency_min = 40;
  o.rd_latency_max = 100;
  o.wr_latency_min = 40;
  o.wr_latency_max = 100;
  return o;
}

AxiSlaveOptions AxiSlaveOptions::Stress(uint64_t seed, double gap) {
  AxiSlaveOptions o;
  o.seed = seed;
  o.Gaps(gap);
  o.rd_latency_min = 1;
  o.rd_latency_max = 30;
  o.wr_latency_min = 1;
  o.wr_latency_max = 30;
  return o;
}

AxiSlaveOptions& AxiSlaveOptions::Gaps(double gap) {
  ar_gap = r_gap = aw_gap = w_gap = b_gap = gap;
  return *this;
}

std::string AxiCounters::ToString() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "rd %" PRIu64 " bursts %" PRIu64 " beats %" PRIu64
                " B (max %u outstanding, longest %u beats, %" PRIu64 " error); wr %" PRIu64
                " bursts %" PRIu64 " beats %" PRIu64
                " B (max %u outstanding, longest %u beats, %" PRIu64 " error)",
                rd_bursts, rd_beats, rd_bytes, rd_max_outstanding, rd_max_beats, rd_error_resps,
                wr_bursts, wr_beats, wr_bytes, wr_max_outstanding, wr_max_beats, wr_error_resps);
  return buf;
}

AxiMemSlave::AxiMemSlave(Sim* sim, std::string name, const AxiPorts& ports,
                         const MemoryMap* mem, const AxiSlaveOptions& options)
    : sim_(sim), name_(std::move(name)), ports_(ports), mem_(mem), options_(options),
      rng_(options.seed) {
  if (sim_ == nullptr || mem_ == nullptr) throw SimError(name_ + ": no Sim or no MemoryMap");
  if (!ports_.has_read() && !ports_.has_write()) {
    throw SimError(name_ + ": neither the read nor the write half of the bundle is bound");
  }
  const unsigned rd_bytes = ports_.has_read() ? ports_.r_data.bytes() : 0;
  const unsigned wr_bytes = ports_.has_write() ? ports_.w_data.bytes() : 0;
  if (rd_bytes != 0 && wr_bytes != 0 && rd_bytes != wr_bytes) {
    throw SimError(name_ + ": RDATA and WDATA differ in width");
  }
  beat_bytes_ = rd_bytes != 0 ? rd_bytes : wr_bytes;
  if (beat_bytes_ == 0 || beat_bytes_ > kMaxBeatBytes || (beat_bytes_ & (beat_bytes_ - 1)) != 0) {
    throw SimError(name_ + ": data width of " + std::to_string(beat_bytes_ * 8) +
                   " bits is not supported (128, 256 or 512 bits)");
  }
  while ((1u << size_log2_) < beat_bytes_) ++size_log2_;
  if (options_.rd_latency_min < 1 || options_.wr_latency_min < 1 ||
      options_.rd_latency_max < options_.rd_latency_min ||
      options_.wr_latency_max < options_.wr_latency_min || options_.max_rd_bursts < 1 ||
      options_.max_wr_bursts < 1) {
    throw SimError(name_ + ": bad AxiSlaveOptions (latency 1 <= min <= max, at least 1 burst)");
  }
  sim_->Attach(this);
}

AxiMemSlave::~AxiMemSlave() { sim_->Detach(this); }

void AxiMemSlave::AddErrorRange(uint64_t base, uint64_t size, uint8_t resp) {
  error_ranges_.push_back(ErrorRange{base, size, resp});
}

void AxiMemSlave::SetOptions(const AxiSlaveOptions& options) {
  options_ = options;
  rng_.seed(options.seed);
}

bool AxiMemSlave::Idle() const {
  return rd_bursts_.empty() && aw_bursts_.empty() && w_buffer_.empty() && b_queue_.empty();
}

bool AxiMemSlave::Gap(double p) {
  if (p <= 0.0) return false;
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

unsigned AxiMemSlave::Latency(unsigned lo, unsigned hi) {
  if (lo == hi) return lo;
  return std::uniform_int_distribution<unsigned>(lo, hi)(rng_);
}

void AxiMemSlave::Fail(const char* chan, uint64_t cycle, const std::string& rule) const {
  throw SimError(name_ + " " + chan + " at cycle " + std::to_string(cycle) + ": " + rule);
}

AxiMemSlave::Request AxiMemSlave::ReadRequest(bool write) const {
  if (write) {
    return Request{ports_.aw_addr.Get(), ports_.aw_len.Get(), ports_.aw_size.Get(),
                   ports_.aw_burst.Get(), ports_.aw_id.Get()};
  }
  return Request{ports_.ar_addr.Get(), ports_.ar_len.Get(), ports_.ar_size.Get(),
                 ports_.ar_burst.Get(), ports_.ar_id.Get()};
}

uint8_t AxiMemSlave::CheckBurst(const char* chan, uint64_t cycle, const Request& rq) {
  const uint64_t beats = rq.len + 1;
  const uint64_t bytes = beats * beat_bytes_;
  const std::string what =
      "burst addr=" + Hex(rq.addr) + " len=" + std::to_string(beats) + " beats (" +
      std::to_string(bytes) + " bytes, last byte " + Hex(rq.addr + bytes - 1) + "): ";
  if (rq.burst != kBurstIncr) {
    Fail(chan, cycle, what + "burst type " + std::to_string(rq.burst) +
                          " is not INCR (1); only INCR bursts are allowed");
  }
  if (rq.size != size_log2_) {
    Fail(chan, cycle, what + "size " + std::to_string(rq.size) + " (" +
                          std::to_string(1u << rq.size) + " bytes) is not the full data width (" +
                          std::to_string(size_log2_) + ", " + std::to_string(beat_bytes_) +
                          " bytes)");
  }
  if (rq.addr % beat_bytes_ != 0) {
    Fail(chan, cycle, what + "address is not aligned to the " + std::to_string(beat_bytes_) +
                          "-byte beat");
  }
  if (beats > kAxiMaxBeats) {
    Fail(chan, cycle, what + "longer than the AXI4 limit of 256 beats");
  }
  if ((rq.addr % kPageBytes) + bytes > kPageBytes) {
    Fail(chan, cycle, what + "crosses the 4 KiB boundary at " +
                          Hex((rq.addr / kPageBytes + 1) * kPageBytes) +
                          " (AXI4: a burst must not cross a 4 KiB boundary)");
  }
  if (mem_->Find(rq.addr, bytes) == nullptr) {
    Fail(chan, cycle, what + "not inside one mapped region (mapped: " + mem_->Describe() + ")");
  }
  for (const ErrorRange& e : error_ranges_) {
    if (rq.addr < e.base + e.size && e.base < rq.addr + bytes) return e.resp;
  }
  return 0;
}

void AxiMemSlave::DriveIdle() {
  if (ports_.has_read()) {
    ports_.ar_ready.Set(0);
    ports_.r_valid.Set(0);
    ports_.r_last.Set(0);
    ports_.r_resp.Set(0);
    ports_.r_id.Set(0);
  }
  if (ports_.has_write()) {
    ports_.aw_ready.Set(0);
    ports_.w_ready.Set(0);
    ports_.b_valid.Set(0);
    ports_.b_resp.Set(0);
    ports_.b_id.Set(0);
  }
}

void AxiMemSlave::Reset() {
  rd_bursts_.clear();
  aw_bursts_.clear();
  w_buffer_.clear();
  b_queue_.clear();
  ar_ready_ = aw_ready_ = w_ready_ = false;
  r_presented_ = b_presented_ = false;
  ar_pending_ = aw_pending_ = w_pending_ = false;
  DriveIdle();
}

void AxiMemSlave::Drive(uint64_t cycle) {
  if (ports_.has_read()) {
    ar_ready_ = rd_bursts_.size() < options_.max_rd_bursts && !Gap(options_.ar_gap);
    ports_.ar_ready.Set(ar_ready_);
    if (!r_presented_ && !rd_bursts_.empty() && rd_bursts_.front().ready_cycle <= cycle &&
        !Gap(options_.r_gap)) {
      // The beat's data is read from memory when it is first presented.
      const Burst& b = rd_bursts_.front();
      const uint64_t addr = b.addr + uint64_t{b.done} * beat_bytes_;
      if (b.resp != 0) {
        r_beat_.fill(0);
      } else {
        std::memcpy(r_beat_.data(), mem_->Translate(addr, beat_bytes_), beat_bytes_);
      }
      r_presented_ = true;
    }
    ports_.r_valid.Set(r_presented_);
    if (r_presented_) {
      const Burst& b = rd_bursts_.front();
      ports_.r_data.Set(r_beat_.data());
      ports_.r_last.Set(b.done + 1 == b.beats);
      ports_.r_resp.Set(b.resp);
      ports_.r_id.Set(b.id);
    }
  }
  if (ports_.has_write()) {
    const size_t wr_outstanding = aw_bursts_.size() + b_queue_.size();
    aw_ready_ = wr_outstanding < options_.max_wr_bursts && !Gap(options_.aw_gap);
    ports_.aw_ready.Set(aw_ready_);
    w_ready_ = w_buffer_.size() < options_.w_buffer_beats && !Gap(options_.w_gap);
    ports_.w_ready.Set(w_ready_);
    if (!b_presented_ && !b_queue_.empty() && b_queue_.front().ready_cycle <= cycle &&
        !Gap(options_.b_gap)) {
      b_presented_ = true;
    }
    ports_.b_valid.Set(b_presented_);
    if (b_presented_) {
      ports_.b_resp.Set(b_queue_.front().resp);
      ports_.b_id.Set(b_queue_.front().id);
    }
  }
}

void AxiMemSlave::Sample(uint64_t cycle) {
  if (ports_.has_read()) {
    // AR: stability while waiting, then acceptance.
    const bool ar_valid = ports_.ar_valid.Get() != 0;
    const Request rq = ar_valid ? ReadRequest(false) : Request{};
    if (ar_pending_) {
      if (!ar_valid) {
        Fail("AR", cycle, "ARVALID dropped before ARREADY (request addr=" +
                              Hex(ar_pending_rq_.addr) + ")");
      }
      if (!(rq == ar_pending_rq_)) {
        Fail("AR", cycle, "AR payload changed while ARVALID waited for ARREADY (addr " +
                              Hex(ar_pending_rq_.addr) + " -> " + Hex(rq.addr) + ")");
      }
    }
    ar_pending_ = ar_valid && !ar_ready_;
    ar_pending_rq_ = rq;
    if (ar_valid && ar_ready_) {
      const uint8_t resp = CheckBurst("AR", cycle, rq);
      const unsigned beats = static_cast<unsigned>(rq.len + 1);
      rd_bursts_.push_back(Burst{rq.addr, beats, rq.id,
                                 cycle + Latency(options_.rd_latency_min, options_.rd_latency_max),
                                 0, resp});
      ++counters_.rd_bursts;
      counters_.rd_max_beats = std::max(counters_.rd_max_beats, beats);
      counters_.rd_max_outstanding =
          std::max(counters_.rd_max_outstanding, static_cast<unsigned>(rd_bursts_.size()));
      counters_.first_cycle = std::min(counters_.first_cycle, cycle);
      if (resp != 0) ++counters_.rd_error_resps;
    }
    // R.
    if (r_presented_ && ports_.r_ready.Get() != 0) {
      Burst& b = rd_bursts_.front();
      ++counters_.rd_beats;
      counters_.rd_bytes += beat_bytes_;
      counters_.last_cycle = cycle;
      r_presented_ = false;
      if (++b.done == b.beats) rd_bursts_.pop_front();
    }
  }

  if (ports_.has_write()) {
    // AW.
    const bool aw_valid = ports_.aw_valid.Get() != 0;
    const Request rq = aw_valid ? ReadRequest(true) : Request{};
    if (aw_pending_) {
      if (!aw_valid) {
        Fail("AW", cycle, "AWVALID dropped before AWREADY (request addr=" +
                              Hex(aw_pending_rq_.addr) + ")");
      }
      if (!(rq == aw_pending_rq_)) {
        Fail("AW", cycle, "AW payload changed while AWVALID waited for AWREADY (addr " +
                              Hex(aw_pending_rq_.addr) + " -> " + Hex(rq.addr) + ")");
      }
    }
    aw_pending_ = aw_valid && !aw_ready_;
    aw_pending_rq_ = rq;
    if (aw_valid && aw_ready_) {
      const uint8_t resp = CheckBurst("AW", cycle, rq);
      const unsigned beats = static_cast<unsigned>(rq.len + 1);
      aw_bursts_.push_back(Burst{rq.addr, beats, rq.id, 0, 0, resp});
      ++counters_.wr_bursts;
      counters_.wr_max_beats = std::max(counters_.wr_max_beats, beats);
      counters_.wr_max_outstanding = std::max(
          counters_.wr_max_outstanding, static_cast<unsigned>(aw_bursts_.size() + b_queue_.size()));
      counters_.first_cycle = std::min(counters_.first_cycle, cycle);
      if (resp != 0) ++counters_.wr_error_resps;
      MatchWrites(cycle);  // W beats may have arrived before this AW
    }
    // W.
    const bool w_valid = ports_.w_valid.Get() != 0;
    WBeat beat{};
    if (w_valid) {
      ports_.w_data.Get(beat.data.data());
      beat.strb = ports_.w_strb.Get();
      beat.last = ports_.w_last.Get() != 0;
    }
    if (w_pending_) {
      if (!w_valid) Fail("W", cycle, "WVALID dropped before WREADY");
      if (beat.strb != w_pending_beat_.strb || beat.last != w_pending_beat_.last ||
          std::memcmp(beat.data.data(), w_pending_beat_.data.data(), beat_bytes_) != 0) {
        Fail("W", cycle, "W payload changed while WVALID waited for WREADY");
      }
    }
    w_pending_ = w_valid && !w_ready_;
    w_pending_beat_ = beat;
    if (w_valid && w_ready_) {
      w_buffer_.push_back(beat);
      MatchWrites(cycle);
    }
    // B.
    if (b_presented_ && ports_.b_ready.Get() != 0) {
      b_queue_.pop_front();
      b_presented_ = false;
      counters_.last_cycle = cycle;
    }
  }
}

void AxiMemSlave::MatchWrites(uint64_t cycle) {
  while (!aw_bursts_.empty() && !w_buffer_.empty()) {
    Burst& b = aw_bursts_.front();
    const WBeat& w = w_buffer_.front();
    const bool last_expected = b.done + 1 == b.beats;
    if (w.last != last_expected) {
      Fail("W", cycle, "WLAST=" + std::to_string(w.last) + " on beat " +
                           std::to_string(b.done + 1) + " of the " + std::to_string(b.beats) +
                           "-beat burst at " + Hex(b.addr) +
                           " (WLAST must be set on the last beat only)");
    }
    const uint64_t addr = b.addr + uint64_t{b.done} * beat_bytes_;
    if (b.resp == 0) {
      uint8_t* host = mem_->Translate(addr, beat_bytes_);
      for (unsigned k = 0; k < beat_bytes_; ++k) {
        if ((w.strb >> k) & 1u) host[k] = w.data[k];
      }
    }
    ++counters_.wr_beats;
    for (unsigned k = 0; k < beat_bytes_; ++k) counters_.wr_bytes += (w.strb >> k) & 1u;
    w_buffer_.pop_front();
    if (++b.done == b.beats) {
      b.ready_cycle = cycle + Latency(options_.wr_latency_min, options_.wr_latency_max);
      b_queue_.push_back(b);
      aw_bursts_.pop_front();
    }
  }
}

}  // namespace emu
}  // namespace csdkit
