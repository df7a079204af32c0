// `csdkit bench io`: the libaio engine's sequential read and write throughput on one file,
// against fio (ioengine=libaio, direct=1) on the same file with the same block size and queue
// depth, measured in the same run. Prints JSON; asserts nothing.
#ifndef CSDKIT_BENCH_IO_BENCH_H_
#define CSDKIT_BENCH_IO_BENCH_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace csdkit::bench {

struct IoBenchOptions {
  /// Directory of the test file; must be on a filesystem that does O_DIRECT. Empty: a new
  /// directory under the current one, removed afterwards.
  std::string dir;
  uint64_t size = uint64_t{1} << 30;        // file size; a multiple of block_size
  uint64_t block_size = uint64_t{1} << 20;  // bytes per request (engine and fio)
  uint32_t queue_depth = 32;                // requests in flight (engine and fio iodepth)
  uint32_t intra_op_parallelism = 1;        // engine worker threads (fio: numjobs=1 always)
  bool single_submit = false;
  bool overlap_events = true;
  unsigned reps = 3;        // each measurement is the best of reps, engine and fio interleaved
  std::string fio = "fio";  // fio program (searched in PATH unless it contains '/')
  bool keep_file = false;   // leave the test file in place
  bool progress = false;    // progress lines on stderr
};

/// Runs the benchmark. JSON: the setup, engine read/write GB/s (1 GB = 1e9 bytes), fio read/write
/// GB/s, the ratio engine/fio per direction against the 0.9 target, the engine's counters. When
/// fio is missing or fails, the "fio" object says so and there is no ratio. Throws
/// std::invalid_argument on bad options, csdkit::aio::IoError when the engine's I/O fails.
nlohmann::json IoBench(const IoBenchOptions& options);

}  // namespace csdkit::bench

#endif  // CSDKIT_BENCH_IO_BENCH_H_
