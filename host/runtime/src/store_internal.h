// Helpers shared by the store's sources (store.cpp, store_config.cpp); not a public header.
#ifndef CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_
#define CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/platform/optimizer.h"
#include "csdkit/runtime/store.h"

namespace csdkit::store_internal {

[[noreturn]] inline void Fail(const std::string& msg) { throw StoreError(msg); }

/// Field `key` of a manifest object, or a StoreError naming it and `where`.
template <typename T>
T Get(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) Fail(where + ": expected a field '" + key + "', found none");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    Fail(where + ": field '" + key + "' has the wrong type: " + e.what());
  }
}

/// Non-negative integer field `key` in [lo, hi]: a JSON integer (not 2.0, not "2"), checked
/// before it is converted, or a StoreError naming the field, the range and what was found.
inline uint64_t GetUint(const nlohmann::json& j, const char* key, const std::string& where,
                        uint64_t lo, uint64_t hi) {
  if (!j.is_object() || !j.contains(key)) {
    Fail(where + ": expected a field '" + key + "', found none");
  }
  const nlohmann::json& v = j.at(key);
  const bool non_negative =
      v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  if (!non_negative || v.get<uint64_t>() < lo || v.get<uint64_t>() > hi) {
    Fail(where + ": field '" + key + "': expected an integer in [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "], found " + v.dump());
  }
  return v.get<uint64_t>();
}

/// Largest store: 2^40 parameters on at most 256 devices.
constexpr uint64_t kMaxStoreParams = uint64_t{1} << 40;
constexpr unsigned kMaxStoreDevices = 256;

/// Shards of ceil(params / devices) elements, rounded up to `align` (model stores: whole sparse
/// blocks, so that group boundaries stay block boundaries inside every shard).
std::vector<Shard> MakeShards(uint64_t params, unsigned devices, uint64_t align);

/// What every store's configuration must satisfy (Create and every manifest read alike):
/// valid hyper-parameters, 1..256 devices each holding part of the model (`whole_blocks`:
/// shards of whole 65536-element blocks), at most 2^40 parameters, a subgroup size that is a
/// positive multiple of 65536, a loss scale whose value and reciprocal are finite binary32.
/// Throws std::invalid_argument naming the field.
void CheckStoreConfig(const StoreConfig& c, bool whole_blocks);
/// The alignment of shard boundaries: whole sparse blocks (model stores), whole q8 blocks
/// (256, q8 stores without a layout), else 1.
uint64_t ShardAlign(const StoreConfig& c, bool whole_blocks);

/// Hyper-parameters as the manifest stores them (HyperToJson's names).
void HyperFromJson(const nlohmann::json& h, const std::string& where, OptimizerConfig* c);

}  // namespace csdkit::store_internal

#endif  // CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_
