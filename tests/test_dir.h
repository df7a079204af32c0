// A fresh directory for a test's stores: CSDKIT_TEST_DIR/<name>, under the build tree (O_DIRECT
// needs a real filesystem, not tmpfs), removed first; only its parent is created. Each test
// target defines CSDKIT_TEST_DIR (its own directory in the build tree).
#ifndef CSDKIT_TESTS_TEST_DIR_H_
#define CSDKIT_TESTS_TEST_DIR_H_

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace csdkit::testing {

inline std::string TestDir(const std::string& name) {
  const std::string d = std::string(CSDKIT_TEST_DIR) + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(std::filesystem::path(d).parent_path());
  return d;
}

/// The step a store's manifest names as committed, read from the file (for checks made while a
/// Store object holds the store's writer lock).
inline int64_t CommittedStep(const std::string& store_dir) {
  std::ifstream f(store_dir + "/manifest.json");
  return nlohmann::json::parse(f).at("committed_step").get<int64_t>();
}

}  // namespace csdkit::testing

#endif  // CSDKIT_TESTS_TEST_DIR_H_
