// Bench of csd_philox4x32 (Philox4x32-10), two Verilated models: MulStages = 1 (the default,
// 20 cycles) and MulStages = 2 (30 cycles). Each is fed one counter per cycle: Random123's
// known-answer vectors, counters and keys of all-zero / all-one / single-bit words, then random
// counters and keys (100 000 by default), checked as they emerge against the Random123 library
// (philox4x32_R(10, ctr, key)) and against csdkit's C++ core (Philox4x32x10 of state_q8.h),
// which is itself compared with the library on every vector (model-vs-random123).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#if __has_include(<Random123/philox.h>)
#include <Random123/philox.h>
#define TB_HAVE_RANDOM123 1
#else
#define TB_HAVE_RANDOM123 0
#endif

#include "Vcsd_philox4x32.h"
#include "Vcsd_philox4x32_csd_philox4x32.h"
#include "Vcsd_philox4x32_m2.h"
#include "Vcsd_philox4x32_m2_csd_philox4x32.h"
#include "csdkit/hls/state_q8.h"
#include "tb_q8.h"

namespace {

using csd_tb::Checker;
using csd_tb::Hex;

constexpr uint64_t kDefaultRandomOps = 100000;

/// Random123's known-answer vectors of philox4x32_10 (its kat_vectors file): ctr, key, result.
struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t out[4];
};
constexpr Kat kKats[] = {
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
     {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};
constexpr uint64_t kNumKats = sizeof(kKats) / sizeof(kKats[0]);

struct PhiloxOp {
  uint64_t index = 0;
  uint32_t ctr[4] = {};
  uint32_t key[2] = {};
  uint32_t exp[4] = {};
};

std::string Inputs(const PhiloxOp& op) {
  return Hex("ctr=%08x_%08x_%08x_%08x key=%08x_%08x", op.ctr[0], op.ctr[1], op.ctr[2], op.ctr[3],
             op.key[0], op.key[1]);
}

/// The library's answer (or, without Random123, the known answers and the C++ core's).
void Reference(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
#if TB_HAVE_RANDOM123
  const philox4x32_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
  const philox4x32_key_t k = {{key[0], key[1]}};
  const philox4x32_ctr_t r = philox4x32_R(10, c, k);
  for (int w = 0; w < 4; ++w) out[w] = r.v[w];
#else
  csdkit::hls::Philox4x32x10(ctr, key, out);
#endif
}

/// Counter or key word i of the directed stimulus beyond the known answers: 0, all ones, one
/// bit, all but one bit.
uint32_t DirectedWord(uint64_t i, unsigned w) {
  const uint64_t x = (i * 0x9e3779b97f4a7c15ull) >> (8 * w);
  switch ((x >> 5) % 4u) {
    case 0:
      return 0u;
    case 1:
      return 0xffffffffu;
    case 2:
      return 1u << (x & 31u);
    default:
      return ~(1u << (x & 31u));
  }
}
constexpr uint64_t kNumDirected = 512;

template <class Model>
bool RunModel(const char* name, unsigned latency, const csd_tb::Options& o, uint64_t n) {
  csd_tb::Q8Pipe<Model, PhiloxOp> pipe(name, latency, o.seed);
  Checker rtl(std::string(name) + " rtl-vs-random123", o.seed, 8);
  Checker model(std::string(name) + " model-vs-random123", o.seed, 8);
  Checker kat(std::string(name) + " random123-vs-kat", o.seed, 8);
  std::mt19937_64 rng(o.seed);

  auto drive = [](Model& m, const PhiloxOp& op) {
    for (int w = 0; w < 4; ++w) m.ctr_i[w] = op.ctr[w];
    m.key_i = (static_cast<uint64_t>(op.key[1]) << 32) | op.key[0];
  };
  auto junk = [](Model& m, uint64_t bits) {
    for (int w = 0; w < 4; ++w) m.ctr_i[w] = static_cast<uint32_t>(bits >> (8 * w));
    m.key_i = ~bits;
  };
  auto gen = [&](uint64_t i, PhiloxOp* op) {
    if (i < kNumKats) {
      for (int w = 0; w < 4; ++w) op->ctr[w] = kKats[i].ctr[w];
      for (int w = 0; w < 2; ++w) op->key[w] = kKats[i].key[w];
    } else if (i < kNumKats + kNumDirected) {
      for (unsigned w = 0; w < 4; ++w) op->ctr[w] = DirectedWord(i, w);
      for (unsigned w = 0; w < 2; ++w) op->key[w] = DirectedWord(~i, w);
    } else {
      // Random counters and keys; one in four has a small counter (consecutive elements, step
      // and seed with zero high words, as a store draws them).
      const uint64_t a = rng(), b = rng(), c = rng();
      const bool small = (c & 3u) == 0u;
      op->ctr[0] = static_cast<uint32_t>(a);
      op->ctr[1] = small ? 0u : static_cast<uint32_t>(a >> 32);
      op->ctr[2] = small ? static_cast<uint32_t>(b & 0xffffu) : static_cast<uint32_t>(b);
      op->ctr[3] = small ? 0u : static_cast<uint32_t>(b >> 32);
      op->key[0] = static_cast<uint32_t>(c >> 2);
      op->key[1] = small ? 0u : static_cast<uint32_t>(c >> 34) ^ static_cast<uint32_t>(a);
    }
    Reference(op->ctr, op->key, op->exp);
    uint32_t mine[4];
    csdkit::hls::Philox4x32x10(op->ctr, op->key, mine);
    for (unsigned w = 0; w < 4; ++w) {
      TB_CHECK_EQ_HEX(model, i, mine[w], op->exp[w], "%s word=%u", Inputs(*op).c_str(), w);
      if (i < kNumKats) {
        TB_CHECK_EQ_HEX(kat, i, op->exp[w], kKats[i].out[w], "%s word=%u", Inputs(*op).c_str(), w);
      }
    }
  };
  auto check = [](Model& m, const PhiloxOp& op, Checker& chk) {
    for (unsigned w = 0; w < 4; ++w) {
      TB_CHECK_EQ_HEX(chk, op.index, static_cast<uint32_t>(m.words_o[w]), op.exp[w], "%s word=%u",
                      Inputs(op).c_str(), w);
    }
  };

  pipe.Reset(junk);
  const csd_tb::RunStats s = pipe.Run(kNumKats + kNumDirected + n, gen, drive, junk, check, rtl);
  pipe.PrintSpeed("kat+directed+random", s);
  const bool ok_rtl = rtl.Finish();
  const bool ok_model = model.Finish();
  const bool ok_kat = kat.Finish();
  return ok_rtl && ok_model && ok_kat;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace csd_tb;
  const Options o = ParseOptions(argc, argv);
  const uint64_t n = o.n != 0 ? o.n : kDefaultRandomOps;
  std::printf("tb_csd_philox4x32: seed=0x%" PRIx64 " random_ops=%" PRIu64 " reference=%s\n", o.seed,
              n,
              TB_HAVE_RANDOM123 ? "Random123 philox4x32_R(10)"
                                : "csdkit Philox4x32x10 (Random123 not installed)");
  bool ok =
      RunModel<Vcsd_philox4x32>("csd_philox4x32/m1", Vcsd_philox4x32_csd_philox4x32::Latency, o, n);
  ok = RunModel<Vcsd_philox4x32_m2>("csd_philox4x32/m2", Vcsd_philox4x32_m2_csd_philox4x32::Latency,
                                    o, n) &&
       ok;
  std::printf("%s tb_csd_philox4x32\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
