// CRC-32 of the state arrays as the updater streams them (the status word's CRC lanes, mode.h).
//
// The CRC is zlib's crc32(): the reflected polynomial 0xEDB88320, register initialised to
// 0xFFFFFFFF, the final value complemented. Kernel data is a sequence of 32-bit words stored
// little-endian, so the CRC advances one 32-bit word (4 bytes, low byte first) at a time, or one
// 512-bit memory word (word.h) with a lane count for the last, partial word of an array.
//
// The register is kept raw (not complemented) while the words stream: start from kCrc32Init,
// advance with Crc32Word / Crc32Beat, and report Crc32Final(register), which equals zlib's
// crc32(0, bytes, len) over the same bytes (0 for no bytes). tests/crc_test.cpp checks every
// form below against zlib.
//
// Two implementations of the one 32-bit step, equal bit for bit:
//   * Crc32WordBitwise: 32 shift-and-conditional-xor steps, unrolled. Pure logic, no memory:
//     every register bit after the step is an XOR of register and data bits, so a 512-bit beat
//     (16 steps chained) is one XOR network — the parallel CRC a hardware CRC is — which HLS
//     schedules in one beat per cycle without a ROM on the path. The HLS build uses it.
//   * Crc32WordTable: "slicing by 4" with four 256-entry tables (4 KiB) computed at compile time
//     (constexpr): four independent lookups per word instead of 32 dependent steps. The
//     software builds (the host model's general datapath, the OpenCL build) use it; one
//     256-entry table would make four dependent lookups per word, and the CRC chain is the
//     longest dependency of the general datapath in software, so the three more tables pay for
//     themselves there. In HLS the same chained lookups could not be scheduled at one beat per
//     cycle, hence the bitwise form there.
// Both are plain C++ that g++, Vitis HLS and clang's C++ for OpenCL accept (no intrinsics, no
// heap, no standard library beyond <cstdint>).
#ifndef CSDKIT_HLS_CRC_H_
#define CSDKIT_HLS_CRC_H_

#include <cstdint>

#include "csdkit/hls/word.h"

namespace csdkit {
namespace hls {

/// zlib's CRC-32 polynomial, reflected.
constexpr uint32_t kCrc32Poly = 0xedb88320u;
/// The raw register before the first byte.
constexpr uint32_t kCrc32Init = 0xffffffffu;

/// The reported CRC of a raw register: equal to zlib's crc32() over the bytes streamed.
inline uint32_t Crc32Final(uint32_t reg) { return ~reg; }

/// Advances a raw register over one 32-bit word (its 4 bytes, low byte first) bit by bit: the
/// synthesizable form (no tables).
inline uint32_t Crc32WordBitwise(uint32_t reg, uint32_t w) {
  uint32_t c = reg ^ w;
CRC_BITS:
  for (unsigned b = 0; b < 32; ++b) {
#pragma HLS UNROLL
    c = (c >> 1) ^ (kCrc32Poly & (0u - (c & 1u)));
  }
  return c;
}

/// The slicing-by-4 tables: t[0][x] is the register after one byte x from a zero register;
/// t[k][x] after byte x followed by k zero bytes.
struct Crc32Tables {
  uint32_t t[4][256];
};

constexpr Crc32Tables MakeCrc32Tables() {
  Crc32Tables r{};
  for (uint32_t x = 0; x < 256u; ++x) {
    uint32_t c = x;
    for (unsigned b = 0; b < 8; ++b) c = (c >> 1) ^ (kCrc32Poly & (0u - (c & 1u)));
    r.t[0][x] = c;
  }
  for (unsigned k = 1; k < 4; ++k) {
    for (uint32_t x = 0; x < 256u; ++x) {
      const uint32_t p = r.t[k - 1][x];
      r.t[k][x] = (p >> 8) ^ r.t[0][p & 0xffu];
    }
  }
  return r;
}

constexpr Crc32Tables kCrc32Tables = MakeCrc32Tables();

/// Advances a raw register over one 32-bit word (its 4 bytes, low byte first) with four table
/// lookups: the software form, equal to Crc32WordBitwise.
inline uint32_t Crc32WordTable(uint32_t reg, uint32_t w) {
  const uint32_t c = reg ^ w;
  return kCrc32Tables.t[3][c & 0xffu] ^ kCrc32Tables.t[2][(c >> 8) & 0xffu] ^
         kCrc32Tables.t[1][(c >> 16) & 0xffu] ^ kCrc32Tables.t[0][c >> 24];
}

/// Advances a raw register over one 32-bit word: the bitwise form in HLS, the table form in
/// software builds (see the top of this file).
inline uint32_t Crc32Word(uint32_t reg, uint32_t w) {
#ifdef __SYNTHESIS__
  return Crc32WordBitwise(reg, w);
#else
  return Crc32WordTable(reg, w);
#endif
}

/// Advances a raw register over the first `lanes` 32-bit lanes (0..16) of a 512-bit word, lane 0
/// first: a whole beat, or the last word of an array whose length is not a multiple of 16. The
/// lanes past `lanes` are not part of the CRC.
inline uint32_t Crc32Beat(uint32_t reg, const Word& w, unsigned lanes) {
CRC_LANES:
  for (unsigned l = 0; l < kLanes; ++l) {
#pragma HLS UNROLL
    const uint32_t next = Crc32Word(reg, w[l]);
    reg = l < lanes ? next : reg;
  }
  return reg;
}

/// Advances kN raw registers reg[0..kN) side by side, register k over the first `lanes` lanes of
/// word w[k] when on[k] (else it is kept; w[k] must still hold defined values): the same values as
/// Crc32Beat on each, interleaved lane by lane. (Pointers, not array references: C++ for OpenCL
/// would not deduce the bound through an address space.)
/// In hardware that is kN independent networks either way; in software it lets the kN
/// dependency chains overlap (one word's 16 chained steps alone fill a processor's out-of-order
/// window, so three arrays checksummed one after the other run three times as long).
template <unsigned kN>
inline void Crc32Beats(uint32_t* reg, const Word* w, const bool* on, unsigned lanes) {
CRC_LANES_N:
  for (unsigned l = 0; l < kLanes; ++l) {
#pragma HLS UNROLL
    for (unsigned k = 0; k < kN; ++k) {
#pragma HLS UNROLL
      const uint32_t next = Crc32Word(reg[k], w[k][l]);
      reg[k] = on[k] && l < lanes ? next : reg[k];
    }
  }
}

/// The product of a 32x32 matrix over GF(2) (column k = mat[k]) and a vector.
inline uint32_t Gf2Times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
GF2_TIMES:
  for (unsigned k = 0; k < 32; ++k) {
#pragma HLS UNROLL
    sum ^= (vec >> k) & 1u ? mat[k] : 0u;
  }
  return sum;
}

/// sq = mat * mat over GF(2).
inline void Gf2Square(uint32_t* sq, const uint32_t* mat) {
  for (unsigned k = 0; k < 32; ++k) sq[k] = Gf2Times(mat, mat[k]);
}

/// The reported CRC of A followed by B from the reported CRCs of A and of B and B's length in
/// bytes (zlib's crc32_combine): A's CRC is advanced over len2 zero bytes by squaring the
/// one-zero-bit operator (the register shifted once, the polynomial folded in) — a logarithmic
/// number of 32x32 GF(2) matrix products — then B's CRC is added. Used once per launch for a q8
/// moment's lane (its codes, then its absmax values, streamed side by side).
inline uint32_t Crc32Combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  if (len2 == 0) return crc1;
  uint32_t odd[32], even[32];
  odd[0] = kCrc32Poly;  // the operator for one zero bit
  for (unsigned k = 1; k < 32; ++k) odd[k] = 1u << (k - 1);
  Gf2Square(even, odd);  // two zero bits
  Gf2Square(odd, even);  // four zero bits
CRC_COMBINE:
  while (len2 != 0) {  // one zero byte first, then squared per bit of len2
    Gf2Square(even, odd);
    if (len2 & 1u) crc1 = Gf2Times(even, crc1);
    len2 >>= 1;
    if (len2 == 0) break;
    Gf2Square(odd, even);
    if (len2 & 1u) crc1 = Gf2Times(odd, crc1);
    len2 >>= 1;
  }
  return crc1 ^ crc2;
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_CRC_H_
