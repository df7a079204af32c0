// The input format of fuzz_sparse, shared by the harness (FromInput) and the seed generator
// (ToInput, make_sparse_seeds.cpp), so seeds and harness cannot drift apart.
//
//   byte 0       bits [1:0] gradient dtype (0 fp32, 1 fp16, 2 bf16, 3 read as fp32)
//                bits [4:2] short buffer: 0 none, 1 blk, 2 idx, 3 val, else none — that buffer
//                           gets half the bytes the stream needs (the buffer-size check)
//                bits [7:5] optimizer of the kernel launches, modulo 5 (mode.h order: adamw,
//                           adam, sgd, adagrad, lion)
//   bytes 1..3   n, 24-bit little-endian, taken modulo kMaxN + 1
//   bytes 4..6   nnz, 24-bit little-endian, taken modulo min(n, kMaxNnz) + 2 (so nnz = n + 1
//                still occurs for n <= kMaxNnz)
//   then         the block table (uint32[NumBlocks(n) + 1]), the indices (uint16[nnz]) and the
//                values (dtype[nnz]), little-endian, back to back; bytes past the end of the
//                input read as zero
//
// n is bounded (kMaxN, four blocks of 2^16) so that decoding a valid stream stays cheap. nnz is
// bounded too (kMaxNnz): past the input's end every index reads as offset 0, so a stream with
// more than one entry per block (at most 4) past the end repeats an offset and is refused;
// sizing buffers for up to 2^18 such entries made most runs spend their time allocating and
// clearing memory.
#ifndef CSDKIT_TESTS_FUZZ_SPARSE_INPUT_H_
#define CSDKIT_TESTS_FUZZ_SPARSE_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "csdkit/hls/sparse.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/sparse_codec.h"

namespace csdkit::fuzz {

constexpr uint32_t kMaxN = 4u * hls::kBlockElems;
constexpr uint32_t kMaxNnz = 16384;  // above what fits in scripts/fuzz's -max_len of 16384
constexpr size_t kHeaderBytes = 7;

/// Reads the input's fields in order; past the end it yields zeros.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  /// Consumes the next `n` bytes of the input and copies the first `room` of them into `out`,
  /// which must be zero-filled already: bytes past the end of the input stay zero.
  void Read(uint8_t* out, size_t n, size_t room) {
    const size_t have = pos_ < size_ ? std::min(n, size_ - pos_) : 0;
    const size_t copy = std::min(have, room);
    if (copy > 0) std::memcpy(out, data_ + pos_, copy);
    pos_ += n;
  }
  uint32_t U24() {
    uint8_t b[3] = {};
    Read(b, 3, 3);
    return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// What an input describes: a stream (its buffers are always at least one page: AlignedBuffer)
/// and the optimizer the harness launches the kernel with.
struct SparseInput {
  SparseGrad s;
  Optimizer opt = Optimizer::kAdamW;
};

inline SparseInput FromInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  uint8_t head = 0;
  in.Read(&head, 1, 1);
  SparseInput r;
  r.opt = static_cast<Optimizer>((head >> 5) % hls::kNumOptimizers);
  SparseGrad& s = r.s;
  const unsigned t = head & 3u;
  s.dtype = t == 1 ? DType::kFp16 : t == 2 ? DType::kBf16 : DType::kFp32;
  const unsigned shorten = (head >> 2) & 7u;
  s.n = in.U24() % (kMaxN + 1);
  s.nnz = in.U24() % ((s.n < kMaxNnz ? s.n : kMaxNnz) + 2);
  const size_t blk_bytes = (size_t{hls::NumBlocks(s.n)} + 1) * 4;
  const size_t idx_bytes = size_t{s.nnz} * 2;
  const size_t val_bytes = size_t{s.nnz} * DTypeBytes(s.dtype);
  s.blk = AlignedBuffer(shorten == 1 ? blk_bytes / 2 : blk_bytes);
  s.idx = AlignedBuffer(shorten == 2 ? idx_bytes / 2 : idx_bytes);
  s.val = AlignedBuffer(shorten == 3 ? val_bytes / 2 : val_bytes);
  // The contents are laid out as the stream's sizes say, whatever the buffers' sizes.
  in.Read(s.blk.data(), blk_bytes, s.blk.size());
  in.Read(s.idx.data(), idx_bytes, s.idx.size());
  in.Read(s.val.data(), val_bytes, s.val.size());
  return r;
}

/// The input that FromInput reads back as `s` (full-size buffers) and `opt`. `s.n` must be
/// <= kMaxN and `s.nnz` <= kMaxNnz.
inline std::vector<uint8_t> ToInput(const SparseGrad& s, Optimizer opt = Optimizer::kAdamW) {
  std::vector<uint8_t> out;
  const unsigned t = s.dtype == DType::kFp16 ? 1u : s.dtype == DType::kBf16 ? 2u : 0u;
  out.push_back(static_cast<uint8_t>(t | static_cast<unsigned>(opt) << 5));
  for (uint32_t v : {s.n, s.nnz}) {
    for (int i = 0; i < 3; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  auto append = [&out](const AlignedBuffer& b, size_t bytes) {
    out.insert(out.end(), b.data(), b.data() + bytes);
  };
  append(s.blk, (size_t{hls::NumBlocks(s.n)} + 1) * 4);
  append(s.idx, size_t{s.nnz} * 2);
  append(s.val, size_t{s.nnz} * DTypeBytes(s.dtype));
  return out;
}

}  // namespace csdkit::fuzz

#endif  // CSDKIT_TESTS_FUZZ_SPARSE_INPUT_H_
