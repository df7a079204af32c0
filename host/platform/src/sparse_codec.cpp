#include "csdkit/platform/sparse_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "csdkit/hls/sparse.h"

namespace csdkit {

namespace {

SparseGrad Allocate(uint32_t n, DType dtype, uint32_t nnz) {
  SparseGrad s;
  s.n = n;
  s.nnz = nnz;
  s.dtype = dtype;
  const uint64_t nb = hls::NumBlocks(n);
  s.blk = AlignedBuffer((nb + 1) * 4);
  s.idx = AlignedBuffer(static_cast<std::size_t>(nnz) * 2);
  s.val = AlignedBuffer(static_cast<std::size_t>(nnz) * DTypeBytes(dtype));
  return s;
}

// Magnitude key: the bits without the sign orders NaN > inf > finite, and finite values by size.
uint32_t MagKey(const void* dense, DType t, uint32_t i) {
  if (t == DType::kFp32) return static_cast<const uint32_t*>(dense)[i] & 0x7fffffffu;
  const uint16_t h = static_cast<const uint16_t*>(dense)[i] & 0x7fffu;
  return h;  // fp16 and bf16 bit patterns order by magnitude the same way
}

}  // namespace

uint64_t SparseGrad::StreamBytes() const {
  return (static_cast<uint64_t>(hls::NumBlocks(n)) + 1) * 4 + static_cast<uint64_t>(nnz) * 2 +
         static_cast<uint64_t>(nnz) * DTypeBytes(dtype);
}

uint32_t TopKCount(uint32_t n, double ratio) {
  if (!(ratio > 0.0 && ratio <= 1.0)) {
    std::ostringstream os;
    os << "top-k ratio: expected a value in (0, 1], found " << ratio;
    throw std::invalid_argument(os.str());
  }
  if (n == 0) return 0;
  const double k = std::ceil(ratio * static_cast<double>(n));
  return static_cast<uint32_t>(std::min<double>(std::max(k, 1.0), n));
}

SparseGrad EncodeSparse(uint32_t n, DType dtype, const uint32_t* indices, const void* values,
                        uint32_t nnz) {
  if (nnz > n) {
    throw std::invalid_argument("sparse encode: expected at most n = " + std::to_string(n) +
                                " entries, found " + std::to_string(nnz));
  }
  SparseGrad s = Allocate(n, dtype, nnz);
  uint32_t* blk = s.blk.as<uint32_t>();
  uint16_t* idx = s.idx.as<uint16_t>();
  for (uint32_t k = 0; k < nnz; ++k) {
    const uint32_t x = indices[k];
    if (x >= n || (k > 0 && x <= indices[k - 1])) {
      std::ostringstream os;
      os << "sparse encode: entry " << k << ": expected an index "
         << (k > 0 ? "greater than the previous (" + std::to_string(indices[k - 1]) + ") and " : "")
         << "below n = " << n << ", found " << x;
      throw std::invalid_argument(os.str());
    }
    idx[k] = static_cast<uint16_t>(x & (hls::kBlockElems - 1u));
    blk[(x >> hls::kBlockBits) + 1] += 1;
  }
  const uint32_t nb = hls::NumBlocks(n);
  for (uint32_t b = 0; b < nb; ++b) blk[b + 1] += blk[b];
  // With no entries `values` may be null (CompressTopK of n = 0 passes an empty vector's
  // data()); memcpy's pointers must not be, even for 0 bytes.
  if (nnz > 0) std::memcpy(s.val.data(), values, static_cast<std::size_t>(nnz) * DTypeBytes(dtype));
  return s;
}

SparseGrad CompressTopK(const void* dense, DType dtype, uint32_t n, double ratio) {
  const uint32_t k = TopKCount(n, ratio);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  auto better = [&](uint32_t a, uint32_t b) {
    const uint32_t ka = MagKey(dense, dtype, a), kb = MagKey(dense, dtype, b);
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), better);
  order.resize(k);
  std::sort(order.begin(), order.end());
  const unsigned eb = DTypeBytes(dtype);
  std::vector<uint8_t> vals(static_cast<std::size_t>(k) * eb);
  for (uint32_t j = 0; j < k; ++j) {
    std::memcpy(&vals[static_cast<std::size_t>(j) * eb],
                static_cast<const uint8_t*>(dense) + static_cast<std::size_t>(order[j]) * eb, eb);
  }
  return EncodeSparse(n, dtype, order.data(), vals.data(), k);
}

std::string DescribeKernelError(uint32_t bits, uint32_t pos) {
  if (bits == 0) return "";
  std::ostringstream os;
  if (bits & hls::kErrBadMode) {
    os << "invalid mode word (unknown optimizer/dtype/state format or flag)";
  } else if (bits & hls::kErrBlockLen) {
    os << "q8 state: expected whole blocks of 256 (the element count and the first element's "
          "store index multiples of 256)";
  } else if (bits & hls::kErrBlkTable)
    os << "block table entry " << pos << ": expected a non-decreasing prefix count starting at 0";
  else if (bits & hls::kErrCount)
    os << "block table entry " << pos << ": expected counts to total nnz (and nnz <= n)";
  else if (bits & hls::kErrOutOfRange)
    os << "entry " << pos << ": index past the end of its block / of the subgroup";
  else if (bits & hls::kErrDuplicate)
    os << "entry " << pos << ": duplicate index (expected strictly ascending)";
  else if (bits & hls::kErrUnsorted)
    os << "entry " << pos << ": index below its predecessor (expected strictly ascending)";
  else
    os << "unknown error bits 0x" << std::hex << bits;
  return os.str();
}

std::string CheckSparse(const SparseGrad& s) {
  std::ostringstream os;
  os << "sparse stream (n = " << s.n << ", nnz = " << s.nnz << "): ";
  if (s.nnz > s.n) {
    os << "expected at most n entries, found nnz = " << s.nnz;
    return os.str();
  }
  const uint32_t nb = hls::NumBlocks(s.n);
  const uint64_t need_blk = (static_cast<uint64_t>(nb) + 1) * 4;
  const uint64_t need_idx = static_cast<uint64_t>(s.nnz) * 2;
  const uint64_t need_val = static_cast<uint64_t>(s.nnz) * DTypeBytes(s.dtype);
  if (s.blk.size() < need_blk || s.idx.size() < need_idx || s.val.size() < need_val) {
    os << "expected buffers of at least " << need_blk << " (block table), " << need_idx
       << " (indices) and " << need_val << " (values) bytes, found " << s.blk.size() << ", "
       << s.idx.size() << " and " << s.val.size();
    return os.str();
  }
  uint32_t pos = 0;
  const uint32_t err = hls::ValidateSparse(s.blk.words(), s.idx.words(), s.n, s.nnz, &pos);
  if (err == 0) return "";
  const uint32_t* blk = s.blk.as<uint32_t>();
  const uint16_t* idx = s.idx.as<uint16_t>();
  os << DescribeKernelError(err, pos) << "; ";
  if (err & (hls::kErrBlkTable | hls::kErrCount)) {
    os << "found blk[" << pos << "] = " << blk[pos];
    if (pos > 0) os << " after blk[" << pos - 1 << "] = " << blk[pos - 1];
    if (pos == nb) os << " (nnz = " << s.nnz << ")";
  } else {
    // Locate the entry's block to state its size.
    uint32_t b = 0;
    while (b + 1 < nb && blk[b + 1] <= pos) ++b;
    if (err & hls::kErrOutOfRange) {
      os << "expected an offset below " << hls::BlockSize(s.n, b) << " (size of block " << b
         << "), found " << idx[pos];
    } else {
      os << "expected an offset above " << idx[pos - 1] << " (entry " << pos - 1 << ", block " << b
         << "), found " << idx[pos];
    }
  }
  return os.str();
}

}  // namespace csdkit
