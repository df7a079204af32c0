// Bench of csd_q8_rand16 (the 16-bit random numbers of eight consecutive elements): fed one
// group per cycle — groups, steps and seeds at the edges of their words (0, 2^32 - 1, 2^32,
// the largest group 2^61 - 1, step 2^64 - 1), then random ones (100 000 by default) — each of
// the eight outputs checked against csdkit::hls::Random16(seed, step, 8e + j) of state_q8.h,
// which the bench also checks against Random123's philox4x32_R(10) (model-vs-random123).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

#if __has_include(<Random123/philox.h>)
#include <Random123/philox.h>
#define TB_HAVE_RANDOM123 1
#else
#define TB_HAVE_RANDOM123 0
#endif

#include "Vcsd_q8_rand16.h"
#include "Vcsd_q8_rand16_csd_q8_rand16.h"
#include "csdkit/hls/state_q8.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;

constexpr uint64_t kDefaultRandomOps = 100000;
constexpr uint64_t kGroupMask = (1ull << 61) - 1;

struct RandOp {
  uint64_t index = 0;
  uint64_t seed = 0, step = 0, group = 0;
  uint32_t exp[8] = {};
};

std::string Inputs(const RandOp& op) {
  return Hex("seed=%016" PRIx64 " step=%016" PRIx64 " group=%016" PRIx64, op.seed, op.step,
             op.group);
}

/// Edge values of a 64-bit input.
constexpr uint64_t kEdges[] = {0ull,
                               1ull,
                               0xffffffffull,
                               0x100000000ull,
                               0x1ffffffffull,
                               0x8000000000000000ull,
                               0xffffffffffffffffull,
                               0x0123456789abcdefull};
constexpr uint64_t kNumEdges = sizeof(kEdges) / sizeof(kEdges[0]);
constexpr uint64_t kNumDirected = kNumEdges * kNumEdges * kNumEdges;

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  using Model = Vcsd_q8_rand16;
  const Options o = ParseOptions(argc, argv);
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_q8_rand16: seed=0x%" PRIx64 " random_ops=%" PRIu64 "%s\n", o.seed, n,
              TB_HAVE_RANDOM123 ? "" : " (Random123 not installed: model-vs-random123 skipped)");

  const std::string name = "csd_q8_rand16";
  Q8Pipe<Model, RandOp> pipe(name, Vcsd_q8_rand16_csd_q8_rand16::Latency, o.seed);
  Checker rtl(name + " rtl-vs-model", o.seed, 4);
  Checker lib(name + " model-vs-random123", o.seed, 4);
  std::mt19937_64 rng(o.seed);

  auto drive = [](Model& m, const RandOp& op) {
    m.seed_i = op.seed;
    m.step_i = op.step;
    m.group_i = op.group;
  };
  auto junk = [](Model& m, uint64_t bits) {
    m.seed_i = bits;
    m.step_i = ~bits;
    m.group_i = (bits * 0x9e3779b97f4a7c15ull) & kGroupMask;
  };
  auto gen = [&](uint64_t i, RandOp* op) {
    if (i < kNumDirected) {
      op->seed = kEdges[i % kNumEdges];
      op->step = kEdges[(i / kNumEdges) % kNumEdges];
      op->group = kEdges[i / (kNumEdges * kNumEdges)] & kGroupMask;  // all ones: 2^61 - 1
    } else {
      const uint64_t r = rng();
      op->seed = rng();
      op->step = (r & 1u) != 0u ? rng() : (r >> 1) & 0xfffffu;  // small or any step
      op->group = ((r & 2u) != 0u ? rng() : (r >> 24) & 0xffffffffull) & kGroupMask;
    }
    for (uint64_t j = 0; j < 8; ++j) {
      op->exp[j] = csdkit::hls::Random16(op->seed, op->step, (op->group << 3) | j);
    }
#if TB_HAVE_RANDOM123
    const philox4x32_ctr_t c = {
        {static_cast<uint32_t>(op->group), static_cast<uint32_t>(op->group >> 32),
         static_cast<uint32_t>(op->step), static_cast<uint32_t>(op->step >> 32)}};
    const philox4x32_key_t k = {
        {static_cast<uint32_t>(op->seed), static_cast<uint32_t>(op->seed >> 32)}};
    const philox4x32_ctr_t w = philox4x32_R(10, c, k);
    for (unsigned j = 0; j < 8; ++j) {
      TB_CHECK_EQ_HEX(lib, i, op->exp[j], (w.v[j >> 1] >> (16 * (j & 1))) & 0xffffu, "%s j=%u",
                      Inputs(*op).c_str(), j);
    }
#endif
  };
  auto check = [](Model& m, const RandOp& op, Checker& chk) {
    for (unsigned j = 0; j < 8; ++j) {
      const uint32_t got = (static_cast<uint32_t>(m.rand_o[j >> 1]) >> (16 * (j & 1))) & 0xffffu;
      TB_CHECK_EQ_HEX(chk, op.index, got, op.exp[j], "%s j=%u", Inputs(op).c_str(), j);
    }
  };

  pipe.Reset(junk);
  const RunStats s = pipe.Run(kNumDirected + n, gen, drive, junk, check, rtl);
  pipe.PrintSpeed("directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_lib = lib.Finish();
  const bool ok = ok_rtl && ok_lib;
  std::printf("%s tb_csd_q8_rand16\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
