// Configuration of the libaio engine, with the names and defaults of DeepSpeed's `aio` block
// (ds_config["aio"]), so a DeepSpeed configuration can be handed over as it is:
//
//   "aio": { "block_size": 1048576, "queue_depth": 8, "intra_op_parallelism": 1,
//            "single_submit": false, "overlap_events": true }
//
// Older DeepSpeed releases call intra_op_parallelism `thread_count`; both spellings are accepted
// (giving both with different values is an error). `use_gds` (GPUDirect Storage) is accepted
// only as false: this engine moves data between files and host memory.
#ifndef CSDKIT_AIO_AIO_CONFIG_H_
#define CSDKIT_AIO_AIO_CONFIG_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace csdkit::aio {

struct AioConfig {
  // Accepted ranges (inclusive). block_size must also be a multiple of kBlockSizeGranule, and
  // of the direct-I/O alignment of every file it is used on (checked per request).
  static constexpr uint64_t kMinBlockSize = 512;
  static constexpr uint64_t kMaxBlockSize = uint64_t{1} << 30;
  static constexpr uint64_t kBlockSizeGranule = 512;
  static constexpr uint32_t kMaxQueueDepth = 4096;
  static constexpr uint32_t kMaxIntraOpParallelism = 64;

  /// Bytes per kernel request: a large transfer is cut into blocks of this size.
  uint64_t block_size = uint64_t{1} << 20;
  /// Requests each worker keeps in flight (the io context is created for this many events).
  uint32_t queue_depth = 8;
  /// Worker threads, each with its own io context; a transfer of several blocks is split into
  /// this many contiguous parts, one per worker.
  uint32_t intra_op_parallelism = 1;
  /// Hand one iocb to each io_submit call instead of all ready iocbs at once.
  bool single_submit = false;
  /// true: sliding window — as each completion is reaped a new request is submitted, so the
  /// queue stays full. false: lockstep — submit a full window, wait for all of it, repeat.
  bool overlap_events = true;

  /// Throws std::invalid_argument naming the field, the value found and the accepted range.
  void Validate() const;

  /// Parses a DeepSpeed `aio` block (a JSON object). Missing keys keep their defaults.
  /// Throws std::invalid_argument on: a non-object, an unknown key (the message lists the
  /// accepted ones), a wrong type (e.g. "8" or 8.0 for queue_depth, 1 for single_submit), an
  /// out-of-range value, thread_count and intra_op_parallelism both given and different,
  /// use_gds true.
  static AioConfig FromJson(const nlohmann::json& aio_block);

  /// Takes the `aio` block of a whole DeepSpeed configuration (defaults when it has none); the
  /// rest of the configuration is not looked at.
  static AioConfig FromDeepSpeedConfig(const nlohmann::json& ds_config);

  /// The block in DeepSpeed's spelling (intra_op_parallelism, not thread_count).
  nlohmann::json ToJson() const;

  std::string ToString() const;
};

bool operator==(const AioConfig& a, const AioConfig& b);
inline bool operator!=(const AioConfig& a, const AioConfig& b) { return !(a == b); }

}  // namespace csdkit::aio

#endif  // CSDKIT_AIO_AIO_CONFIG_H_
