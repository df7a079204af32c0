#include "csdkit/aio/aio_config.h"

#include <sstream>
#include <stdexcept>
#include <string>

namespace csdkit::aio {

namespace {

constexpr const char* kAcceptedKeys =
    "block_size, queue_depth, intra_op_parallelism (alias thread_count), single_submit, "
    "overlap_events, use_gds (false only)";

[[noreturn]] void Fail(const std::string& what) {
  throw std::invalid_argument("aio config: " + what);
}

std::string TypeName(const nlohmann::json& v) {
  if (v.is_number_float()) return "a floating-point number";
  if (v.is_number_integer()) return "an integer";
  if (v.is_boolean()) return "a boolean";
  if (v.is_string()) return "a string";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

// An integer field in [lo, hi]. Floating-point values (8.0) and strings ("8") are refused: a
// config that spells numbers as strings is usually a templating mistake worth seeing.
uint64_t GetInteger(const nlohmann::json& v, const char* key, uint64_t lo, uint64_t hi) {
  if (!v.is_number_integer()) {
    Fail(std::string("\"") + key + "\" must be an integer in [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "], found " + TypeName(v) + " (" + v.dump() +
         "); write it as a plain JSON integer, e.g. \"" + key + "\": " + std::to_string(lo));
  }
  // nlohmann keeps parsed non-negative integers as unsigned, integers built in C++ as signed.
  const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  if (!negative) {
    const uint64_t x =
        v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
    if (x >= lo && x <= hi) return x;
  }
  Fail(std::string("\"") + key + "\" must be in [" + std::to_string(lo) + ", " +
       std::to_string(hi) + "], found " + v.dump());
}

bool GetBool(const nlohmann::json& v, const char* key) {
  if (!v.is_boolean()) {
    Fail(std::string("\"") + key + "\" must be true or false, found " + TypeName(v) + " (" +
         v.dump() + ")");
  }
  return v.get<bool>();
}

}  // namespace

void AioConfig::Validate() const {
  if (block_size < kMinBlockSize || block_size > kMaxBlockSize) {
    Fail("block_size must be in [" + std::to_string(kMinBlockSize) + ", " +
         std::to_string(kMaxBlockSize) + "] bytes, found " + std::to_string(block_size));
  }
  if (block_size % kBlockSizeGranule != 0) {
    Fail("block_size must be a multiple of " + std::to_string(kBlockSizeGranule) +
         " (direct I/O moves whole sectors), found " + std::to_string(block_size) + "; e.g. " +
         std::to_string((block_size + kBlockSizeGranule - 1) / kBlockSizeGranule *
                        kBlockSizeGranule));
  }
  if (queue_depth < 1 || queue_depth > kMaxQueueDepth) {
    Fail("queue_depth must be in [1, " + std::to_string(kMaxQueueDepth) + "], found " +
         std::to_string(queue_depth));
  }
  if (intra_op_parallelism < 1 || intra_op_parallelism > kMaxIntraOpParallelism) {
    Fail("intra_op_parallelism must be in [1, " + std::to_string(kMaxIntraOpParallelism) +
         "], found " + std::to_string(intra_op_parallelism));
  }
}

AioConfig AioConfig::FromJson(const nlohmann::json& aio_block) {
  if (!aio_block.is_object()) {
    Fail(
        "the aio block must be a JSON object such as {\"block_size\": 1048576, "
        "\"queue_depth\": 8}, found " +
        TypeName(aio_block));
  }
  AioConfig c;
  bool have_intra = false;
  bool have_threads = false;
  uint64_t thread_count = 0;
  for (const auto& [key, value] : aio_block.items()) {
    if (key == "block_size") {
      c.block_size = GetInteger(value, "block_size", kMinBlockSize, kMaxBlockSize);
    } else if (key == "queue_depth") {
      c.queue_depth = static_cast<uint32_t>(GetInteger(value, "queue_depth", 1, kMaxQueueDepth));
    } else if (key == "intra_op_parallelism") {
      c.intra_op_parallelism = static_cast<uint32_t>(
          GetInteger(value, "intra_op_parallelism", 1, kMaxIntraOpParallelism));
      have_intra = true;
    } else if (key == "thread_count") {
      thread_count = GetInteger(value, "thread_count", 1, kMaxIntraOpParallelism);
      have_threads = true;
    } else if (key == "single_submit") {
      c.single_submit = GetBool(value, "single_submit");
    } else if (key == "overlap_events") {
      c.overlap_events = GetBool(value, "overlap_events");
    } else if (key == "use_gds") {
      if (GetBool(value, "use_gds")) {
        Fail(
            "\"use_gds\": true (GPUDirect Storage) is not supported: this engine moves data "
            "between files and host memory; set it to false or remove it");
      }
    } else {
      Fail("unknown key \"" + key + "\"; accepted keys: " + kAcceptedKeys);
    }
  }
  if (have_threads) {
    if (have_intra && thread_count != c.intra_op_parallelism) {
      Fail("\"thread_count\" (" + std::to_string(thread_count) +
           ") and \"intra_op_parallelism\" (" + std::to_string(c.intra_op_parallelism) +
           ") are two names for the same setting and disagree; keep one of them");
    }
    c.intra_op_parallelism = static_cast<uint32_t>(thread_count);
  }
  c.Validate();
  return c;
}

AioConfig AioConfig::FromDeepSpeedConfig(const nlohmann::json& ds_config) {
  if (!ds_config.is_object()) {
    Fail("a DeepSpeed configuration must be a JSON object, found " + TypeName(ds_config));
  }
  auto it = ds_config.find("aio");
  if (it == ds_config.end()) return AioConfig();
  return FromJson(*it);
}

nlohmann::json AioConfig::ToJson() const {
  return {{"block_size", block_size},
          {"queue_depth", queue_depth},
          {"intra_op_parallelism", intra_op_parallelism},
          {"single_submit", single_submit},
          {"overlap_events", overlap_events}};
}

std::string AioConfig::ToString() const { return ToJson().dump(); }

bool operator==(const AioConfig& a, const AioConfig& b) {
  return a.block_size == b.block_size && a.queue_depth == b.queue_depth &&
         a.intra_op_parallelism == b.intra_op_parallelism && a.single_submit == b.single_submit &&
         a.overlap_events == b.overlap_events;
}

}  // namespace csdkit::aio
