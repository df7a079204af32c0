#include "csdkit/aligned_buffer.h"

#include <cstdlib>
#include <new>
#include <utility>

namespace csdkit {

AlignedBuffer::AlignedBuffer(std::size_t bytes) {
  size_ = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, size_));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, size_);
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

AlignedBuffer AlignedBuffer::Clone() const {
  if (size_ == 0) return AlignedBuffer();
  AlignedBuffer c(size_);
  if (size_ != 0) std::memcpy(c.data_, data_, size_);
  return c;
}

}  // namespace csdkit
