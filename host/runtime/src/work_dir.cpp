#include "csdkit/runtime/work_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace csdkit {

namespace fs = std::filesystem;

void CreateMissingDirs(const std::string& path, std::vector<std::string>* made) {
  std::vector<fs::path> missing;  // innermost first
  std::error_code ec;
  for (fs::path p = fs::absolute(path, ec).lexically_normal(); !p.empty() && p != p.root_path();
       p = p.parent_path()) {
    if (p.filename().empty()) continue;  // "a/b/" ends in an empty component
    if (fs::exists(fs::symlink_status(p, ec))) break;
    missing.push_back(p);
  }
  for (auto p = missing.rbegin(); p != missing.rend(); ++p) {
    if (::mkdir(p->c_str(), 0777) == 0) {
      made->push_back(p->string());
    } else if (errno != EEXIST) {
      throw std::runtime_error("cannot create the directory '" + p->string() + "': " +
                               std::strerror(errno));
    }
  }
}

WorkDir::WorkDir(WorkDir&& o) noexcept
    : path_(std::move(o.path_)),
      made_(std::move(o.made_)),
      owned_(std::move(o.owned_)),
      kept_(o.kept_) {
  o.made_.clear();
  o.owned_.clear();
  o.kept_ = true;
}

WorkDir::~WorkDir() {
  if (!kept_) Remove();
}

void WorkDir::Remove() {
  std::error_code ec;
  for (auto e = owned_.rbegin(); e != owned_.rend(); ++e) fs::remove_all(*e, ec);
  for (auto d = made_.rbegin(); d != made_.rend(); ++d) ::rmdir(d->c_str());
  owned_.clear();
  made_.clear();
}

WorkDir WorkDir::Prepare(const std::string& option, const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument(option + ": expected a directory, found \"\"");
  WorkDir w;
  w.path_ = dir;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw std::invalid_argument(option + ": expected an absent or empty directory, found '" +
                                  dir + "', which is not a directory");
    }
    std::error_code ec;
    const fs::directory_iterator it(dir, ec);
    if (ec) {
      throw std::invalid_argument(option + ": cannot list '" + dir + "': " + ec.message());
    }
    if (it != fs::directory_iterator()) {
      throw std::invalid_argument(option + ": expected an absent or empty directory, found '" +
                                  dir + "' with '" + it->path().filename().string() +
                                  "' in it; choose another " + option);
    }
    return w;
  }
  try {
    CreateMissingDirs(dir, &w.made_);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(option + ": " + e.what());
  }
  return w;
}

}  // namespace csdkit
