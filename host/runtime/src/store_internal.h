// Helpers shared by the store's sources (store.cpp, store_config.cpp); not a public header.
#ifndef CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_
#define CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_

#include <nlohmann/json.hpp>
#include <string>

#include "csdkit/platform/optimizer.h"
#include "csdkit/runtime/store.h"

namespace csdkit::store_internal {

[[noreturn]] inline void Fail(const std::string& msg) { throw StoreError(msg); }

/// Field `key` of a manifest object, or a StoreError naming it and `where`.
template <typename T>
T Get(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) Fail(where + ": expected a field '" + key + "', found none");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    Fail(where + ": field '" + key + "' has the wrong type: " + e.what());
  }
}

/// Hyper-parameters as the manifest stores them (HyperToJson's names).
void HyperFromJson(const nlohmann::json& h, const std::string& where, OptimizerConfig* c);

}  // namespace csdkit::store_internal

#endif  // CSDKIT_RUNTIME_SRC_STORE_INTERNAL_H_
