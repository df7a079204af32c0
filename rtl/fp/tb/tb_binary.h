// The bench body shared by the binary32 two-operand units (add/sub, mul, div): one Verilated
// model per policy, fed one operation per cycle: first the cross product of the hand-picked
// values (both signs), then biased random pairs from the unit's pair generator. Each result is
// compared with the host oracle (tb_oracle.h); csdkit's C++ model (csdkit/hls/fp32.h) is
// compared with the same oracle on every vector.
#ifndef CSDKIT_RTL_FP_TB_TB_BINARY_H_
#define CSDKIT_RTL_FP_TB_TB_BINARY_H_

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "csdkit/hls/fp32.h"
#include "tb_check.h"
#include "tb_gen.h"
#include "tb_oracle.h"

namespace csd_tb {

/// Which operation a binary unit performs; kAddSub drives sub_i randomly.
enum class Unit { kAddSub, kMul, kDiv };

/// The C++ model's result of the same operation.
inline uint32_t ModelBinary(const csdkit::hls::Fp32& f, BinOp op, uint32_t a, uint32_t b) {
  const float fa = AsF(a), fb = AsF(b);
  switch (op) {
    case BinOp::kAdd:
      return AsU(f.Add(fa, fb));
    case BinOp::kSub:
      return AsU(f.Sub(fa, fb));
    case BinOp::kMul:
      return AsU(f.Mul(fa, fb));
    default:
      return AsU(f.Div(fa, fb));
  }
}

/// Runs one policy's model; returns true when the RTL and the C++ model both match the oracle.
/// `random_ops` biased random operations follow the directed cross product.
/// Counts of the cases the stimulus is meant to reach, measured on the IEEE results; a bench
/// fails if one of them is never reached (a broken generator must not pass silently).
struct BinaryCoverage {
  uint64_t nan_operand = 0;    // an operand is a NaN
  uint64_t sub_operand = 0;    // an operand is subnormal
  uint64_t tie = 0;            // the exact result lies halfway between two binary32 values
  uint64_t sub_tie = 0;        // ... and the result is subnormal (or the smallest normal)
  uint64_t sub_result = 0;     // subnormal result
  uint64_t up_to_normal = 0;   // exact result below 2^-126 rounded up to 2^-126 (FTZ keeps it)
  uint64_t overflow = 0;       // finite operands, infinite result
  uint64_t exact_zero = 0;     // non-zero operands, zero result (cancellation or underflow)

  void Add(BinOp op, uint32_t a, uint32_t b, uint32_t r) {
    const float fa = AsF(a), fb = AsF(b), fr = AsF(r);
    if (std::isnan(fa) || std::isnan(fb)) {
      ++nan_operand;
      return;
    }
    if (std::fpclassify(fa) == FP_SUBNORMAL || std::fpclassify(fb) == FP_SUBNORMAL) ++sub_operand;
    if (std::isinf(fr) && std::isfinite(fa) && std::isfinite(fb)) ++overflow;
    if (fr == 0.0f && fa != 0.0f && fb != 0.0f && std::isfinite(fa) && std::isfinite(fb)) {
      ++exact_zero;
    }
    if (!std::isfinite(fr) || fr == 0.0f || !std::isfinite(fa) || !std::isfinite(fb)) return;
    if (std::fpclassify(fr) == FP_SUBNORMAL) ++sub_result;
    // Is the exact result one of the two midpoints around r? Compared in double, where the
    // midpoints (25 bits) and the products below (<= 49 bits) are exact.
    const double da = fa, db = fb;
    const double lo = (static_cast<double>(fr) + std::nextafter(fr, 0.0f)) / 2.0;
    const double hi = (static_cast<double>(fr) + std::nextafter(fr, 2.0f * fr)) / 2.0;
    bool is_tie = false;
    switch (op) {
      case BinOp::kAdd:
        is_tie = da + db == lo || da + db == hi;
        break;
      case BinOp::kSub:
        is_tie = da - db == lo || da - db == hi;
        break;
      case BinOp::kMul:
        is_tie = da * db == lo || da * db == hi;
        break;
      default:
        is_tie = lo * db == da || hi * db == da;
        break;
    }
    if (is_tie) ++tie;
    const double min_normal = std::ldexp(1.0, -126);
    if (is_tie && std::fabs(fr) <= min_normal) ++sub_tie;
    if (std::fabs(fr) == min_normal) {
      const bool below = op == BinOp::kDiv ? std::fabs(da) < min_normal * std::fabs(db)
                         : op == BinOp::kMul ? std::fabs(da * db) < min_normal
                         : op == BinOp::kAdd ? std::fabs(da + db) < min_normal
                                             : std::fabs(da - db) < min_normal;
      if (below) ++up_to_normal;
    }
  }

  /// Prints the counts; returns false if a required case was never reached. Sums and
  /// differences are exact below 2^-125, so `additive` drops the two cases they cannot reach.
  bool Report(const std::string& name, bool additive) const {
    std::printf("COVERAGE %s: nan_operand=%" PRIu64 " sub_operand=%" PRIu64 " tie=%" PRIu64
                " sub_tie=%" PRIu64 " sub_result=%" PRIu64 " up_to_normal=%" PRIu64
                " overflow=%" PRIu64 " exact_zero=%" PRIu64 "\n",
                name.c_str(), nan_operand, sub_operand, tie, sub_tie, sub_result, up_to_normal,
                overflow, exact_zero);
    const bool ok = nan_operand > 0 && sub_operand > 0 && tie > 0 && sub_result > 0 &&
                    overflow > 0 && exact_zero > 0 &&
                    (additive || (sub_tie > 0 && up_to_normal > 0));
    if (!ok) std::printf("FAIL %s: the stimulus missed a required case (count 0 above)\n",
                         name.c_str());
    return ok;
  }
};

template <class Model, class Drive>
bool RunBinaryPolicy(const char* unit_name, Unit unit, bool ftz, unsigned latency,
                     const Options& o, uint64_t random_ops, Drive drive) {
  const std::string name = std::string(unit_name) + (ftz ? "/ftz" : "/ieee");
  PipeDriver<Model> drv(name, latency, o.seed);
  auto fmt = [unit](const Op& op) {
    return unit == Unit::kAddSub ? Hex("a=0x%08x b=0x%08x sub=%u", op.a, op.b, op.sub)
                                 : Hex("a=0x%08x b=0x%08x", op.a, op.b);
  };
  drv.Reset(drive);

  std::vector<uint32_t> vals;
  for (uint32_t v : kSpecials) {
    vals.push_back(v);
    vals.push_back(v | kSign);
  }
  const uint64_t pairs = static_cast<uint64_t>(vals.size()) * vals.size();
  const uint64_t directed = unit == Unit::kAddSub ? 2 * pairs : pairs;

  Checker rtl(name + " rtl-vs-oracle", o.seed, 8);
  Checker model(name + " model-vs-oracle", o.seed, 8);
  const csdkit::hls::Fp32 f(ftz);
  BinaryCoverage cov;
  Gen g(o.seed);
  auto gen = [&](uint64_t i, Op* op) {
    if (i < directed) {
      const uint64_t k = unit == Unit::kAddSub ? i >> 1 : i;
      op->sub = unit == Unit::kAddSub ? static_cast<uint32_t>(i & 1u) : 0u;
      op->a = vals[k / vals.size()];
      op->b = vals[k % vals.size()];
    } else {
      std::pair<uint32_t, uint32_t> ab;
      switch (unit) {
        case Unit::kAddSub:
          op->sub = g.Below(2);
          ab = g.AddPair(op->sub != 0u);
          break;
        case Unit::kMul:
          ab = g.MulPair();
          break;
        default:
          ab = g.DivPair();
          break;
      }
      op->a = ab.first;
      op->b = ab.second;
    }
    const BinOp bop = unit == Unit::kMul   ? BinOp::kMul
                      : unit == Unit::kDiv ? BinOp::kDiv
                      : op->sub != 0u      ? BinOp::kSub
                                           : BinOp::kAdd;
    op->exp = RefBinary(bop, ftz, op->a, op->b);
    if (!ftz) cov.Add(bop, op->a, op->b, op->exp);
    TB_CHECK_EQ_HEX(model, i, ModelBinary(f, bop, op->a, op->b), op->exp, "%s",
                    fmt(*op).c_str());
  };
  const RunStats s = drv.Run(directed + random_ops, gen, drive, fmt, rtl);
  drv.PrintSpeed("directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok_cov = ftz || cov.Report(name, unit == Unit::kAddSub);
  return ok_rtl && ok_model && ok_cov;
}

}  // namespace csd_tb

#endif  // CSDKIT_RTL_FP_TB_TB_BINARY_H_
