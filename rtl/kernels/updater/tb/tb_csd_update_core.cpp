// Bench of csd_update_core against the C++ model (hls/kernels/csd_update.cpp): every launch is
// run on the model and on the Verilated core, whose channels are served by core_harness.h with
// seeded random gaps; every byte of every buffer is compared (outputs, and the inputs that
// must stay untouched).
//
// One executable per Verilated configuration (TB_MODEL, TB_LANES, TB_FTZ). Suites:
//   --suite matrix --variant NAME   every grad dtype x out dtype x dense/sparse of one optimizer
//                                   variant (tests/test_util.h AllVariants), sizes 1, 15, 17,
//                                   33, 1000, 4097, 70001, special values, register junk in
//                                   the operands the optimizer ignores, rotating memory
//                                   profiles; plus a launch with the other policy's ftz bit
//   --suite malformed               malformed sparse streams, bad modes, dense nnz != 0, empty
//                                   launches: error bits and position as the model, only the
//                                   status written, the index array never read before the
//                                   table is proven consistent
//   --suite q8 [--iters K] [--variant A,B]
//                                   the compressed state formats (q8, q8-bf16): every optimizer
//                                   variant (or those listed) x grad dtype x copy x dense/sparse
//                                   x format, K sizes each (multiples of 256, one to several
//                                   absmax words, across a sparse block), special data, rotating
//                                   profiles; the non-zero rule's directed blocks (AdamW); then
//                                   the refusals (n or index_lo not whole blocks, an fp16 copy
//                                   of bf16 weights, format 3)
//   --suite perf                    ideal streams: cycles per word and pipeline latency (JSON
//                                   lines; results checked, times not asserted)
//   --suite random --iters N        random launches (nightly)
// Options: --seed S (or $CSDKIT_TEST_SEED), --fst FILE (builds with CSDKIT_RTL_TRACE=ON).
// Every mismatch prints the seed, the configuration, the index, the inputs and EXP/GOT in hex.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include TB_HEADER
#include "core_harness.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/sparse_codec.h"
#include "test_util.h"

namespace {

using csd_upd_tb::Harness;
using csd_upd_tb::Launch;
using csd_upd_tb::Profile;
using csd_upd_tb::Profiles;
using csd_upd_tb::Rng;
using csd_upd_tb::RunResult;
using csdkit::AlignedBuffer;
using csdkit::DType;
using csdkit::Problem;
using csdkit::ProblemSpec;
using csdkit::UpdateBuffers;
using csdkit::testing::Variant;
namespace hk = csdkit::hls;

constexpr unsigned kLanes = TB_LANES;
constexpr bool kFtz = TB_FTZ != 0;
constexpr unsigned kWordBytes = kLanes * 4;
constexpr uint64_t kDefaultSeed = 0xc5d0c0de5eedull;
using Core = Harness<TB_MODEL, kLanes>;

const char* kModelName = TB_MODEL_NAME;

uint64_t Words(uint64_t count, unsigned elem_bytes) {
  return (count * elem_bytes + kWordBytes - 1) / kWordBytes;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  Rng r{a * 0x9e3779b97f4a7c15ull ^ b};
  return r.Next();
}

std::string Hex(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

// ---- A launch: inputs, arguments, description ------------------------------------------------

struct Case {
  std::string config;  // human-readable configuration
  Problem p;           // inputs (p.buf) and the generated problem
  uint32_t n = 0, nnz = 0, mode = 0;
  hk::Scalars sc{};
  uint64_t seed = 0;
  const Profile* prof = nullptr;
};

/// What a launch may touch on each channel, in this core's words, from the arguments.
Launch MakeLaunch(const Case& c, UpdateBuffers& b) {
  Launch l;
  l.n = c.n;
  l.nnz = c.nnz;
  l.mode = c.mode;
  const uint32_t s[10] = {c.sc.unscale, c.sc.lr,  c.sc.beta1, c.sc.omb1, c.sc.beta2,
                          c.sc.omb2,    c.sc.eps, c.sc.wd,    c.sc.c1,   c.sc.c2};
  std::memcpy(l.scalars, s, sizeof s);
  const uint32_t key[6] = {b.seed_lo, b.seed_hi, b.step_lo, b.step_hi, b.index_lo, b.index_hi};
  std::memcpy(l.key, key, sizeof key);
  AlignedBuffer* rd[csd_upd_tb::kNumRd] = {&b.theta,  &b.m,      &b.v,        &b.grad,
                                           &b.sp_idx, &b.sp_blk, &b.m_absmax, &b.v_absmax};
  AlignedBuffer* wr[csd_upd_tb::kNumWr] = {&b.theta,  &b.m,        &b.v,       &b.out16,
                                           &b.status, &b.m_absmax, &b.v_absmax};
  for (unsigned p = 0; p < csd_upd_tb::kNumRd; ++p) l.rd_mem[p] = rd[p]->data();
  for (unsigned p = 0; p < csd_upd_tb::kNumWr; ++p) l.wr_mem[p] = wr[p]->data();
  l.wr_words[csd_upd_tb::kWrStatus] = 64 / kWordBytes;
  hk::Mode md{};
  if (!hk::DecodeMode(c.mode, &md) || md.ftz != kFtz) return l;  // nothing but the status
  const uint64_t words = Words(c.n, 4);
  const unsigned gb = md.grad == DType::kFp32 ? 4 : 2;
  // q8 formats: theta binary32 or bf16, a moment's codes (a byte each) and absmax values.
  const bool q8 = hk::IsQ8(md.state);
  const uint64_t twords = Words(c.n, md.state == hk::StateFmt::kQ8Bf16 ? 2 : 4);
  const uint64_t mwords = q8 ? Words(c.n, 1) : words;
  const uint64_t awords = q8 ? Words(c.n / hk::kQ8Block, 4) : 0;
  l.rd_words[csd_upd_tb::kRdTheta] = l.wr_words[csd_upd_tb::kWrTheta] = twords;
  if (hk::UsesM(md)) {
    l.rd_words[csd_upd_tb::kRdM] = l.wr_words[csd_upd_tb::kWrM] = mwords;
    l.rd_words[csd_upd_tb::kRdMAbs] = l.wr_words[csd_upd_tb::kWrMAbs] = awords;
  }
  if (hk::UsesV(md)) {
    l.rd_words[csd_upd_tb::kRdV] = l.wr_words[csd_upd_tb::kWrV] = mwords;
    l.rd_words[csd_upd_tb::kRdVAbs] = l.wr_words[csd_upd_tb::kWrVAbs] = awords;
  }
  if (md.out != DType::kFp32) l.wr_words[csd_upd_tb::kWrOut16] = Words(c.n, 2);
  if (md.sparse) {
    // The arrays as the arguments describe them, but never past the host buffers.
    auto cap = [](uint64_t w, const AlignedBuffer& a) {
      return std::min<uint64_t>(w, a.size() / kWordBytes);
    };
    l.rd_words[csd_upd_tb::kRdGrad] = cap(Words(c.nnz, gb), b.grad);
    l.rd_words[csd_upd_tb::kRdIdx] = cap(Words(c.nnz, 2), b.sp_idx);
    l.rd_words[csd_upd_tb::kRdBlk] = cap(Words(hk::NumBlocks(c.n) + 1ull, 4), b.sp_blk);
  } else {
    l.rd_words[csd_upd_tb::kRdGrad] = Words(c.n, gb);
  }
  return l;
}

/// The gradient element i of a launch as the kernel sees it (dense bits, or the sparse entry).
std::string DescribeGrad(const Case& c, const UpdateBuffers& in, uint64_t i) {
  hk::Mode md{};
  if (!hk::DecodeMode(c.mode, &md) || i >= c.n) return "";
  const bool half = md.grad != DType::kFp32;
  char b[64];
  if (!md.sparse) {
    if (half)
      std::snprintf(b, sizeof b, " g=0x%04x", in.grad.as<uint16_t>()[i]);
    else
      std::snprintf(b, sizeof b, " g=0x%08x", in.grad.as<uint32_t>()[i]);
    return b;
  }
  const uint32_t blk = static_cast<uint32_t>(i >> 16);
  const uint32_t* t = in.sp_blk.as<uint32_t>();
  for (uint32_t k = t[blk]; k < t[blk + 1] && k < c.nnz; ++k) {
    if (in.sp_idx.as<uint16_t>()[k] == (i & 0xffffu)) {
      if (half)
        std::snprintf(b, sizeof b, " g=entry %u 0x%04x", k, in.grad.as<uint16_t>()[k]);
      else
        std::snprintf(b, sizeof b, " g=entry %u 0x%08x", k, in.grad.as<uint32_t>()[k]);
      return b;
    }
  }
  return " g=(no entry: +0)";
}

struct Totals {
  uint64_t launches = 0, failures = 0, words = 0, cycles = 0;
  uint64_t policy_sensitive = 0;  // launches whose model results differ between IEEE and FTZ
};

/// Runs one case on the model and the core; compares; returns true when they agree.
bool RunCase(Core& core, const Case& c, Totals& tot, RunResult* out = nullptr) {
  const UpdateBuffers& in = c.p.buf;
  hk::Mode md{};
  const bool mode_ok = hk::DecodeMode(c.mode, &md);
  // The core implements one policy: a launch for the other one is a bad mode. Its expected
  // result is the model's for a bad mode.
  const bool policy_reject = mode_ok && md.ftz != kFtz;
  UpdateBuffers exp = in.Clone();
  csdkit::KernelLaunch kl;
  kl.mode = policy_reject ? (c.mode | (1u << 20)) : c.mode;
  kl.scalars = c.sc;
  const uint32_t exp_err = csdkit::RunUpdate(exp, c.n, c.nnz, kl);
  if (mode_ok && !policy_reject && exp_err == 0) {
    // Evidence that the comparison can tell the policies apart: the other policy's result.
    UpdateBuffers other = in.Clone();
    csdkit::KernelLaunch ko = kl;
    ko.mode ^= hk::kModeFtz;
    csdkit::RunUpdate(other, c.n, c.nnz, ko);
    if (!other.theta.SameBytes(exp.theta) || !other.m.SameBytes(exp.m) ||
        !other.v.SameBytes(exp.v) || !other.out16.SameBytes(exp.out16)) {
      ++tot.policy_sensitive;
    }
  }
  // A core with narrower words writes out16 up to its own last word; the model's 512-bit
  // word reaches further. Those bytes must stay as they were (checked through `exp`).
  if (exp_err == 0 && mode_ok && md.out != DType::kFp32) {
    const uint64_t rtl_end = Words(c.n, 2) * kWordBytes;
    const uint64_t model_end = hk::WordsFor(c.n, 2) * hk::kWordBytes;
    std::memcpy(exp.out16.data() + rtl_end, in.out16.data() + rtl_end, model_end - rtl_end);
  }

  UpdateBuffers act = in.Clone();
  const Launch l = MakeLaunch(c, act);
  uint64_t budget = 20000;
  for (unsigned p = 0; p < csd_upd_tb::kNumRd; ++p) budget += 3 * l.rd_words[p];
  for (unsigned p = 0; p < csd_upd_tb::kNumWr; ++p) budget += l.wr_words[p];
  budget *= 12;  // the slowest profile needs about 7 cycles per word
  const uint64_t run_seed = Mix(c.seed, 0x5eed);
  const RunResult r = core.Run(l, *c.prof, run_seed, budget);
  if (out != nullptr) *out = r;
  ++tot.launches;
  tot.cycles += r.cycles;
  tot.words += Words(c.n, 4);

  char ctxb[512];
  std::snprintf(ctxb, sizeof ctxb,
                "model=%s seed=0x%016" PRIx64 " run_seed=0x%016" PRIx64
                " config={%s} n=%u nnz=%u mode=0x%08x profile=%s",
                kModelName, c.seed, run_seed, c.config.c_str(), c.n, c.nnz, c.mode, c.prof->name);
  const std::string ctx = ctxb;
  bool ok = true;
  if (!r.ok) {
    std::printf("FAIL protocol: %s\n  %s\n", r.error.c_str(), ctx.c_str());
    ok = false;
  }
  const std::pair<const char*, std::pair<const AlignedBuffer*, const AlignedBuffer*>> bufs[] = {
      {"theta", {&exp.theta, &act.theta}},
      {"m", {&exp.m, &act.m}},
      {"v", {&exp.v, &act.v}},
      {"status", {&exp.status, &act.status}},
      {"grad", {&exp.grad, &act.grad}},
      {"sp_idx", {&exp.sp_idx, &act.sp_idx}},
      {"sp_blk", {&exp.sp_blk, &act.sp_blk}},
      {"m_absmax", {&exp.m_absmax, &act.m_absmax}},
      {"v_absmax", {&exp.v_absmax, &act.v_absmax}}};
  for (const auto& [name, pr] : bufs) {
    const std::string rep = csdkit::testing::CompareBuffers(name, *pr.first, *pr.second, 4, ctx);
    if (rep.empty()) continue;
    ok = false;
    uint64_t i = 0;
    while (i * 4 < pr.first->size() &&
           std::memcmp(pr.first->data() + i * 4, pr.second->data() + i * 4, 4) == 0) {
      ++i;
    }
    // The inputs at that 32-bit word of each state array (q8: 4 codes of m / v, 2 bf16 theta).
    auto at = [&](const AlignedBuffer& b) {
      return (i + 1) * 4 <= b.size() ? Hex(b.as<uint32_t>()[i]) : std::string("-");
    };
    std::printf("FAIL %s\n  first mismatch: in[%" PRIu64
                "] (32-bit words): theta=%s m=%s v=%s m_absmax=%s v_absmax=%s%s\n",
                rep.c_str(), i, at(in.theta).c_str(), at(in.m).c_str(), at(in.v).c_str(),
                at(in.m_absmax).c_str(), at(in.v_absmax).c_str(),
                DescribeGrad(c, in, i).c_str());
  }
  const std::string r16 = csdkit::testing::CompareBuffers("out16", exp.out16, act.out16, 2, ctx);
  if (!r16.empty()) {
    ok = false;
    uint64_t i = 0;
    while (i * 2 < exp.out16.size() &&
           std::memcmp(exp.out16.data() + i * 2, act.out16.data() + i * 2, 2) == 0) {
      ++i;
    }
    const bool bf16 = mode_ok && md.state == hk::StateFmt::kQ8Bf16;
    const uint32_t th = i >= c.n ? 0u
                        : bf16   ? in.theta.as<uint16_t>()[i]
                                 : in.theta.as<uint32_t>()[i];
    std::printf("FAIL %s\n  first mismatch: in[%" PRIu64 "]: theta=0x%08x%s\n", r16.c_str(), i,
                th, DescribeGrad(c, in, i).c_str());
  }

  // Read accounting. Errors: the values, and the state, are never read; a launch stopped by
  // the mode, the count or the table never reads the indices. Success: the main pass reads
  // each array once, the validation pass the table twice more and the indices once more.
  using namespace csd_upd_tb;
  auto expect = [&](bool cond, const std::string& what) {
    if (!cond) {
      ok = false;
      std::printf("FAIL reads: %s\n  %s\n", what.c_str(), ctx.c_str());
    }
  };
  if (r.ok && exp_err != 0) {
    expect(r.rd_cmds[kRdGrad] == 0 && r.rd_cmds[kRdTheta] == 0 && r.rd_cmds[kRdM] == 0 &&
               r.rd_cmds[kRdV] == 0 && r.rd_cmds[kRdMAbs] == 0 && r.rd_cmds[kRdVAbs] == 0,
           "state or gradient read by a launch that fails validation");
    if (exp_err == hk::kErrBadMode || exp_err == hk::kErrCount || exp_err == hk::kErrBlkTable) {
      expect(r.rd_cmds[kRdIdx] == 0, "indices read before the table was proven consistent");
    }
  }
  if (r.ok && exp_err == 0 && mode_ok && c.n > 0) {
    const uint64_t words = Words(c.n, md.state == hk::StateFmt::kQ8Bf16 ? 2 : 4);
    expect(r.rd_beats[kRdTheta] == words, "theta words read != its words");
    if (hk::IsQ8(md.state)) {
      const uint64_t aw = Words(c.n / hk::kQ8Block, 4);
      expect(r.rd_beats[kRdMAbs] == (hk::UsesM(md) ? aw : 0) &&
                 r.rd_beats[kRdVAbs] == (hk::UsesV(md) ? aw : 0) &&
                 r.wr_beats[kWrMAbs] == (hk::UsesM(md) ? aw : 0) &&
                 r.wr_beats[kWrVAbs] == (hk::UsesV(md) ? aw : 0),
             "absmax words not read and written once each");
    }
    if (md.sparse) {
      const uint64_t tw = Words(hk::NumBlocks(c.n) + 1ull, 4), iw = Words(c.nnz, 2);
      const uint64_t vw = Words(c.nnz, md.grad == DType::kFp32 ? 4 : 2);
      expect(r.rd_beats[kRdGrad] == vw, "values not read exactly once");
      expect(r.rd_beats[kRdIdx] == 2 * iw, "indices not read exactly twice");
      expect(r.rd_beats[kRdBlk] == (c.nnz == 0 ? 2 : 3) * tw, "table not read 3 (2) times");
    }
  }
  if (!ok) ++tot.failures;
  return ok;
}

// ---- Problem construction -------------------------------------------------------------------

/// Writes junk into the scalar registers the optimizer does not use (the core must substitute
/// or ignore them exactly as MakeRuleCtl does).
void JunkUnusedScalars(const hk::Mode& md, hk::Scalars& sc, Rng& rng) {
  auto junk = [&]() { return static_cast<uint32_t>(rng.Next()); };
  const bool adam = md.opt == hk::Optimizer::kAdamW || md.opt == hk::Optimizer::kAdam;
  if (!(md.opt == hk::Optimizer::kAdamW || md.opt == hk::Optimizer::kLion)) sc.c1 = junk();
  if (!adam) sc.c2 = junk();
  if (md.opt == hk::Optimizer::kAdagrad) {
    sc.beta2 = junk();
    sc.omb2 = junk();
    sc.beta1 = junk();
    sc.omb1 = junk();
  }
  if (!md.l2) sc.wd = junk();
  if (md.opt == hk::Optimizer::kSgd || md.opt == hk::Optimizer::kLion) sc.eps = junk();
  if (md.opt == hk::Optimizer::kSgd) {
    sc.beta2 = junk();
    sc.omb2 = junk();
    if (!md.momentum) sc.beta1 = junk();
  }
}

/// Random bytes in b from `byte` on.
void JunkFrom(AlignedBuffer& b, uint64_t byte, Rng& rng) {
  for (uint64_t i = byte; i < b.size(); ++i) b.data()[i] = static_cast<uint8_t>(rng.Next());
}

struct Shape {
  DType grad = DType::kFp32, out = DType::kFp32;
  bool sparse = false;
  uint32_t n = 1;
  double ratio = 0.1;
  bool specials = false, junk = false;
  hk::StateFmt state = hk::StateFmt::kFp32;
  uint64_t index = 0;  // q8 formats: the store index of element 0
};

Case MakeCase(const Variant& var, const Shape& s, uint64_t seed, const Profile* prof) {
  ProblemSpec spec;
  spec.hyper = var.cfg;
  spec.step = var.step;
  spec.grad.grad = s.grad;
  spec.grad.out = s.out;
  spec.grad.ftz = kFtz;
  spec.grad.loss_scale = s.grad == DType::kFp16 ? 1024.0 : 1.0;
  spec.grad.clip_coef = 0.75;
  spec.n = s.n;
  spec.topk = s.sparse ? s.ratio : 0.0;
  spec.seed = seed;
  spec.grad.state = s.state;
  spec.index = s.index;
  const bool q8 = hk::IsQ8(s.state);
  // q8 formats: the generator's special data (absmax values, code bytes, bf16 theta patterns);
  // InjectSpecials writes binary32 patterns and is for fp32 state only.
  if (q8 && s.specials) spec.data = csdkit::ProblemData::kSpecial;
  Case c;
  c.p = Problem::Generate(spec);
  if (s.specials && !q8) csdkit::testing::InjectSpecials(c.p, 0.05, seed);
  c.n = s.n;
  c.nnz = c.p.nnz;
  c.mode = c.p.launch.mode;
  c.sc = c.p.launch.scalars;
  c.seed = seed;
  c.prof = prof;
  hk::Mode md{};
  hk::DecodeMode(c.mode, &md);
  Rng rng{seed ^ 0x6a09e667f3bcc908ull};
  // Junk past the end of every array (state past n, gradient past n or nnz, indices past nnz,
  // table past nb + 1): lanes past n must come back exactly as read, and nothing past an
  // array's last entry may influence a result.
  auto junk_from = [&](AlignedBuffer& b, uint64_t byte) { JunkFrom(b, byte, rng); };
  const unsigned tbytes = s.state == hk::StateFmt::kQ8Bf16 ? 2 : 4;
  junk_from(c.p.buf.theta, static_cast<uint64_t>(tbytes) * c.n);
  junk_from(c.p.buf.m, (q8 ? 1ull : 4ull) * c.n);
  junk_from(c.p.buf.v, (q8 ? 1ull : 4ull) * c.n);
  // Absmax lanes past the last block (q8: written back as read); the whole buffer otherwise.
  junk_from(c.p.buf.m_absmax, q8 ? 4ull * (c.n / hk::kQ8Block) : 0);
  junk_from(c.p.buf.v_absmax, q8 ? 4ull * (c.n / hk::kQ8Block) : 0);
  const unsigned gbytes = s.grad == DType::kFp32 ? 4 : 2;
  junk_from(c.p.buf.grad, static_cast<uint64_t>(gbytes) * (s.sparse ? c.nnz : c.n));
  if (s.sparse) {
    junk_from(c.p.buf.sp_idx, 2ull * c.nnz);
    junk_from(c.p.buf.sp_blk, 4ull * (hk::NumBlocks(c.n) + 1ull));
  }
  // Canary in the copy, poison in state the optimizer does not have: neither may be touched.
  std::memset(c.p.buf.out16.data(), 0xab, c.p.buf.out16.size());
  if (!hk::UsesM(md)) std::memset(c.p.buf.m.data(), 0xcd, c.p.buf.m.size());
  if (!hk::UsesV(md)) std::memset(c.p.buf.v.data(), 0xcd, c.p.buf.v.size());
  if (!hk::UsesM(md)) std::memset(c.p.buf.m_absmax.data(), 0xcd, c.p.buf.m_absmax.size());
  if (!hk::UsesV(md)) std::memset(c.p.buf.v_absmax.data(), 0xcd, c.p.buf.v_absmax.size());
  if (s.junk) JunkUnusedScalars(md, c.sc, rng);
  char b[320];
  char st[96] = "";
  if (q8) {
    std::snprintf(st, sizeof st, " state=%s index=0x%" PRIx64 " key=%08x%08x step=%08x%08x",
                  s.state == hk::StateFmt::kQ8 ? "q8" : "q8-bf16", s.index, c.p.buf.seed_hi,
                  c.p.buf.seed_lo, c.p.buf.step_hi, c.p.buf.step_lo);
  }
  std::snprintf(b, sizeof b, "%s grad=%s out=%s %s%s%s%s%s", var.name, csdkit::DTypeName(s.grad),
                csdkit::OutDTypeName(s.out), s.sparse ? "sparse ratio=" : "dense",
                s.sparse ? std::to_string(s.ratio).c_str() : "", s.specials ? " specials" : "",
                s.junk ? " junk-scalars" : "", st);
  c.config = b;
  return c;
}

const Variant* FindVariant(const std::string& name) {
  static const std::vector<Variant> vars = csdkit::testing::AllVariants();
  for (const Variant& v : vars) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

// ---- Suites -----------------------------------------------------------------------------------

bool SuiteMatrix(Core& core, const Variant& var, uint64_t seed, Totals& tot) {
  const uint32_t sizes[] = {1, 15, 17, 33, 1000, 4097, 70001};
  const double ratios[] = {0.1, 1.0, 0.01, 0.5};
  const DType dts[] = {DType::kFp32, DType::kFp16, DType::kBf16};
  const auto& profs = Profiles();
  bool ok = true;
  unsigned cfg = 0;
  for (DType g : dts) {
    for (DType o : dts) {
      for (bool sparse : {false, true}) {
        for (unsigned si = 0; si < std::size(sizes); ++si, ++cfg) {
          Shape s;
          s.grad = g;
          s.out = o;
          s.sparse = sparse;
          s.n = sizes[si];
          s.ratio = ratios[(si + cfg) % std::size(ratios)];
          s.specials = (si + cfg) % 2 == 1;
          s.junk = (si + cfg) % 3 == 0;
          // The large size runs with light gaps only (time); the others rotate all profiles.
          const Profile* prof = s.n > 65536 ? &profs[cfg % 2] : &profs[(si + cfg) % profs.size()];
          const Case c = MakeCase(var, s, Mix(seed, cfg * 131 + si), prof);
          ok = RunCase(core, c, tot) && ok;
        }
      }
    }
  }
  // A launch computed for the other policy is refused (bad mode, nothing written).
  {
    Shape s;
    s.n = 33;
    Case c = MakeCase(var, s, Mix(seed, 0xf72), &profs[1]);
    c.mode ^= hk::kModeFtz;
    c.config += " (ftz bit of the other policy)";
    ok = RunCase(core, c, tot) && ok;
  }
  return ok;
}

/// The q8 formats: every variant x grad dtype x copy x dense/sparse x format, `sizes` launches
/// each; sizes are whole blocks, from one block to several absmax words of this core (Lanes
/// blocks per word, the last one partial); with more than one size each, also 257 blocks
/// (across a sparse block), which otherwise two launches (dense, sparse) cover. Half the
/// launches have special data; the random key (seed, step, index) takes 64-bit values.
bool SuiteQ8(Core& core, uint64_t seed, unsigned sizes, const std::string& only, Totals& tot) {
  const auto& vars = csdkit::testing::AllVariants();
  const auto& profs = Profiles();
  const uint32_t blocks[] = {1, 3, kLanes + 1, 2 * kLanes + 5, 4 * kLanes - 1, 16, 257};
  const unsigned nblocks = sizes > 1 ? std::size(blocks) : std::size(blocks) - 1;
  const double ratios[] = {0.1, 1.0, 0.01, 0.5};
  const DType dts[] = {DType::kFp32, DType::kFp16, DType::kBf16};
  Rng rng{seed ^ 0x510e527fade682d1ull};
  bool ok = true;
  unsigned cfg = 0;
  for (const Variant& var : vars) {
    // --variant A,B,...: those variants only (the configuration numbering stays the same).
    if (!only.empty() && ("," + only + ",").find("," + std::string(var.name) + ",") ==
                             std::string::npos) {
      cfg += 2 * 15 * sizes;
      continue;
    }
    for (hk::StateFmt st : {hk::StateFmt::kQ8, hk::StateFmt::kQ8Bf16}) {
      for (DType g : dts) {
        for (DType o : dts) {
          if (st == hk::StateFmt::kQ8Bf16 && o == DType::kFp16) continue;  // refused, below
          for (bool sparse : {false, true}) {
            for (unsigned k = 0; k < sizes; ++k, ++cfg) {
              Shape s;
              s.state = st;
              s.grad = g;
              s.out = o;
              s.sparse = sparse;
              const uint32_t nb = blocks[(cfg * 5 + k) % nblocks];
              s.n = nb * hk::kQ8Block;
              s.ratio = ratios[(cfg + k) % std::size(ratios)];
              s.specials = (cfg + k) % 2 == 1;
              s.junk = (cfg + k) % 3 == 0;
              s.index = (rng.Next() >> (cfg % 2 == 0 ? 0 : 32)) & ~0xffull;
              const Profile* prof = &profs[(cfg + k) % profs.size()];
              Case c = MakeCase(var, s, Mix(seed, 0x98 + cfg * 131 + k), prof);
              // Full 64-bit seed and step words (the problem's key has a small step).
              const uint64_t key = rng.Next(), step = rng.Next() >> (cfg % 3 == 0 ? 0 : 40);
              c.p.buf.SetRandomKey(key, step, s.index);
              char b[96];
              std::snprintf(b, sizeof b, " (key=0x%016" PRIx64 " step=0x%" PRIx64 ")", key, step);
              c.config += b;
              ok = RunCase(core, c, tot) && ok;
            }
          }
        }
      }
    }
  }
  const Variant& adamw = *FindVariant("adamw");
  // Across a sparse block (257 blocks): AdamW dense q8-bf16 and sparse q8.
  if (sizes <= 1) {
    for (bool sparse : {false, true}) {
      Shape s;
      s.state = sparse ? hk::StateFmt::kQ8 : hk::StateFmt::kQ8Bf16;
      s.grad = sparse ? DType::kFp16 : DType::kBf16;
      s.out = DType::kBf16;
      s.sparse = sparse;
      s.ratio = 0.02;
      s.n = 257 * hk::kQ8Block;
      s.specials = sparse;
      s.index = 0x123400ull << 8;
      Case c = MakeCase(adamw, s, Mix(seed, 0x257 + sparse), &profs[sparse ? 1 : 0]);
      c.p.buf.SetRandomKey(rng.Next(), rng.Next(), s.index);
      ok = RunCase(core, c, tot) && ok;
    }
  }
  // The non-zero rule (a value non-zero as read never takes index 0): AdamW with m' = g and
  // v' = g * g over blocks built for it (test_util.h MakeNonZeroRuleProblem: both signs of m,
  // and v, at index 0 before the rule, zeros beside them, tiny blocks), once per format. The
  // counts are taken from the launch's own data, so a generator that stops reaching a case
  // fails here rather than passing quietly.
  if (only.empty() || ("," + only + ",").find(",adamw,") != std::string::npos) {
    unsigned i = 0;
    for (hk::StateFmt st : {hk::StateFmt::kQ8, hk::StateFmt::kQ8Bf16}) {
      Shape s;
      s.state = st;
      s.out = st == hk::StateFmt::kQ8 ? DType::kFp16 : DType::kBf16;
      s.n = 16 * hk::kQ8Block;
      s.index = static_cast<uint64_t>(0x2e4 + i) << 8;
      Case c = MakeCase(adamw, s, Mix(seed, 0x2e40 + i), &profs[i == 0 ? 2 : 5]);
      csdkit::testing::MakeNonZeroRuleProblem(c.p, c.seed);
      c.sc = c.p.launch.scalars;
      const csdkit::testing::NonZeroRuleCoverage cov = csdkit::testing::CountNonZeroRule(c.p);
      char b[200];
      std::snprintf(b, sizeof b,
                    " non-zero rule (index 0: m+ %" PRIu64 " m- %" PRIu64 " v %" PRIu64
                    "; zeros m %" PRIu64 " v %" PRIu64 "; tiny blocks m %" PRIu64 " v %" PRIu64 ")",
                    cov.m_pos, cov.m_neg, cov.v, cov.m_zero, cov.v_zero, cov.m_tiny, cov.v_tiny);
      c.config += b;
      const std::string missing = cov.Missing(64);
      std::printf("%s%s\n", st == hk::StateFmt::kQ8 ? "q8" : "q8-bf16", b);
      if (!missing.empty()) {
        std::printf("FAIL coverage: %s\n  seed=0x%016" PRIx64 " config={%s}\n", missing.c_str(),
                    c.seed, c.config.c_str());
        ok = false;
      }
      ok = RunCase(core, c, tot) && ok;
      ++i;
    }
  }
  // Refusals: n or index_lo not whole blocks (0x40), an fp16 copy of bf16 weights and the
  // unknown format 3 (bad mode); nothing but the status is written.
  struct Refuse {
    const char* what;
    hk::StateFmt st;
    DType out;
    uint32_t n_delta;
    uint64_t index;
    uint32_t mode_or;
  };
  const Refuse refusals[] = {
      {"q8, n not whole blocks", hk::StateFmt::kQ8, DType::kFp32, 100, 0, 0},
      {"q8-bf16, n one short", hk::StateFmt::kQ8Bf16, DType::kBf16, 0xffffffffu, 0, 0},
      {"q8, index_lo not whole blocks", hk::StateFmt::kQ8, DType::kFp16, 0, 0x1234580, 0},
      {"q8-bf16, index_lo + 1", hk::StateFmt::kQ8Bf16, DType::kFp32, 0, 0x700000101ull, 0},
      {"q8-bf16 with an fp16 copy", hk::StateFmt::kQ8Bf16, DType::kFp16, 0, 0, 0},
      {"state format 3", hk::StateFmt::kQ8, DType::kFp32, 0, 0, 2u << hk::kModeStateShift},
      {"q8, n = 0", hk::StateFmt::kQ8, DType::kBf16, 0, 0, 0},
  };
  unsigned i = 0;
  for (const Refuse& rf : refusals) {
    Shape s;
    s.state = rf.st;
    s.out = rf.out == DType::kFp16 && rf.st == hk::StateFmt::kQ8Bf16 ? DType::kFp32 : rf.out;
    s.n = 3 * hk::kQ8Block;
    s.index = rf.index & ~0xffull;
    Case c = MakeCase(adamw, s, Mix(seed, 0x4ef0 + i), &profs[i % profs.size()]);
    if (rf.out == DType::kFp16 && rf.st == hk::StateFmt::kQ8Bf16) {
      c.mode |= 1u << hk::kModeOutShift;  // the fp16 copy the generator would not make
    }
    c.n += rf.n_delta;  // (the buffers hold 3 blocks; the core must not read a byte)
    c.mode |= rf.mode_or;
    if (std::string(rf.what) == "q8, n = 0") c.n = 0;
    c.p.buf.SetRandomKey(0x1234, 7, rf.index);
    c.config += std::string(" refusal: ") + rf.what;
    ok = RunCase(core, c, tot) && ok;
    ++i;
  }
  return ok;
}

struct Corruption {
  const char* name;
  std::function<void(Case&)> apply;
};

bool SuiteMalformed(Core& core, uint64_t seed, Totals& tot) {
  const auto& profs = Profiles();
  const Variant& adamw = *FindVariant("adamw");
  bool ok = true;
  // The corruptions of tests/sparse_test.cpp, on a four-block subgroup (the last partial).
  Shape s;
  s.grad = DType::kFp16;
  s.out = DType::kFp16;
  s.sparse = true;
  s.n = 3 * 65536 + 1000;
  s.ratio = 0.01;
  auto idx = [](Case& c) { return c.p.buf.sp_idx.as<uint16_t>(); };
  auto blk = [](Case& c) { return c.p.buf.sp_blk.as<uint32_t>(); };
  const std::vector<Corruption> cases = {
      {"swap two indices", [&](Case& c) { std::swap(idx(c)[10], idx(c)[11]); }},
      {"duplicate index", [&](Case& c) { idx(c)[21] = idx(c)[20]; }},
      {"index past the partial block", [&](Case& c) { idx(c)[c.nnz - 1] = 1000; }},
      {"index 0xffff in the partial block", [&](Case& c) { idx(c)[c.nnz - 1] = 0xffff; }},
      {"table total != nnz", [&](Case& c) { c.nnz -= 1; }},
      {"nnz > n", [&](Case& c) { c.nnz = c.n + 1; }},
      {"table not starting at 0", [&](Case& c) { blk(c)[0] = 1; }},
      {"table decreasing", [&](Case& c) { blk(c)[2] = blk(c)[1] - 1; }},
      {"table entry past nnz", [&](Case& c) { blk(c)[1] = c.nnz + 5; }},
      {"last index of a block wraps", [&](Case& c) { idx(c)[blk(c)[1] - 1] = 0; }},
      {"first index of a block below the previous block's last (valid)",
       [&](Case& c) { idx(c)[blk(c)[1]] = 0; }},
  };
  for (unsigned i = 0; i < cases.size(); ++i) {
    for (unsigned pi = 0; pi < 3; ++pi) {
      Case c = MakeCase(adamw, s, Mix(seed, 0xbad0 + i), &profs[(i + pi * 2) % profs.size()]);
      cases[i].apply(c);
      c.config += std::string(" malformed: ") + cases[i].name;
      ok = RunCase(core, c, tot) && ok;
    }
  }
  // Valid streams with empty blocks (first, middle, last) and offsets at both ends of blocks.
  {
    Shape e;
    e.sparse = true;
    e.grad = DType::kBf16;
    e.n = 4 * 65536 + 5;
    const std::vector<std::vector<uint32_t>> layouts = {
        {0, 1, 65535, 2 * 65536 + 5, 2 * 65536 + 6, 2 * 65536 + 7, 4 * 65536, 4 * 65536 + 4},
        {65536, 65537, 3 * 65536 + 65535},
        {4 * 65536 + 4},
        {0}};
    unsigned li = 0;
    for (const auto& ids : layouts) {
      Case c = MakeCase(adamw, e, Mix(seed, 0xeb + li), &profs[li % profs.size()]);
      std::vector<uint16_t> vals(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) vals[k] = static_cast<uint16_t>(0x3f80 + 3 * k);
      csdkit::SparseGrad sg =
          csdkit::EncodeSparse(e.n, DType::kBf16, ids.data(), vals.data(), ids.size());
      c.p.buf.grad = std::move(sg.val);
      c.p.buf.sp_idx = std::move(sg.idx);
      c.p.buf.sp_blk = std::move(sg.blk);
      c.nnz = sg.nnz;
      Rng jr{c.seed};
      JunkFrom(c.p.buf.grad, 2ull * c.nnz, jr);
      JunkFrom(c.p.buf.sp_idx, 2ull * c.nnz, jr);
      JunkFrom(c.p.buf.sp_blk, 4ull * (hk::NumBlocks(c.n) + 1ull), jr);
      c.config += " empty blocks, layout " + std::to_string(li++);
      ok = RunCase(core, c, tot) && ok;
    }
  }
  // A full last block (n a multiple of 2^16: offset 0xffff is in range), every element
  // present, and the same with the last offset pushed out of range by one block.
  for (unsigned full = 0; full < 2; ++full) {
    Shape e;
    e.sparse = true;
    e.n = 2 * 65536;
    e.ratio = 1.0;
    Case c = MakeCase(adamw, e, Mix(seed, 0xf011 + full), &profs[full]);
    c.config += " full last block, density 1";
    if (full == 1) {
      c.n = 2 * 65536 - 1;  // the last offset, 0xffff, is now past the partial block
      c.config += ", n one short";
    }
    ok = RunCase(core, c, tot) && ok;
  }
  // Random corruptions of small multi-block streams: the model says what the error is.
  Rng rng{seed ^ 0x3c6ef372fe94f82bull};
  for (unsigned t = 0; t < 40; ++t) {
    Shape r;
    r.grad = static_cast<DType>(rng.Below(3));
    r.out = static_cast<DType>(rng.Below(3));
    r.sparse = true;
    r.n = static_cast<uint32_t>(1 + rng.Below(3 * 65536 + 100));
    r.ratio = (t % 4 == 0) ? 1.0 : 0.0005 + 0.01 * static_cast<double>(rng.Below(10));
    Case c = MakeCase(adamw, r, Mix(seed, 0x7a4d + t), &profs[t % profs.size()]);
    uint16_t* ix = idx(c);
    uint32_t* bt = blk(c);
    const uint32_t nb = hk::NumBlocks(c.n);
    const unsigned kind = static_cast<unsigned>(rng.Below(8));
    const uint32_t k = c.nnz == 0 ? 0 : static_cast<uint32_t>(rng.Below(c.nnz));
    std::string what;
    switch (kind) {
      case 0:
        ix[k] = static_cast<uint16_t>(rng.Next());
        what = "random offset";
        break;
      case 1:
        if (k > 0) ix[k] = ix[k - 1];
        what = "duplicate";
        break;
      case 2:
        if (k > 0) std::swap(ix[k], ix[k - 1]);
        what = "swap";
        break;
      case 3:
        bt[1 + rng.Below(nb)] += 1;
        what = "table entry + 1";
        break;
      case 4:
        bt[1 + rng.Below(nb)] -= 1;
        what = "table entry - 1";
        break;
      case 5:
        c.nnz += static_cast<uint32_t>(rng.Below(3)) - 1;
        what = "nnz +-1";
        break;
      case 6:
        ix[c.nnz - 1] = static_cast<uint16_t>(0xffff - rng.Below(4));
        what = "last offset high";
        break;
      default:
        what = "none (valid)";
        break;
    }
    c.config += " random corruption: " + what;
    ok = RunCase(core, c, tot) && ok;
  }
  // Bad modes (tests/kernel_test.cpp), and a dense launch claiming sparse entries.
  {
    Shape d;
    d.n = 777;
    const uint32_t ftz = kFtz ? hk::kModeFtz : 0u;
    const uint32_t bad_modes[] = {
        7u | ftz,
        (3u << hk::kModeGradShift) | ftz,
        (3u << hk::kModeOutShift) | ftz,
        (1u << 20) | ftz,
        hk::kModeL2 | ftz,
        hk::kModeMomentum | ftz,
        static_cast<uint32_t>(hk::Optimizer::kSgd) | hk::kModeNesterov | ftz,
        static_cast<uint32_t>(hk::Optimizer::kAdagrad) | hk::kModeFirst | ftz,
        hk::kModeSparse | (5u) | ftz};
    unsigned i = 0;
    for (uint32_t m : bad_modes) {
      Case c = MakeCase(adamw, d, Mix(seed, 0xb0de + i), &profs[i % profs.size()]);
      c.mode = m;
      c.config += " bad mode " + Hex(m);
      ok = RunCase(core, c, tot) && ok;
      ++i;
    }
    Case c = MakeCase(adamw, d, Mix(seed, 0xc0c0), &profs[2]);
    c.nnz = 5;
    c.config += " dense with nnz = 5";
    ok = RunCase(core, c, tot) && ok;
  }
  // Empty launches (n = 0), dense and sparse; a sparse launch without entries.
  for (bool sparse : {false, true}) {
    Shape e;
    e.n = 64;
    e.sparse = sparse;
    Case c = MakeCase(adamw, e, Mix(seed, 0xe0 + sparse), &profs[sparse ? 3 : 1]);
    c.n = 0;
    c.nnz = 0;
    c.config += " n = 0";
    ok = RunCase(core, c, tot) && ok;
  }
  {
    Shape e;
    e.n = 65536 * 2 + 3;
    e.sparse = true;
    Case c = MakeCase(adamw, e, Mix(seed, 0xe5), &profs[1]);
    c.nnz = 0;
    std::memset(c.p.buf.sp_blk.data(), 0, c.p.buf.sp_blk.size());
    c.config += " nnz = 0";
    ok = RunCase(core, c, tot) && ok;
  }
  return ok;
}

bool SuitePerf(Core& core, uint64_t seed, Totals& tot) {
  const auto& vars = csdkit::testing::AllVariants();
  struct P {
    const char* name;
    unsigned var;
    Shape s;
  };
  Shape dense;
  dense.n = 32768u * kLanes;  // 32768 words
  Shape sp1 = dense, sp100 = dense;
  sp1.sparse = sp100.sparse = true;
  sp1.grad = DType::kFp16;
  sp1.ratio = 0.01;
  sp100.ratio = 1.0;
  Shape copy = dense;
  copy.grad = DType::kBf16;
  copy.out = DType::kFp16;
  Shape q8 = dense, q8bf = dense;
  q8.state = hk::StateFmt::kQ8;
  q8bf.state = hk::StateFmt::kQ8Bf16;
  q8bf.grad = DType::kBf16;
  q8bf.out = DType::kBf16;
  const P runs[] = {{"adamw dense fp32", 0, dense},
                    {"adamw dense bf16 + fp16 copy", 0, copy},
                    {"adamw sparse fp16 1%", 0, sp1},
                    {"adamw sparse fp32 100%", 0, sp100},
                    {"sgd_plain dense fp32", 7, dense},
                    {"adamw dense fp32, state q8", 0, q8},
                    {"adamw dense bf16 + bf16 copy, state q8-bf16", 0, q8bf}};
  bool ok = true;
  for (const P& pr : runs) {
    const Case c = MakeCase(vars[pr.var], pr.s, Mix(seed, pr.var), &Profiles()[0]);
    RunResult r;
    ok = RunCase(core, c, tot, &r) && ok;
    const uint64_t words = Words(c.n, 4);
    uint64_t valid_words = 0;  // words read by the validation pass
    if (pr.s.sparse) {
      valid_words = 2 * Words(hk::NumBlocks(c.n) + 1ull, 4) + Words(c.nnz, 2);
    }
    std::printf(
        "{\"model\": \"%s\", \"lanes\": %u, \"run\": \"%s\", \"n\": %u, \"nnz\": %u, "
        "\"words\": %" PRIu64 ", \"cycles\": %" PRIu64
        ", \"cycles_per_word\": %.4f, "
        "\"validation_words\": %" PRIu64 ", \"first_theta_in_to_out_cycles\": %" PRId64 "}\n",
        kModelName, kLanes, pr.name, c.n, c.nnz, words, r.cycles,
        static_cast<double>(r.cycles) / static_cast<double>(words), valid_words,
        r.first_wr_theta - r.first_rd_theta);
  }
  return ok;
}

bool SuiteRandom(Core& core, uint64_t seed, uint64_t iters, Totals& tot) {
  const auto& vars = csdkit::testing::AllVariants();
  const auto& profs = Profiles();
  Rng rng{seed};
  bool ok = true;
  for (uint64_t it = 0; it < iters; ++it) {
    Shape s;
    s.grad = static_cast<DType>(rng.Below(3));
    s.out = static_cast<DType>(rng.Below(3));
    s.sparse = rng.Chance(0.5);
    const unsigned sz = static_cast<unsigned>(rng.Below(4));
    s.n = static_cast<uint32_t>(sz == 0   ? 1 + rng.Below(64)
                                : sz == 1 ? 1 + rng.Below(5000)
                                : sz == 2 ? 1 + rng.Below(70000)
                                          : 60000 + rng.Below(150000));
    const double ratios[] = {1.0, 0.5, 0.1, 0.01, 0.001};
    s.ratio = ratios[rng.Below(5)];
    s.specials = rng.Chance(0.5);
    s.junk = rng.Chance(0.5);
    const Variant& v = vars[rng.Below(vars.size())];
    Case c = MakeCase(v, s, rng.Next(), &profs[rng.Below(profs.size())]);
    if (s.sparse && c.nnz > 1 && rng.Chance(0.15)) {
      const uint32_t k = 1 + static_cast<uint32_t>(rng.Below(c.nnz - 1));
      uint16_t* ix = c.p.buf.sp_idx.as<uint16_t>();
      if (rng.Chance(0.5))
        ix[k] = ix[k - 1];
      else
        ix[k] = static_cast<uint16_t>(rng.Next());
      c.config += " corrupted index " + std::to_string(k);
    }
    ok = RunCase(core, c, tot) && ok;
    if (!ok && tot.failures >= 5) break;
  }
  return ok;
}

void Usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s --suite matrix|malformed|q8|perf|random [--variant NAME] [--iters N]\n"
               "       [--seed S] [--fst FILE]\n",
               prog);
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite, variant, fst;
  uint64_t seed = kDefaultSeed, iters = 0;  // 0: the suite's default
  if (const char* e = std::getenv("CSDKIT_TEST_SEED"); e != nullptr && *e != '\0') {
    seed = std::strtoull(e, nullptr, 0);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      Usage(argv[0]);
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--suite")
      suite = v;
    else if (a == "--variant")
      variant = v;
    else if (a == "--seed")
      seed = std::strtoull(v, nullptr, 0);
    else if (a == "--iters")
      iters = std::strtoull(v, nullptr, 0);
    else if (a == "--fst")
      fst = v;
    else {
      Usage(argv[0]);
      return 2;
    }
  }
  csdkit::CheckFpEnvironment();
  Core core(fst.empty() ? nullptr : fst.c_str());
  Totals tot;
  const auto t0 = std::chrono::steady_clock::now();
  bool ok;
  if (suite == "matrix") {
    const Variant* v = FindVariant(variant);
    if (v == nullptr) {
      std::fprintf(stderr,
                   "%s: --variant: expected one of tests/test_util.h AllVariants(), "
                   "found '%s'\n",
                   argv[0], variant.c_str());
      return 2;
    }
    ok = SuiteMatrix(core, *v, seed, tot);
  } else if (suite == "malformed") {
    ok = SuiteMalformed(core, seed, tot);
  } else if (suite == "q8") {
    ok = SuiteQ8(core, seed, static_cast<unsigned>(iters == 0 ? 1 : iters), variant, tot);
  } else if (suite == "perf") {
    ok = SuitePerf(core, seed, tot);
  } else if (suite == "random") {
    ok = SuiteRandom(core, seed, iters == 0 ? 200 : iters, tot);
  } else {
    Usage(argv[0]);
    return 2;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s %s suite=%s%s%s seed=0x%" PRIx64 ": %" PRIu64 " launches (%" PRIu64
              " policy-sensitive), %" PRIu64 " failed, %" PRIu64 " words, %" PRIu64
              " cycles, %.1f s (%.0f cycles/s)\n",
              ok ? "PASS" : "FAIL", kModelName, suite.c_str(),
              variant.empty() ? "" : " variant=", variant.c_str(), seed, tot.launches,
              tot.policy_sensitive, tot.failures, tot.words, tot.cycles, secs,
              static_cast<double>(tot.cycles) / secs);
  return ok ? 0 : 1;
}
