// A zero-initialised, 4096-byte aligned host buffer: the alignment O_DIRECT, PoCL's
// CL_MEM_USE_HOST_PTR and the kernels' 512-bit words all accept.
#ifndef CSDKIT_ALIGNED_BUFFER_H_
#define CSDKIT_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "csdkit/hls/word.h"

namespace csdkit {

class AlignedBuffer {
 public:
  static constexpr std::size_t kAlign = 4096;

  /// The page size behind a buffer of at least one huge page (2 MiB).
  enum class Pages {
    kHuge,   // 2 MiB aligned and advised for transparent huge pages (the default)
    kSmall,  // advised against them: 4 KiB pages, as most allocators give
  };

  AlignedBuffer() = default;
  /// Allocates at least `bytes` (rounded up to kAlign; at least one page), zero-filled.
  explicit AlignedBuffer(std::size_t bytes) : AlignedBuffer(bytes, Pages::kHuge) {}
  AlignedBuffer(std::size_t bytes, Pages pages);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  /// An address range of at least `bytes` (rounded up to kAlign) with no memory behind it: an
  /// anonymous PROT_NONE mapping without swap reservation, so it costs neither RAM nor commit
  /// charge at any size, and any access faults. Planning (the null device, a planned
  /// gradient) passes such ranges where the runtime wants host addresses it never dereferences:
  /// a plan of a 33e9-parameter model keeps its 66 GB weight copy this way. Throws
  /// std::bad_alloc when the address space is refused.
  static AlignedBuffer Reserve(std::size_t bytes);
  /// True for a range from Reserve (its bytes cannot be read or written).
  bool reserved() const { return reserved_; }

  /// A deep copy (same capacity, same bytes); std::logic_error for a reserved range.
  AlignedBuffer Clone() const;

  std::size_t size() const { return size_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  hls::Word* words() { return reinterpret_cast<hls::Word*>(data_); }
  const hls::Word* words() const { return reinterpret_cast<const hls::Word*>(data_); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }
  bool SameBytes(const AlignedBuffer& o) const {
    return size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0);
  }

 private:
  uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  bool reserved_ = false;  // data_ is a PROT_NONE mapping (munmap, not free)
};

}  // namespace csdkit

#endif  // CSDKIT_ALIGNED_BUFFER_H_
