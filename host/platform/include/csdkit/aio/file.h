// A file opened for direct I/O (O_DIRECT): the descriptor the engine submits requests on, and
// the alignment the kernel demands for buffers, offsets and lengths on it.
//
// The alignment comes from statx(STATX_DIOALIGN) when the kernel and filesystem report it
// (Linux >= 6.1 on ext4, xfs, btrfs, block devices: typically the logical block size, 512 or
// 4096); otherwise it is 4096, which every O_DIRECT-capable filesystem accepts.
#ifndef CSDKIT_AIO_FILE_H_
#define CSDKIT_AIO_FILE_H_

#include <cstdint>
#include <string>

namespace csdkit::aio {

enum class OpenMode {
  kReadOnly,        // existing file, reads only
  kReadWrite,       // existing file
  kCreate,          // create if missing (mode 0600), keep existing contents
  kCreateTruncate,  // create if missing (mode 0600), truncate to 0 bytes
};

struct FileOptions {
  /// Raise the required alignment of buffers, offsets and lengths to at least this (a power of
  /// two; 0: what the filesystem needs). The emulated device uses 4096 so that what works here
  /// also works with P2P buffers.
  uint32_t min_alignment = 0;
  /// Expert/testing: if nonzero (a power of two), use exactly this alignment and do not ask the
  /// filesystem — for filesystems that misreport it. Requests the kernel then refuses come back
  /// as IoError(EINVAL) from the completion, instead of AlignmentError before submission.
  uint32_t assume_alignment = 0;
  /// Refuse a path whose last component is a symbolic link (O_NOFOLLOW; the IoError says so)
  /// instead of opening, creating or truncating what it points to. The store sets it for its
  /// state files: they never lead outside the store (directories above them may be links).
  bool no_follow = false;
};

class File {
 public:
  /// Fallback alignment when statx does not report one.
  static constexpr uint32_t kDefaultAlignment = 4096;
  /// Permissions of files this class creates (owner read/write only: training state).
  static constexpr unsigned kCreateMode = 0600;

  File() = default;
  /// Opens `path` with O_DIRECT | O_CLOEXEC. Throws IoError (with the errno) when the file
  /// cannot be opened; when the filesystem refuses O_DIRECT (EINVAL: tmpfs before Linux 6.6,
  /// some FUSE and overlay mounts) the message says so and what to do. Throws
  /// std::invalid_argument on bad options.
  static File Open(const std::string& path, OpenMode mode, const FileOptions& options = {});
  /// Open(path, kCreateTruncate, options): a new empty file with mode 0600.
  static File Create(const std::string& path, const FileOptions& options = {});

  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool writable() const { return writable_; }
  /// Required alignment of buffer addresses.
  uint32_t memory_alignment() const { return memory_alignment_; }
  /// Required alignment of file offsets and transfer lengths.
  uint32_t offset_alignment() const { return offset_alignment_; }
  /// True when the alignment came from statx(STATX_DIOALIGN), false for the 4096 fallback or
  /// FileOptions::assume_alignment.
  bool alignment_from_statx() const { return alignment_from_statx_; }

  /// Current size in bytes (fstat). Throws IoError.
  uint64_t Size() const;
  /// Sets the size (ftruncate); e.g. to cut an aligned write back to the payload's length.
  void Truncate(uint64_t size);
  /// Reserves blocks for [0, size) (posix_fallocate), so a later write cannot fail with ENOSPC.
  /// Throws IoError (ENOSPC with free-space advice).
  void Allocate(uint64_t size);
  /// fdatasync: makes written data durable. Throws IoError.
  void Sync();
  /// Closes the descriptor (also done by the destructor). Throws IoError if close fails.
  void Close();

 private:
  File(int fd, std::string path, bool writable, uint32_t mem_align, uint32_t off_align,
       bool from_statx);

  int fd_ = -1;
  std::string path_;
  bool writable_ = false;
  uint32_t memory_alignment_ = kDefaultAlignment;
  uint32_t offset_alignment_ = kDefaultAlignment;
  bool alignment_from_statx_ = false;
};

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_FILE_H_
