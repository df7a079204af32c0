// Bench of csd_q8_absmax (a block's stored absmax from its beats): two Verilated models, 16
// lanes and 8 lanes (a tree with an odd number of levels). Each is fed one beat per cycle
// (random bubbles inside and between blocks), blocks back to back: every kind of block the
// contract distinguishes — mixed scales with zeros, subnormals and both signs; tiny blocks
// (zeros, -0, subnormals; a largest element of 2^-126 or just below it); blocks with one
// infinity or NaN anywhere; the largest element first, last or twice with both signs; the
// largest finite value; partial blocks (fewer beats) — 10 000 blocks per model by default.
// Each block's absmax, nonfinite and tiny outputs are checked against
// csdkit::hls::QuantizeBlockQ8 of state_q8.h on the same values (its *absmax; nonfinite: the
// canonical NaN; tiny: +0), under IEEE for even blocks and FTZ/DAZ for odd ones (the unit has
// no policy: the policy cannot change a block's absmax). QuantizeBlockQ8's absmax is compared
// on every block with an independent oracle (model-vs-oracle): a plain loop over the values in
// float — any NaN or infinity gives the canonical NaN, else the largest |x| with DAZ applied by
// classification, +0 below 2^-126.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "Vcsd_q8_absmax.h"
#include "Vcsd_q8_absmax_csd_q8_absmax.h"
#include "Vcsd_q8_absmax_l8.h"
#include "Vcsd_q8_absmax_l8_csd_q8_absmax.h"
#include "csdkit/hls/state_q8.h"
#include "tb_gen.h"
#include "tb_oracle.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;

constexpr uint64_t kDefaultBlocks = 10000;
constexpr int kBlock = csdkit::hls::kQ8Block;

/// One beat; the last beat of a block carries the block's expected outputs.
struct BeatOp {
  uint64_t index = 0;
  uint64_t block = 0;
  uint32_t x[16] = {};
  bool last = false;
  uint32_t exp_absmax = 0;
  bool exp_nonfinite = false, exp_tiny = false;
  uint32_t n = 0;  // the block's elements (for reports)
};

/// Only a block's last beat produces a result (found by Q8Pipe through argument-dependent
/// lookup).
bool ExpectsResult(const BeatOp& op) { return op.last; }

std::string Inputs(const BeatOp& op) { return Hex("block=%" PRIu64 " n=%u", op.block, op.n); }

/// The oracle: any NaN or infinity -> canonical NaN; else the largest |x| (DAZ by
/// classification) in float; below 2^-126 -> +0.
uint32_t Oracle(const std::vector<float>& x, bool ftz) {
  float a = 0.0f;
  for (float v : x) {
    if (!std::isfinite(v)) return csd_tb::kCanonicalNan;
    const float m = std::fabs(ftz ? csd_tb::RefFlush(v) : v);
    if (m > a) a = m;
  }
  return a < std::ldexp(1.0f, -126) ? 0u : csd_tb::AsU(a);
}

/// Block kinds of the stimulus.
enum Kind { kMixed, kTiny, kNonFinite, kEdgeMax, kHuge, kPartial, kNumKinds };

/// Fills one block of the given kind: n values (n = kBlock but for partial blocks).
std::vector<float> MakeBlock(csd_tb::Gen& g, Kind kind, unsigned lanes) {
  const unsigned beats = kBlock / lanes;
  const unsigned n = kind == kPartial ? lanes * (1u + g.Below(beats - 1)) : kBlock;
  std::vector<uint32_t> u(n);
  const uint32_t e = 1u + g.Below(254);  // the scale's exponent field
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t r = g.Bits();
    const uint32_t sign = static_cast<uint32_t>(r >> 63) << 31;
    const uint32_t man = static_cast<uint32_t>(r >> 8) & csd_tb::kMan;
    switch (kind) {
      case kTiny:  // zeros, -0 and subnormals only
        u[i] = sign | ((r & 3u) == 0u ? 0u : man >> (r >> 2 & 15u));
        break;
      default: {  // mixed: zero, subnormal, or a value up to the scale
        const uint32_t d = static_cast<uint32_t>((r >> 3) % 24u);
        switch (r % 6u) {
          case 0:
            u[i] = sign;
            break;
          case 1:
            u[i] = sign | man;
            break;
          default:
            u[i] = sign | (e > d ? ((e - d) << 23) | man : man);
            break;
        }
        break;
      }
    }
  }
  switch (kind) {
    case kTiny:
      // A third of the tiny blocks end at the border: the largest subnormal (tiny) or 2^-126
      // (not tiny, under either policy).
      if (g.Below(3) == 0) {
        u[g.Below(n)] = g.RandSign() | (g.Below(2) != 0 ? 0x007fffffu : 0x00800000u);
      }
      break;
    case kNonFinite: {  // one infinity or NaN (any payload, either sign) anywhere
      const uint32_t k = g.Below(4);
      const uint32_t payload = static_cast<uint32_t>(g.Bits()) & 0x007fffffu;
      u[g.Below(n)] = g.RandSign() | (k == 0 ? 0x7f800000u : 0x7f800000u | (payload | 1u));
      break;
    }
    case kEdgeMax: {  // the largest element first, last, or twice with both signs
      const uint32_t m = (e < 254u ? (e + 1u) << 23 : 0x7f7fffffu) | (g.Bits() & 0xffu);
      switch (g.Below(3)) {
        case 0:
          u[0] = g.RandSign() | m;
          break;
        case 1:
          u[n - 1] = g.RandSign() | m;
          break;
        default:
          u[g.Below(n)] = m;
          u[g.Below(n)] = m | 0x80000000u;
          break;
      }
      break;
    }
    case kHuge:  // the largest finite value
      u[g.Below(n)] = g.RandSign() | 0x7f7fffffu;
      break;
    default:
      break;
  }
  std::vector<float> x(n);
  for (unsigned i = 0; i < n; ++i) x[i] = csd_tb::AsF(u[i]);
  return x;
}

template <class Model>
bool RunModel(const char* name, unsigned lanes, unsigned latency, const csd_tb::Options& o,
              uint64_t blocks) {
  csd_tb::Q8Pipe<Model, BeatOp> pipe(name, latency, o.seed);
  Checker rtl(std::string(name) + " rtl-vs-model", o.seed, 8);
  Checker model(std::string(name) + " model-vs-oracle", o.seed, 8);
  csd_tb::Gen g(o.seed ^ lanes);
  uint64_t kinds[kNumKinds] = {};
  uint64_t nonfinite = 0, tiny = 0, plain = 0, sub_tiny = 0;

  // The beats of all blocks, in order.
  std::vector<BeatOp> beats;
  for (uint64_t b = 0; b < blocks; ++b) {
    const Kind kind = static_cast<Kind>(b < 2 * kNumKinds ? b / 2 : g.Below(kNumKinds));
    const bool ftz = (b & 1u) != 0u;
    const csdkit::hls::Fp32 f(ftz);
    ++kinds[kind];
    const std::vector<float> x = MakeBlock(g, kind, lanes);
    const unsigned n = static_cast<unsigned>(x.size());
    std::vector<uint8_t> codes(n);
    float absmax;
    csdkit::hls::QuantizeBlockQ8(x.data(), static_cast<int>(n), (b & 2u) != 0u, f, codes.data(),
                                 &absmax);
    const uint32_t a = csd_tb::AsU(absmax);
    TB_CHECK_EQ_HEX(model, b, a, Oracle(x, ftz), "block=%" PRIu64 " n=%u ftz=%d", b, n,
                    ftz ? 1 : 0);
    if (a == csd_tb::kCanonicalNan) {
      ++nonfinite;
    } else if (a == 0u) {
      ++tiny;
      for (float v : x) {
        if (std::fpclassify(v) == FP_SUBNORMAL) {
          ++sub_tiny;  // a tiny block with a non-zero (subnormal) element
          break;
        }
      }
    } else {
      ++plain;
    }
    for (unsigned k = 0; k < n / lanes; ++k) {
      BeatOp op;
      op.block = b;
      op.n = n;
      for (unsigned l = 0; l < lanes; ++l) op.x[l] = csd_tb::AsU(x[k * lanes + l]);
      op.last = k + 1 == n / lanes;
      op.exp_absmax = a;
      op.exp_nonfinite = a == csd_tb::kCanonicalNan;
      op.exp_tiny = a == 0u;
      beats.push_back(op);
    }
  }

  auto drive = [lanes](Model& m, const BeatOp& op) {
    for (unsigned l = 0; l < lanes; ++l) m.x_i[l] = op.x[l];
    m.last_i = op.last ? 1u : 0u;
  };
  auto junk = [lanes](Model& m, uint64_t bits) {
    for (unsigned l = 0; l < lanes; ++l) {
      m.x_i[l] = static_cast<uint32_t>((bits * (2 * l + 1)) >> 24);
    }
    m.last_i = static_cast<uint32_t>(bits >> 63);
  };
  auto gen = [&](uint64_t i, BeatOp* op) {
    *op = beats[i];
    op->index = i;
  };
  auto check = [](Model& m, const BeatOp& op, Checker& chk) {
    TB_CHECK_EQ_HEX(chk, op.block, m.absmax_o, op.exp_absmax, "%s absmax", Inputs(op).c_str());
    TB_CHECK_EQ_HEX(chk, op.block, m.nonfinite_o, op.exp_nonfinite ? 1u : 0u, "%s nonfinite",
                    Inputs(op).c_str());
    TB_CHECK_EQ_HEX(chk, op.block, m.tiny_o, op.exp_tiny ? 1u : 0u, "%s tiny", Inputs(op).c_str());
  };

  pipe.Reset(junk);
  const csd_tb::RunStats s = pipe.Run(beats.size(), gen, drive, junk, check, rtl);
  pipe.PrintSpeed("blocks", s);
  std::printf("COVERAGE %s: blocks=%" PRIu64 " nonfinite=%" PRIu64 " tiny=%" PRIu64
              " plain=%" PRIu64 " sub_tiny=%" PRIu64 " partial=%" PRIu64 "\n",
              name, blocks, nonfinite, tiny, plain, sub_tiny, kinds[kPartial]);
  const bool ok_cov = nonfinite > 0 && tiny > 0 && plain > 0 && sub_tiny > 0 && kinds[kPartial] > 0;
  if (!ok_cov) std::printf("FAIL %s: the stimulus missed a required case\n", name);
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  return ok_rtl && ok_model && ok_cov;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  const uint64_t blocks = o.n != 0 ? o.n : kDefaultBlocks;
  std::printf("tb_csd_q8_absmax: seed=0x%" PRIx64 " blocks=%" PRIu64 "\n", o.seed, blocks);
  bool ok = RunModel<Vcsd_q8_absmax>("csd_q8_absmax/l16", 16, Vcsd_q8_absmax_csd_q8_absmax::Latency,
                                     o, blocks);
  ok = RunModel<Vcsd_q8_absmax_l8>("csd_q8_absmax/l8", 8, Vcsd_q8_absmax_l8_csd_q8_absmax::Latency,
                                   o, blocks) &&
       ok;
  std::printf("%s tb_csd_q8_absmax\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
