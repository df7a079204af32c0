// Minimal stand-in for Vitis HLS <hls_vector.h>, for builds without Vitis.
//
// Only what csdkit's kernels use: a fixed-size, over-aligned array value type with element
// access. Vitis aligns hls::vector<T, N> to the next power of two of sizeof(T) * N; this shim
// requires that size to be a power of two already, so the layout is identical and a 512-bit
// word is exactly 64 bytes at a 64-byte boundary in both builds.
#ifndef CSDKIT_SHIM_HLS_VECTOR_H_
#define CSDKIT_SHIM_HLS_VECTOR_H_

#include <cstddef>

namespace hls {

template <typename T, std::size_t N>
class alignas(sizeof(T) * N) vector {
  static_assert(N > 0 && (sizeof(T) * N & (sizeof(T) * N - 1)) == 0,
                "hls::vector shim: sizeof(T) * N must be a power of two");

 public:
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  static constexpr std::size_t size() { return N; }

 private:
  T data_[N];
};

}  // namespace hls

#endif  // CSDKIT_SHIM_HLS_VECTOR_H_
