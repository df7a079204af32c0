// Errors of the libaio storage engine. Every failure the engine sees — a refused open, a
// misaligned request, a failed io_submit, a negative io_event.res, an end of file in the middle
// of a read — becomes one of these exceptions, carrying the file, the byte range and the errno,
// with a message that says what was expected, what was found and what to do.
#ifndef CSDKIT_AIO_IO_ERROR_H_
#define CSDKIT_AIO_IO_ERROR_H_

#include <cstdint>
#include <stdexcept>
#include <string>

namespace csdkit::aio {

/// An I/O operation on `path()` covering [offset(), offset() + length()) failed with
/// `error_number()` (an errno value; 0 when the failure is not an errno, e.g. a short read).
class IoError : public std::runtime_error {
 public:
  IoError(const std::string& message, std::string path, uint64_t offset, uint64_t length,
          int error_number);

  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }
  int error_number() const { return error_number_; }

 private:
  std::string path_;
  uint64_t offset_;
  uint64_t length_;
  int error_number_;
};

/// A request refused before submission because its buffer address, file offset or length is not
/// a multiple of what O_DIRECT needs for this file. error_number() is EINVAL (what the kernel
/// would have answered).
class AlignmentError : public IoError {
 public:
  AlignmentError(const std::string& message, std::string path, uint64_t offset, uint64_t length,
                 uintptr_t address, uint32_t memory_alignment, uint32_t offset_alignment);

  uintptr_t address() const { return address_; }
  /// Required alignment of the buffer address.
  uint32_t memory_alignment() const { return memory_alignment_; }
  /// Required alignment of file offsets and lengths.
  uint32_t offset_alignment() const { return offset_alignment_; }

 private:
  uintptr_t address_;
  uint32_t memory_alignment_;
  uint32_t offset_alignment_;
};

/// A read reached the end of the file before `length()` bytes: only `bytes_read()` bytes, from
/// `offset()`, are valid in the caller's buffer (the rest of the buffer is unspecified).
/// error_number() is 0.
class ShortReadError : public IoError {
 public:
  ShortReadError(const std::string& message, std::string path, uint64_t offset, uint64_t length,
                 uint64_t bytes_read);

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  uint64_t bytes_read_;
};

/// "EIO (Input/output error)": the symbolic name and strerror text of an errno value, for
/// messages.
std::string ErrnoText(int error_number);

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_IO_ERROR_H_
