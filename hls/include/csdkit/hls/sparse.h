// The block-sparse gradient format and its streaming decoder.
//
// FORMAT (one subgroup of n elements; docs/sparse-format.md has the rationale and byte counts).
// The subgroup is cut into blocks of 2^16 elements, nb = ceil(n / 2^16).
//   blk  uint32[nb + 1]  blk[0] = 0, blk[b + 1] - blk[b] = entries in block b, blk[nb] = nnz
//   idx  uint16[nnz]     offset of each entry inside its block, strictly ascending per block
//   val  T[nnz]          the entry's gradient value, T = fp32, fp16 or bf16 (the grad dtype)
// Each array lives in its own buffer of whole 512-bit words. A kept fp16/bf16 value costs
// 2 + 2 = 4 bytes plus 4 bytes per 2^16 elements of block table; a kept fp32 value costs 6.
//
// DECODING is a merge, not a scatter: the dense gradient is produced in element order and each
// element compares its own offset with the next unread entry; an entry's index only decides
// whether its value is taken, never where anything is written. A stream is validated in full
// (ValidateSparse) before the kernel writes anything.
#ifndef CSDKIT_HLS_SPARSE_H_
#define CSDKIT_HLS_SPARSE_H_

#include <cstdint>

#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/word.h"

namespace csdkit {
namespace hls {

constexpr unsigned kBlockBits = 16;
constexpr uint32_t kBlockElems = 1u << kBlockBits;

/// Blocks of a subgroup of n elements.
inline uint32_t NumBlocks(uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(n) + kBlockElems - 1) >> kBlockBits);
}

/// Elements in block b of a subgroup of n elements.
inline uint32_t BlockSize(uint32_t n, uint32_t b) {
  const uint32_t start = b << kBlockBits;
  const uint32_t left = n - start;
  return left < kBlockElems ? left : kBlockElems;
}

/// Entry b of the block table.
inline uint32_t BlkAt(const Word* blk, uint32_t b) { return blk[b >> 4][b & 15u]; }

/// In-block offset of entry k.
inline uint32_t IdxAt(const Word* idx, uint32_t k) { return GetHalf(idx[k >> 5], k & 31u); }

/// Value of entry k, widened exactly to binary32 bits.
inline uint32_t ValAt(const Word* val, DType t, uint32_t k) {
  if (t == DType::kFp32) return val[k >> 4][k & 15u];
  const uint16_t h = GetHalf(val[k >> 5], k & 31u);
  return t == DType::kFp16 ? F16ToF32(h) : Bf16ToF32(h);
}

/// Checks a sparse stream completely, reading only the block table and the indices. Returns 0
/// for a valid stream, or the error bit (mode.h) of the first problem found, with the offending
/// entry index (kErrUnsorted, kErrDuplicate, kErrOutOfRange) or block-table index (kErrBlkTable,
/// kErrCount) in *pos. Never reads the index buffer past entry nnz - 1, and reads it at all only
/// after the block table has been proved consistent with nnz.
inline uint32_t ValidateSparse(const Word* blk, const Word* idx, uint32_t n, uint32_t nnz,
                               uint32_t* pos) {
  *pos = 0;
  if (nnz > n) return kErrCount;
  const uint32_t nb = NumBlocks(n);
  if (BlkAt(blk, 0) != 0u) return kErrBlkTable;
  uint32_t prev = 0;
CHECK_BLK:
  for (uint32_t b = 1; b <= nb; ++b) {
#pragma HLS PIPELINE II = 1
    const uint32_t cur = BlkAt(blk, b);
    if (cur < prev) {
      *pos = b;
      return kErrBlkTable;
    }
    if (cur > nnz || (b == nb && cur != nnz)) {
      *pos = b;
      return kErrCount;
    }
    prev = cur;
  }
  uint32_t k = 0;
CHECK_BLOCKS:
  for (uint32_t b = 0; b < nb; ++b) {
    const uint32_t end = BlkAt(blk, b + 1);
    const uint32_t size = BlockSize(n, b);
    uint32_t last = 0;
  CHECK_ENTRIES:
    for (uint32_t first = k; k < end; ++k) {
#pragma HLS PIPELINE II = 1
      const uint32_t x = IdxAt(idx, k);
      uint32_t err = 0;
      if (x >= size) err = kErrOutOfRange;
      else if (k != first && x == last) err = kErrDuplicate;
      else if (k != first && x < last) err = kErrUnsorted;
      if (err != 0u) {
        *pos = k;
        return err;
      }
      last = x;
    }
  }
  return 0;
}

/// Merge-decodes `len` consecutive elements of one block, starting at in-block offset `off`,
/// into binary32 bit patterns: g[i] = value of the entry whose offset is off + i, else +0.
/// `*k` is the next unread entry and advances past every entry taken; `end` is the block's
/// entry limit (blk[b + 1]). Requires a validated stream.
inline void MergeDecode(const Word* idx, const Word* val, DType t, uint32_t off, uint32_t len,
                        uint32_t end, uint32_t* k, uint32_t* g) {
  uint32_t kk = *k;
MERGE:
  for (uint32_t i = 0; i < len; ++i) {
#pragma HLS PIPELINE II = 1
    const bool hit = kk < end && IdxAt(idx, kk) == off + i;
    g[i] = hit ? ValAt(val, t, kk) : 0u;
    kk += hit ? 1u : 0u;
  }
  *k = kk;
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_SPARSE_H_
