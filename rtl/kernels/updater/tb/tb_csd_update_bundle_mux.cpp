// tb_csd_update_bundle_mux: unit bench of csd_update_bundle_mux (two read and two write masters
// on one AXI4 bundle, told apart by the AXI ID), through its bench top csd_update_bundle_mux_tb
// (narrow flat ports; every passed-through field derived from a 32-bit tag; MaxBursts = 3 so
// that the W order queue fills). C++ models of the four masters and of the subordinate drive
// it with random request timing and random ready / valid gaps on both sides, one profile of
// chances after another, and check every cycle:
//   - AR / AW: a master's handshake is the bundle's handshake of the same request (tag) in the
//     same cycle, with the master's number as the ID, every other field intact; a request on
//     the bundle stays unchanged until its handshake (AXI A3.2.1); while both masters ask, the
//     same one is never granted twice in a row (the other waits for at most one grant);
//   - R / B: a beat on the bundle is shown to the master its ID names and to no other, with
//     that master's ready; each master receives exactly the beats of its own requests, in the
//     order of its requests, data, resp and last intact, ID 0;
//   - W: the bursts leave in the order of their AWs on the bundle, whole (no beat of another
//     burst in between), each beat the one its master sent for that burst, last on the last;
//   - progress: the run ends with every request answered within a cycle bound, and never goes
//     1000 cycles without a handshake while work is left (a deadlock).
// The subordinate answers reads of the two IDs interleaved beat by beat and write responses in
// any order across IDs (in order per ID), as AXI allows.
// Options: --seed S (or $CSDKIT_TEST_SEED), --n N (requests per master and direction per
// profile; default 500). Mismatches print the seed, the cycle, the channel, GOT= and EXP= in hex.
#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Vcsd_update_bundle_mux_tb.h"
#include "tb_check.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;
using Top = Vcsd_update_bundle_mux_tb;

/// TB_CHECK_EQ_HEX on the bench's checker: index and message carry the cycle.
#define MUX_CHECK(got, exp, fmt, ...) \
  TB_CHECK_EQ_HEX(chk_, cycle_, got, exp, "cycle=%" PRIu64 " " fmt, cycle_, ##__VA_ARGS__)

constexpr uint64_t kDefaultRequests = 500;
/// Cycles without any handshake, with work left, that count as a deadlock.
constexpr uint64_t kStallLimit = 1000;

/// Chances per cycle: a master offers a request / W beat or is ready (R, B); the bundle is ready
/// (AR, AW, W) or offers a beat (R, B).
struct Profile {
  const char* name;
  double m_ar, m_r, m_aw, m_w, m_b;
  double s_ar, s_r, s_aw, s_w, s_b;
};

const Profile kProfiles[] = {
    {"ideal", 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
    {"light", 0.8, 0.9, 0.8, 0.9, 0.9, 0.9, 0.9, 0.85, 0.9, 0.9},
    {"heavy", 0.5, 0.4, 0.5, 0.5, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3},
    {"bundle_stall", 0.9, 1.0, 0.9, 1.0, 1.0, 0.08, 0.15, 0.08, 0.12, 0.1},
    {"master_stall", 0.3, 0.1, 0.3, 0.15, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0},
    {"w_starve", 1.0, 1.0, 1.0, 0.05, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0},
};

/// The data word of beat `beat` of the burst tagged `tag` (salt: R or W), and the resp bits.
uint32_t BeatWord(uint32_t tag, uint32_t beat, uint32_t salt) {
  uint32_t h = tag * 0x9e3779b1u ^ (beat + 1u) * 0x85ebca6bu ^ salt;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  return h ^ (h >> 13);
}
constexpr uint32_t kSaltR = 0x52524444u, kSaltW = 0x57575757u, kSaltB = 0x42424242u;
uint32_t Beats(uint32_t tag) { return (tag & 0xffu) + 1u; }
unsigned SourceOf(uint32_t tag) { return tag >> 31; }
/// Master k's word of a [1:0][31:0] port (one 64-bit value in the Verilated model).
uint32_t Lane32(uint64_t v, unsigned k) { return static_cast<uint32_t>(v >> (32 * k)); }

/// One burst in a queue, and how many of its beats went.
struct Burst {
  uint32_t tag = 0;
  uint32_t beat = 0;
};

class Bench {
 public:
  Bench(uint64_t seed, uint64_t requests)
      : seed_(seed), requests_(requests), rng_(seed), chk_("csd_update_bundle_mux", seed, 8) {
    ctx_ = std::make_unique<VerilatedContext>();
    ctx_->randReset(2);  // registers start random (--x-initial unique): only reset clears them
    ctx_->randSeed(static_cast<int>(seed & 0x7fffffff));
    top_ = std::make_unique<Top>(ctx_.get(), "top");
  }
  ~Bench() { top_->final(); }

  bool Run() {
    // Reset while every master asks: the arbiters and the W order queue come out of it empty.
    top_->rst_ni = 0;
    top_->m_ar_valid_i = 3;
    top_->m_aw_valid_i = 3;
    top_->m_w_valid_i = 3;
    for (int i = 0; i < 4; ++i) Tick();
    top_->rst_ni = 1;
    for (const Profile& p : kProfiles) {
      if (!RunProfile(p)) break;
    }
    // Evidence the contention the checks are about was reached.
    if (stats_both_ar_ == 0 || stats_both_aw_ == 0 || stats_queue_full_ == 0) {
      chk_.Protocol(cycle_, "COVERAGE: contention or a full W order queue never reached");
    }
    std::printf("%s csd_update_bundle_mux seed=0x%" PRIx64 ": %zu profiles, %" PRIu64
                " requests, %" PRIu64 " R beats, %" PRIu64 " W beats, %" PRIu64 " cycles (%" PRIu64
                " with both masters asking on AR, %" PRIu64 " on AW, %" PRIu64
                " with the W order queue full)\n",
                chk_.failures() == 0 ? "PASS" : "FAIL", seed_, std::size(kProfiles),
                stats_requests_, stats_r_beats_, stats_w_beats_, cycle_, stats_both_ar_,
                stats_both_aw_, stats_queue_full_);
    return chk_.Finish();
  }

 private:
  // ---- Masters -------------------------------------------------------------------------------
  struct Master {
    // Reads: requests issued so far, the one offered (held until its handshake), the beats
    // expected back in order.
    uint64_t ar_next = 0;
    bool ar_hold = false;
    uint32_t ar_tag = 0;
    std::deque<Burst> r_exp;
    // Writes: AWs issued, the one offered; the W stream (bursts in order, beats of the
    // current one), the B responses expected in order.
    uint64_t aw_next = 0;
    bool aw_hold = false;
    uint32_t aw_tag = 0;
    std::deque<uint32_t> w_tags;  // tags of the bursts whose W beats are still to send
    uint32_t w_beat = 0;
    bool w_hold = false;
    uint64_t w_bursts = 0;  // bursts whose W beats were all sent
    std::deque<uint32_t> b_exp;
    // Fairness: grants of the other master while this one waited with a request.
    unsigned ar_passed = 0, aw_passed = 0;
  };

  uint32_t NewTag(unsigned src, uint64_t seq) {
    const uint32_t junk = static_cast<uint32_t>(rng_() & 3u) << 29;  // [29]: the ID to replace
    return (static_cast<uint32_t>(src) << 31) | junk |
           (static_cast<uint32_t>(seq & 0x1fffffu) << 8) | static_cast<uint32_t>(rng_() % 8);
  }
  bool Chance(double p) { return p >= 1.0 || std::uniform_real_distribution<double>()(rng_) < p; }

  /// Sets this cycle's master-side inputs from their state.
  void DriveMasters(const Profile& p) {
    uint32_t ar_valid = 0, aw_valid = 0, w_valid = 0, w_last = 0, r_ready = 0, b_ready = 0;
    uint64_t ar_tags = 0, aw_tags = 0, w_data = 0;  // [1:0][31:0] ports: master k in [32k +: 32]
    for (unsigned k = 0; k < 2; ++k) {
      Master& m = m_[k];
      if (!m.ar_hold && m.ar_next < requests_ && Chance(p.m_ar)) {
        m.ar_tag = NewTag(k, m.ar_next);
        m.ar_hold = true;
      }
      if (m.ar_hold) ar_valid |= 1u << k;
      ar_tags |= static_cast<uint64_t>(m.ar_tag) << (32 * k);
      if (!m.aw_hold && m.aw_next < requests_ && Chance(p.m_aw)) {
        m.aw_tag = NewTag(k, m.aw_next);
        m.aw_hold = true;
        ++m.aw_next;
        m.w_tags.push_back(m.aw_tag);  // its W beats may go before the AW does
      }
      if (m.aw_hold) aw_valid |= 1u << k;
      aw_tags |= static_cast<uint64_t>(m.aw_tag) << (32 * k);
      if (!m.w_hold && !m.w_tags.empty() && Chance(p.m_w)) m.w_hold = true;
      if (m.w_hold) {
        const uint32_t tag = m.w_tags.front();
        w_valid |= 1u << k;
        if (m.w_beat + 1 == Beats(tag)) w_last |= 1u << k;
        w_data |= static_cast<uint64_t>(BeatWord(tag, m.w_beat, kSaltW)) << (32 * k);
      } else {
        w_data |= (rng_() & 0xffffffffull) << (32 * k);  // garbage while not valid
      }
      if (Chance(p.m_r)) r_ready |= 1u << k;
      if (Chance(p.m_b)) b_ready |= 1u << k;
    }
    top_->m_ar_tag_i = ar_tags;
    top_->m_aw_tag_i = aw_tags;
    top_->m_w_data_i = w_data;
    top_->m_ar_valid_i = ar_valid;
    top_->m_aw_valid_i = aw_valid;
    top_->m_w_valid_i = w_valid;
    top_->m_w_last_i = w_last;
    top_->m_r_ready_i = r_ready;
    top_->m_b_ready_i = b_ready;
  }

  // ---- Subordinate ---------------------------------------------------------------------------
  struct Beat {
    bool valid = false;
    unsigned id = 0;
  };

  /// Picks the ID of the next R or B beat among those with something pending.
  bool PickId(const std::array<std::deque<Burst>, 2>& q, unsigned* id) {
    const bool a = !q[0].empty(), b = !q[1].empty();
    if (!a && !b) return false;
    *id = (a && b) ? static_cast<unsigned>(rng_() & 1u) : (b ? 1u : 0u);
    return true;
  }

  void DriveSubordinate(const Profile& p) {
    top_->s_ar_ready_i = Chance(p.s_ar);
    top_->s_aw_ready_i = Chance(p.s_aw);
    top_->s_w_ready_i = Chance(p.s_w);
    // R: a beat once shown stays until taken; a new one with chance s_r, of either ID.
    if (!r_.valid && Chance(p.s_r)) r_.valid = PickId(rd_pending_, &r_.id);
    top_->s_r_valid_i = r_.valid;
    top_->s_r_id_i = r_.id;
    if (r_.valid) {
      const Burst& bu = rd_pending_[r_.id].front();
      const uint32_t w = BeatWord(bu.tag, bu.beat, kSaltR);
      top_->s_r_data_i = w;
      top_->s_r_resp_i = (w >> 7) & 3u;
      top_->s_r_last_i = bu.beat + 1 == Beats(bu.tag);
    } else {
      top_->s_r_data_i = static_cast<uint32_t>(rng_());
      top_->s_r_resp_i = 0;
      top_->s_r_last_i = 0;
    }
    if (!b_.valid && Chance(p.s_b)) b_.valid = PickId(wr_resp_pending_, &b_.id);
    top_->s_b_valid_i = b_.valid;
    top_->s_b_id_i = b_.id;
    top_->s_b_resp_i =
        b_.valid ? BeatWord(wr_resp_pending_[b_.id].front().tag, 0, kSaltB) & 3u : 0u;
  }

  // ---- One cycle: drive, evaluate, check every handshake, clock ----------------------------
  bool Step(const Profile& p) {
    DriveMasters(p);
    DriveSubordinate(p);
    top_->eval();
    bool progress = false;
    progress |= CheckAr();
    progress |= CheckAw();
    progress |= CheckW();
    progress |= CheckR();
    progress |= CheckB();
    // What must hold next cycle: a request shown and not taken stays as it is.
    prev_ar_ = {top_->s_ar_valid_o && !top_->s_ar_ready_i, top_->s_ar_id_o, top_->s_ar_tag_o};
    prev_aw_ = {top_->s_aw_valid_o && !top_->s_aw_ready_i, top_->s_aw_id_o, top_->s_aw_tag_o};
    Tick();
    return progress;
  }

  void Tick() {
    top_->clk_i = 1;
    top_->eval();
    top_->clk_i = 0;
    top_->eval();
    ++cycle_;
  }

  /// A request on the bundle that was shown and not taken in the last cycle.
  struct Held {
    bool held = false;
    uint32_t id = 0, tag = 0;
  };

  /// AR or AW (`aw`): handshakes on the masters' side equal the bundle's, fairness, stability.
  bool CheckAx(bool aw) {
    const char* ch = aw ? "AW" : "AR";
    const uint32_t m_valid = aw ? top_->m_aw_valid_i : top_->m_ar_valid_i;
    const uint32_t m_ready = aw ? top_->m_aw_ready_o : top_->m_ar_ready_o;
    const bool s_valid = aw ? top_->s_aw_valid_o : top_->s_ar_valid_o;
    const bool s_ready = aw ? top_->s_aw_ready_i : top_->s_ar_ready_i;
    const uint32_t s_id = aw ? top_->s_aw_id_o : top_->s_ar_id_o;
    const uint32_t s_tag = aw ? top_->s_aw_tag_o : top_->s_ar_tag_o;
    const bool s_intact = aw ? top_->s_aw_intact_o : top_->s_ar_intact_o;
    const Held& prev = aw ? prev_aw_ : prev_ar_;
    if (prev.held) {
      MUX_CHECK(s_valid, 1, "%s valid dropped before its handshake", ch);
      MUX_CHECK(s_tag, prev.tag, "%s tag changed before its handshake", ch);
      MUX_CHECK(s_id, prev.id, "%s id changed before its handshake", ch);
    }
    if (m_valid == 3u) ++(aw ? stats_both_aw_ : stats_both_ar_);
    const uint32_t m_fire = m_valid & m_ready;
    const bool s_fire = s_valid && s_ready;
    MUX_CHECK(m_fire, s_fire ? (1u << s_id) : 0u,
              "%s handshakes: masters' (bits) against the bundle's (id %u, tag 0x%08x)", ch, s_id,
              s_tag);
    if (!s_fire) {
      for (unsigned k = 0; k < 2; ++k) {
        if ((m_valid >> k & 1u) == 0u) (aw ? m_[k].aw_passed : m_[k].ar_passed) = 0;
      }
      return false;
    }
    const uint32_t src = s_id;
    Master& m = m_[src];
    const uint32_t exp_tag = aw ? m.aw_tag : m.ar_tag;
    MUX_CHECK(s_tag, exp_tag, "%s of master %u: tag", ch, src);
    MUX_CHECK(SourceOf(s_tag), src, "%s tag 0x%08x: ID against source", ch, s_tag);
    MUX_CHECK(s_intact, 1, "%s tag 0x%08x: fields not passed intact", ch, s_tag);
    // Fairness: the other master, if it was asking, has now been passed over once more.
    Master& o = m_[src ^ 1u];
    unsigned& passed = aw ? o.aw_passed : o.ar_passed;
    passed = (m_valid >> (src ^ 1u) & 1u) != 0u ? passed + 1 : 0;
    MUX_CHECK(passed > 1, 0, "%s: master %u granted again while master %u waited", ch, src,
              src ^ 1u);
    (aw ? m.aw_passed : m.ar_passed) = 0;
    ++stats_requests_;
    if (aw) {
      m.aw_hold = false;
      aw_order_.push_back({exp_tag, 0});
      m.b_exp.push_back(exp_tag);
    } else {
      m.ar_hold = false;
      ++m.ar_next;
      m.r_exp.push_back({exp_tag, 0});
      rd_pending_[src].push_back({exp_tag, 0});
    }
    return true;
  }
  bool CheckAr() { return CheckAx(false); }
  bool CheckAw() {
    // The W order queue is full when an AW is waiting on the masters' side and none goes.
    if (top_->m_aw_valid_i != 0u && !top_->s_aw_valid_o) ++stats_queue_full_;
    return CheckAx(true);
  }

  /// W: the beat on the bundle is the next of the oldest burst whose AW went; the masters'
  /// handshake is the one of that burst's master.
  bool CheckW() {
    const bool s_fire = top_->s_w_valid_o && top_->s_w_ready_i;
    const uint32_t m_fire = top_->m_w_valid_i & top_->m_w_ready_o;
    if (top_->s_w_valid_o && aw_order_.empty()) {
      chk_.Protocol(cycle_, "W beat 0x%08x on the bundle before any AW", top_->s_w_data_o);
    }
    if (!s_fire || aw_order_.empty()) {
      MUX_CHECK(m_fire, 0,
                "W handshake of a master (bits) with none on "
                "the bundle");
      return false;
    }
    Burst& bu = aw_order_.front();
    const unsigned src = SourceOf(bu.tag);
    MUX_CHECK(m_fire, 1u << src,
              "W handshakes of the masters (bits); the oldest burst is master %u's, tag "
              "0x%08x beat %u",
              src, bu.tag, bu.beat);
    MUX_CHECK(top_->s_w_data_o, BeatWord(bu.tag, bu.beat, kSaltW),
              "W data of burst tag 0x%08x (master %u) beat %u of %u, in AW order", bu.tag, src,
              bu.beat, Beats(bu.tag));
    const bool last = bu.beat + 1 == Beats(bu.tag);
    MUX_CHECK(top_->s_w_last_o, last, "W last of burst tag 0x%08x beat %u", bu.tag, bu.beat);
    MUX_CHECK(top_->s_w_intact_o, 1, "W data / strb of tag 0x%08x beat %u", bu.tag, bu.beat);
    ++stats_w_beats_;
    // The master's side: its stream moves on (its own bookkeeping, whatever the mux did).
    if ((m_fire >> src & 1u) != 0u) {
      Master& m = m_[src];
      m.w_hold = false;
      if (++m.w_beat == Beats(m.w_tags.front())) {
        m.w_beat = 0;
        m.w_tags.pop_front();
        ++m.w_bursts;
      }
    }
    if (++bu.beat == Beats(bu.tag)) {
      wr_resp_pending_[src].push_back({bu.tag, 0});
      aw_order_.pop_front();
    }
    return true;
  }

  /// R: the beat goes to the master its ID names, and is that master's next expected beat.
  bool CheckR() {
    const uint32_t mv = top_->m_r_valid_o;
    if (!r_.valid) {
      MUX_CHECK(mv, 0,
                "R valid at the masters (bits) with none on the "
                "bundle");
      return false;
    }
    const unsigned id = r_.id;
    Burst& bu = rd_pending_[id].front();
    MUX_CHECK(mv, 1u << id,
              "R valid at the masters (bits) for a beat of ID "
              "%u, tag 0x%08x beat %u",
              id, bu.tag, bu.beat);
    MUX_CHECK(top_->s_r_ready_o, top_->m_r_ready_i >> id & 1u, "bundle R ready against master %u's",
              id);
    if (!top_->s_r_ready_o) return false;
    // The bundle's handshake: this beat is delivered.
    const uint32_t word = BeatWord(bu.tag, bu.beat, kSaltR);
    Master& m = m_[id];
    if (m.r_exp.empty()) {
      chk_.Protocol(cycle_, "R beat 0x%08x of ID %u with no read outstanding at master %u", word,
                    id, id);
    } else if ((top_->m_r_ready_i >> id & 1u) != 0u && (mv >> id & 1u) != 0u) {
      Burst& e = m.r_exp.front();
      MUX_CHECK(Lane32(top_->m_r_data_o, id), BeatWord(e.tag, e.beat, kSaltR),
                "R data at master %u: its read tag 0x%08x beat %u", id, e.tag, e.beat);
      MUX_CHECK((top_->m_r_resp_o >> (2 * id)) & 3u, (BeatWord(e.tag, e.beat, kSaltR) >> 7) & 3u,
                "R resp at master %u", id);
      const bool last = e.beat + 1 == Beats(e.tag);
      MUX_CHECK(top_->m_r_last_o >> id & 1u, last, "R last at master %u", id);
      MUX_CHECK(top_->m_r_id_o >> id & 1u, 0, "R id at master %u", id);
      MUX_CHECK(top_->m_r_intact_o >> id & 1u, 1,
                "R data copies at master "
                "%u",
                id);
      if (++e.beat == Beats(e.tag)) m.r_exp.pop_front();
    }
    ++stats_r_beats_;
    r_.valid = false;
    if (++bu.beat == Beats(bu.tag)) rd_pending_[id].pop_front();
    return true;
  }

  /// B: the response goes to the master its ID names, in that master's AW order.
  bool CheckB() {
    const uint32_t mv = top_->m_b_valid_o;
    if (!b_.valid) {
      MUX_CHECK(mv, 0,
                "B valid at the masters (bits) with none on the "
                "bundle");
      return false;
    }
    const unsigned id = b_.id;
    const uint32_t tag = wr_resp_pending_[id].front().tag;
    MUX_CHECK(mv, 1u << id,
              "B valid at the masters (bits) for ID %u, tag "
              "0x%08x",
              id, tag);
    MUX_CHECK(top_->s_b_ready_o, top_->m_b_ready_i >> id & 1u, "bundle B ready against master %u's",
              id);
    if (!top_->s_b_ready_o) return false;
    Master& m = m_[id];
    if (m.b_exp.empty()) {
      chk_.Protocol(cycle_, "B of ID %u (tag 0x%08x) with no write outstanding at master %u", id,
                    tag, id);
    } else if ((top_->m_b_ready_i >> id & 1u) != 0u && (mv >> id & 1u) != 0u) {
      MUX_CHECK(tag, m.b_exp.front(), "B at master %u: in its AW order", id);
      MUX_CHECK((top_->m_b_resp_o >> (2 * id)) & 3u, BeatWord(m.b_exp.front(), 0, kSaltB) & 3u,
                "B resp at master %u", id);
      MUX_CHECK(top_->m_b_id_o >> id & 1u, 0, "B id at master %u", id);
      m.b_exp.pop_front();
    }
    b_.valid = false;
    wr_resp_pending_[id].pop_front();
    return true;
  }

  bool WorkLeft() const {
    for (const Master& m : m_) {
      if (m.ar_next < requests_ || m.aw_next < requests_ || m.ar_hold || m.aw_hold ||
          !m.r_exp.empty() || !m.w_tags.empty() || !m.b_exp.empty()) {
        return true;
      }
    }
    return false;
  }

  bool RunProfile(const Profile& p) {
    for (Master& m : m_) {
      m.ar_next = 0;
      m.aw_next = 0;
      m.w_bursts = 0;
    }
    // Worst case about 9 beats per request on four channels at the slowest chances.
    const uint64_t bound = cycle_ + 2000 + requests_ * 2 * 9 * 40;
    uint64_t quiet = 0;
    while (WorkLeft()) {
      quiet = Step(p) ? 0 : quiet + 1;
      if (quiet >= kStallLimit || cycle_ >= bound) {
        chk_.Protocol(cycle_,
                      "profile %s: %s; master 0: reads %" PRIu64
                      " issued, %zu expecting data, "
                      "writes %" PRIu64
                      " issued, %zu W bursts to send, %zu B expected; master "
                      "1: %" PRIu64 ", %zu, %" PRIu64 ", %zu, %zu; W order queue %zu",
                      p.name,
                      quiet >= kStallLimit ? "no handshake for 1000 cycles (deadlock)"
                                           : "cycle bound reached",
                      m_[0].ar_next, m_[0].r_exp.size(), m_[0].aw_next, m_[0].w_tags.size(),
                      m_[0].b_exp.size(), m_[1].ar_next, m_[1].r_exp.size(), m_[1].aw_next,
                      m_[1].w_tags.size(), m_[1].b_exp.size(), aw_order_.size());
        return false;
      }
      if (chk_.failures() >= csd_tb::kMaxReports) return false;
    }
    return true;
  }

  uint64_t seed_, requests_;
  std::mt19937_64 rng_;
  Checker chk_;
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Top> top_;
  uint64_t cycle_ = 0;
  std::array<Master, 2> m_;
  // The subordinate: reads per ID (bursts, next beat), the AWs in bundle order with the beats
  // of the oldest seen, write responses per ID; the R and B beats shown now.
  std::array<std::deque<Burst>, 2> rd_pending_, wr_resp_pending_;
  std::deque<Burst> aw_order_;
  Beat r_, b_;
  Held prev_ar_, prev_aw_;
  uint64_t stats_requests_ = 0, stats_r_beats_ = 0, stats_w_beats_ = 0;
  uint64_t stats_both_ar_ = 0, stats_both_aw_ = 0, stats_queue_full_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const csd_tb::Options o = csd_tb::ParseOptions(argc, argv);
  Bench b(o.seed, o.n == 0 ? kDefaultRequests : o.n);
  return b.Run() ? 0 : 1;
}
