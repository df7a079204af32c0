#include "csdkit/aio/io_error.h"

#include <errno.h>
#include <string.h>

#include <utility>

namespace csdkit::aio {

IoError::IoError(const std::string& message, std::string path, uint64_t offset, uint64_t length,
                 int error_number)
    : std::runtime_error(message),
      path_(std::move(path)),
      offset_(offset),
      length_(length),
      error_number_(error_number) {}

AlignmentError::AlignmentError(const std::string& message, std::string path, uint64_t offset,
                               uint64_t length, uintptr_t address, uint32_t memory_alignment,
                               uint32_t offset_alignment)
    : IoError(message, std::move(path), offset, length, EINVAL),
      address_(address),
      memory_alignment_(memory_alignment),
      offset_alignment_(offset_alignment) {}

ShortReadError::ShortReadError(const std::string& message, std::string path, uint64_t offset,
                               uint64_t length, uint64_t bytes_read)
    : IoError(message, std::move(path), offset, length, 0), bytes_read_(bytes_read) {}

std::string ErrnoText(int error_number) {
  // strerrorname_np / strerrordesc_np (glibc >= 2.32) are thread-safe, unlike strerror.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* name = strerrorname_np(error_number);
  const char* desc = strerrordesc_np(error_number);
  if (name != nullptr && desc != nullptr) return std::string(name) + " (" + desc + ")";
#endif
  char buf[128];
  // GNU strerror_r returns the message (possibly not in buf).
  const char* desc_r = strerror_r(error_number, buf, sizeof(buf));
  return "errno " + std::to_string(error_number) + " (" + desc_r + ")";
}

}  // namespace csdkit::aio
