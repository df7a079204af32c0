// The memory side of csd_update_core, modelled in C++: every read and write channel backed by a
// host byte buffer, driven with seeded random valid/ready gaps, command latencies and late
// write acknowledgements, and checked against the channel protocol the core documents:
//   * read: at most one command outstanding per channel, count >= 1, inside the array; every
//     commanded word is taken before done;
//   * write: data only after its command; the status command only after every other write
//     was acknowledged, and nothing written after it; commands inside the array;
//   * channels the launch does not use (m/v of optimizers without them, out16 without a copy,
//     the sparse arrays of a dense launch, the absmax arrays of an fp32 launch) never see a
//     command;
//   * done_o only after the status acknowledgement; all channels quiet afterwards.
// One harness object owns one Verilated model and runs any number of launches on it.
#ifndef CSDKIT_RTL_UPDATER_TB_CORE_HARNESS_H_
#define CSDKIT_RTL_UPDATER_TB_CORE_HARNESS_H_

#include <verilated.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "csdkit/platform/splitmix.h"

#if VM_TRACE_FST
#include <verilated_fst_c.h>
#endif

namespace csd_upd_tb {

// Channel indices (csd_update_pkg::rd_port_e / wr_port_e).
enum RdPort : unsigned { kRdTheta, kRdM, kRdV, kRdGrad, kRdIdx, kRdBlk, kRdMAbs, kRdVAbs, kNumRd };
enum WrPort : unsigned {
  kWrTheta, kWrM, kWrV, kWrOut16, kWrStatus, kWrMAbs, kWrVAbs, kNumWr
};
inline const char* RdName(unsigned p) {
  static const char* const k[] = {"rd.theta", "rd.m",   "rd.v",        "rd.grad",
                                  "rd.idx",   "rd.blk", "rd.m_absmax", "rd.v_absmax"};
  return k[p];
}
inline const char* WrName(unsigned p) {
  static const char* const k[] = {"wr.theta",  "wr.m",        "wr.v",       "wr.out16",
                                  "wr.status", "wr.m_absmax", "wr.v_absmax"};
  return k[p];
}

/// How the memory side behaves: per-cycle probabilities and latency bounds.
struct Profile {
  const char* name;
  double rd_cmd_ready;  // a read command is accepted
  double rd_valid;      // a read data word is presented (once presented it is held)
  double wr_cmd_ready;  // a write command is accepted
  double wr_ready;      // a write data word is accepted
  unsigned rd_latency;  // cycles from command acceptance to its first word: 0 .. rd_latency
  unsigned done_delay;  // cycles from a command's last word to its done pulse: 0 .. done_delay
};

inline const std::vector<Profile>& Profiles() {
  static const std::vector<Profile> k = {
      {"ideal", 1.0, 1.0, 1.0, 1.0, 0, 0},     {"light", 0.9, 0.85, 0.9, 0.85, 8, 6},
      {"heavy", 0.4, 0.3, 0.4, 0.3, 40, 30},   {"rd_starve", 1.0, 0.15, 1.0, 1.0, 20, 2},
      {"wr_stall", 1.0, 1.0, 0.5, 0.1, 2, 50}, {"mixed", 0.7, 0.6, 0.3, 0.5, 100, 100},
  };
  return k;
}

/// One launch: arguments and the arrays behind each channel, with the number of words of each
/// the launch may touch (commands reaching past them are errors; 0 = the channel is unused).
struct Launch {
  uint32_t n = 0, nnz = 0, mode = 0;
  uint32_t scalars[10] = {};  // unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2
  uint32_t key[6] = {};       // q8 formats: seed_lo/hi, step_lo/hi, index_lo/hi
  uint8_t* rd_mem[kNumRd] = {};
  uint64_t rd_words[kNumRd] = {};
  uint8_t* wr_mem[kNumWr] = {};
  uint64_t wr_words[kNumWr] = {};
};

/// What a launch did.
struct RunResult {
  bool ok = true;       // no protocol violation, finished in time
  std::string error;    // the first violation
  uint64_t cycles = 0;  // start to done
  uint64_t rd_cmds[kNumRd] = {}, rd_beats[kNumRd] = {};
  uint64_t wr_cmds[kNumWr] = {}, wr_beats[kNumWr] = {};
  int64_t first_rd_theta = -1, first_wr_theta = -1;  // cycle of the first theta word in / out
  uint64_t word_bytes = 0;
};

/// The kit's splitmix64 with the bench's two draws.
struct Rng {
  csdkit::SplitMix64 g;
  explicit Rng(uint64_t seed) : g{seed} {}
  uint64_t Next() { return g.Next(); }
  bool Chance(double p) { return p >= 1.0 || static_cast<double>(Next() >> 11) * 0x1p-53 < p; }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
};

template <class Model, unsigned kLanes>
class Harness {
 public:
  static constexpr unsigned kWordBytes = kLanes * 4;

  explicit Harness(const char* fst_path = nullptr) : ctx_(new VerilatedContext) {
    ctx_->randReset(2);  // datapath registers start random; only resets may make them quiet
    ctx_->fatalOnError(true);
    top_.reset(new Model(ctx_.get(), "top"));
#if VM_TRACE_FST
    if (fst_path != nullptr) {
      ctx_->traceEverOn(true);
      trace_.reset(new VerilatedFstC);
      top_->trace(trace_.get(), 99);
      trace_->open(fst_path);
    }
#else
    (void)fst_path;
#endif
    Reset();
  }

  ~Harness() {
#if VM_TRACE_FST
    if (trace_) trace_->close();
#endif
    top_->final();
  }

  /// Runs one launch to completion (or to max_cycles) under `prof`, seeded by `seed`.
  RunResult Run(const Launch& l, const Profile& prof, uint64_t seed, uint64_t max_cycles) {
    RunResult r;
    r.word_bytes = kWordBytes;
    Rng rng{seed};
    std::deque<RdCmd> rdq[kNumRd];
    RdBeat rd_cur[kNumRd] = {};
    std::deque<WrCmd> wrq[kNumWr];
    std::deque<uint64_t> done_at[kNumWr];
    uint64_t wr_open[kNumWr] = {};  // commands accepted and not yet acknowledged
    bool status_started = false, status_acked = false;
    auto fail = [&](const std::string& what) {
      if (r.ok) {
        r.ok = false;
        r.error = what + " (cycle " + std::to_string(r.cycles) + ")";
      }
    };

    if (!top_->idle_o) fail("core not idle before start");
    top_->n_i = l.n;
    top_->nnz_i = l.nnz;
    top_->mode_i = l.mode;
    top_->unscale_i = l.scalars[0];
    top_->lr_i = l.scalars[1];
    top_->beta1_i = l.scalars[2];
    top_->omb1_i = l.scalars[3];
    top_->beta2_i = l.scalars[4];
    top_->omb2_i = l.scalars[5];
    top_->eps_i = l.scalars[6];
    top_->wd_i = l.scalars[7];
    top_->c1_i = l.scalars[8];
    top_->c2_i = l.scalars[9];
    top_->seed_lo_i = l.key[0];
    top_->seed_hi_i = l.key[1];
    top_->step_lo_i = l.key[2];
    top_->step_hi_i = l.key[3];
    top_->index_lo_i = l.key[4];
    top_->index_hi_i = l.key[5];
    top_->axi_err_i = 0;  // status lane 12: the kernel's AXI error report, none here
    top_->start_i = 1;
    Tick();
    top_->start_i = 0;
    // Scramble the arguments: the core must have sampled them with start_i.
    top_->n_i = 0xdeadbeefu;
    top_->nnz_i = 0xfeedfaceu;
    top_->mode_i = 0xffffffffu;
    top_->seed_lo_i = top_->step_hi_i = top_->index_lo_i = 0x5c4a3b1du;

    bool done = false;
    for (r.cycles = 1; r.cycles <= max_cycles && r.ok; ++r.cycles) {
      const uint64_t cyc = r.cycles;
      // ---- Drive ----
      uint32_t rd_cmd_ready = 0, rd_valid = 0, wr_cmd_ready = 0, wr_ready = 0, wr_done = 0;
      for (unsigned p = 0; p < kNumRd; ++p) {
        if (rng.Chance(prof.rd_cmd_ready)) rd_cmd_ready |= 1u << p;
        if (!rd_cur[p].valid && !rdq[p].empty() && rdq[p].front().ready_at <= cyc &&
            rng.Chance(prof.rd_valid)) {
          RdCmd& c = rdq[p].front();
          rd_cur[p].valid = true;
          rd_cur[p].word = c.offset + c.sent;
        }
        if (rd_cur[p].valid) {
          rd_valid |= 1u << p;
          const uint8_t* src = l.rd_mem[p] + rd_cur[p].word * kWordBytes;
          for (unsigned j = 0; j < kLanes; ++j) {
            uint32_t w;
            std::memcpy(&w, src + 4 * j, 4);
            top_->rd_data_i[p * kLanes + j] = w;
          }
        } else {
          // Idle data lines carry junk: the core must look at valid.
          for (unsigned j = 0; j < kLanes; ++j) {
            top_->rd_data_i[p * kLanes + j] = static_cast<uint32_t>(rng.Next());
          }
        }
      }
      for (unsigned p = 0; p < kNumWr; ++p) {
        if (rng.Chance(prof.wr_cmd_ready)) wr_cmd_ready |= 1u << p;
        if (rng.Chance(prof.wr_ready)) wr_ready |= 1u << p;
        if (!done_at[p].empty() && done_at[p].front() <= cyc) {
          wr_done |= 1u << p;
          done_at[p].pop_front();
          --wr_open[p];
          if (p == kWrStatus) status_acked = true;
        }
      }
      top_->rd_cmd_ready_i = rd_cmd_ready;
      top_->rd_valid_i = rd_valid;
      top_->wr_cmd_ready_i = wr_cmd_ready;
      top_->wr_ready_i = wr_ready;
      top_->wr_done_i = wr_done;
      top_->clk_i = 0;
      top_->eval();
      Dump();

      // ---- Sample the handshakes of this cycle ----
      const uint32_t rd_cmd_fire = top_->rd_cmd_valid_o & rd_cmd_ready;
      const uint32_t rd_fire = rd_valid & top_->rd_ready_o;
      const uint32_t wr_cmd_fire = top_->wr_cmd_valid_o & wr_cmd_ready;
      const uint32_t wr_fire = top_->wr_valid_o & wr_ready;
      if (top_->done_o) {
        done = true;
        if (!status_acked) fail("done_o before the status write was acknowledged");
      }
      for (unsigned p = 0; p < kNumRd; ++p) {
        if (rd_cmd_fire >> p & 1u) {
          const uint64_t off = top_->rd_cmd_offset_o[p], cnt = top_->rd_cmd_count_o[p];
          ++r.rd_cmds[p];
          if (!rdq[p].empty()) fail(std::string(RdName(p)) + ": second command outstanding");
          if (cnt == 0) fail(std::string(RdName(p)) + ": zero-word command");
          if (off + cnt > l.rd_words[p]) {
            fail(std::string(RdName(p)) + ": command [" + std::to_string(off) + ", +" +
                 std::to_string(cnt) + ") past the " + std::to_string(l.rd_words[p]) +
                 " words this launch may read");
          }
          rdq[p].push_back({off, cnt, 0, cyc + 1 + rng.Below(prof.rd_latency + 1)});
        }
        if (rd_fire >> p & 1u) {
          ++r.rd_beats[p];
          if (p == kRdTheta && r.first_rd_theta < 0) r.first_rd_theta = static_cast<int64_t>(cyc);
          rd_cur[p].valid = false;
          RdCmd& c = rdq[p].front();
          if (++c.sent == c.count) rdq[p].pop_front();
        }
      }
      for (unsigned p = 0; p < kNumWr; ++p) {
        if (wr_cmd_fire >> p & 1u) {
          const uint64_t off = top_->wr_cmd_offset_o[p], cnt = top_->wr_cmd_count_o[p];
          ++r.wr_cmds[p];
          if (status_started) fail(std::string(WrName(p)) + ": command after the status write");
          if (p == kWrStatus) {
            for (unsigned q = 0; q < kNumWr; ++q) {
              if (q != kWrStatus && (wr_open[q] != 0 || !wrq[q].empty())) {
                fail(std::string("status written while ") + WrName(q) + " is unacknowledged");
              }
            }
            status_started = true;
          }
          if (!wrq[p].empty() || wr_open[p] != 0) {
            fail(std::string(WrName(p)) + ": second command outstanding");
          }
          if (cnt == 0) fail(std::string(WrName(p)) + ": zero-word command");
          if (off + cnt > l.wr_words[p]) {
            fail(std::string(WrName(p)) + ": command [" + std::to_string(off) + ", +" +
                 std::to_string(cnt) + ") past the " + std::to_string(l.wr_words[p]) +
                 " words this launch may write");
          }
          wrq[p].push_back({off, cnt, 0});
          ++wr_open[p];
        }
        if (wr_fire >> p & 1u) {
          ++r.wr_beats[p];
          if (p == kWrTheta && r.first_wr_theta < 0) r.first_wr_theta = static_cast<int64_t>(cyc);
          if (wrq[p].empty()) {
            fail(std::string(WrName(p)) + ": data word without a command");
          } else {
            WrCmd& c = wrq[p].front();
            uint8_t* dst = l.wr_mem[p] + (c.offset + c.sent) * kWordBytes;
            if (c.offset + c.sent < l.wr_words[p]) {
              for (unsigned j = 0; j < kLanes; ++j) {
                const uint32_t w = top_->wr_data_o[p * kLanes + j];
                std::memcpy(dst + 4 * j, &w, 4);
              }
            }
            if (++c.sent == c.count) {
              wrq[p].pop_front();
              uint64_t t = cyc + 1 + rng.Below(prof.done_delay + 1);
              if (!done_at[p].empty() && t <= done_at[p].back()) t = done_at[p].back() + 1;
              done_at[p].push_back(t);
            }
          }
        }
      }

      top_->clk_i = 1;
      top_->eval();
      Dump();
      if (done) break;
    }
    if (r.ok && !done) fail("no done_o within " + std::to_string(max_cycles) + " cycles");
    if (r.ok) {
      for (unsigned p = 0; p < kNumRd; ++p) {
        if (!rdq[p].empty()) fail(std::string(RdName(p)) + ": commanded words never taken");
      }
      for (unsigned p = 0; p < kNumWr; ++p) {
        if (!wrq[p].empty() || wr_open[p] != 0 || !done_at[p].empty()) {
          fail(std::string(WrName(p)) + ": write unfinished at done");
        }
      }
    }
    // A few idle cycles: nothing may move once done.
    ClearInputs();
    for (int i = 0; i < 4 && r.ok; ++i) {
      Tick();
      if (top_->rd_cmd_valid_o != 0 || top_->wr_cmd_valid_o != 0 || top_->wr_valid_o != 0) {
        fail("channel activity after done");
      }
      if (!top_->idle_o) fail("core not idle after done");
    }
    // After a failure the core may be anywhere: reset it so the next launch is meaningful.
    if (!r.ok) Reset();
    return r;
  }

  /// Synchronous reset, a few cycles long.
  void Reset() {
    top_->rst_ni = 0;
    ClearInputs();
    for (int i = 0; i < 8; ++i) Tick();
    top_->rst_ni = 1;
    Tick();
  }

 private:
  struct RdCmd {
    uint64_t offset, count, sent, ready_at;
  };
  struct RdBeat {
    bool valid;
    uint64_t word;
  };
  struct WrCmd {
    uint64_t offset, count, sent;
  };

  void ClearInputs() {
    top_->start_i = 0;
    top_->rd_cmd_ready_i = 0;
    top_->rd_valid_i = 0;
    top_->wr_cmd_ready_i = 0;
    top_->wr_ready_i = 0;
    top_->wr_done_i = 0;
  }

  void Tick() {
    top_->clk_i = 0;
    top_->eval();
    Dump();
    top_->clk_i = 1;
    top_->eval();
    Dump();
  }

  void Dump() {
#if VM_TRACE_FST
    if (trace_) trace_->dump(ctx_->time());
#endif
    ctx_->timeInc(1);
  }

  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Model> top_;
#if VM_TRACE_FST
  std::unique_ptr<VerilatedFstC> trace_;
#endif
};

}  // namespace csd_upd_tb

#endif  // CSDKIT_RTL_UPDATER_TB_CORE_HARNESS_H_
