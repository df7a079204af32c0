// The host model's CRC-32 of whole arrays (host builds only; never part of the HLS, OpenCL or RTL
// kernels).
//
// The kernel's CRC lanes (mode.h) are zlib's CRC-32 of the state arrays as read and as written.
// The general datapath advances them one 512-bit word at a time with crc.h, as the hardware does;
// the host model's specialised datapath (csd_update) computes the same values over each chunk of
// the arrays while the chunk is in cache, with carry-less multiplication (PCLMULQDQ, or
// VPCLMULQDQ on 256-bit vectors): the folding method of Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (2009), with the constants of the Linux kernel's
// crc32-pclmul for zlib's polynomial. A CRC is the same value however it is computed: every
// implementation here is checked against zlib and against crc.h (tests/crc_test.cpp).
#ifndef CSDKIT_HLS_HOST_CRC_FAST_H_
#define CSDKIT_HLS_HOST_CRC_FAST_H_

#include <cstddef>
#include <cstdint>

namespace csdkit {
namespace hls {
namespace host {

/// Advances a raw CRC-32 register (crc.h: start from kCrc32Init, report Crc32Final) over
/// `words` 32-bit words, each little-endian: the same as Crc32Word over each word in turn.
uint32_t Crc32Words(uint32_t reg, const uint32_t* p, size_t words);

/// The same, and adds to *nonfinite the number of the words whose binary32 exponent field is all
/// ones (an infinity or a NaN).
uint32_t Crc32WordsNonFinite(uint32_t reg, const uint32_t* p, size_t words, uint64_t* nonfinite);

/// Folding constants: a 128-bit accumulator lane (lo, hi: its 64-bit halves) moves D bits on
/// as clmul(lo, k.lo) ^ clmul(hi, k.hi), with k.lo = x^(D+32) and k.hi = x^(D-32) mod P
/// (bit-reflected, times 2). For the host model's fused loops (datapath_isa.cpp) and for
/// crc_fast.cpp.
struct CrcFold {
  uint64_t lo, hi;
};
constexpr CrcFold kCrcFold128 = {0x1751997d0ull, 0x0ccaa009eull};
constexpr CrcFold kCrcFold256 = {0x0f1da05aaull, 0x15a546366ull};
constexpr CrcFold kCrcFold512 = {0x154442bd4ull, 0x1c6e41596ull};
constexpr CrcFold kCrcFold1024 = {0x1e88ef372ull, 0x14a7fe880ull};
constexpr CrcFold kCrcFold2048 = {0x11542778aull, 0x1322d1430ull};

/// The raw register (crc.h) of a message folded into one 128-bit accumulator (lo: its low 64
/// bits, the earlier bytes), the register having been xored into its first 32 bits.
uint32_t Crc32FromFold(uint64_t lo, uint64_t hi);

/// The implementations (kVpclmul512 came last, hence its number).
enum class CrcImpl : uint32_t { kVpclmul = 0, kPclmul = 1, kTable = 2, kVpclmul512 = 3 };

/// Whether this processor runs `impl` (kVpclmul512: AVX-512 F/BW/VL and VPCLMULQDQ, 512-bit
/// folding; kVpclmul: AVX2 and VPCLMULQDQ, 256-bit; kPclmul: SSE4.1 and PCLMULQDQ; kTable:
/// always). The widest is chosen by default.
bool HasCrcImpl(CrcImpl impl);
/// The implementation in use: the widest available unless SetCrcImpl chose one.
CrcImpl ActiveCrcImpl();
/// Chooses the implementation (tests, benchmarks). Returns false, changing nothing, when the
/// processor lacks it.
bool SetCrcImpl(CrcImpl impl);
const char* CrcImplName(CrcImpl impl);

}  // namespace host
}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_HOST_CRC_FAST_H_
