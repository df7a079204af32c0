// Host side of the block-sparse gradient format (hls/include/csdkit/hls/sparse.h): the
// reference Top-K compressor and the pre-dispatch validator.
#ifndef CSDKIT_SPARSE_CODEC_H_
#define CSDKIT_SPARSE_CODEC_H_

#include <cstdint>
#include <string>

#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"

namespace csdkit {

/// One subgroup's compressed gradient, each array in its own word-padded buffer.
struct SparseGrad {
  uint32_t n = 0;    // elements of the subgroup
  uint32_t nnz = 0;  // kept entries
  DType dtype = DType::kFp32;
  AlignedBuffer blk;  // uint32[NumBlocks(n) + 1]
  AlignedBuffer idx;  // uint16[nnz]
  AlignedBuffer val;  // dtype[nnz]

  /// Bytes of the stream as a device reads it (unpadded array sizes).
  uint64_t StreamBytes() const;
};

/// Number of entries Top-K keeps for `ratio` of n elements: ceil(ratio * n), at least 1 when
/// n > 0. Throws std::invalid_argument unless 0 < ratio <= 1.
uint32_t TopKCount(uint32_t n, double ratio);

/// Reference Top-K compressor: keeps the `TopKCount(n, ratio)` entries of largest magnitude
/// of a dense gradient of `dtype` (n elements in `dense`), ties broken towards the lower
/// index. NaN ranks above infinity above every finite value, so a non-finite gradient always
/// survives compression (loss-scale overflow stays visible). Values are copied bit for bit.
SparseGrad CompressTopK(const void* dense, DType dtype, uint32_t n, double ratio);

/// Builds a stream from explicit subgroup-global indices (must be sorted, unique, < n) and
/// their value bits; used by tests and trainers with their own selection. Throws
/// std::invalid_argument naming the first bad index.
SparseGrad EncodeSparse(uint32_t n, DType dtype, const uint32_t* indices, const void* values,
                        uint32_t nnz);

/// Validates a stream the way the kernel does (same code) and returns "" when it is valid, else
/// a message with the error, the position, what was expected and what was found.
std::string CheckSparse(const SparseGrad& s);

/// Human-readable description of the kernel's error bits (mode.h).
std::string DescribeKernelError(uint32_t bits, uint32_t pos);

}  // namespace csdkit

#endif  // CSDKIT_SPARSE_CODEC_H_
