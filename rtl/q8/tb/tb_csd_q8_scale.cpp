// Bench of csd_q8_scale (r = 1 / a of a block's absmax), one Verilated model (the unit is IEEE
// whatever the policy, as the C++ core's `1.0f / a`), fed one absmax per cycle: every binade of
// the domain a in [2^-126, max finite] (fraction 0, 1, all ones and a random one; r is
// subnormal above 2^126), rtl/fp's hand-picked values with both signs (outside the domain too:
// zeros, subnormals, infinities, NaNs), then random a (10^6 by default: three in four in the
// domain). In the domain the result is checked against QuantizeBlockQ8's expression, the host's
// `1.0f / a`; outside it against the contract's IEEE division (rtl/fp/tb/tb_oracle.h). The C++
// expression is compared with that oracle in the domain (model-vs-oracle).
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "Vcsd_q8_scale.h"
#include "Vcsd_q8_scale_csd_q8_scale.h"
#include "tb_gen.h"
#include "tb_oracle.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;
using Model = Vcsd_q8_scale;

constexpr uint64_t kDefaultRandomOps = 1000000;
constexpr uint32_t kOne = 0x3f800000u;

struct ScaleOp {
  uint64_t index = 0;
  uint32_t a = 0;
  uint32_t exp = 0;
};

/// a is an absmax the quantizer divides by: finite, positive, >= 2^-126.
bool InDomain(uint32_t a) { return a >= 0x00800000u && a < 0x7f800000u; }

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_q8_scale: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);

  std::vector<uint32_t> directed;
  for (uint32_t e = 1; e <= 254; ++e) {
    for (uint32_t frac : {0u, 1u, 0x007fffffu, 0x00555555u}) directed.push_back(e << 23 | frac);
  }
  for (uint32_t v : kSpecials) {
    directed.push_back(v);
    directed.push_back(v | kSign);
  }

  const std::string name = "csd_q8_scale";
  Q8Pipe<Model, ScaleOp> pipe(name, Vcsd_q8_scale_csd_q8_scale::Latency, o.seed);
  Checker rtl(name + " rtl-vs-model", o.seed, 8);
  Checker model(name + " model-vs-oracle", o.seed, 8);
  Gen g(o.seed);
  uint64_t in_domain = 0, sub_result = 0;

  auto drive = [](Model& m, const ScaleOp& op) { m.absmax_i = op.a; };
  auto junk = [](Model& m, uint64_t bits) { m.absmax_i = static_cast<uint32_t>(bits >> 17); };
  auto gen = [&](uint64_t i, ScaleOp* op) {
    if (i < directed.size()) {
      op->a = directed[i];
    } else {
      op->a = g.Below(4) != 0 ? g.Normal(1, 254) & 0x7fffffffu : g.Operand();
    }
    const uint32_t oracle = RefBinary(BinOp::kDiv, false, kOne, op->a);
    if (InDomain(op->a)) {
      ++in_domain;
      op->exp = AsU(1.0f / AsF(op->a));  // QuantizeBlockQ8: r = 1.0f / a
      TB_CHECK_EQ_HEX(model, i, op->exp, oracle, "a=0x%08x", op->a);
      if (op->exp < 0x00800000u) ++sub_result;
    } else {
      op->exp = oracle;
    }
  };
  auto check = [](Model& m, const ScaleOp& op, Checker& chk) {
    TB_CHECK_EQ_HEX(chk, op.index, m.scale_o, op.exp, "a=0x%08x", op.a);
  };

  pipe.Reset(junk);
  const RunStats s = pipe.Run(directed.size() + n, gen, drive, junk, check, rtl);
  pipe.PrintSpeed("directed+random", s);
  std::printf("COVERAGE %s: in_domain=%" PRIu64 " subnormal_r=%" PRIu64 "\n", name.c_str(),
              in_domain, sub_result);
  const bool ok_cov = in_domain > 0 && sub_result > 0;
  if (!ok_cov) std::printf("FAIL %s: the stimulus missed a required case\n", name.c_str());
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok = ok_rtl && ok_model && ok_cov;
  std::printf("%s tb_csd_q8_scale\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
