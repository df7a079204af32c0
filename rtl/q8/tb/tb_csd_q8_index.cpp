// Bench of csd_q8_index (the code of an element from q = |x| * r), one Verilated model (the unit
// has no policy: the policy is in q and the non-zero flag), fed one element per cycle:
//   directed: both maps; every threshold exactly and one ulp (one unit of the bit pattern) below
//     and above it; 0, subnormals, 2^-126, 1 - ulp, 1, 1 + ulp, 1 + 2 ulp, the largest finite
//     value, infinity, NaN and patterns with bit 31 set (compared as unsigned, as the C++ core
//     does); each with the non-zero flag and the sign off and on;
//   random: q uniform in [0, 1 + 16 ulp], within a few ulps of a random threshold, below the
//     smallest threshold, or any pattern (10^6 by default);
//   blocks: whole blocks through csdkit::hls::QuantizeBlockQ8 (both maps, both policies, 50
//     finite non-tiny blocks each of mixed scales with zeros, subnormals and both signs): q,
//     the sign and the non-zero flag formed exactly as the C++ core forms them, the RTL's code
//     checked against the function's own codes.
// Directed and random results are checked against the C++ core's rule (Q8Index of state_q8.h,
// then the non-zero rule and the code), which is compared on every vector with an independent
// oracle that counts the thresholds <= q one by one (model-vs-oracle).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "Vcsd_q8_index.h"
#include "Vcsd_q8_index_csd_q8_index.h"
#include "csdkit/hls/state_q8.h"
#include "tb_gen.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;
using Model = Vcsd_q8_index;

constexpr uint64_t kDefaultRandomOps = 1000000;
constexpr int kBlocksPerCase = 50;

struct IndexOp {
  uint64_t index = 0;
  uint32_t q = 0;
  uint32_t is_signed = 0;
  uint32_t sign = 0;
  uint32_t nonzero = 0;
  uint32_t exp = 0;
};

std::string Inputs(const IndexOp& op) {
  return Hex("q=0x%08x map=%s sign=%u nonzero=%u", op.q, op.is_signed != 0u ? "signed" : "unsigned",
             op.sign, op.nonzero);
}

const uint32_t* Thr(bool is_signed) {
  return is_signed ? csdkit::hls::kQ8SignedThr : csdkit::hls::kQ8UnsignedThr;
}
uint32_t NumThr(bool is_signed) { return is_signed ? 127u : 255u; }

/// The C++ core's code: Q8Index, the non-zero rule, the code (as in QuantizeBlockQ8).
uint32_t ModelCode(const IndexOp& op) {
  const bool s = op.is_signed != 0u;
  uint32_t k = csdkit::hls::Q8Index(op.q, Thr(s), NumThr(s));
  if (k == 0u && op.nonzero != 0u) k = 1u;
  return s ? (op.sign << 7) | k : k;
}

/// The oracle: thresholds <= q counted one by one.
uint32_t OracleCode(const IndexOp& op) {
  const bool s = op.is_signed != 0u;
  uint32_t k = 0;
  for (uint32_t j = 0; j < NumThr(s); ++j) k += Thr(s)[j] <= op.q ? 1u : 0u;
  if (k == 0u && op.nonzero != 0u) k = 1u;
  return s ? (op.sign << 7) | k : k;
}

/// Hand-picked q patterns besides the thresholds.
constexpr uint32_t kSpecialQ[] = {
    0x00000000u, 0x00000001u, 0x00400000u, 0x007fffffu, 0x00800000u, 0x00800001u,
    0x33800000u, 0x3f7fffffu, 0x3f800000u, 0x3f800001u, 0x3f800002u, 0x7f7fffffu,
    0x7f800000u, 0x7fc00000u, 0x80000000u, 0x80000001u, 0xbf800000u, 0xffffffffu,
};
constexpr uint32_t kNumSpecialQ = sizeof(kSpecialQ) / sizeof(kSpecialQ[0]);

/// The directed list: per map, the thresholds -1/0/+1 and the specials, x nonzero x sign.
std::vector<IndexOp> Directed() {
  std::vector<IndexOp> v;
  for (uint32_t s = 0; s < 2; ++s) {
    std::vector<uint32_t> qs(kSpecialQ, kSpecialQ + kNumSpecialQ);
    for (uint32_t j = 0; j < NumThr(s != 0u); ++j) {
      const uint32_t t = Thr(s != 0u)[j];
      qs.push_back(t - 1u);
      qs.push_back(t);
      qs.push_back(t + 1u);
    }
    for (uint32_t q : qs) {
      for (uint32_t flags = 0; flags < 4; ++flags) {
        IndexOp op;
        op.q = q;
        op.is_signed = s;
        op.nonzero = flags & 1u;
        op.sign = flags >> 1;
        v.push_back(op);
      }
    }
  }
  return v;
}

/// One block of mixed values for QuantizeBlockQ8: a scale 2^e, values of magnitude up to it,
/// with zeros, subnormals, near-threshold ratios and both signs.
void BlockValues(csd_tb::Gen& g, bool is_signed, float* x) {
  // The scale's exponent field: anywhere from tiny normals (where |x| * r has subnormal
  // elements under IEEE) to huge (r subnormal, so DAZ reads it as zero under FTZ).
  const uint32_t e = 1u + g.Below(254);
  for (int i = 0; i < csdkit::hls::kQ8Block; ++i) {
    const uint64_t r = g.Bits();
    uint32_t u;
    switch (r % 8u) {
      case 0:  // zero
        u = 0u;
        break;
      case 1:  // subnormal
        u = static_cast<uint32_t>(r >> 8) & 0x007fffffu;
        break;
      case 2: {  // far below the scale (indices 0, 1 and the non-zero rule)
        const uint32_t d = 8u + static_cast<uint32_t>((r >> 3) % 40u);
        u = e > d ? ((e - d) << 23) | (static_cast<uint32_t>(r >> 8) & 0x007fffffu)
                  : static_cast<uint32_t>(r >> 8) & 0x007fffffu;
        break;
      }
      default: {  // within 2^-20 .. 1 of the scale
        const uint32_t d = static_cast<uint32_t>((r >> 3) % 21u);
        u = e > d ? ((e - d) << 23) | (static_cast<uint32_t>(r >> 8) & 0x007fffffu) : 0u;
        break;
      }
    }
    if (is_signed) u |= static_cast<uint32_t>(r >> 63) << 31;  // -0 included
    x[i] = csdkit::hls::U2F(u);
  }
  // One element at the scale exactly (q = 1 for it) in half of the blocks.
  if ((g.Bits() & 1u) != 0u) x[g.Below(csdkit::hls::kQ8Block)] = csdkit::hls::U2F(e << 23);
}

/// Counts of the cases the stimulus must reach.
struct Coverage {
  uint64_t on_threshold = 0;   // q equal to a threshold
  uint64_t nonzero_rule = 0;   // index 0 raised to 1
  uint64_t neg_zero_code = 0;  // code 0x80
  uint64_t top_code = 0;       // index 127 (signed) / 255 (unsigned)
  uint64_t block_ops = 0;      // elements of QuantizeBlockQ8 blocks
  uint64_t block_sub_q = 0;    // ... with a subnormal q
};

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_q8_index: seed=0x%" PRIx64 " random_ops=%" PRIu64 "\n", o.seed, n);

  const std::string name = "csd_q8_index";
  Q8Pipe<Model, IndexOp> pipe(name, Vcsd_q8_index_csd_q8_index::Latency, o.seed);
  Checker rtl(name + " rtl-vs-model", o.seed, 2);
  Checker model(name + " model-vs-oracle", o.seed, 2);
  Gen g(o.seed);
  Coverage cov;

  const std::vector<IndexOp> directed = Directed();

  // The block stage: ops from QuantizeBlockQ8 on whole blocks, both maps x both policies.
  std::vector<IndexOp> blocks;
  for (int c = 0; c < 4; ++c) {
    const bool is_signed = (c & 1) != 0;
    const csdkit::hls::Fp32 f((c & 2) != 0);
    for (int b = 0; b < kBlocksPerCase; ++b) {
      float x[csdkit::hls::kQ8Block];
      uint8_t codes[csdkit::hls::kQ8Block];
      float absmax;
      BlockValues(g, is_signed, x);
      csdkit::hls::QuantizeBlockQ8(x, csdkit::hls::kQ8Block, is_signed, f, codes, &absmax);
      const uint32_t a = csdkit::hls::F2U(absmax);
      if (a < 0x00800000u || a >= 0x7f800000u) continue;  // tiny or non-finite: no index unit
      const float r = 1.0f / absmax;
      for (int i = 0; i < csdkit::hls::kQ8Block; ++i) {
        const uint32_t u = csdkit::hls::F2U(x[i]);
        const float mag = f.Mul(csdkit::hls::U2F(u & 0x7fffffffu), 1.0f);  // |x| as read
        IndexOp op;
        op.q = csdkit::hls::F2U(f.Mul(mag, r));
        op.is_signed = is_signed ? 1u : 0u;
        op.sign = u >> 31;
        op.nonzero = csdkit::hls::F2U(mag) != 0u ? 1u : 0u;
        op.exp = codes[i];
        if (op.q != 0u && op.q < 0x00800000u) ++cov.block_sub_q;
        blocks.push_back(op);
      }
    }
  }
  cov.block_ops = blocks.size();

  auto drive = [](Model& m, const IndexOp& op) {
    m.q_i = op.q;
    m.signed_map_i = op.is_signed;
    m.sign_i = op.sign;
    m.nonzero_i = op.nonzero;
  };
  auto junk = [](Model& m, uint64_t bits) {
    m.q_i = static_cast<uint32_t>(bits);
    m.signed_map_i = static_cast<uint32_t>(bits >> 32) & 1u;
    m.sign_i = static_cast<uint32_t>(bits >> 33) & 1u;
    m.nonzero_i = static_cast<uint32_t>(bits >> 34) & 1u;
  };
  const uint64_t nd = directed.size(), nb = blocks.size();
  auto gen = [&](uint64_t i, IndexOp* op) {
    const bool block = i >= nd && i < nd + nb;
    if (i < nd) {
      *op = directed[i];
    } else if (block) {
      *op = blocks[i - nd];
    } else {
      const uint64_t r = g.Bits();
      op->is_signed = static_cast<uint32_t>(r & 1u);
      op->sign = static_cast<uint32_t>(r >> 1) & 1u;
      op->nonzero = static_cast<uint32_t>(r >> 2) & 1u;
      const bool s = op->is_signed != 0u;
      switch ((r >> 3) % 8u) {
        case 0:
        case 1:
        case 2:  // uniform over [0, 1 + 16 ulp]
          op->q = static_cast<uint32_t>((r >> 8) % (0x3f800011ull));
          break;
        case 3:
        case 4:
        case 5: {  // a few ulps around a threshold
          const uint32_t t = Thr(s)[static_cast<uint32_t>(r >> 8) % NumThr(s)];
          op->q = t + static_cast<uint32_t>((r >> 24) % 9u) - 4u;
          break;
        }
        case 6:  // below the smallest threshold (index 0 and the non-zero rule)
          op->q = static_cast<uint32_t>(r >> 8) % Thr(s)[0];
          break;
        default:  // any pattern
          op->q = static_cast<uint32_t>(r >> 32);
          break;
      }
    }
    op->index = i;
    if (!block) {
      op->exp = ModelCode(*op);
      TB_CHECK_EQ_HEX(model, i, op->exp, OracleCode(*op), "%s", Inputs(*op).c_str());
    } else {
      // The block's code must also be the rule's (a disagreement would mean the bench forms q
      // or the flags differently from QuantizeBlockQ8).
      TB_CHECK_EQ_HEX(model, i, op->exp, OracleCode(*op), "%s (block)", Inputs(*op).c_str());
    }
    const bool s = op->is_signed != 0u;
    for (uint32_t j = 0; j < NumThr(s); ++j) cov.on_threshold += Thr(s)[j] == op->q ? 1u : 0u;
    const uint32_t k = op->exp & (s ? 0x7fu : 0xffu);
    if (k == 1u && op->q < Thr(s)[0]) ++cov.nonzero_rule;
    if (s && op->exp == 0x80u) ++cov.neg_zero_code;
    if (k == (s ? 127u : 255u)) ++cov.top_code;
  };
  auto check = [](Model& m, const IndexOp& op, Checker& chk) {
    TB_CHECK_EQ_HEX(chk, op.index, m.code_o, op.exp, "%s", Inputs(op).c_str());
  };

  pipe.Reset(junk);
  const RunStats s = pipe.Run(nd + nb + n, gen, drive, junk, check, rtl);
  pipe.PrintSpeed("directed+blocks+random", s);
  std::printf("COVERAGE %s: directed=%" PRIu64 " block_ops=%" PRIu64 " block_sub_q=%" PRIu64
              " on_threshold=%" PRIu64 " nonzero_rule=%" PRIu64 " neg_zero_code=%" PRIu64
              " top_code=%" PRIu64 "\n",
              name.c_str(), nd, cov.block_ops, cov.block_sub_q, cov.on_threshold, cov.nonzero_rule,
              cov.neg_zero_code, cov.top_code);
  const bool ok_cov = cov.block_ops >= 4u * kBlocksPerCase * 128u && cov.block_sub_q > 0 &&
                      cov.on_threshold > 0 && cov.nonzero_rule > 0 && cov.neg_zero_code > 0 &&
                      cov.top_code > 0;
  if (!ok_cov) std::printf("FAIL %s: the stimulus missed a required case\n", name.c_str());
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok = ok_rtl && ok_model && ok_cov;
  std::printf("%s tb_csd_q8_index\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
