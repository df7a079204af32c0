// Bench of csd_fp_cast: its four Verilated format pairs (csd_fp_cast_tb, -G per pair), one
// operation per cycle (operand, rounding mode, random bits), each result checked against an
// oracle and the csdkit C++ model against the same oracle. One configuration per run:
//
//   --cfg f16_to_f32     all 2^16 operands vs VCVTPH2PS (F16C); csdkit F16ToF32 cross-checked
//   --cfg bf16_to_f32    all 2^16 operands vs the bits shifted left by 16; csdkit Bf16ToF32
//                        (both: mode and random bits random on every operation, since a
//                        widening cast ignores them)
//   --cfg f32_to_f16     the hand-picked values + 8e6 biased random operands (ties in the half
//                        normal and subnormal ranges, the 65520 threshold, NaN payloads) vs
//                        VCVTPS2PH imm 0; csdkit F32ToF16. Nearest even; random bits random.
//   --cfg f32_to_bf16    the hand-picked values + 8e6 biased random operands (ties on the 16
//                        dropped bits, subnormal ties, the largest finite values, NaN payloads)
//                        vs the nearest-neighbour reference in double (tb_oracle.h); csdkit
//                        F32ToBf16. Nearest even; random bits random (ignored).
//   --cfg f32_to_bf16_sr stochastic rounding (docs/state-formats.md): every hand-picked value
//                        and bf16-exact value, both signs, with R = 0, 0xFFFF, 0x8000, the
//                        exact carry edge 0x10000 - low16, one below it and a random R; then
//                        6e6 random (operand, R) pairs with the mode drawn per operation (3 in 4
//                        stochastic), so both modes share the pipeline and must align at one
//                        Latency. Reference: RoundBf16Stochastic (hls/include/csdkit/hls/
//                        state_q8.h); cross-check: the rule restated in value space here
//                        (the operand's position in the gap between its two bf16 neighbours).
//                        Nearest-even operations: as f32_to_bf16.
//   --exhaustive --shard K [--shards M] with f32_to_f16 or f32_to_bf16: one shard of all 2^32
//                        operands, nearest even.
//
// Without --cfg every quick configuration runs in turn. Operand streams are the same as the
// former per-pair benches' for the same seed (modes and random bits come from a second
// generator).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "Vcsd_fp_cast_bf16_to_f32.h"
#include "Vcsd_fp_cast_bf16_to_f32_csd_fp_pkg.h"
#include "Vcsd_fp_cast_f16_to_f32.h"
#include "Vcsd_fp_cast_f16_to_f32_csd_fp_pkg.h"
#include "Vcsd_fp_cast_f32_to_bf16.h"
#include "Vcsd_fp_cast_f32_to_bf16_csd_fp_pkg.h"
#include "Vcsd_fp_cast_f32_to_f16.h"
#include "Vcsd_fp_cast_f32_to_f16_csd_fp_pkg.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/state_q8.h"
#include "tb_oracle.h"
#include "tb_unary.h"

namespace {

using namespace csd_tb;

constexpr uint64_t kDefaultRandomOps = 8000000;
constexpr uint64_t kDefaultStochasticOps = 6000000;

/// csd_fp_pkg::rnd_e.
constexpr uint32_t kRndNearestEven = 0;
constexpr uint32_t kRndStochastic = 1;

// An operation of the cast benches is an Op with a = operand, b = the 16 random bits R,
// sub = the rounding mode (rnd_e), so the shared PipeDriver drives garbage on all three in
// bubbles and during reset.
uint32_t Mode(const Op& op) { return op.sub & 1u; }
uint32_t Rnd(const Op& op) { return op.b & 0xffffu; }

/// How one configuration is exercised.
struct CastSpec {
  std::string name;      // configuration, for reports
  unsigned latency = 0;  // the model's Latency
  int in_digits = 8;     // hex digits of operand and result
  int out_digits = 8;
  std::vector<Op> directed;  // run first (quick mode): a, b = R, sub = mode
  uint64_t random_ops = 0;   // then this many from the configuration's generator
  std::string reference;     // what op.exp is, for the header line
  std::string cross;         // what is checked against it besides the RTL
};

/// Runs one model. `fill(&op)` draws a random operation (a, b, sub), `ref(op)` gives the expected
/// result, `cross(op)` an independent computation of the same, `cov.Add(op)` counts reached
/// cases (quick mode only). --exhaustive sweeps operands [K*2^32/M, (K+1)*2^32/M) at nearest
/// even with garbage random bits.
template <class Model, class Fill, class Ref, class Cross, class Cov>
bool RunCast(const CastSpec& spec, const Options& o, Fill fill, Ref ref, Cross cross, Cov& cov) {
  std::printf("%s: latency=%u reference=%s cross-check=%s\n", spec.name.c_str(), spec.latency,
              spec.reference.c_str(), spec.cross.c_str());
  PipeDriver<Model> drv(spec.name, spec.latency, o.seed);
  const uint32_t in_mask = spec.in_digits == 8 ? 0xffffffffu : 0xffffu;
  auto drive = [in_mask](Model& m, const Op& op) {
    m.a_i = op.a & in_mask;
    m.rnd_mode_i = Mode(op);
    m.rnd_bits_i = Rnd(op);
  };
  const int in_digits = spec.in_digits;
  auto fmt = [in_digits](const Op& op) {
    return Hex("a=0x%0*x mode=%u r=0x%04x", in_digits, op.a, Mode(op), Rnd(op));
  };
  drv.Reset(drive);

  Checker rtl(spec.name + " rtl-vs-reference", o.seed, spec.out_digits);
  Checker second(spec.name + " cross-vs-reference", o.seed, spec.out_digits);
  uint64_t n;
  uint64_t base = 0;
  if (o.exhaustive) {
    n = (uint64_t{1} << 32) / o.shards;
    base = n * o.shard;
    std::printf("%s: exhaustive shard %u of %u: operands 0x%08" PRIx64 "..0x%08" PRIx64 "\n",
                spec.name.c_str(), o.shard, o.shards, base, base + n - 1);
  } else {
    n = spec.directed.size() + spec.random_ops;
  }
  auto gen = [&](uint64_t i, Op* op) {
    if (o.exhaustive) {
      op->a = static_cast<uint32_t>(base + i);
      op->b = static_cast<uint32_t>((base + i) * 0x9e3779b97f4a7c15ull >> 48);
      op->sub = kRndNearestEven;
    } else if (i < spec.directed.size()) {
      op->a = spec.directed[i].a;
      op->b = spec.directed[i].b;
      op->sub = spec.directed[i].sub;
    } else {
      fill(op);
    }
    op->a &= in_mask;
    op->exp = ref(*op);
    if (!o.exhaustive) cov.Add(*op);
    TB_CHECK_EQ_HEX(second, i, cross(*op), op->exp, "a=0x%0*x mode=%u r=0x%04x", in_digits, op->a,
                    Mode(*op), Rnd(*op));
  };
  const RunStats s = drv.Run(n, gen, drive, fmt, rtl);
  drv.PrintSpeed(o.exhaustive ? "exhaustive-shard" : "directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_second = second.Finish();
  const bool ok_cov = o.exhaustive || cov.Report(spec.name);
  return ok_rtl && ok_second && ok_cov;
}

/// Directed operations: each operand at nearest even, with random bits from `rng`.
std::vector<Op> Nearest(const std::vector<uint32_t>& operands, std::mt19937_64& rng) {
  std::vector<Op> v(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    v[i].a = operands[i];
    v[i].b = static_cast<uint32_t>(rng() & 0xffffu);
    v[i].sub = kRndNearestEven;
  }
  return v;
}

// ---- Widening: all 2^16 operands, mode and random bits ignored ----------------------------------

/// Both modes must have been driven (the widening casts ignore them).
struct ModeCoverage {
  uint64_t modes[2] = {0, 0};
  void Add(const Op& op) { ++modes[Mode(op)]; }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: nearest_even=%" PRIu64 " stochastic=%" PRIu64 "\n", name.c_str(),
                modes[0], modes[1]);
    return modes[0] > 0 && modes[1] > 0;
  }
};

template <class Model>
bool RunWiden(const Options& o, const char* name, unsigned latency, bool bf16) {
  CastSpec spec;
  spec.name = name;
  spec.latency = latency;
  spec.in_digits = 4;
  spec.reference = bf16 ? "bits<<16" : "F16C VCVTPH2PS";
  spec.cross = bf16 ? "csdkit Bf16ToF32" : "csdkit F16ToF32";
  std::mt19937_64 rng(o.seed ^ 0xca57ull);
  for (uint32_t a : All16()) {
    Op op;
    op.a = a;
    op.b = static_cast<uint32_t>(rng() & 0xffffu);
    op.sub = static_cast<uint32_t>(rng() & 1u);
    spec.directed.push_back(op);
  }
  ModeCoverage cov;
  auto ref = [bf16](const Op& op) {
    const uint16_t h = static_cast<uint16_t>(op.a);
    return bf16 ? RefBf16ToF32(h) : RefF16ToF32(h);
  };
  auto cross = [bf16](const Op& op) {
    const uint16_t h = static_cast<uint16_t>(op.a);
    return bf16 ? csdkit::hls::Bf16ToF32(h) : csdkit::hls::F16ToF32(h);
  };
  return RunCast<Model>(
      spec, o, [](Op*) {}, ref, cross, cov);
}

// ---- fp32 -> fp16, nearest even -----------------------------------------------------------------

/// Cases the random stimulus must reach.
struct F16Coverage {
  uint64_t tie = 0, sub_tie = 0, sub_half = 0, overflow = 0, nan = 0;
  void Add(const Op& op) {
    const float fa = AsF(op.a);
    if (std::isnan(fa)) {
      ++nan;
      return;
    }
    const uint16_t h = static_cast<uint16_t>(op.exp);
    const uint16_t mag = h & 0x7fffu;
    if (mag == 0x7c00u) {
      if (std::isfinite(fa)) ++overflow;
      return;
    }
    if (mag != 0u && mag < 0x0400u) ++sub_half;
    // Halfway between the result and one of its neighbours (magnitudes, exact in double)?
    const double x = std::fabs(static_cast<double>(fa));
    const double v = _cvtsh_ss(mag);
    auto half = [](uint32_t m) { return static_cast<double>(_cvtsh_ss(static_cast<uint16_t>(m))); };
    const double up = (v + half(mag + 1u)) / 2;
    const double down = mag == 0u ? -1.0 : (v + half(mag - 1u)) / 2;
    if (x == up || x == down) {
      ++tie;
      if (mag <= 0x0400u) ++sub_tie;
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: tie=%" PRIu64 " sub_tie=%" PRIu64 " sub_half=%" PRIu64
                " overflow=%" PRIu64 " nan=%" PRIu64 "\n",
                name.c_str(), tie, sub_tie, sub_half, overflow, nan);
    return tie > 0 && sub_tie > 0 && sub_half > 0 && overflow > 0 && nan > 0;
  }
};

bool RunF32ToF16(const Options& o) {
  CastSpec spec;
  spec.name = "csd_fp_cast/f32_to_f16";
  spec.latency = Vcsd_fp_cast_f32_to_f16_csd_fp_pkg::CVT_LATENCY;
  spec.out_digits = 4;
  spec.reference = "F16C VCVTPS2PH imm 0";
  spec.cross = "csdkit F32ToF16";
  std::mt19937_64 rng(o.seed ^ 0xca57ull);
  spec.directed = Nearest(SpecialOperands(), rng);
  spec.random_ops = o.n != 0 ? o.n : kDefaultRandomOps;
  Gen g(o.seed);
  F16Coverage cov;
  return RunCast<Vcsd_fp_cast_f32_to_f16>(
      spec, o,
      [&](Op* op) {
        op->a = g.F16Operand();
        op->b = static_cast<uint32_t>(rng() & 0xffffu);
        op->sub = kRndNearestEven;  // fp32 -> fp16 has only nearest even
      },
      [](const Op& op) { return RefF32ToF16(op.a); },
      [](const Op& op) { return csdkit::hls::F32ToF16(op.a); }, cov);
}

// ---- fp32 -> bf16, nearest even and stochastic --------------------------------------------------

/// Stochastic rounding restated in value space, independently of state_q8.h: a NaN gives
/// 0x7fc0; a bf16 value is kept; any other value lies strictly between its two bf16 neighbours
/// lo < |x| < hi (hi = 2^128, infinity, above the largest finite bf16), at k / 2^16 of the gap
/// (the gap holds 2^16 binary32 steps, so k is an integer, exact in double); it rounds away
/// from zero, to hi, when k + R >= 2^16 (probability k / 2^16 for a uniform R).
uint16_t ValueStochasticBf16(uint32_t a_bits, uint32_t r) {
  if (std::isnan(AsF(a_bits))) return 0x7fc0u;
  const uint32_t sign = a_bits & kSign;
  const uint32_t mag = a_bits & ~kSign;
  const uint32_t lo = mag & 0xffff0000u;
  if (lo == mag) return static_cast<uint16_t>(a_bits >> 16);
  const uint32_t hi = lo + 0x10000u;
  const double x = static_cast<double>(AsF(mag));
  const double vlo = static_cast<double>(AsF(lo));
  const double vhi = hi == kExp ? std::ldexp(1.0, 128) : static_cast<double>(AsF(hi));
  const double k = (x - vlo) / (vhi - vlo) * 65536.0;
  const bool away = k + static_cast<double>(r) >= 65536.0;
  return static_cast<uint16_t>((sign | (away ? hi : lo)) >> 16);
}

/// The reference: nearest even by the oracle, stochastic by the contract's C++ function.
uint32_t RefBf16(const Op& op) {
  return Mode(op) == kRndStochastic ? csdkit::hls::RoundBf16Stochastic(AsF(op.a), Rnd(op))
                                    : RefF32ToBf16(op.a);
}

/// The cross-check: csdkit's F32ToBf16 for nearest even, the value-space rule for stochastic.
uint32_t CrossBf16(const Op& op) {
  return Mode(op) == kRndStochastic ? ValueStochasticBf16(op.a, Rnd(op))
                                    : csdkit::hls::F32ToBf16(op.a);
}

/// Cases the nearest-even stimulus must reach.
struct Bf16Coverage {
  uint64_t tie = 0, sub_tie = 0, overflow = 0, nan = 0;
  void Add(const Op& op) {
    const float fa = AsF(op.a);
    if (std::isnan(fa)) {
      ++nan;
      return;
    }
    if ((op.exp & 0x7fffu) == 0x7f80u && std::isfinite(fa)) ++overflow;
    if ((op.a & 0xffffu) == 0x8000u) {
      ++tie;
      if ((op.a & kExp) == 0u) ++sub_tie;
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: tie=%" PRIu64 " sub_tie=%" PRIu64 " overflow=%" PRIu64 " nan=%" PRIu64
                "\n",
                name.c_str(), tie, sub_tie, overflow, nan);
    return tie > 0 && sub_tie > 0 && overflow > 0 && nan > 0;
  }
};

/// Cases the stochastic stimulus must reach (stochastic operations only, except `nearest`).
struct StochasticCoverage {
  uint64_t up = 0, kept = 0, exact_ffff = 0, edge = 0, to_inf = 0, sub_to_normal = 0,
           nan_payload = 0, neg_up = 0, nearest = 0;
  void Add(const Op& op) {
    if (Mode(op) != kRndStochastic) {
      ++nearest;
      return;
    }
    const uint32_t a = op.a, r = Rnd(op), low = a & 0xffffu;
    if (std::isnan(AsF(a))) {
      if (a != kCanonicalNan) ++nan_payload;
      return;
    }
    if (low == 0u) {
      if (r == 0xffffu) ++exact_ffff;  // a bf16 value with the largest R: unchanged
      return;
    }
    if (r == ((0x10000u - low) & 0xffffu)) ++edge;  // the smallest R that carries
    if (op.exp != (a >> 16)) {
      ++up;
      if ((a & kSign) != 0u) ++neg_up;
      if ((op.exp & 0x7fffu) == 0x7f80u) ++to_inf;
      if ((a & kExp) == 0u && (op.exp & 0x7f80u) != 0u) ++sub_to_normal;
    } else {
      ++kept;
    }
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: up=%" PRIu64 " kept=%" PRIu64 " exact_r_ffff=%" PRIu64
                " carry_edge=%" PRIu64 " to_inf=%" PRIu64 " sub_to_normal=%" PRIu64
                " nan_payload=%" PRIu64 " neg_up=%" PRIu64 " nearest_even_ops=%" PRIu64 "\n",
                name.c_str(), up, kept, exact_ffff, edge, to_inf, sub_to_normal, nan_payload,
                neg_up, nearest);
    return up > 0 && kept > 0 && exact_ffff > 0 && edge > 0 && to_inf > 0 && sub_to_normal > 0 &&
           nan_payload > 0 && neg_up > 0 && nearest > 0;
  }
};

/// Random bits for a stochastic rounding of `a`: the fixed values, the carry edge and its
/// neighbour below, or uniform.
uint32_t StochasticBits(uint32_t a, std::mt19937_64& rng) {
  const uint64_t x = rng();
  const uint32_t low = a & 0xffffu;
  switch (x % 8u) {
    case 0:
      return 0u;
    case 1:
      return 0xffffu;
    case 2:
      return 0x8000u;
    case 3:
      return (0x10000u - low) & 0xffffu;
    case 4:
      return (0xffffu - low) & 0xffffu;
    default:
      return static_cast<uint32_t>(x >> 16) & 0xffffu;
  }
}

bool RunF32ToBf16(const Options& o) {
  CastSpec spec;
  spec.name = "csd_fp_cast/f32_to_bf16";
  spec.latency = Vcsd_fp_cast_f32_to_bf16_csd_fp_pkg::CVT_LATENCY;
  spec.out_digits = 4;
  spec.reference = "nearest-neighbour in double (tb_oracle.h)";
  spec.cross = "csdkit F32ToBf16";
  std::mt19937_64 rng(o.seed ^ 0xca57ull);
  spec.directed = Nearest(SpecialOperands(), rng);
  spec.random_ops = o.n != 0 ? o.n : kDefaultRandomOps;
  Gen g(o.seed);
  Bf16Coverage cov;
  return RunCast<Vcsd_fp_cast_f32_to_bf16>(
      spec, o,
      [&](Op* op) {
        op->a = g.Bf16Operand();
        op->b = static_cast<uint32_t>(rng() & 0xffffu);
        op->sub = kRndNearestEven;
      },
      RefBf16, CrossBf16, cov);
}

bool RunF32ToBf16Stochastic(const Options& o) {
  CastSpec spec;
  spec.name = "csd_fp_cast/f32_to_bf16_sr";
  spec.latency = Vcsd_fp_cast_f32_to_bf16_csd_fp_pkg::CVT_LATENCY;
  spec.out_digits = 4;
  spec.reference = "RoundBf16Stochastic (state_q8.h) | nearest-neighbour oracle";
  spec.cross = "value-space rule | csdkit F32ToBf16";
  std::mt19937_64 rng(o.seed ^ 0x570c4a57ull);
  // Every hand-picked value, bf16 values (zero, subnormal, normal, the largest finite), NaNs
  // whose payload lies only in the dropped bits (so b + R would carry into the exponent), with
  // both signs, each with R = 0, 0xFFFF, 0x8000, the carry edge, one below it and a random R.
  std::vector<uint32_t> operands = SpecialOperands();
  for (uint32_t v :
       {0x00010000u, 0x007f0000u, 0x00800000u, 0x3f800000u, 0x40490000u, 0x7f7f0000u, 0x0000ffffu,
        0x00008000u, 0x007fffffu, 0x7f7f7fffu, 0x7f80ffffu, 0x7f808000u, 0x7fbf0001u}) {
    operands.push_back(v);
    operands.push_back(v | kSign);
  }
  for (uint32_t a : operands) {
    const uint32_t low = a & 0xffffu;
    for (uint32_t r : {0u, 0xffffu, 0x8000u, (0x10000u - low) & 0xffffu, (0xffffu - low) & 0xffffu,
                       static_cast<uint32_t>(rng() & 0xffffu)}) {
      Op op;
      op.a = a;
      op.b = r;
      op.sub = kRndStochastic;
      spec.directed.push_back(op);
    }
  }
  spec.random_ops = o.n != 0 ? o.n : kDefaultStochasticOps;
  Gen g(o.seed);
  StochasticCoverage cov;
  return RunCast<Vcsd_fp_cast_f32_to_bf16>(
      spec, o,
      [&](Op* op) {
        op->a = g.Bf16Operand();
        op->sub = (rng() & 3u) != 0u ? kRndStochastic : kRndNearestEven;
        op->b = op->sub == kRndStochastic ? StochasticBits(op->a, rng)
                                          : static_cast<uint32_t>(rng() & 0xffffu);
      },
      RefBf16, CrossBf16, cov);
}

// ---- Command line -------------------------------------------------------------------------------

constexpr const char* kConfigs[] = {"f16_to_f32", "bf16_to_f32", "f32_to_f16", "f32_to_bf16",
                                    "f32_to_bf16_sr"};

bool RunConfig(const std::string& cfg, const Options& o) {
  if (cfg == "f16_to_f32") {
    return RunWiden<Vcsd_fp_cast_f16_to_f32>(
        o, "csd_fp_cast/f16_to_f32", Vcsd_fp_cast_f16_to_f32_csd_fp_pkg::CVT_LATENCY, false);
  }
  if (cfg == "bf16_to_f32") {
    return RunWiden<Vcsd_fp_cast_bf16_to_f32>(
        o, "csd_fp_cast/bf16_to_f32", Vcsd_fp_cast_bf16_to_f32_csd_fp_pkg::CVT_LATENCY, true);
  }
  if (cfg == "f32_to_f16") return RunF32ToF16(o);
  if (cfg == "f32_to_bf16") return RunF32ToBf16(o);
  return RunF32ToBf16Stochastic(o);
}

}  // namespace

int main(int argc, char** argv) {
  // --cfg NAME is this bench's own option; the rest are the shared ones (tb_check.h).
  std::string cfg;
  std::vector<char*> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cfg") == 0 && i + 1 < argc) {
      cfg = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  const Options o = ParseOptions(static_cast<int>(args.size()), args.data());
  bool known = cfg.empty();
  for (const char* c : kConfigs) known = known || cfg == c;
  if (!known || (o.exhaustive && cfg != "f32_to_f16" && cfg != "f32_to_bf16")) {
    std::fprintf(stderr,
                 "%s: --cfg must be one of f16_to_f32, bf16_to_f32, f32_to_f16, f32_to_bf16, "
                 "f32_to_bf16_sr (got '%s'); --exhaustive needs f32_to_f16 or f32_to_bf16 (the "
                 "widening configurations are always all 2^16 operands)\n",
                 argv[0], cfg.c_str());
    return 2;
  }
  if (!HostIsIeee()) return 1;
  std::printf("tb_csd_fp_cast: seed=0x%" PRIx64 " cfg=%s\n", o.seed,
              cfg.empty() ? "(all)" : cfg.c_str());
  bool ok = true;
  for (const char* c : kConfigs) {
    if (cfg.empty() || cfg == c) ok = RunConfig(c, o) && ok;
  }
  std::printf("%s tb_csd_fp_cast%s%s\n", ok ? "PASS" : "FAIL", cfg.empty() ? "" : " --cfg ",
              cfg.c_str());
  return ok ? 0 : 1;
}
