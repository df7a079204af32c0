#include "csdkit/aio/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "csdkit/aio/io_error.h"

namespace csdkit::aio {

namespace {

struct DioAlignment {
  bool reported = false;  // the kernel filled in STATX_DIOALIGN for this file
  uint32_t memory = 0;    // stx_dio_mem_align (0 while reported: no direct I/O on this file)
  uint32_t offset = 0;    // stx_dio_offset_align
};

// statx(STATX_DIOALIGN) (Linux >= 6.1). glibc 2.36's struct statx predates the stx_dio_* fields
// and <linux/stat.h>, which has them, cannot be included next to <sys/stat.h>; so the kernel's
// 256-byte record is read at the offsets of its ABI: stx_mask at 0x00, stx_dio_mem_align at
// 0x98, stx_dio_offset_align at 0x9c. A kernel that does not know the bit leaves it clear.
DioAlignment QueryDioAlignment(int fd) {
  constexpr unsigned kStatxDioAlign = 0x00002000U;
  constexpr size_t kMaskAt = 0x00, kMemAlignAt = 0x98, kOffsetAlignAt = 0x9c;
  DioAlignment a;
#ifdef SYS_statx
  alignas(8) unsigned char record[256] = {};
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, kStatxDioAlign, record) != 0) return a;
  uint32_t mask = 0;
  std::memcpy(&mask, record + kMaskAt, sizeof(mask));
  if ((mask & kStatxDioAlign) == 0) return a;
  a.reported = true;
  std::memcpy(&a.memory, record + kMemAlignAt, sizeof(a.memory));
  std::memcpy(&a.offset, record + kOffsetAlignAt, sizeof(a.offset));
#else
  (void)fd;
#endif
  return a;
}

bool IsPowerOfTwo(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

void CheckAlignmentOption(const char* name, uint32_t value) {
  constexpr uint32_t kMax = 1u << 20;
  if (value != 0 && (!IsPowerOfTwo(value) || value > kMax)) {
    throw std::invalid_argument(std::string("aio: FileOptions::") + name +
                                " must be 0 or a power of two up to " + std::to_string(kMax) +
                                ", found " + std::to_string(value));
  }
}

const char* ModeText(OpenMode mode) {
  switch (mode) {
    case OpenMode::kReadOnly:
      return "reading";
    case OpenMode::kReadWrite:
      return "reading and writing";
    case OpenMode::kCreate:
      return "creating (or reading and writing)";
    case OpenMode::kCreateTruncate:
      return "creating (truncated)";
  }
  return "?";
}

[[noreturn]] void ThrowOpenError(const std::string& path, OpenMode mode, int err) {
  std::string msg =
      "aio: cannot open '" + path + "' for " + ModeText(mode) + " with O_DIRECT: " + ErrnoText(err);
  if (err == EINVAL) {
    msg +=
        ". The filesystem refuses direct I/O (tmpfs before Linux 6.6, some FUSE, overlay and "
        "network mounts do). Put the files on a disk-backed filesystem such as ext4 or xfs, "
        "e.g. under the build directory instead of /tmp or /dev/shm";
  } else if (err == ENOENT) {
    msg +=
        mode == OpenMode::kReadOnly || mode == OpenMode::kReadWrite
            ? ". Expected an existing file; create it first (OpenMode::kCreate) or check the path"
            : ". The directory does not exist; create it first";
  } else if (err == EACCES || err == EPERM) {
    msg += ". Check the permissions of the file and its directory";
  } else if (err == EISDIR) {
    msg += ". Expected a file, found a directory";
  } else if (err == ELOOP) {
    msg += ". Expected a file, found a symbolic link (refused, not followed: this file must not "
           "lead elsewhere)";
  }
  throw IoError(msg, path, 0, 0, err);
}

}  // namespace

File::File(int fd, std::string path, bool writable, uint32_t mem_align, uint32_t off_align,
           bool from_statx)
    : fd_(fd),
      path_(std::move(path)),
      writable_(writable),
      memory_alignment_(mem_align),
      offset_alignment_(off_align),
      alignment_from_statx_(from_statx) {}

File File::Open(const std::string& path, OpenMode mode, const FileOptions& options) {
  CheckAlignmentOption("min_alignment", options.min_alignment);
  CheckAlignmentOption("assume_alignment", options.assume_alignment);
  if (path.empty()) throw std::invalid_argument("aio: File::Open needs a path, found \"\"");

  int flags = O_DIRECT | O_CLOEXEC | (options.no_follow ? O_NOFOLLOW : 0);
  switch (mode) {
    case OpenMode::kReadOnly:
      flags |= O_RDONLY;
      break;
    case OpenMode::kReadWrite:
      flags |= O_RDWR;
      break;
    case OpenMode::kCreate:
      flags |= O_RDWR | O_CREAT;
      break;
    case OpenMode::kCreateTruncate:
      flags |= O_RDWR | O_CREAT | O_TRUNC;
      break;
  }
  const bool creating = (flags & O_CREAT) != 0;
  // Linux creates the file before it checks O_DIRECT support; a file that did not exist before
  // a refused open is removed again so the failure leaves nothing behind.
  const bool existed =
      creating && ::faccessat(AT_FDCWD, path.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  int fd;
  do {
    fd = ::open(path.c_str(), flags, kCreateMode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    if (err == EINVAL && creating && !existed) ::unlink(path.c_str());
    ThrowOpenError(path, mode, err);
  }

  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError("aio: fstat of '" + path + "' failed: " + ErrnoText(err), path, 0, 0, err);
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    ::close(fd);
    throw IoError("aio: '" + path +
                      "' is not a regular file or a block device (the engine "
                      "reads and writes only those); check the path",
                  path, 0, 0, EINVAL);
  }

  uint32_t mem_align = kDefaultAlignment;
  uint32_t off_align = kDefaultAlignment;
  bool from_statx = false;
  if (options.assume_alignment != 0) {
    mem_align = off_align = options.assume_alignment;
  } else {
    const DioAlignment dio = QueryDioAlignment(fd);
    if (dio.reported) {
      if (dio.memory == 0 || dio.offset == 0) {
        ::close(fd);
        if (creating && !existed) ::unlink(path.c_str());
        throw IoError("aio: the filesystem of '" + path +
                          "' reports (statx STATX_DIOALIGN) that it cannot do direct I/O on "
                          "this file; put the files on a disk-backed filesystem such as ext4 "
                          "or xfs",
                      path, 0, 0, EINVAL);
      }
      mem_align = dio.memory;
      off_align = dio.offset;
      from_statx = true;
    }
  }
  if (options.min_alignment > mem_align) mem_align = options.min_alignment;
  if (options.min_alignment > off_align) off_align = options.min_alignment;
  return File(fd, path, mode != OpenMode::kReadOnly, mem_align, off_align, from_statx);
}

File File::Create(const std::string& path, const FileOptions& options) {
  return Open(path, OpenMode::kCreateTruncate, options);
}

File::~File() {
  if (fd_ >= 0 && ::close(fd_) != 0) {
    // A destructor cannot throw; say it rather than drop it. Call Close() to get an exception.
    std::fprintf(stderr, "csdkit aio: closing '%s' failed: %s\n", path_.c_str(),
                 ErrnoText(errno).c_str());
  }
}

File::File(File&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      path_(std::move(o.path_)),
      writable_(o.writable_),
      memory_alignment_(o.memory_alignment_),
      offset_alignment_(o.offset_alignment_),
      alignment_from_statx_(o.alignment_from_statx_) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    writable_ = o.writable_;
    memory_alignment_ = o.memory_alignment_;
    offset_alignment_ = o.offset_alignment_;
    alignment_from_statx_ = o.alignment_from_statx_;
  }
  return *this;
}

namespace {
void RequireOpen(const File& f, const char* what) {
  if (!f.is_open()) {
    throw std::logic_error(std::string("aio: File::") + what + " on a file that is not open");
  }
}
}  // namespace

uint64_t File::Size() const {
  RequireOpen(*this, "Size");
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    throw IoError("aio: fstat of '" + path_ + "' failed: " + ErrnoText(err), path_, 0, 0, err);
  }
  if (S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  const off_t end = ::lseek(fd_, 0, SEEK_END);  // block device: its capacity
  if (end < 0) {
    const int err = errno;
    throw IoError("aio: cannot find the size of '" + path_ + "': " + ErrnoText(err), path_, 0, 0,
                  err);
  }
  return static_cast<uint64_t>(end);
}

void File::Truncate(uint64_t size) {
  RequireOpen(*this, "Truncate");
  int rc;
  do {
    rc = ::ftruncate(fd_, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    throw IoError("aio: cannot set the size of '" + path_ + "' to " + std::to_string(size) +
                      " bytes: " + ErrnoText(err),
                  path_, 0, size, err);
  }
}

void File::Allocate(uint64_t size) {
  RequireOpen(*this, "Allocate");
  if (size == 0) return;
  int rc;
  do {
    rc = ::fallocate(fd_, 0, 0, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    std::string msg = "aio: cannot reserve " + std::to_string(size) + " bytes for '" + path_ +
                      "': " + ErrnoText(err);
    if (err == ENOSPC) msg += ". Free space on that filesystem or use another directory";
    if (err == EOPNOTSUPP) msg += ". The filesystem cannot preallocate; skip Allocate() there";
    throw IoError(msg, path_, 0, size, err);
  }
}

void File::Sync() {
  RequireOpen(*this, "Sync");
  int rc;
  do {
    rc = ::fdatasync(fd_);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    throw IoError("aio: fdatasync of '" + path_ + "' failed: " + ErrnoText(err) +
                      "; data written since the last successful sync may not be on disk",
                  path_, 0, 0, err);
  }
}

void File::Close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  // close() must not be retried on EINTR on Linux (the descriptor is already released).
  if (::close(fd) != 0) {
    const int err = errno;
    throw IoError("aio: closing '" + path_ + "' failed: " + ErrnoText(err), path_, 0, 0, err);
  }
}

}  // namespace csdkit::aio
