// fuzz_xclbin: the xclbin reader (host/platform/src/xclbin_container.cpp, xclbin_inspect.cpp).
//
// The input is a whole xclbin file. It goes first through the structural validator
// (xclbin_internal::ValidateAxlf) in memory; an input the validator accepts is then written to
// a scratch file and read back by CheckXclbin, which runs InspectXclbin (XRT's own parser)
// and then checks the result against the argument table.
//
// The validator exists so that XRT never reads past the bytes of a file: a crash or a sanitizer
// report in the second half means it let through something XRT dereferences badly.
//
// Expected outcomes: XclbinError from either call. Findings: anything else — a
// crash, a sanitizer report, std::bad_alloc or an exception of another type.
//
// XRT's libxrt_coreutil is Debian's build, not instrumented: an out-of-bounds read inside XRT
// is seen only when it faults, and coverage feedback stops at its entry points.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "csdkit/platform/xclbin.h"
#include "fuzz_util.h"
#include "xclbin_internal.h"

namespace {

constexpr const char* kTarget = "fuzz_xclbin";

// The one scratch file of this process. It is made with mkstemp under $TMPDIR (or /tmp) and
// unlinked at once; the readers open it again through /proc/self/fd/N, which names the same
// (nameless) file. So nothing is left behind however the process ends — a normal exit, a
// crash, or libFuzzer's _Exit on a timeout or the RSS limit, where no destructor runs.
class ScratchFile {
 public:
  ScratchFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string templ =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/csdkit_fuzz_xclbin.XXXXXX";
    fd_ = ::mkstemp(templ.data());
    if (fd_ < 0) {
      std::fprintf(stderr, "%s: cannot create a scratch file %s: %s\n", kTarget, templ.c_str(),
                   std::strerror(errno));
      std::abort();
    }
    ::unlink(templ.c_str());
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~ScratchFile() { ::close(fd_); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  /// Replaces the file's contents with `bytes`.
  void Write(const std::vector<char>& bytes) {
    if (::ftruncate(fd_, 0) != 0) Die("ftruncate");
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w =
          ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) Die("pwrite");
      done += static_cast<size_t>(w);
    }
  }

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void Die(const char* what) {
    std::fprintf(stderr, "%s: %s on the scratch file failed: %s\n", kTarget, what,
                 std::strerror(errno));
    std::abort();
  }

  int fd_ = -1;
  std::string path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFile scratch;
  const std::vector<char> bytes(reinterpret_cast<const char*>(data),
                                reinterpret_cast<const char*>(data) + size);
  try {
    try {
      csdkit::xclbin_internal::ValidateAxlf("fuzz input", bytes);
    } catch (const csdkit::XclbinError& e) {
      csdkit::fuzz::Refused(kTarget, e);
      return 0;  // refused before XRT sees it: the common, expected case
    }
    scratch.Write(bytes);
    // CheckXclbin starts with InspectXclbin (the file read, the validator again, then XRT's
    // parser through every accessor the kit uses) and then compares the result with the
    // argument table, so this one call covers both. A separate InspectXclbin call as well would
    // parse the file twice for no new coverage: XRT's XML parsing is most of the cost of an
    // accepted input, about 20 ms under ASan here (45 ms with both calls).
    try {
      csdkit::CheckXclbin(scratch.path());
      csdkit::fuzz::Accepted(kTarget, "CheckXclbin");
    } catch (const csdkit::XclbinError& e) {
      csdkit::fuzz::Refused(kTarget, e);
    }
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
