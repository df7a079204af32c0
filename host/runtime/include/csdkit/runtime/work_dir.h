// The directories a command creates for its work, owned by it: a command removes only what it
// created itself, and everything it created when it fails (scratch work also when it is done).
//
//   WorkDir w = WorkDir::Prepare("--dir", dir);  // absent (created, with missing parents) or an
//                                                // empty directory; anything else refused
//   w.Own(dir + "/store");                       // an entry this command created in it
//   ...
//   w.Keep();                                    // what it made stays (success, --keep)
//
// Without Keep(), the destructor removes the owned entries (newest first, recursively: they are
// this command's own), then each directory it created, innermost first, and only while empty
// (rmdir: never a directory someone else put something into meanwhile).
#ifndef CSDKIT_RUNTIME_WORK_DIR_H_
#define CSDKIT_RUNTIME_WORK_DIR_H_

#include <string>
#include <vector>

namespace csdkit {

/// Creates the missing directories of `path` (itself included), outermost first, appending each
/// one this call created to `made`. A component that exists is left alone (if it is not a
/// directory, the next mkdir fails). Throws std::runtime_error naming the directory and errno.
void CreateMissingDirs(const std::string& path, std::vector<std::string>* made);

class WorkDir {
 public:
  WorkDir() = default;
  WorkDir(WorkDir&& o) noexcept;
  WorkDir& operator=(WorkDir&&) = delete;
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir();

  /// `dir` for a command's work, given as `option` (used in messages): absent (created here,
  /// missing parents too) or an existing empty directory. A file, or a directory with entries,
  /// is refused with std::invalid_argument naming the option, the path and what was found.
  static WorkDir Prepare(const std::string& option, const std::string& dir);

  const std::string& path() const { return path_; }
  /// Records an entry this command created (removed recursively unless kept).
  void Own(const std::string& entry) { owned_.push_back(entry); }
  /// Keeps everything: the destructor removes nothing.
  void Keep() { kept_ = true; }
  /// Removes now what the destructor would (idempotent).
  void Remove();

 private:
  std::string path_;
  std::vector<std::string> made_;   // directories created, outermost first
  std::vector<std::string> owned_;  // entries created inside
  bool kept_ = false;
};

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_WORK_DIR_H_
