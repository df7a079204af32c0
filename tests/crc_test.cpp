// The CRC-32 building blocks against zlib's crc32: crc.h (the bitwise and the table step, a
// 512-bit beat with every lane count, three beats side by side) and the host model's
// carry-less-multiplication CRC (hls/host/crc_fast.h, each implementation the processor runs,
// with its non-finite count), on random data of many lengths and alignments. Every mismatch
// prints the seed, the length, the offset and expected / actual in hex.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "crc_fast.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/splitmix.h"

namespace csdkit::testing {
namespace {

namespace hh = hls::host;

constexpr uint64_t kSeed = 0xc3c32000u;

// zlib's CRC-32 of `words` 32-bit words (their bytes in memory order: little-endian).
uint32_t Zlib(const uint32_t* p, size_t words) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(p), words * 4));
}

// Random words; about one in eight gets an all-ones exponent (an infinity or a NaN), so the
// non-finite counts are exercised too.
std::vector<uint32_t> RandomWords(size_t count, uint64_t seed) {
  SplitMix64 g{seed};
  std::vector<uint32_t> v(count);
  for (uint32_t& x : v) {
    x = static_cast<uint32_t>(g.Next());
    if ((g.Next() & 7u) == 0u) x |= hls::kExpMask;
  }
  return v;
}

std::string Hex(uint64_t x) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%08llx", static_cast<unsigned long long>(x));
  return b;
}

// Lengths in words: every length up to a few folding blocks, then scattered larger ones.
std::vector<size_t> Lengths() {
  std::vector<size_t> r;
  for (size_t n = 0; n <= 300; ++n) r.push_back(n);
  for (size_t n : {511u, 512u, 513u, 1023u, 1024u, 1031u, 4095u, 4096u, 4099u, 8192u, 65537u})
    r.push_back(n);
  return r;
}

TEST(Crc32, KnownValue) {
  // "123456789" is the CRC catalogue's check string; zlib's CRC-32 of it is 0xcbf43926. Here
  // as 8 bytes ("12345678", two little-endian words) against zlib, and the check value of the
  // whole string through zlib to confirm the reference itself.
  const char s[] = "123456789";
  ASSERT_EQ(crc32_z(0L, reinterpret_cast<const Bytef*>(s), 9), 0xcbf43926u);
  const uint32_t w[2] = {0x34333231u, 0x38373635u};
  uint32_t bit = hls::kCrc32Init, tab = hls::kCrc32Init;
  for (uint32_t x : w) {
    bit = hls::Crc32WordBitwise(bit, x);
    tab = hls::Crc32WordTable(tab, x);
  }
  const uint32_t exp = static_cast<uint32_t>(crc32_z(0L, reinterpret_cast<const Bytef*>(s), 8));
  EXPECT_EQ(hls::Crc32Final(bit), exp) << "bitwise GOT=" << Hex(hls::Crc32Final(bit))
                                       << " EXP=" << Hex(exp);
  EXPECT_EQ(hls::Crc32Final(tab), exp) << "table GOT=" << Hex(hls::Crc32Final(tab))
                                       << " EXP=" << Hex(exp);
  EXPECT_EQ(hls::Crc32Final(hls::kCrc32Init), 0u) << "the CRC of no bytes is 0, as zlib's";
}

// Both 32-bit steps, word by word, against zlib, on every length and two alignments.
TEST(Crc32, WordStepsEqualZlib) {
  const std::vector<uint32_t> d = RandomWords(70000, kSeed);
  for (size_t n : Lengths()) {
    for (size_t off : {0u, 3u}) {
      const uint32_t exp = Zlib(d.data() + off, n);
      uint32_t bit = hls::kCrc32Init, tab = hls::kCrc32Init, sel = hls::kCrc32Init;
      for (size_t i = 0; i < n; ++i) {
        bit = hls::Crc32WordBitwise(bit, d[off + i]);
        tab = hls::Crc32WordTable(tab, d[off + i]);
        sel = hls::Crc32Word(sel, d[off + i]);
      }
      ASSERT_EQ(hls::Crc32Final(bit), exp) << "Crc32WordBitwise seed=" << Hex(kSeed)
                                           << " words=" << n << " offset=" << off
                                           << " EXP=" << Hex(exp)
                                           << " GOT=" << Hex(hls::Crc32Final(bit));
      ASSERT_EQ(hls::Crc32Final(tab), exp) << "Crc32WordTable seed=" << Hex(kSeed)
                                           << " words=" << n << " offset=" << off
                                           << " EXP=" << Hex(exp)
                                           << " GOT=" << Hex(hls::Crc32Final(tab));
      ASSERT_EQ(hls::Crc32Final(sel), exp) << "Crc32Word seed=" << Hex(kSeed) << " words=" << n
                                           << " offset=" << off << " EXP=" << Hex(exp)
                                           << " GOT=" << Hex(hls::Crc32Final(sel));
    }
  }
}

// Every input of the step exercised bit by bit: the two forms agree on single-bit registers and
// words (the step is linear, so these columns determine it).
TEST(Crc32, BitwiseAndTableAgreeOnEveryBit) {
  for (unsigned b = 0; b < 32; ++b) {
    for (uint32_t reg : {0u, 1u << b, 0xffffffffu}) {
      const uint32_t w = 1u << b;
      EXPECT_EQ(hls::Crc32WordBitwise(reg, w), hls::Crc32WordTable(reg, w))
          << "reg=" << Hex(reg) << " word=" << Hex(w);
      EXPECT_EQ(hls::Crc32WordBitwise(w, 0u), hls::Crc32WordTable(w, 0u)) << "reg=" << Hex(w);
    }
  }
}

// A stream of 512-bit words, the last one partial (every lane count 0..16), against zlib over
// exactly the valid lanes' bytes; the lanes past the count hold random bits that must not count.
TEST(Crc32, BeatWithLaneCountEqualsZlib) {
  const std::vector<uint32_t> d = RandomWords(16 * 70, kSeed + 1);
  for (uint32_t words = 1; words <= 70; words += (words < 8 ? 1 : 7)) {
    std::vector<hls::Word> w(words);
    for (uint32_t i = 0; i < words * hls::kLanes; ++i) w[i / 16][i % 16] = d[i];
    for (unsigned last = 0; last <= hls::kLanes; ++last) {
      const size_t n = size_t{words - 1} * hls::kLanes + last;
      uint32_t reg = hls::kCrc32Init;
      for (uint32_t k = 0; k < words; ++k) {
        reg = hls::Crc32Beat(reg, w[k], k + 1 == words ? last : hls::kLanes);
      }
      const uint32_t exp = Zlib(d.data(), n);
      ASSERT_EQ(hls::Crc32Final(reg), exp)
          << "Crc32Beat seed=" << Hex(kSeed + 1) << " words=" << words << " last lanes=" << last
          << " EXP=" << Hex(exp) << " GOT=" << Hex(hls::Crc32Final(reg));
    }
  }
}

// Three registers side by side (the kernel's LoadState / StoreState) equal three Crc32Beat
// chains, and a register that is off stays as it was.
TEST(Crc32, BeatsSideBySideEqualSeparateBeats) {
  const std::vector<uint32_t> d = RandomWords(16 * 3 * 9, kSeed + 2);
  for (unsigned mask = 0; mask < 8; ++mask) {
    for (unsigned lanes = 0; lanes <= hls::kLanes; lanes += 3) {
      uint32_t reg[3] = {hls::kCrc32Init, 0x12345678u, hls::kCrc32Init};
      uint32_t sep[3] = {reg[0], reg[1], reg[2]};
      const bool on[3] = {(mask & 1u) != 0, (mask & 2u) != 0, (mask & 4u) != 0};
      for (unsigned k = 0; k < 9; ++k) {
        hls::Word w[3];
        for (unsigned a = 0; a < 3; ++a)
          for (unsigned l = 0; l < hls::kLanes; ++l) w[a][l] = d[(k * 3 + a) * 16 + l];
        const unsigned lc = k == 8 ? lanes : hls::kLanes;
        hls::Crc32Beats<3>(reg, w, on, lc);
        for (unsigned a = 0; a < 3; ++a)
          if (on[a]) sep[a] = hls::Crc32Beat(sep[a], w[a], lc);
      }
      for (unsigned a = 0; a < 3; ++a) {
        EXPECT_EQ(reg[a], sep[a]) << "Crc32Beats seed=" << Hex(kSeed + 2) << " on-mask=" << mask
                                  << " last lanes=" << lanes << " register " << a
                                  << " EXP=" << Hex(sep[a]) << " GOT=" << Hex(reg[a]);
      }
    }
  }
}

// The host model's CRC (each implementation this processor has) against zlib, and its
// non-finite count against a plain loop, on every length and several alignments.
TEST(Crc32Host, EveryImplementationEqualsZlib) {
  const std::vector<uint32_t> d = RandomWords(70000, kSeed + 3);
  const hh::CrcImpl was = hh::ActiveCrcImpl();
  int impls = 0;
  for (hh::CrcImpl impl : {hh::CrcImpl::kVpclmul512, hh::CrcImpl::kVpclmul, hh::CrcImpl::kPclmul,
                            hh::CrcImpl::kTable}) {
    if (!hh::SetCrcImpl(impl)) {
      std::printf("CRC implementation %s: not on this processor, skipped\n", hh::CrcImplName(impl));
      continue;
    }
    ++impls;
    for (size_t n : Lengths()) {
      for (size_t off : {0u, 1u, 5u}) {
        const uint32_t* p = d.data() + off;
        const uint32_t exp = Zlib(p, n);
        uint64_t exp_nf = 0;
        for (size_t i = 0; i < n; ++i) exp_nf += hls::IsNonFinite(p[i]) ? 1u : 0u;
        const uint32_t got = hls::Crc32Final(hh::Crc32Words(hls::kCrc32Init, p, n));
        uint64_t nf = 7;  // added to, not overwritten
        const uint32_t got_nf =
            hls::Crc32Final(hh::Crc32WordsNonFinite(hls::kCrc32Init, p, n, &nf));
        const std::string ctx = std::string(hh::CrcImplName(impl)) + " seed=" + Hex(kSeed + 3) +
                                " words=" + std::to_string(n) + " offset=" + std::to_string(off);
        ASSERT_EQ(got, exp) << "Crc32Words " << ctx << " EXP=" << Hex(exp) << " GOT=" << Hex(got);
        ASSERT_EQ(got_nf, exp) << "Crc32WordsNonFinite " << ctx << " EXP=" << Hex(exp)
                               << " GOT=" << Hex(got_nf);
        ASSERT_EQ(nf, exp_nf + 7) << "non-finite count " << ctx << " EXP=" << Hex(exp_nf + 7)
                                  << " GOT=" << Hex(nf);
      }
    }
    // A register carried across calls of any split equals one call.
    for (size_t split : {0u, 1u, 17u, 64u, 1000u}) {
      const size_t n = 4099;
      const uint32_t exp = Zlib(d.data(), n);
      uint32_t reg = hh::Crc32Words(hls::kCrc32Init, d.data(), split);
      reg = hh::Crc32Words(reg, d.data() + split, n - split);
      ASSERT_EQ(hls::Crc32Final(reg), exp) << hh::CrcImplName(impl) << " split at " << split
                                           << " EXP=" << Hex(exp)
                                           << " GOT=" << Hex(hls::Crc32Final(reg));
    }
  }
  hh::SetCrcImpl(was);
  EXPECT_GE(impls, 1);
  std::printf("host CRC: %s in use\n", hh::CrcImplName(hh::ActiveCrcImpl()));
}

}  // namespace
}  // namespace csdkit::testing

// The combination used for a q8 moment's lanes (its codes, then its absmax values) equals
// zlib's crc32_combine and the CRC of the concatenated bytes, for lengths of B from 0 to past a
// sparse block's absmax values.
TEST(Crc32, CombineEqualsZlibAndTheConcatenation) {
  std::vector<uint8_t> bytes(70000);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint8_t& b : bytes) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(x >> 56);
  }
  for (size_t len_a : {size_t{0}, size_t{1}, size_t{256}, size_t{5000}}) {
    for (size_t len_b : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{1024}, size_t{4096},
                         size_t{65535}}) {
      const uint32_t a = static_cast<uint32_t>(crc32_z(0, bytes.data(), len_a));
      const uint32_t b = static_cast<uint32_t>(crc32_z(0, bytes.data() + len_a, len_b));
      const uint32_t whole = static_cast<uint32_t>(crc32_z(0, bytes.data(), len_a + len_b));
      const uint32_t zl = static_cast<uint32_t>(crc32_combine(a, b, static_cast<z_off_t>(len_b)));
      EXPECT_EQ(csdkit::hls::Crc32Combine(a, b, len_b), whole)
          << "len_a " << len_a << " len_b " << len_b;
      EXPECT_EQ(zl, whole);
    }
  }
}
