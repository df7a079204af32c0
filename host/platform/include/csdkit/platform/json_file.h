// Reading the JSON files the kit is given (store manifests, device and rank records, golden
// vectors' problem.json, DeepSpeed configs, an xclbin's build metadata) with bounds that hold
// against hostile input:
//
//  - nesting depth: at most kMaxJsonDepth levels, checked while parsing (a parser callback stops
//    at the first value deeper than that), so no deep document is ever built — nlohmann's value
//    type copies and compares recursively, and a document 80,000 arrays deep overflows the stack;
//  - the file itself: a regular file (a directory, FIFO, socket or device is refused before it is
//    read, and a FIFO is opened without waiting for a writer), of at most a given size.
//
// Errors are JsonFileError, whose message names the file (or the name given for a buffer), what
// was expected and what was found; callers prefix what the file is to them.
#ifndef CSDKIT_PLATFORM_JSON_FILE_H_
#define CSDKIT_PLATFORM_JSON_FILE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace csdkit {

/// The deepest nesting of arrays and objects any JSON the kit reads may have. The kit's own
/// files nest at most 5 deep; DeepSpeed configs about 3.
inline constexpr int kMaxJsonDepth = 64;

/// Largest JSON file read by default (a 256-device manifest with its checksums is ~2 MiB).
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;

/// A JSON file or buffer that could not be read; the message names it.
class JsonFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace json_detail {

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

inline std::string KindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace json_detail

/// Parses [begin, end) as one JSON document nested at most kMaxJsonDepth deep, as `Json`
/// (nlohmann::json, or nlohmann::ordered_json to keep members in file order). `name` is how
/// errors call the input (a quoted path, or "--ds-config '<path>'"). Throws JsonFileError.
template <typename Json = nlohmann::json>
Json ParseJsonBounded(const char* begin, const char* end, const std::string& name) {
  struct TooDeep {};
  using Event = typename Json::parse_event_t;
  const typename Json::parser_callback_t limit = [](int depth, Event event, Json&) {
    // depth counts the containers around the value being parsed; an array or object that
    // starts at depth kMaxJsonDepth is the (kMaxJsonDepth + 1)-th level.
    if (depth >= kMaxJsonDepth && (event == Event::array_start || event == Event::object_start)) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return Json::parse(begin, end, limit);
  } catch (const TooDeep&) {
    throw JsonFileError(name + ": expected JSON nested at most " + std::to_string(kMaxJsonDepth) +
                        " levels deep, found deeper nesting (refused while parsing)");
  } catch (const nlohmann::json::exception& e) {
    throw JsonFileError(name + ": expected JSON, found invalid JSON (" + e.what() + ")");
  }
}

/// Reads and parses the JSON file at `path` (see the file comment for the bounds). Throws
/// JsonFileError naming the path: missing, not a regular file, larger than `max_bytes`,
/// unreadable, invalid or too deeply nested.
/// With `no_follow`, a symbolic link at `path` is refused instead of followed (a store's files).
template <typename Json = nlohmann::json>
Json ReadJsonFile(const std::string& path, uint64_t max_bytes = kMaxJsonFileBytes,
                  bool no_follow = false) {
  const std::string q = json_detail::Quote(path);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                                          (no_follow ? O_NOFOLLOW : 0));
  if (fd < 0) {
    const int e = errno;
    throw JsonFileError(q + ": expected a JSON file, found " +
                        (e == ENOENT  ? std::string("no such file")
                         : e == ELOOP ? std::string("a symbolic link (refused, not followed)")
                                      : std::string(std::strerror(e))));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw JsonFileError(q + ": cannot stat it: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw JsonFileError(q + ": expected a regular JSON file, found " +
                        json_detail::KindOf(st.st_mode));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw JsonFileError(q + ": expected at most " + std::to_string(max_bytes) +
                        " bytes of JSON, found " +
                        std::to_string(static_cast<uint64_t>(st.st_size)));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw JsonFileError(q + ": cannot read it: " + std::strerror(errno));
    if (n == 0) break;  // shrank while being read: parse what is there (and likely refuse it)
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return ParseJsonBounded<Json>(text.data(), text.data() + text.size(), q);
}

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_JSON_FILE_H_
