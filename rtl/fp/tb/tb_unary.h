// The bench body shared by the one-operand units (sqrt, sign, the conversions): a Verilated
// model fed one operand per cycle, either a directed list followed by biased random operands
// (quick), or a shard of all 2^32 operands (--exhaustive --shard K --shards M). Each result is
// compared with the host oracle, and csdkit's C++ model with the same oracle.
#ifndef CSDKIT_RTL_FP_TB_TB_UNARY_H_
#define CSDKIT_RTL_FP_TB_TB_UNARY_H_

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tb_check.h"
#include "tb_gen.h"

namespace csd_tb {

/// How a unary unit is exercised and checked.
struct UnarySpec {
  std::string name;           // unit/policy, for reports
  unsigned latency = 0;       // the unit's Latency
  int in_digits = 8;          // hex digits of operand and result
  int out_digits = 8;
  std::vector<uint32_t> directed;  // operands run first (quick mode)
  uint64_t random_ops = 0;         // biased random operands after them (quick mode)
};

/// No coverage requirement.
struct NoCoverage {
  void Add(uint32_t, uint32_t) {}
  bool Report(const std::string&) const { return true; }
};

/// Runs one model. `rand_op()` draws a random operand, `ref(a)` is the oracle, `cpp(a)` the C++
/// model, `cov.Add(a, expected)` counts reached cases (quick mode only).
template <class Model, class RandOp, class Ref, class Cpp, class Cov>
bool RunUnary(const UnarySpec& spec, const Options& o, RandOp rand_op, Ref ref, Cpp cpp,
              Cov& cov) {
  PipeDriver<Model> drv(spec.name, spec.latency, o.seed);
  const uint32_t in_mask = spec.in_digits == 8 ? 0xffffffffu : 0xffffu;
  auto drive = [in_mask](Model& m, const Op& op) { m.a_i = op.a & in_mask; };
  const int in_digits = spec.in_digits;
  auto fmt = [in_digits](const Op& op) { return Hex("a=0x%0*x", in_digits, op.a); };
  drv.Reset(drive);

  Checker rtl(spec.name + " rtl-vs-oracle", o.seed, spec.out_digits);
  Checker model(spec.name + " model-vs-oracle", o.seed, spec.out_digits);
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
    } else {
      op->a = i < spec.directed.size() ? spec.directed[i] : rand_op();
      op->a &= in_mask;
    }
    op->exp = ref(op->a);
    if (!o.exhaustive) cov.Add(op->a, op->exp);
    TB_CHECK_EQ_HEX(model, i, cpp(op->a), op->exp, "a=0x%0*x", in_digits, op->a);
  };
  const RunStats s = drv.Run(n, gen, drive, fmt, rtl);
  drv.PrintSpeed(o.exhaustive ? "exhaustive-shard" : "directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok_cov = o.exhaustive || cov.Report(spec.name);
  return ok_rtl && ok_model && ok_cov;
}

/// The hand-picked binary32 values with both signs.
inline std::vector<uint32_t> SpecialOperands() {
  std::vector<uint32_t> v;
  for (uint32_t s : kSpecials) {
    v.push_back(s);
    v.push_back(s | kSign);
  }
  return v;
}

/// All 2^16 values of a 16-bit format.
inline std::vector<uint32_t> All16() {
  std::vector<uint32_t> v(1u << 16);
  for (uint32_t i = 0; i < (1u << 16); ++i) v[i] = i;
  return v;
}

}  // namespace csd_tb

#endif  // CSDKIT_RTL_FP_TB_TB_UNARY_H_
