// tb_csd_axi_masters: unit bench of csd_axi_rd_master and csd_axi_wr_master, both on one AXI4
// bundle (csd_axi_master_tb_top, Verilated with MaxOutstanding=3, MaxBurstLen=16,
// RdFifoDepth=40, WrFifoDepth=24). The bench drives the commands and both word streams with
// random gaps, queues commands back to back, and checks:
//   - read: every word of every command arrives once, in order, equal to memory;
//   - write: each done pulse comes in command order, when that command's words are all in
//     memory; at the end the write arena equals the expected image (no stray byte);
//   - bursts: exactly the split the rules give (min of what is left, 16 beats, the page end),
//     at most 3 in flight per direction (slave counters); the slave rejects any 4 KiB crossing;
//   - idle outputs, zero-word commands, words streamed before their write command;
//   - error responses: a read or write burst answered SLVERR sets err_o, the data count stays
//     right (read words are zero), the command completes, err_clr_i clears it.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "Vcsd_axi_master_tb_top.h"
#include "csdkit/emu/harness/axi_mem_slave.h"
#include "csdkit/emu/harness/bench.h"
#include "csdkit/emu/harness/memory_map.h"
#include "csdkit/emu/harness/sim.h"
#include "csdkit/emu/harness/verilated_dut.h"

namespace ce = csdkit::emu;

namespace {

constexpr uint64_t kWord = 64;
constexpr uint64_t kPage = 4096;
// Parameters the model was Verilated with (rtl/axi.cmake, CSD_AXI_MASTER_TB_PARAMS).
constexpr unsigned kMaxOutstanding = 3;
constexpr unsigned kMaxBurst = 16;

constexpr uint64_t kRdBase = 0x0000'0001'0000'0000ull;
constexpr uint64_t kWrBase = 0x0000'0002'0000'0000ull;
constexpr uint64_t kArenaBytes = 64 * kPage;

using Top = Vcsd_axi_master_tb_top;
using Word = std::array<uint8_t, kWord>;

/// Bursts the masters must issue for `words` words at `addr`.
uint64_t ExpectedBursts(uint64_t addr, uint64_t words) {
  uint64_t n = 0;
  while (words != 0) {
    const uint64_t page_left = (kPage - addr % kPage) / kWord;
    const uint64_t len = std::min<uint64_t>({words, kMaxBurst, page_left});
    addr += len * kWord;
    words -= len;
    ++n;
  }
  return n;
}

/// Drives the command and stream ports of the two masters and checks what comes back.
class MasterDriver : public ce::Component {
 public:
  struct Cmd {
    uint64_t base;
    uint32_t len;
  };

  MasterDriver(ce::Sim* sim, Top* top, const uint8_t* rd_image, uint8_t* wr_mem,
               ce::Checker* chk)
      : sim_(sim), top_(top), rd_image_(rd_image), wr_mem_(wr_mem), chk_(chk) {
    sim_->Attach(this);
  }
  ~MasterDriver() override { sim_->Detach(this); }

  void SetGaps(uint64_t seed, double cmd_gap, double stream_gap) {
    rng_.seed(seed);
    cmd_gap_ = cmd_gap;
    stream_gap_ = stream_gap;
  }
  /// A read command; its words are expected from the read image (zero inside the zero range).
  void QueueRead(uint64_t base, uint32_t len) {
    rd_cmds_.push_back(Cmd{base, len});
    for (uint64_t w = 0; w < len; ++w) rd_expect_.push_back(base + w * kWord);
  }
  /// A write command with random data; writes that data into the expected image `expect`.
  void QueueWrite(uint64_t base, uint32_t len, uint8_t* expect) {
    wr_cmds_.push_back(Cmd{base, len});
    wr_pending_.push_back(Cmd{base, len});
    for (uint64_t w = 0; w < len; ++w) {
      Word word;
      for (auto& b : word) b = static_cast<uint8_t>(rng_());
      wr_words_.push_back(word);
      std::memcpy(expect + (base - kWrBase) + w * kWord, word.data(), kWord);
    }
  }
  void ClearErrors() { err_clr_ = true; }
  /// Read words in [from, to) are expected to be zero (bursts answered with an error).
  void set_zero_range(uint64_t from, uint64_t to) {
    zero_from_ = from;
    zero_to_ = to;
  }

  bool AllDone() const {
    return rd_cmds_.empty() && rd_expect_.empty() && wr_cmds_.empty() && wr_words_.empty() &&
           wr_pending_.empty();
  }
  uint64_t rd_words() const { return rd_words_; }
  uint64_t done_pulses() const { return done_pulses_; }
  bool saw_busy() const { return saw_busy_; }

  void Reset() override {
    rd_cmds_.clear();
    rd_expect_.clear();
    wr_cmds_.clear();
    wr_words_.clear();
    wr_pending_.clear();
    rd_cmd_shown_ = wr_cmd_shown_ = wr_word_shown_ = false;
    top_->rd_cmd_valid_i = 0;
    top_->wr_cmd_valid_i = 0;
    top_->wr_data_valid_i = 0;
    top_->rd_data_ready_i = 0;
    top_->rd_err_clr_i = 0;
    top_->wr_err_clr_i = 0;
  }

  void Drive(uint64_t) override {
    if (!rd_cmds_.empty() && !rd_cmd_shown_ && !Gap(cmd_gap_)) rd_cmd_shown_ = true;
    top_->rd_cmd_valid_i = rd_cmd_shown_;
    if (rd_cmd_shown_) {
      top_->rd_cmd_base_i = rd_cmds_.front().base;
      top_->rd_cmd_len_i = rd_cmds_.front().len;
    }
    if (!wr_cmds_.empty() && !wr_cmd_shown_ && !Gap(cmd_gap_)) wr_cmd_shown_ = true;
    top_->wr_cmd_valid_i = wr_cmd_shown_;
    if (wr_cmd_shown_) {
      top_->wr_cmd_base_i = wr_cmds_.front().base;
      top_->wr_cmd_len_i = wr_cmds_.front().len;
    }
    rd_ready_ = !Gap(stream_gap_);
    top_->rd_data_ready_i = rd_ready_;
    if (!wr_words_.empty() && !wr_word_shown_ && !Gap(stream_gap_)) wr_word_shown_ = true;
    top_->wr_data_valid_i = wr_word_shown_;
    if (wr_word_shown_) std::memcpy(top_->wr_data_i.data(), wr_words_.front().data(), kWord);
    top_->rd_err_clr_i = err_clr_;
    top_->wr_err_clr_i = err_clr_;
    err_clr_ = false;
  }

  void Sample(uint64_t cycle) override {
    if (!top_->rd_idle_o || !top_->wr_idle_o) saw_busy_ = true;
    if (rd_cmd_shown_ && top_->rd_cmd_ready_o) {
      rd_cmds_.pop_front();
      rd_cmd_shown_ = false;
    }
    if (wr_cmd_shown_ && top_->wr_cmd_ready_o) {
      wr_cmds_.pop_front();
      wr_cmd_shown_ = false;
    }
    if (wr_word_shown_ && top_->wr_data_ready_o) {
      wr_words_.pop_front();
      wr_word_shown_ = false;
    }
    if (rd_ready_ && top_->rd_data_valid_o) {
      if (rd_expect_.empty()) {
        chk_->True(false, ce::Format("cycle %" PRIu64 ": read word with none expected", cycle));
      } else {
        const uint64_t addr = rd_expect_.front();
        rd_expect_.pop_front();
        Word exp{};
        if (addr < zero_from_ || addr >= zero_to_) {
          std::memcpy(exp.data(), rd_image_ + (addr - kRdBase), kWord);
        }
        const uint8_t* got = reinterpret_cast<const uint8_t*>(top_->rd_data_o.data());
        if (std::memcmp(got, exp.data(), kWord) != 0) {
          for (unsigned b = 0; b < kWord; ++b) {
            if (got[b] != exp[b]) {
              chk_->Eq(got[b], exp[b], ce::Format("cycle %" PRIu64 ": read word at 0x%" PRIx64
                                                  " byte %u", cycle, addr, b));
              break;
            }
          }
        } else {
          chk_->True(true, "read word");
        }
        ++rd_words_;
      }
    }
    if (top_->wr_done_o) {
      ++done_pulses_;
      if (wr_pending_.empty()) {
        chk_->True(false, ce::Format("cycle %" PRIu64 ": write done with no command", cycle));
      } else {
        // The command this done belongs to must be completely in memory now.
        const Cmd p = wr_pending_.front();
        wr_pending_.pop_front();
        const uint64_t off = p.base - kWrBase;
        chk_->True(std::memcmp(wr_mem_ + off, expect_image_ + off, p.len * kWord) == 0,
                   ce::Format("cycle %" PRIu64 ": done of the write of %u words at 0x%" PRIx64
                              " before all its words were in memory",
                              cycle, p.len, p.base));
      }
    }
  }

  void set_expect_image(const uint8_t* e) { expect_image_ = e; }

 private:
  bool Gap(double p) {
    return p > 0.0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
  }

  ce::Sim* sim_;
  Top* top_;
  const uint8_t* rd_image_;
  uint8_t* wr_mem_;
  const uint8_t* expect_image_ = nullptr;
  ce::Checker* chk_;
  std::mt19937_64 rng_{1};
  double cmd_gap_ = 0.0, stream_gap_ = 0.0;
  std::deque<Cmd> rd_cmds_, wr_cmds_;
  std::deque<uint64_t> rd_expect_;
  std::deque<Word> wr_words_;
  std::deque<Cmd> wr_pending_;  // commands whose done pulse is due
  bool rd_cmd_shown_ = false, wr_cmd_shown_ = false, wr_word_shown_ = false, rd_ready_ = false;
  bool err_clr_ = false;
  uint64_t zero_from_ = 0, zero_to_ = 0;
  uint64_t rd_words_ = 0, done_pulses_ = 0;
  bool saw_busy_ = false;
};

class MastersBench {
 public:
  explicit MastersBench(const ce::BenchArgs& args)
      : args_(args),
        rng_(args.seed),
        dut_(args.seed),
        sim_(&dut_, args.sim),
        rd_image_(kArenaBytes),
        wr_mem_(kArenaBytes),
        expect_(kArenaBytes),
        gmem_(&sim_, "gmem", CSDKIT_AXI_PORTS(dut_.top(), m_axi_gmem), &mem_),
        chk_("tb_csd_axi_masters", args.seed),
        drv_(&sim_, dut_.top(), rd_image_.data(), wr_mem_.data(), &chk_) {
    for (auto& b : rd_image_) b = static_cast<uint8_t>(rng_());
    for (auto& b : wr_mem_) b = static_cast<uint8_t>(rng_());
    expect_ = wr_mem_;
    drv_.set_expect_image(expect_.data());
    mem_.Map(kRdBase, kArenaBytes, rd_image_.data(), "read arena");
    mem_.Map(kWrBase, kArenaBytes, wr_mem_.data(), "write arena");
  }

  int Run() {
    sim_.Reset();
    const unsigned rounds = args_.full ? 3000 : 300;
    for (unsigned r = 0; r < rounds; ++r) RandomRound(r);
    Errors();
    std::printf("%" PRIu64 " cycles simulated\n", sim_.cycle());
    return chk_.Finish();
  }

 private:
  /// Length of a random command: often short, sometimes 0, sometimes many pages.
  uint32_t RandomLen() {
    switch (rng_() % 8) {
      case 0: return 0;
      case 1: return 1;
      case 2: return static_cast<uint32_t>(1 + rng_() % 16);
      case 3: return static_cast<uint32_t>(15 + rng_() % 4);
      case 4: return static_cast<uint32_t>(60 + rng_() % 10);
      default: return static_cast<uint32_t>(rng_() % 400);
    }
  }

  /// Runs until both masters are done and idle, then checks counters and idle flags.
  void Drain(const std::string& ctx, uint64_t exp_rd_words, uint64_t exp_wr_cmds) {
    sim_.RunUntil([&] { return drv_.AllDone() && dut_->rd_idle_o && dut_->wr_idle_o; },
                  2'000'000, ctx + ": masters finishing");
    sim_.Step(4);
    chk_.Eq(drv_.rd_words(), exp_rd_words, ctx + ": read words delivered");
    chk_.Eq(drv_.done_pulses(), exp_wr_cmds, ctx + ": write done pulses");
    chk_.True(dut_->rd_idle_o && dut_->wr_idle_o && !dut_->rd_data_valid_o,
              ctx + ": idle at the end");
    chk_.True(gmem_.Idle(), ctx + ": slave idle at the end");
    const ce::AxiCounters& c = gmem_.counters();
    chk_.True(c.rd_max_outstanding <= kMaxOutstanding && c.wr_max_outstanding <= kMaxOutstanding,
              ce::Format("%s: %u read / %u write bursts in flight, limit %u", ctx.c_str(),
                         c.rd_max_outstanding, c.wr_max_outstanding, kMaxOutstanding));
    chk_.True(c.rd_max_beats <= kMaxBurst && c.wr_max_beats <= kMaxBurst,
              ce::Format("%s: bursts of %u / %u beats, limit %u", ctx.c_str(), c.rd_max_beats,
                         c.wr_max_beats, kMaxBurst));
  }

  void RandomRound(unsigned r) {
    const uint64_t s = rng_();
    ce::AxiSlaveOptions o;
    switch (r % 4) {
      case 0: o = ce::AxiSlaveOptions::Ideal(); break;
      case 1: o = ce::AxiSlaveOptions::Ddr(s); break;
      default: o = ce::AxiSlaveOptions::Stress(s, 0.15 * (r % 4)); break;
    }
    gmem_.SetOptions(o);
    gmem_.ClearCounters();
    const double stream_gap = (r % 3) * 0.3, cmd_gap = (r % 5) * 0.2;
    drv_.SetGaps(s + 7, cmd_gap, stream_gap);
    const std::string ctx = ce::Format("round %u (slave %s, stream gap %.1f, cmd gap %.1f)", r,
                                       r % 4 == 0 ? "ideal" : r % 4 == 1 ? "ddr" : "stress",
                                       stream_gap, cmd_gap);
    const uint64_t words_before = drv_.rd_words(), dones_before = drv_.done_pulses();
    uint64_t rd_words = 0, rd_bursts = 0, wr_words = 0, wr_bursts = 0;
    const unsigned cmds = 4 + static_cast<unsigned>(rng_() % 8);
    // Reads anywhere in the read arena; writes to disjoint, ascending regions.
    uint64_t wr_next = kWrBase + (rng_() % 64) * kWord;
    unsigned wr_cmds = 0;
    for (unsigned i = 0; i < cmds; ++i) {
      const uint32_t rl = RandomLen();
      const uint64_t rb = kRdBase + (rng_() % (kArenaBytes / kWord - rl)) * kWord;
      drv_.QueueRead(rb, rl);
      rd_words += rl;
      rd_bursts += ExpectedBursts(rb, rl);
      const uint32_t wl = RandomLen();
      if (wr_next + uint64_t{wl} * kWord > kWrBase + kArenaBytes) continue;
      drv_.QueueWrite(wr_next, wl, expect_.data());
      wr_words += wl;
      wr_bursts += ExpectedBursts(wr_next, wl);
      ++wr_cmds;
      wr_next += uint64_t{wl} * kWord + (rng_() % 8) * kWord;
    }
    Drain(ctx, words_before + rd_words, dones_before + wr_cmds);
    const ce::AxiCounters& c = gmem_.counters();
    chk_.Eq(c.rd_bursts, rd_bursts, ctx + ": read bursts");
    chk_.Eq(c.wr_bursts, wr_bursts, ctx + ": write bursts");
    chk_.Eq(c.rd_bytes, rd_words * kWord, ctx + ": bytes read");
    chk_.Eq(c.wr_bytes, wr_words * kWord, ctx + ": bytes written");
    chk_.True(std::memcmp(wr_mem_.data(), expect_.data(), kArenaBytes) == 0,
              ctx + ": write arena differs from the expected image");
    chk_.True(!dut_->rd_err_o && !dut_->wr_err_o, ctx + ": error flag without an error");
    if (wr_words + rd_words != 0) chk_.True(drv_.saw_busy(), ctx + ": never busy");
  }

  void Errors() {
    gmem_.SetOptions(ce::AxiSlaveOptions::Stress(rng_(), 0.2));
    gmem_.ClearCounters();
    drv_.SetGaps(rng_(), 0.2, 0.2);
    // Read: a range of 3 words in the middle of a 100-word read answers SLVERR; the bursts that
    // touch it return zeros.
    const uint64_t rb = kRdBase + 5 * kPage + 10 * kWord;
    const uint64_t bad = rb + 40 * kWord;
    gmem_.AddErrorRange(bad, 3 * kWord);
    // The burst containing the bad words: 16-beat aligned split from rb (page offset 10 words).
    uint64_t zf = 0, zt = 0;
    for (uint64_t a = rb, left = 100; left != 0;) {
      const uint64_t len = std::min<uint64_t>({left, kMaxBurst, (kPage - a % kPage) / kWord});
      if (a < bad + 3 * kWord && bad < a + len * kWord) {
        if (zt == 0) zf = a;
        zt = a + len * kWord;
      }
      a += len * kWord;
      left -= len;
    }
    drv_.set_zero_range(zf, zt);
    const uint64_t words_before = drv_.rd_words(), dones_before = drv_.done_pulses();
    drv_.QueueRead(rb, 100);
    Drain("read error", words_before + 100, dones_before);
    chk_.True(dut_->rd_err_o && !dut_->wr_err_o, "read error: rd_err_o set, wr_err_o clear");
    chk_.True(gmem_.counters().rd_error_resps >= 1, "read error: slave answered SLVERR");
    drv_.ClearErrors();
    sim_.Step(2);
    chk_.True(!dut_->rd_err_o, "read error: rd_err_o cleared by rd_err_clr_i");
    drv_.set_zero_range(0, 0);
    gmem_.ClearErrorRanges();

    // Write: a 50-word write whose middle burst is refused; the command still completes.
    const uint64_t wb = kWrBase + 40 * kPage + 3 * kWord;
    gmem_.AddErrorRange(wb + 20 * kWord, kWord);
    // The bursts touching the bad word are dropped by the slave: expect their old bytes.
    std::vector<uint8_t> keep(wr_mem_.begin() + (wb - kWrBase),
                              wr_mem_.begin() + (wb - kWrBase) + 50 * kWord);
    drv_.QueueWrite(wb, 50, expect_.data());
    uint64_t a = wb;
    for (uint64_t left = 50; left != 0;) {
      const uint64_t len = std::min<uint64_t>({left, kMaxBurst, (kPage - a % kPage) / kWord});
      if (a <= wb + 20 * kWord && wb + 20 * kWord < a + len * kWord) {
        std::memcpy(expect_.data() + (a - kWrBase), keep.data() + (a - wb), len * kWord);
      }
      a += len * kWord;
      left -= len;
    }
    // The done-time check compares with the expected image, which now holds the old bytes.
    Drain("write error", drv_.rd_words(), dones_before + 1);
    chk_.True(dut_->wr_err_o && !dut_->rd_err_o, "write error: wr_err_o set, rd_err_o clear");
    chk_.True(gmem_.counters().wr_error_resps == 1, "write error: one burst answered SLVERR");
    chk_.True(std::memcmp(wr_mem_.data(), expect_.data(), kArenaBytes) == 0,
              "write error: memory differs (the refused burst must not be written, the others "
              "must)");
    drv_.ClearErrors();
    sim_.Step(2);
    chk_.True(!dut_->wr_err_o, "write error: wr_err_o cleared by wr_err_clr_i");
    gmem_.ClearErrorRanges();
  }

  ce::BenchArgs args_;
  std::mt19937_64 rng_;
  ce::VerilatedDut<Top> dut_;
  ce::Sim sim_;
  ce::MemoryMap mem_;
  std::vector<uint8_t> rd_image_, wr_mem_, expect_;
  ce::AxiMemSlave gmem_;
  ce::Checker chk_;
  MasterDriver drv_;
};

}  // namespace

int main(int argc, char** argv) {
  const ce::BenchArgs args = ce::ParseBenchArgs(argc, argv);
  try {
    MastersBench bench(args);
    return bench.Run();
  } catch (const ce::SimError& e) {
    std::printf("tb_csd_axi_masters: FAIL (seed 0x%" PRIx64 "): %s\n", args.seed, e.what());
    return 1;
  }
}
