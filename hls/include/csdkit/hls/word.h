// The 512-bit memory word and its lanes.
//
// Every kernel buffer is an array of 512-bit words (one AXI beat of the SmartSSD's memory
// interface): 16 binary32 lanes or 32 16-bit lanes. Buffers are allocated in whole words; lanes
// past the element count are part of the buffer (see docs/kernel-interface.md for what the
// kernels do with them).
#ifndef CSDKIT_HLS_WORD_H_
#define CSDKIT_HLS_WORD_H_

#include <cstdint>

#include "hls_vector.h"

namespace csdkit {
namespace hls {

constexpr unsigned kWordBytes = 64;
/// binary32 (or uint32) lanes per word.
constexpr unsigned kLanes = 16;
/// 16-bit lanes per word.
constexpr unsigned kHalfLanes = 32;

using Word = ::hls::vector<uint32_t, kLanes>;
static_assert(sizeof(Word) == kWordBytes, "a word is 512 bits");
static_assert(alignof(Word) == kWordBytes, "words are 64-byte aligned");

/// Words needed for `count` elements of `elem_bytes` (4 or 2) each.
constexpr uint64_t WordsFor(uint64_t count, unsigned elem_bytes) {
  return (count * elem_bytes + kWordBytes - 1) / kWordBytes;
}

/// 16-bit lane `j` (0..31) of a word; lane 2k is the low half of 32-bit lane k (little endian).
inline uint16_t GetHalf(const Word& w, unsigned j) {
  return static_cast<uint16_t>(w[j >> 1] >> ((j & 1u) * 16u));
}

/// Sets 16-bit lane `j` (0..31) of a word.
inline void SetHalf(Word& w, unsigned j, uint16_t h) {
  const unsigned sh = (j & 1u) * 16u;
  w[j >> 1] = (w[j >> 1] & ~(0xffffu << sh)) | (static_cast<uint32_t>(h) << sh);
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_WORD_H_
