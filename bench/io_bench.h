// `csdkit bench io`: the libaio engine's sequential read and write throughput on one file,
// against fio (ioengine=libaio, direct=1) on the same file, block size, queue depth and number
// of bytes, measured in the same run, per buffer configuration:
//
//   4k_pages  the engine's buffer is advised MADV_NOHUGEPAGE (4 KiB pages); fio uses its default
//             iomem=malloc.
//   thp       the engine's buffer is 2 MiB aligned and advised MADV_HUGEPAGE (transparent huge
//             pages); fio uses iomem=mmaphuge, its closest option, which takes pages from the
//             hugetlb pool. When the pool has too few free pages, fio is not run for this
//             configuration and the JSON says why.
//
// Both tools use a buffer of queue_depth * block_size bytes, reused around the file, new for every
// measurement, filled before writes and left untouched before reads (fio's behaviour; the engine
// copies it). Engine and fio alternate rep by rep; medians and bests are reported, with the
// requests the block device received (from sysfs) and how physically contiguous the engine's
// buffer was. Prints JSON; asserts nothing.
#ifndef CSDKIT_BENCH_IO_BENCH_H_
#define CSDKIT_BENCH_IO_BENCH_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace csdkit::bench {

struct IoBenchOptions {
  /// Directory of the test file; must be on a filesystem that does O_DIRECT. Empty: a new
  /// directory under the current one, removed afterwards. The test file always gets a new
  /// unique name (created with O_EXCL), so no existing file is ever opened for writing.
  std::string dir;
  uint64_t size = uint64_t{1} << 30;        // bytes per measurement = file size; multiple of
                                            // block_size
  uint64_t block_size = uint64_t{1} << 20;  // bytes per request (engine and fio --bs)
  uint32_t queue_depth = 32;                // requests in flight (engine and fio --iodepth)
  uint32_t intra_op_parallelism = 1;        // engine worker threads (fio: numjobs=1 always)
  bool single_submit = false;
  bool overlap_events = true;
  /// Which buffer configurations to run: "4k", "thp" or "both".
  std::string pages = "both";
  unsigned reps = 5;        // measurements per configuration, direction and tool
  std::string fio = "fio";  // fio program (searched in PATH unless it contains '/')
  bool keep_file = false;   // leave the test file in place
  bool progress = false;    // progress lines on stderr
};

/// Runs the benchmark. JSON: the setup, the system's huge-page settings, the block device's
/// request statistics, and per configuration (named, with each tool's buffer kind) the engine's
/// and fio's read/write GB/s (1 GB = 1e9 bytes) of every rep with median and best, and the
/// ratio engine/fio of medians and of bests per direction against the 0.9 target. When fio is
/// missing, fails, or cannot get its buffer kind, that configuration's "fio" object says so and
/// there is no ratio. Throws std::invalid_argument on bad options (naming the option, the
/// accepted values and the value found), csdkit::aio::IoError when the engine's I/O fails.
nlohmann::json IoBench(const IoBenchOptions& options);

}  // namespace csdkit::bench

#endif  // CSDKIT_BENCH_IO_BENCH_H_
