#include "csdkit/platform/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <utility>

namespace csdkit {

namespace {
// Buffers of at least one huge page are 2 MiB aligned and advised for transparent huge pages:
// the kernels stream several arrays at once, and with 4 KiB pages every tile would start each
// stream on a fresh page (TLB miss, prefetcher restart).
constexpr std::size_t kHugePage = 2u << 20;
}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t bytes, Pages pages) {
  size_ = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  const bool huge = pages == Pages::kHuge && size_ >= kHugePage;
  if (huge) size_ = (size_ + kHugePage - 1) / kHugePage * kHugePage;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(huge ? kHugePage : kAlign, size_));
  if (data_ == nullptr) throw std::bad_alloc();
  // Advisory either way (ignored where unsupported); kSmall matters where the system's policy
  // is to back every large mapping with huge pages.
  if (huge) {
    (void)::madvise(data_, size_, MADV_HUGEPAGE);
  } else if (pages == Pages::kSmall && size_ >= kHugePage) {
    (void)::madvise(data_, size_, MADV_NOHUGEPAGE);
  }
  std::memset(data_, 0, size_);
}

AlignedBuffer AlignedBuffer::Reserve(std::size_t bytes) {
  AlignedBuffer b;
  b.size_ = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = ::mmap(nullptr, b.size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) {
    b.size_ = 0;
    throw std::bad_alloc();
  }
  b.data_ = static_cast<uint8_t*>(p);
  b.reserved_ = true;
  return b;
}

namespace {
void Release(uint8_t* data, std::size_t size, bool reserved) {
  if (data == nullptr) return;
  if (reserved) {
    ::munmap(data, size);
  } else {
    std::free(data);
  }
}
}  // namespace

AlignedBuffer::~AlignedBuffer() { Release(data_, size_, reserved_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      reserved_(std::exchange(o.reserved_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    Release(data_, size_, reserved_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    reserved_ = std::exchange(o.reserved_, false);
  }
  return *this;
}

AlignedBuffer AlignedBuffer::Clone() const {
  if (reserved_) {
    throw std::logic_error("AlignedBuffer::Clone: a reserved address range holds no bytes to "
                           "copy");
  }
  if (size_ == 0) return AlignedBuffer();
  AlignedBuffer c(size_);
  if (size_ != 0) std::memcpy(c.data_, data_, size_);
  return c;
}

}  // namespace csdkit
