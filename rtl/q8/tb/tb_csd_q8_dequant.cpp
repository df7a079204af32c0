// Bench of csd_q8_dequant under both policies: two Verilated models (FtzDaz = 0 and 1), each fed
// one element per cycle: every code x every hand-picked absmax (both signs of rtl/fp's 47
// special magnitudes: zeros, subnormals, 2^-126 and its neighbours, 1 and its neighbours, the
// largest finite value, infinity, quiet and signalling NaNs with payloads) x both maps, then
// random codes, maps and biased random absmax values (10^6 by default). Every result is
// checked against csdkit::hls::DequantQ8 of state_q8.h, which is compared on every vector with
// an independent oracle (model-vs-oracle): the map value from the table times absmax by the
// host's MULSS (rtl/fp/tb/tb_oracle.h, with the policy applied by classification), bit 31
// flipped for a negative signed code.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "Vcsd_q8_dequant_ftz.h"
#include "Vcsd_q8_dequant_ftz_csd_q8_dequant.h"
#include "Vcsd_q8_dequant_ieee.h"
#include "Vcsd_q8_dequant_ieee_csd_q8_dequant.h"
#include "csdkit/hls/state_q8.h"
#include "tb_gen.h"
#include "tb_oracle.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;

constexpr uint64_t kDefaultRandomOps = 1000000;

struct DequantOp {
  uint64_t index = 0;
  uint32_t code = 0;
  uint32_t absmax = 0;
  uint32_t is_signed = 0;
  uint32_t exp = 0;
};

std::string Inputs(const DequantOp& op) {
  return Hex("code=0x%02x absmax=0x%08x map=%s", op.code, op.absmax,
             op.is_signed != 0u ? "signed" : "unsigned");
}

/// The oracle: table value x absmax by MULSS under the policy, sign flipped after the product.
uint32_t Oracle(const DequantOp& op, bool ftz) {
  const uint32_t table = op.is_signed != 0u ? csdkit::hls::kQ8SignedMag[op.code & 0x7fu]
                                            : csdkit::hls::kQ8Unsigned[op.code];
  const uint32_t prod = csd_tb::RefBinary(csd_tb::BinOp::kMul, ftz, table, op.absmax);
  const bool neg = op.is_signed != 0u && (op.code & 0x80u) != 0u;
  return prod ^ (neg ? 0x80000000u : 0u);
}

/// Counts of the cases the stimulus must reach (IEEE model); the bench fails if one is 0.
struct Coverage {
  uint64_t neg_zero = 0;    // a -0 result
  uint64_t sub_result = 0;  // a subnormal result
  uint64_t nan_result = 0;  // a NaN result, either sign
  uint64_t inf_result = 0;  // an infinite result
  uint64_t sub_absmax = 0;  // a subnormal absmax with a non-zero table value
  uint64_t max_code = 0;    // a value 1.0 code (0x7f / 0xff / 0xff unsigned)

  void Add(const DequantOp& op) {
    const uint32_t mag = op.exp & 0x7fffffffu;
    if (op.exp == 0x80000000u) ++neg_zero;
    if (mag != 0u && mag < 0x00800000u) ++sub_result;
    if (mag > 0x7f800000u) ++nan_result;
    if (mag == 0x7f800000u) ++inf_result;
    const uint32_t am = op.absmax & 0x7fffffffu;
    if (am != 0u && am < 0x00800000u && (op.code & (op.is_signed != 0u ? 0x7fu : 0xffu)) != 0u) {
      ++sub_absmax;
    }
    if ((op.code & 0x7fu) == 0x7fu) ++max_code;
  }
  bool Report(const std::string& name) const {
    std::printf("COVERAGE %s: neg_zero=%" PRIu64 " sub_result=%" PRIu64 " nan_result=%" PRIu64
                " inf_result=%" PRIu64 " sub_absmax=%" PRIu64 " max_code=%" PRIu64 "\n",
                name.c_str(), neg_zero, sub_result, nan_result, inf_result, sub_absmax, max_code);
    const bool ok = neg_zero > 0 && sub_result > 0 && nan_result > 0 && inf_result > 0 &&
                    sub_absmax > 0 && max_code > 0;
    if (!ok) std::printf("FAIL %s: the stimulus missed a required case\n", name.c_str());
    return ok;
  }
};

template <class Model>
bool RunPolicy(bool ftz, unsigned latency, const csd_tb::Options& o, uint64_t n) {
  const std::string name = std::string("csd_q8_dequant") + (ftz ? "/ftz" : "/ieee");
  csd_tb::Q8Pipe<Model, DequantOp> pipe(name, latency, o.seed);
  Checker rtl(name + " rtl-vs-model", o.seed, 8);
  Checker model(name + " model-vs-oracle", o.seed, 8);
  const csdkit::hls::Fp32 f(ftz);
  csd_tb::Gen g(o.seed);
  Coverage cov;

  std::vector<uint32_t> absmax;
  for (uint32_t v : csd_tb::kSpecials) {
    absmax.push_back(v);
    absmax.push_back(v | csd_tb::kSign);
  }
  const uint64_t directed = 256u * 2u * absmax.size();

  auto drive = [](Model& m, const DequantOp& op) {
    m.code_i = op.code;
    m.absmax_i = op.absmax;
    m.signed_map_i = op.is_signed;
  };
  auto junk = [](Model& m, uint64_t bits) {
    m.code_i = static_cast<uint32_t>(bits & 0xffu);
    m.absmax_i = static_cast<uint32_t>(bits >> 16);
    m.signed_map_i = static_cast<uint32_t>(bits >> 63);
  };
  auto gen = [&](uint64_t i, DequantOp* op) {
    if (i < directed) {
      op->code = static_cast<uint32_t>(i & 0xffu);
      op->is_signed = static_cast<uint32_t>((i >> 8) & 1u);
      op->absmax = absmax[i >> 9];
    } else {
      const uint64_t r = g.Bits();
      op->code = static_cast<uint32_t>(r & 0xffu);
      op->is_signed = static_cast<uint32_t>((r >> 8) & 1u);
      // Half biased operands of every class, half positive normal absmax values (the stores').
      op->absmax = ((r >> 9) & 1u) != 0u ? g.Operand() : g.Normal(1, 254) & 0x7fffffffu;
    }
    op->exp = csdkit::hls::F2U(csdkit::hls::DequantQ8(
        static_cast<uint8_t>(op->code), csdkit::hls::U2F(op->absmax), op->is_signed != 0u, f));
    TB_CHECK_EQ_HEX(model, i, op->exp, Oracle(*op, ftz), "%s", Inputs(*op).c_str());
    if (!ftz) cov.Add(*op);
  };
  auto check = [](Model& m, const DequantOp& op, Checker& chk) {
    TB_CHECK_EQ_HEX(chk, op.index, m.value_o, op.exp, "%s", Inputs(op).c_str());
  };

  pipe.Reset(junk);
  const csd_tb::RunStats s = pipe.Run(directed + n, gen, drive, junk, check, rtl);
  pipe.PrintSpeed("directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok_cov = ftz || cov.Report(name);
  return ok_rtl && ok_model && ok_cov;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  if (!HostIsIeee()) return 1;
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_q8_dequant: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);
  bool ok =
      RunPolicy<Vcsd_q8_dequant_ieee>(false, Vcsd_q8_dequant_ieee_csd_q8_dequant::Latency, o, n);
  ok =
      RunPolicy<Vcsd_q8_dequant_ftz>(true, Vcsd_q8_dequant_ftz_csd_q8_dequant::Latency, o, n) && ok;
  std::printf("%s tb_csd_q8_dequant\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
