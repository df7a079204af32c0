#include "csdkit/runtime/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "csdkit/aio/aio_engine.h"
#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/aligned_buffer.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/json_file.h"
#include "csdkit/platform/pause_point.h"
#include "csdkit/runtime/synthetic.h"
#include "store_internal.h"

namespace csdkit {

using store_internal::CheckStoreConfig;
using store_internal::Fail;
using store_internal::GetUint;
using store_internal::MakeShards;
using store_internal::ShardAlign;
using store_internal::Get;
using store_internal::HyperFromJson;

void (*Store::commit_hook)(const char* stage) = nullptr;

namespace {

// Format 2: the slot is recorded (not derived from the step) and the manifest carries a CRC-32
// of its own content.
constexpr const char* kFormat = "csdkit-store-2";

std::string ErrnoText() { return std::strerror(errno); }

// What `init` leaves when it is killed before its first commit: device directories with their
// device.json and slot files, no manifest.json.
bool InterruptedCreation(const std::string& dir) {
  return ::access((dir + "/manifest.json").c_str(), F_OK) != 0 &&
         ::access((dir + "/dev0/device.json").c_str(), F_OK) == 0;
}

std::string InterruptedCreationText(const std::string& dir) {
  return "an interrupted creation (device directories without a manifest.json: a `csdkit init` "
         "or store creation stopped before its first commit, so it holds no state); clear it "
         "with `rm -r '" + dir + "'` and create the store again";
}

// A process's command line from /proc/<pid>/cmdline (arguments joined by spaces, at most 200
// characters), or "" when the process is gone or not visible.
std::string CommandLine(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string cmd;
  for (char c; f.get(c);) cmd += c == '\0' ? ' ' : c;
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  if (cmd.size() > 200) cmd = cmd.substr(0, 200) + "...";
  return cmd;
}

// Who holds the flock on the inode (dev, ino), as the kernel lists it in /proc/locks: one entry
// per lock, "pid <n>: <command line>", writers first. A holder whose process is gone from /proc
// (the lock then lives on in a child that inherited the descriptor) is described, not named.
struct Holders {
  std::vector<std::string> writers, readers;
  unsigned hidden = 0;  // holders whose process this host does not show
};

Holders LockHolders(dev_t dev, ino_t ino) {
  Holders h;
  std::ifstream f("/proc/locks");
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%llu", major(dev), minor(dev),
                static_cast<unsigned long long>(ino));
  const std::string want_ino = ":" + std::to_string(static_cast<unsigned long long>(ino));
  std::vector<std::pair<bool, long>> exact, by_inode;  // (writer, pid)
  for (std::string line; std::getline(f, line);) {
    // "1: FLOCK  ADVISORY  WRITE 4711 fd:01:123456 0 EOF"; a waiter's line has "->" after the
    // number (never ours: every taker here is non-blocking).
    std::istringstream in(line);
    std::string id, kind, adv, rw, where;
    long pid = 0;
    if (!(in >> id >> kind) || kind == "->" || kind != "FLOCK") continue;
    if (!(in >> adv >> rw >> pid >> where)) continue;
    const bool writer = rw == "WRITE";
    if (where == want) exact.emplace_back(writer, pid);
    // Some file systems (btrfs subvolumes, overlayfs) show another device number than stat:
    // the inode number alone is the fallback.
    if (where.size() > want_ino.size() &&
        where.compare(where.size() - want_ino.size(), want_ino.size(), want_ino) == 0) {
      by_inode.emplace_back(writer, pid);
    }
  }
  for (const auto& [writer, pid] : exact.empty() ? by_inode : exact) {
    const std::string cmd = CommandLine(pid);
    if (cmd.empty()) {
      ++h.hidden;
      continue;
    }
    (writer ? h.writers : h.readers).push_back("pid " + std::to_string(pid) + ": " + cmd);
  }
  return h;
}

// The holders of a store's lock as a refusal names them: "a writer (pid 12: csdkit step ...)",
// "2 readers (pid 3: ...; pid 4: ...)", or, when the kernel lists none this host can show
// (a holder on another host of a shared file system), who it must be.
std::string HoldersText(const Holders& h, bool held_exclusively) {
  auto list = [](const std::vector<std::string>& v) {
    std::string t;
    for (size_t i = 0; i < v.size() && i < 4; ++i) t += (i ? "; " : "") + v[i];
    if (v.size() > 4) t += "; and " + std::to_string(v.size() - 4) + " more";
    return t;
  };
  std::string t;
  if (!h.writers.empty()) t = "a writer (" + list(h.writers) + ")";
  if (!h.readers.empty()) {
    t += (t.empty() ? "" : " and ") + std::to_string(h.readers.size()) +
         (h.readers.size() == 1 ? " reader (" : " readers (") + list(h.readers) + ")";
  }
  if (h.hidden > 0) {
    t += (t.empty() ? "" : " and ") + std::string(held_exclusively ? "a writer" : "readers") +
         " whose process is not visible here (a child process that inherited the open store, "
         "or a process in another PID namespace)";
  }
  if (t.empty()) {
    t = held_exclusively ? "a writer on another host or outside this host's view"
                         : "readers on another host or outside this host's view";
  }
  return t;
}

// Locks the store: an flock on the store directory itself, taken without waiting — exclusive for
// a writer, shared for a reader. Nothing inside the store takes part, so no file a user might
// delete as "stale" (a lock file) can let a second writer in: the directory is the store. A
// refusal names who holds it, from the kernel's own list (/proc/locks); the lock of a process
// that died is released by the kernel. The returned handle closes the directory, and so drops
// the lock, when its last copy goes.
std::shared_ptr<const int> LockStore(const std::string& dir, StoreAccess access) {
  const bool write = access == StoreAccess::kWrite;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Fail("store '" + dir + "': cannot open the directory to lock it: " + ErrnoText());
  if (::flock(fd, (write ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      // Held exclusively unless a shared lock is still to be had (then only readers hold it).
      bool exclusive = true;
      if (write && ::flock(fd, LOCK_SH | LOCK_NB) == 0) {
        exclusive = false;
        ::flock(fd, LOCK_UN);
      }
      struct stat st {};
      Holders h;
      if (::fstat(fd, &st) == 0) h = LockHolders(st.st_dev, st.st_ino);
      if (exclusive) h.readers.clear();  // a listed reader would be one that raced away
      ::close(fd);
      Fail("store '" + dir + "': expected " +
           (write ? std::string("no one else to have it open (one writer per store)")
                  : std::string("no writer to have it open")) +
           ", found it in use by " + HoldersText(h, exclusive) + "; close that one first");
    }
    ::close(fd);
    Fail("store '" + dir + "': cannot lock the directory: " + std::strerror(e) +
         (e == EBADF || e == ENOLCK || e == EOPNOTSUPP || e == EINVAL
              ? std::string(" (the file system does not take an flock on a directory, as some "
                            "network file systems do not: put the store on a local disk)")
              : std::string()));
  }
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

void FsyncPath(const std::string& path, bool dir) {
  const int fd = ::open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) Fail("cannot open '" + path + "' to sync it: " + ErrnoText());
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) Fail("fsync of '" + path + "' failed: " + std::strerror(e));
}

// Writes a small file durably: write, fsync; the caller renames and syncs the directory.
void WriteSmallFile(const std::string& path, const std::string& text) {
  // O_NOFOLLOW: a symbolic link in the store's place is refused, never written through.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    Fail("cannot create '" + path + "': " +
         (errno == ELOOP ? std::string("expected a file of the store, found a symbolic link "
                                       "(refused, not followed: a store's files never lead "
                                       "outside it)")
                         : ErrnoText()));
  }
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      Fail("cannot write '" + path + "': " + std::strerror(e));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    Fail("fsync of '" + path + "' failed: " + std::strerror(e));
  }
  ::close(fd);
}

// A store's small JSON files: a regular file (not a symbolic link), nested at most
// kMaxJsonDepth deep (csdkit/platform/json_file.h), or a StoreError naming the file.
nlohmann::json ReadStoreJson(const std::string& path, const std::string& what) {
  try {
    return ReadJsonFile(path, kMaxJsonFileBytes, /*no_follow=*/true);
  } catch (const JsonFileError& e) {
    Fail(what + ": " + e.what());
  }
}

// Makes room for `needed` more open descriptors: counts those open (/proc/self/fd), raises the
// soft RLIMIT_NOFILE up to the hard limit if the sum (plus headroom for sockets, aio contexts
// and the device set) exceeds it, and throws a StoreError naming both figures if it cannot.
void EnsureDescriptors(uint64_t needed, const std::string& what) {
  constexpr uint64_t kHeadroom = 256;
  uint64_t open_now = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++open_now;
  }
  const uint64_t want = open_now + needed + kHeadroom;
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want) return;
  if (rl.rlim_cur == RLIM_INFINITY) return;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want) {
    struct rlimit raised = rl;
    raised.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
  }
  Fail(what + ": expected room for " + std::to_string(needed) + " open files (" +
       std::to_string(open_now) + " already open, " + std::to_string(kHeadroom) +
       " kept free), found a limit of " + std::to_string(rl.rlim_cur) + " (hard " +
       (rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max)) +
       "); raise it with `ulimit -n " + std::to_string(want) + "` or use fewer devices");
}

uint64_t Round4096(uint64_t x) { return (x + 4095) / 4096 * 4096; }


}  // namespace

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

std::string Store::FilePath(unsigned d, unsigned a, unsigned slot) const {
  return dir_ + "/dev" + std::to_string(d) + "/" + arrays_.at(a).name + "." +
         std::to_string(slot) + ".bin";
}

namespace {
// A subgroup's absmax values take a 4096-aligned region of their own in an absmax file, at
// its index (a subgroup holds at most subgroup_elems elements).
uint64_t AbsmaxRegion(const StoreConfig& c) {
  return Round4096(uint64_t{c.subgroup_elems} / hls::kQ8Block * 4);
}
}  // namespace

ArrayExtent Store::Extent(unsigned a, const Subgroup& g) const {
  const StateArray& x = arrays_.at(a);
  ArrayExtent e;
  if (x.absmax) {
    e.offset = uint64_t{g.index} * AbsmaxRegion(cfg_);
    e.bytes = uint64_t{g.n} / hls::kQ8Block * 4;
  } else {
    e.offset = g.begin * x.elem_bytes;
    e.bytes = uint64_t{g.n} * x.elem_bytes;
  }
  e.io_bytes = Round4096(e.bytes);
  return e;
}

std::pair<uint64_t, uint64_t> Store::ArrayRange(unsigned a, uint32_t lo, uint32_t hi) const {
  const StateArray& x = arrays_.at(a);
  if (!x.absmax) return {uint64_t{lo} * x.elem_bytes, uint64_t{hi - lo} * x.elem_bytes};
  if (lo % hls::kQ8Block != 0 || hi % hls::kQ8Block != 0) {
    throw std::logic_error("store '" + dir_ + "': elements " + std::to_string(lo) + ".." +
                           std::to_string(hi) + " of a subgroup are not whole blocks of 256 (" +
                           x.name + ")");
  }
  return {uint64_t{lo} / hls::kQ8Block * 4, uint64_t{hi - lo} / hls::kQ8Block * 4};
}

uint64_t Store::ArrayBufferBytes(unsigned a) const {
  const StateArray& x = arrays_.at(a);
  return x.absmax ? AbsmaxRegion(cfg_) : Round4096(uint64_t{cfg_.subgroup_elems} * x.elem_bytes);
}

uint64_t Store::ArrayFileBytes(unsigned d, unsigned a) const {
  const StateArray& x = arrays_.at(a);
  return x.absmax ? SubgroupCount(d) * AbsmaxRegion(cfg_)
                  : Round4096(shards_.at(d).size() * x.elem_bytes);
}

std::vector<unsigned> Store::ArraysOf(unsigned var) const {
  std::vector<unsigned> r;
  for (unsigned a = 0; a < arrays_.size(); ++a) {
    if (arrays_[a].var == var) r.push_back(a);
  }
  return r;
}

uint32_t Store::VarChecksum(unsigned var, const Subgroup& g, const uint32_t* array_crcs) const {
  const std::vector<unsigned> as = ArraysOf(var);
  uint32_t c = array_crcs[0];
  for (size_t k = 1; k < as.size(); ++k) {
    c = hls::Crc32Combine(c, array_crcs[k], Extent(as[k], g).bytes);
  }
  return c;
}

// The JSON is dumped compactly with sorted keys (nlohmann's object order), so the value does not
// depend on the file's whitespace.
std::string Store::ManifestCrc(nlohmann::json j) {
  if (j.is_object()) j.erase("manifest_crc");
  const std::string text = j.dump();
  char b[16];
  std::snprintf(b, sizeof b, "%08x", Crc32(text.data(), text.size()));
  return b;
}

template <typename Fn>
void Store::ForEachSubgroup(unsigned d, Fn&& fn) const {
  // Subgroups of subgroup_elems from the shard's start, also cut where a param group begins
  // (block boundaries in model stores), so that every subgroup has one group.
  uint32_t index = 0;
  const Shard& sh = shards_[d];
  const uint64_t s = cfg_.subgroup_elems;
  uint64_t b = 0;
  unsigned g = has_layout_ ? layout_.GroupOf(sh.begin) : 0;
  while (b < sh.size()) {
    uint64_t e = std::min(sh.size(), b + s);
    if (has_layout_) {
      while (g + 1 < layout_.groups() && layout_.group_begin(g + 1) <= sh.begin + b) ++g;
      if (g + 1 < layout_.groups() && layout_.group_begin(g + 1) < sh.begin + e) {
        e = layout_.group_begin(g + 1) - sh.begin;
      }
    }
    fn(Subgroup{d, index++, b, static_cast<uint32_t>(e - b), g});
    b = e;
  }
}

std::vector<Subgroup> Store::Subgroups(unsigned d) const {
  std::vector<Subgroup> r;
  ForEachSubgroup(d, [&r](const Subgroup& g) { r.push_back(g); });
  return r;
}

uint64_t Store::SubgroupCount(unsigned d) const {
  uint64_t n = 0;
  ForEachSubgroup(d, [&n](const Subgroup&) { ++n; });
  return n;
}

std::vector<Subgroup> Store::AllSubgroups() const {
  std::vector<Subgroup> r;
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    for (const Subgroup& g : Subgroups(d)) r.push_back(g);
  }
  return r;
}

const aio::File& Store::file(unsigned d, unsigned a, unsigned slot) const {
  return files_.at(d).at(a).at(slot);
}

uint32_t Store::checksum(unsigned d, unsigned var, uint32_t sg) const {
  return crcs_.at(d).at(var).at(sg);
}

Store::Checksums Store::EmptyChecksums() const {
  Checksums c(cfg_.devices);
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    c[d].assign(vars_.size(), std::vector<uint32_t>(Subgroups(d).size(), 0u));
  }
  return c;
}

void Store::OpenFiles() {
  // Two files per (device, array) stay open: 1536 for 256 devices with m and v, beyond the
  // usual soft limit of 1024. The soft limit is raised towards the hard one when needed; a hard
  // limit too small is refused here, before any file is opened, instead of failing half-way.
  const uint64_t needed = uint64_t{cfg_.devices} * arrays_.size() * 2;
  EnsureDescriptors(needed, "store '" + dir_ + "' (" + std::to_string(cfg_.devices) +
                                " devices x " + std::to_string(arrays_.size()) + " arrays x 2 slots)");
  files_.clear();
  files_.resize(cfg_.devices);
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    files_[d].resize(arrays_.size());
    for (unsigned v = 0; v < arrays_.size(); ++v) {
      for (unsigned s = 0; s < 2; ++s) {
        const std::string path = FilePath(d, v, s);
        const uint64_t want = ArrayFileBytes(d, v);
        aio::FileOptions fo;
        fo.min_alignment = 4096;
        fo.no_follow = true;
        struct stat st {};
        const bool present = ::lstat(path.c_str(), &st) == 0;
        const bool whole = present && static_cast<uint64_t>(st.st_size) >= want;
        if (s != slot_ && !whole) {
          // The slot that is not committed holds nothing the store needs: a lost or cut file
          // of it is made again (by a writer; a reader never reads it), and the committed
          // state stays usable.
          if (access_ == StoreAccess::kWrite) {
            aio::File f = aio::File::Create(path, fo);
            f.Allocate(want);
            f.Sync();
            FsyncPath(dir_ + "/dev" + std::to_string(d), true);
          } else {
            files_[d][v].emplace_back();
            continue;
          }
        } else if (!present) {
          Fail("store '" + dir_ + "': expected shard file '" + path + "', found none (" +
               ErrnoText() + ")");
        } else if (!whole) {
          Fail("store '" + dir_ + "': shard file '" + path + "' is truncated: expected " +
               std::to_string(want) + " bytes, found " + std::to_string(st.st_size));
        }
        const aio::OpenMode mode = access_ == StoreAccess::kRead ? aio::OpenMode::kReadOnly
                                                                 : aio::OpenMode::kReadWrite;
        files_[d][v].push_back(aio::File::Open(path, mode, fo));
      }
    }
  }
}

namespace {

nlohmann::json ChecksumsToJson(const Store::Checksums& crcs, const std::vector<std::string>& vars) {
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& dev : crcs) {
    nlohmann::json dj = nlohmann::json::object();
    for (unsigned v = 0; v < vars.size(); ++v) dj[vars[v]] = dev[v];
    cj.push_back(dj);
  }
  return cj;
}

// Per-tensor step counts as the manifest keeps them: [tensor, count] for each tensor whose count
// is not the committed step `step` (none in a store where every tensor had a gradient in every
// step).
nlohmann::json TensorStepsToJson(const std::vector<int64_t>& counts, int64_t step) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t t = 0; t < counts.size(); ++t) {
    if (counts[t] != step) a.push_back({t, counts[t]});
  }
  return a;
}

// The counts of `tensors` tensors at committed step `step` from a manifest object's optional
// "tensor_steps" (absent: all at `step`); pairs in ascending tensor order, each count in
// [0, step].
std::vector<int64_t> TensorStepsFromJson(const nlohmann::json& j, size_t tensors, int64_t step,
                                         const std::string& where) {
  std::vector<int64_t> counts(tensors, step);
  if (!j.contains("tensor_steps")) return counts;
  const nlohmann::json& a = j["tensor_steps"];
  const std::string w = where + " tensor_steps";
  if (!a.is_array() || a.size() > tensors) {
    Fail(w + ": expected an array of at most " + std::to_string(tensors) + " [tensor, count] "
         "pairs, found " + (a.is_array() ? std::to_string(a.size()) + " entries"
                                          : std::string(a.type_name())));
  }
  uint64_t next = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string ew = w + "[" + std::to_string(i) + "]";
    const nlohmann::json& e = a[i];
    if (!e.is_array() || e.size() != 2) Fail(ew + ": expected a [tensor, count] pair, found " + e.dump());
    const nlohmann::json pair{{"tensor", e[0]}, {"count", e[1]}};
    const uint64_t t = GetUint(pair, "tensor", ew, next, tensors - 1);
    const uint64_t c = GetUint(pair, "count", ew, 0, static_cast<uint64_t>(step));
    counts[t] = static_cast<int64_t>(c);
    next = t + 1;  // ascending, each tensor once
  }
  return counts;
}

}  // namespace

void Store::WriteManifest(int64_t step, unsigned slot, const Checksums& crcs, bool initial,
                          bool with_previous) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["store_id"] = store_id_;
  j["config"] = cfg_.ToJson();
  nlohmann::json sh = nlohmann::json::array();
  for (const Shard& s : shards_) {
    sh.push_back({{"device", s.device}, {"dir", "dev" + std::to_string(s.device)},
                  {"begin", s.begin}, {"end", s.end}});
  }
  j["shards"] = sh;
  j["vars"] = vars_;
  j["committed_step"] = step;
  j["slot"] = slot;
  nlohmann::json cj = nlohmann::json::array();
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    nlohmann::json dj = nlohmann::json::object();
    for (unsigned v = 0; v < vars_.size(); ++v) dj[vars_[v]] = crcs[d][v];
    cj.push_back(dj);
  }
  j["checksums"] = cj;
  if (has_layout_) {
    j["layout"] = layout_.ToJson();
    nlohmann::json gh = nlohmann::json::array();
    for (const OptimizerConfig& h : group_hyper_) gh.push_back(HyperToJson(h));
    j["group_hyper"] = gh;
    const nlohmann::json ts = TensorStepsToJson(tensor_steps_, step);
    if (!ts.empty()) j["tensor_steps"] = ts;
  }
  if (with_previous) {
    // The state being replaced (step_, slot_, crcs_, and the hyper-parameters in prev_*).
    nlohmann::json pj;
    pj["committed_step"] = step_;
    pj["slot"] = slot_;
    pj["checksums"] = ChecksumsToJson(crcs_, vars_);
    if (has_layout_) {
      nlohmann::json gh = nlohmann::json::array();
      for (const OptimizerConfig& h : prev_group_hyper_) gh.push_back(HyperToJson(h));
      pj["group_hyper"] = gh;
      const nlohmann::json ts = TensorStepsToJson(prev_tensor_steps_, step_);
      if (!ts.empty()) pj["tensor_steps"] = ts;
    }
    j["previous"] = pj;
  }
  j["manifest_crc"] = ManifestCrc(j);
  const std::string tmp = dir_ + "/manifest.json.tmp";
  try {
    WriteSmallFile(tmp, j.dump(1) + "\n");
  } catch (...) {
    ::unlink(tmp.c_str());  // no temp file survives a failed commit
    throw;
  }
  if (!initial && commit_hook) commit_hook("tmp_written");
  if (::rename(tmp.c_str(), (dir_ + "/manifest.json").c_str()) != 0) {
    const std::string e = ErrnoText();
    ::unlink(tmp.c_str());
    Fail("cannot rename '" + tmp + "' over the manifest: " + e);
  }
  // The rename is the commit. What follows only makes it durable; a failure here is reported
  // as such (durability_warning), never as an uncommitted step.
  try {
    if (!initial && commit_hook) commit_hook("renamed");
    FsyncPath(dir_, true);
  } catch (const std::exception& e) {
    if (initial) throw;
    durability_warning_ = std::string("step ") + std::to_string(step) +
                          " is committed, but may not survive a power loss: " + e.what();
  }
}

template <typename Init>
Store Store::CreateImpl(const std::string& dir, const StoreConfig& cfg_in, const ParamLayout* layout,
                        std::vector<OptimizerConfig> groups, const aio::AioConfig& aio_cfg,
                        Init&& init) {
  StoreConfig cfg = cfg_in;
  CheckStoreConfig(cfg, layout != nullptr);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].opt != cfg.hyper.opt) {
      throw std::invalid_argument("param group " + std::to_string(g) + ": expected optimizer " +
                                  OptimizerName(cfg.hyper.opt) + " (the store's), found " +
                                  OptimizerName(groups[g].opt));
    }
    try {
      ValidateConfig(groups[g]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("param group " + std::to_string(g) + ": " + e.what());
    }
  }
  bool made_dir = true;
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) Fail("cannot create '" + dir + "': " + ErrnoText());
    made_dir = false;
    struct stat st {};
    ::stat(dir.c_str(), &st);
    if (!S_ISDIR(st.st_mode)) Fail("'" + dir + "': expected a directory, found a file");
  }
  if (!made_dir) {
    if (::access((dir + "/manifest.json").c_str(), F_OK) == 0) {
      Fail("'" + dir + "': expected an empty or absent directory, found an existing store "
           "(remove it first, or use `csdkit step` on it)");
    }
    std::error_code ec;
    const std::filesystem::directory_iterator it(dir, ec);
    if (ec) Fail("cannot list '" + dir + "': " + ec.message());
    if (InterruptedCreation(dir)) {
      Fail("'" + dir + "': expected an empty or absent directory, found " +
           InterruptedCreationText(dir));
    }
    if (it != std::filesystem::directory_iterator()) {
      Fail("'" + dir + "': expected an empty or absent directory, found '" +
           it->path().filename().string() + "' in it (a store is only created where it "
           "overwrites nothing)");
    }
  }
  // From here on, a failure removes what this call created (and nothing else): the entries it
  // made, then the directory itself if it made that and it is empty again.
  std::vector<std::string> made;  // paths created inside `dir`
  auto undo = [&] {
    std::error_code ec;
    for (auto p = made.rbegin(); p != made.rend(); ++p) std::filesystem::remove_all(*p, ec);
    if (made_dir) ::rmdir(dir.c_str());
  };
  Store s;
  // A lock held by someone else means another creator or user is at work in `dir`: nothing
  // here is ours to remove then.
  s.lock_ = LockStore(dir, StoreAccess::kWrite);
  if (::access((dir + "/manifest.json").c_str(), F_OK) == 0) {
    Fail("'" + dir + "': expected an empty or absent directory, found an existing store "
         "(created meanwhile by another process)");
  }
  try {
  s.dir_ = dir;
  s.cfg_ = cfg;
  s.has_layout_ = layout != nullptr;
  if (layout) s.layout_ = *layout;
  s.group_hyper_ = std::move(groups);
  if (layout) s.tensor_steps_.assign(layout->tensors().size(), 0);
  s.shards_ = MakeShards(cfg.params, cfg.devices, ShardAlign(cfg, layout != nullptr));
  s.vars_ = StateVariables(cfg.hyper);
  s.arrays_ = StateArrays(s.vars_, cfg.state);
  std::random_device rd;
  char id[40];
  std::snprintf(id, sizeof id, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  s.store_id_ = id;
  for (unsigned d = 0; d < cfg.devices; ++d) {
    const std::string dd = dir + "/dev" + std::to_string(d);
    if (::mkdir(dd.c_str(), 0700) != 0) Fail("cannot create '" + dd + "': " + ErrnoText());
    made.push_back(dd);
    const nlohmann::json ident{{"store_id", s.store_id_}, {"device", d}, {"devices", cfg.devices}};
    WriteSmallFile(dd + "/device.json", ident.dump() + "\n");
    for (unsigned a = 0; a < s.arrays_.size(); ++a) {
      for (unsigned sl = 0; sl < 2; ++sl) {
        aio::FileOptions fo;
        fo.min_alignment = 4096;
        fo.no_follow = true;
        aio::File f = aio::File::Create(s.FilePath(d, a, sl), fo);
        f.Allocate(s.ArrayFileBytes(d, a));
      }
    }
    FsyncPath(dd, true);
  }
  s.OpenFiles();

  // Initial state into slot 0, one subgroup at a time.
  aio::Engine engine(aio_cfg);
  Checksums crcs = s.EmptyChecksums();
  // Each variable's binary32 values, then stored in the format: binary32; theta as bf16
  // (nearest even: creating is not a step); a q8 moment quantized block by block.
  AlignedBuffer buf(static_cast<std::size_t>(cfg.subgroup_elems) * 4);
  AlignedBuffer out(static_cast<std::size_t>(cfg.subgroup_elems) * 4);
  const hls::Fp32 policy(cfg.ftz);
  for (unsigned d = 0; d < cfg.devices; ++d) {
    for (const Subgroup& g : s.Subgroups(d)) {
      for (unsigned v = 0; v < s.vars_.size(); ++v) {
        float* x = buf.as<float>();
        init(s, s.shards_[d].begin + g.begin, g, s.vars_[v], x);
        const std::vector<unsigned> as = s.ArraysOf(v);
        std::vector<uint32_t> ac;
        for (unsigned a : as) {
          const StateArray& arr = s.arrays_[a];
          const ArrayExtent e = s.Extent(a, g);
          std::memset(out.data(), 0, e.io_bytes);
          if (arr.elem_bytes == 4 && !arr.absmax) {
            std::memcpy(out.data(), x, e.bytes);
          } else if (arr.elem_bytes == 2) {
            for (uint32_t i = 0; i < g.n; ++i) {
              out.as<uint16_t>()[i] = hls::F32ToBf16(hls::F2U(x[i]));
            }
          } else {
            // codes (elem_bytes 1) or absmax: quantize the blocks, keep the array's half.
            for (uint32_t k = 0; k < g.n / hls::kQ8Block; ++k) {
              uint8_t codes[hls::kQ8Block];
              float amax;
              hls::QuantizeBlockQ8(x + uint64_t{k} * hls::kQ8Block, hls::kQ8Block,
                                   s.vars_[v] == "m", policy, codes, &amax);
              if (arr.absmax) {
                out.as<float>()[k] = amax;
              } else {
                std::memcpy(out.data() + uint64_t{k} * hls::kQ8Block, codes, hls::kQ8Block);
              }
            }
          }
          ac.push_back(Crc32(out.data(), e.bytes));
          engine.Write(s.file(d, a, 0), e.offset, out.data(), e.io_bytes);
        }
        crcs[d][v][g.index] = s.VarChecksum(v, g, ac.data());
      }
    }
    for (unsigned a = 0; a < s.arrays_.size(); ++a) s.files_[d][a][0].Sync();
  }
  made.push_back(dir + "/manifest.json.tmp");
  made.push_back(dir + "/manifest.json");
  s.WriteManifest(0, 0, crcs, true);
  s.crcs_ = crcs;
  s.step_ = 0;
  s.slot_ = 0;
  } catch (...) {
    s.files_.clear();
    undo();
    throw;
  }
  return s;
}

Store Store::Create(const std::string& dir, const StoreConfig& cfg,
                    const aio::AioConfig& aio_cfg) {
  const double acc0 =
      cfg.hyper.opt == Optimizer::kAdagrad ? cfg.hyper.initial_accumulator_value : 0.0;
  return CreateImpl(dir, cfg, nullptr, {cfg.hyper}, aio_cfg,
                    [&](const Store&, uint64_t base, const Subgroup& g, const std::string& name,
                        float* x) {
                      for (uint32_t i = 0; i < g.n; ++i) {
                        x[i] = name == "theta" ? InitialWeight(cfg.seed, base + i)
                                               : (name == "v" ? static_cast<float>(acc0) : 0.0f);
                      }
                    });
}

Store Store::CreateForModel(const std::string& dir, const StoreConfig& cfg_in,
                            const ParamLayout& layout, const std::vector<OptimizerConfig>& groups,
                            const void* weights, DType weight_dtype,
                            const aio::AioConfig& aio_cfg) {
  if (groups.size() != layout.groups()) {
    throw std::invalid_argument("param groups: expected hyper-parameters for the layout's " +
                                std::to_string(layout.groups()) + " groups, found " +
                                std::to_string(groups.size()));
  }
  if (weights == nullptr) throw std::invalid_argument("weights: expected a buffer, found none");
  // The compressed formats place every tensor on a block of 256 (the store's own layout; the
  // tensors, and so the fingerprint, are the caller's).
  const ParamLayout placed(layout.tensors(), hls::IsQ8(cfg_in.state) ? hls::kQ8Block : 1);
  StoreConfig cfg = cfg_in;
  cfg.params = placed.total();
  // Which tensor holds flattened element i: walk the layout alongside the subgroups (they come
  // in increasing order within a shard).
  const unsigned wb = DTypeBytes(weight_dtype);
  const auto* w = static_cast<const uint8_t*>(weights);
  std::vector<uint64_t> packed(placed.tensors().size());  // tensor's first element in `weights`
  for (size_t t = 1; t < packed.size(); ++t) packed[t] = packed[t - 1] + placed.tensors()[t - 1].numel;
  auto widen = [&](uint64_t k) -> float {
    uint32_t bits;
    if (weight_dtype == DType::kFp32) {
      std::memcpy(&bits, w + k * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, w + k * 2, 2);
      bits = weight_dtype == DType::kFp16 ? hls::F16ToF32(h) : hls::Bf16ToF32(h);
    }
    return hls::U2F(bits);
  };
  (void)wb;
  return CreateImpl(
      dir, cfg, &placed, groups, aio_cfg,
      [&](const Store& s, uint64_t base, const Subgroup& g, const std::string& name, float* x) {
        std::fill(x, x + g.n, 0.0f);
        if (name == "v" && cfg.hyper.opt == Optimizer::kAdagrad) {
          std::fill(x, x + g.n,
                    static_cast<float>(s.group_hyper()[g.group].initial_accumulator_value));
        }
        if (name != "theta") return;
        for (size_t t = 0; t < placed.tensors().size(); ++t) {
          const uint64_t tb = placed.offset(t), te = tb + placed.tensors()[t].numel;
          const uint64_t lo = std::max(tb, base), hi = std::min(te, base + g.n);
          for (uint64_t i = lo; i < hi; ++i) x[i - base] = widen(packed[t] + (i - tb));
        }
      });
}

Store::Checksums Store::ChecksumsFromJson(const nlohmann::json& cj, const std::string& w) const {
  if (!cj.is_array() || cj.size() != cfg_.devices) {
    Fail(w + ": checksums: expected one entry per device");
  }
  // Each list's length is checked against the subgroup count before anything is allocated for
  // it, so a manifest cannot make the reader allocate more than its own size.
  Checksums crcs(cfg_.devices, std::vector<std::vector<uint32_t>>(vars_.size()));
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    const uint64_t count = SubgroupCount(d);
    for (unsigned v = 0; v < vars_.size(); ++v) {
      const std::string vw = w + " checksums of device " + std::to_string(d) + " " + vars_[v];
      const auto& list = Get<nlohmann::json>(cj[d], vars_[v].c_str(), w + " checksums");
      if (!list.is_array() || list.size() != count) {
        Fail(vw + ": expected a list of " + std::to_string(count) + " subgroups' CRCs, found " +
             (list.is_array() ? std::to_string(list.size()) + " entries" : list.type_name()));
      }
      for (const auto& c : list) {
        const bool ok = c.is_number_unsigned() && c.get<uint64_t>() <= UINT32_MAX;
        if (!ok) Fail(vw + ": expected CRC-32 values (integers < 2^32), found " + c.dump());
        crcs[d][v].push_back(c.get<uint32_t>());
      }
    }
  }
  return crcs;
}

Store Store::FromManifest(const nlohmann::json& j, const std::string& w) {
  if (!j.is_object()) Fail(w + ": expected a JSON object, found " + j.type_name());
  const std::string fmt = Get<std::string>(j, "format", w);
  if (fmt != kFormat) Fail(w + ": expected format '" + kFormat + "', found '" + fmt + "'");
  const std::string crc = Get<std::string>(j, "manifest_crc", w);
  if (crc != ManifestCrc(j)) {
    Fail(w + ": expected manifest_crc " + ManifestCrc(j) + " (the CRC-32 of its content), found " +
         crc + ": the manifest was edited or corrupted; restore it from a backup, it cannot be "
         "trusted");
  }
  Store s;
  s.store_id_ = Get<std::string>(j, "store_id", w);
  s.cfg_ = StoreConfig::FromJson(Get<nlohmann::json>(j, "config", w));
  s.has_layout_ = j.contains("layout");
  try {
    CheckStoreConfig(s.cfg_, s.has_layout_);
    if (s.has_layout_) s.layout_ = ParamLayout::FromJson(j["layout"]);
  } catch (const std::invalid_argument& e) {
    Fail(w + ": " + e.what());
  }
  s.group_hyper_ = {s.cfg_.hyper};
  if (s.has_layout_) {
    if (s.layout_.total() != s.cfg_.params) {
      Fail(w + ": expected the layout's " + std::to_string(s.layout_.total()) +
           " parameters, found params " + std::to_string(s.cfg_.params));
    }
    const uint64_t align = hls::IsQ8(s.cfg_.state) ? hls::kQ8Block : 1;
    if (s.layout_.tensor_align() != align) {
      Fail(w + ": expected the layout's tensors aligned to " + std::to_string(align) +
           " elements (state " + StateFmtName(s.cfg_.state) + "), found " +
           std::to_string(s.layout_.tensor_align()));
    }
    const auto gh = Get<nlohmann::json>(j, "group_hyper", w);
    if (!gh.is_array() || gh.size() != s.layout_.groups()) {
      Fail(w + ": expected hyper-parameters for " + std::to_string(s.layout_.groups()) +
           " param groups in 'group_hyper'");
    }
    s.group_hyper_.clear();
    for (size_t g = 0; g < gh.size(); ++g) {
      const std::string gw = w + " group_hyper[" + std::to_string(g) + "]";
      OptimizerConfig h = s.cfg_.hyper;
      HyperFromJson(gh[g], gw, &h);
      try {
        ValidateConfig(h);
      } catch (const std::invalid_argument& e) {
        Fail(gw + ": " + e.what());
      }
      s.group_hyper_.push_back(h);
    }
  }
  s.step_ = static_cast<int64_t>(GetUint(j, "committed_step", w, 0, INT64_MAX));
  s.slot_ = static_cast<unsigned>(GetUint(j, "slot", w, 0, 1));
  if (s.has_layout_) {
    s.tensor_steps_ = TensorStepsFromJson(j, s.layout_.tensors().size(), s.step_, w);
  } else if (j.contains("tensor_steps")) {
    Fail(w + ": expected no 'tensor_steps' in a store without a layout, found " +
         j["tensor_steps"].dump());
  }
  s.shards_ = MakeShards(s.cfg_.params, s.cfg_.devices, ShardAlign(s.cfg_, s.has_layout_));
  s.vars_ = StateVariables(s.cfg_.hyper);
  s.arrays_ = StateArrays(s.vars_, s.cfg_.state);
  const auto sh = Get<nlohmann::json>(j, "shards", w);
  if (!sh.is_array() || sh.size() != s.shards_.size()) {
    Fail(w + ": expected " + std::to_string(s.shards_.size()) + " shards, found " +
         std::to_string(sh.is_array() ? sh.size() : 0));
  }
  for (unsigned d = 0; d < s.shards_.size(); ++d) {
    if (GetUint(sh[d], "begin", w, 0, UINT64_MAX) != s.shards_[d].begin ||
        GetUint(sh[d], "end", w, 0, UINT64_MAX) != s.shards_[d].end) {
      Fail(w + ": shard " + std::to_string(d) + " range does not match params/devices");
    }
  }
  if (Get<std::vector<std::string>>(j, "vars", w) != s.vars_) {
    Fail(w + ": state variables do not match the optimizer");
  }
  s.crcs_ = s.ChecksumsFromJson(Get<nlohmann::json>(j, "checksums", w), w);
  if (j.contains("previous")) {
    const std::string pw = w + " previous";
    const auto& pj = j["previous"];
    if (!pj.is_object()) Fail(pw + ": expected an object, found " + std::string(pj.type_name()));
    s.prev_step_ = static_cast<int64_t>(GetUint(pj, "committed_step", pw, 0, INT64_MAX));
    s.prev_slot_ = static_cast<unsigned>(GetUint(pj, "slot", pw, 0, 1));
    if (s.prev_slot_ == s.slot_) Fail(pw + ": expected the other slot than the committed one");
    s.prev_crcs_ = s.ChecksumsFromJson(Get<nlohmann::json>(pj, "checksums", pw), pw);
    s.prev_group_hyper_ = s.group_hyper_;
    if (s.has_layout_) {
      const auto gh = Get<nlohmann::json>(pj, "group_hyper", pw);
      if (!gh.is_array() || gh.size() != s.layout_.groups()) {
        Fail(pw + ": expected hyper-parameters for " + std::to_string(s.layout_.groups()) +
             " param groups in 'group_hyper'");
      }
      for (size_t g = 0; g < gh.size(); ++g) {
        const std::string gw = pw + " group_hyper[" + std::to_string(g) + "]";
        OptimizerConfig h = s.cfg_.hyper;
        HyperFromJson(gh[g], gw, &h);
        try {
          ValidateConfig(h);
        } catch (const std::invalid_argument& e) {
          Fail(gw + ": " + e.what());
        }
        s.prev_group_hyper_[g] = h;
      }
      s.prev_tensor_steps_ =
          TensorStepsFromJson(pj, s.layout_.tensors().size(), s.prev_step_, pw);
    }
    s.has_previous_ = true;
  }
  return s;
}

Store Store::Open(const std::string& dir, StoreAccess access) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Fail("store '" + dir + "': expected a directory created by `csdkit init`, found " +
         (errno == ENOENT ? std::string("nothing") : std::string("no directory")));
  }
  if (::access((dir + "/manifest.json").c_str(), F_OK) != 0) {
    Fail("store '" + dir + "': expected a store (its manifest.json), found " +
         (InterruptedCreation(dir) ? InterruptedCreationText(dir) : std::string("none")));
  }
  std::shared_ptr<const int> lock = LockStore(dir, access);
  Store s = FromManifest(ReadStoreJson(dir + "/manifest.json", "store '" + dir + "'"),
                         "store '" + dir + "' manifest");
  s.dir_ = dir;
  s.lock_ = std::move(lock);
  s.access_ = access;
  for (unsigned d = 0; d < s.cfg_.devices; ++d) {
    const std::string dd = dir + "/dev" + std::to_string(d);
    const nlohmann::json ident = ReadStoreJson(dd + "/device.json", "device " + std::to_string(d));
    if (Get<std::string>(ident, "store_id", dd) != s.store_id_ ||
        GetUint(ident, "device", dd, 0, UINT32_MAX) != d) {
      Fail("device directory '" + dd + "': expected device " + std::to_string(d) + " of store " +
           s.store_id_ + ", found " + ident.dump());
    }
  }
  s.OpenFiles();
  return s;
}

Store Store::Plan(const StoreConfig& cfg) {
  CheckStoreConfig(cfg, false);
  Store s;
  s.cfg_ = cfg;
  s.group_hyper_ = {cfg.hyper};
  s.shards_ = MakeShards(cfg.params, cfg.devices, ShardAlign(cfg, false));
  s.vars_ = StateVariables(cfg.hyper);
  s.arrays_ = StateArrays(s.vars_, cfg.state);
  s.MakePlanning();
  return s;
}

Store Store::PlanCopy() const {
  Store s;
  s.cfg_ = cfg_;
  s.has_layout_ = has_layout_;
  s.layout_ = layout_;
  s.group_hyper_ = group_hyper_;
  s.tensor_steps_ = tensor_steps_;
  s.shards_ = shards_;
  s.vars_ = vars_;
  s.arrays_ = arrays_;
  s.step_ = step_;
  s.slot_ = slot_;
  s.store_id_ = store_id_;
  s.MakePlanning();
  return s;
}

void Store::MakePlanning() {
  planning_ = true;
  access_ = StoreAccess::kWrite;
  dir_.clear();
  files_.clear();
  files_.resize(cfg_.devices);
  for (auto& per_array : files_) {
    per_array.resize(arrays_.size());
    for (auto& slots : per_array) slots.resize(2);
  }
  // The state a null device holds is zeros: each subgroup's CRC is that of its variable's
  // bytes as zeros (subgroups mostly share one size, so few distinct values are computed).
  std::map<uint64_t, uint32_t> zero_crc;
  crcs_ = EmptyChecksums();
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    ForEachSubgroup(d, [&](const Subgroup& g) {
      for (unsigned v = 0; v < vars_.size(); ++v) {
        uint64_t bytes = 0;
        for (unsigned a : ArraysOf(v)) bytes += Extent(a, g).bytes;
        auto it = zero_crc.find(bytes);
        if (it == zero_crc.end()) it = zero_crc.emplace(bytes, Crc32OfZeros(bytes)).first;
        crcs_[d][v][g.index] = it->second;
      }
    });
  }
}

void Store::RequireWriter(const char* what) const {
  if (access_ != StoreAccess::kWrite) {
    throw std::logic_error(std::string(what) + ": store '" + dir_ + "' was opened for reading");
  }
}

void Store::SyncNextSlot() {
  RequireWriter("SyncNextSlot");
  if (planning_) return;  // no files
  const unsigned next = 1 - slot_;
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    for (unsigned a = 0; a < arrays_.size(); ++a) files_[d][a][next].Sync();
  }
}

void Store::Commit(const Checksums& crcs, const std::vector<OptimizerConfig>* used,
                   std::optional<int64_t> step, const std::vector<int64_t>* tensor_steps) {
  RequireWriter("Commit");
  durability_warning_.clear();
  const int64_t next_step = step ? *step : step_ + 1;
  if (next_step < 0) {
    throw std::invalid_argument("commit: expected a step number >= 0, found " +
                                std::to_string(next_step));
  }
  std::vector<int64_t> counts(has_layout_ ? layout_.tensors().size() : 0, next_step);
  if (tensor_steps != nullptr) {
    if (tensor_steps->size() != counts.size()) {
      throw std::invalid_argument("commit: expected a step count for each of the " +
                                  std::to_string(counts.size()) + " tensors, found " +
                                  std::to_string(tensor_steps->size()));
    }
    for (size_t t = 0; t < counts.size(); ++t) {
      if ((*tensor_steps)[t] < 0 || (*tensor_steps)[t] > next_step) {
        throw std::invalid_argument("commit: tensor " + std::to_string(t) + ": expected a step "
                                    "count in [0, " + std::to_string(next_step) + "], found " +
                                    std::to_string((*tensor_steps)[t]));
      }
    }
    counts = *tensor_steps;
  }
  // A planning store (no files) does the same bookkeeping in memory: no sync, no manifest.
  if (!planning_) {
    SyncNextSlot();
    if (commit_hook) commit_hook("synced");
    PausePoint("store-commit");
    CheckManifestUnchanged();
  }
  const std::vector<OptimizerConfig> before = group_hyper_;
  if (used != nullptr) {
    if (used->size() != group_hyper_.size()) {
      throw std::invalid_argument("commit: expected hyper-parameters for " +
                                  std::to_string(group_hyper_.size()) + " groups, found " +
                                  std::to_string(used->size()));
    }
    group_hyper_ = *used;
  }
  // The replaced state's hyper-parameters, recorded as "previous" (ROLLBACK).
  const std::vector<OptimizerConfig> before_prev = prev_group_hyper_;
  prev_group_hyper_ = before;
  std::vector<int64_t> counts_before = tensor_steps_;
  std::vector<int64_t> counts_before_prev = prev_tensor_steps_;
  prev_tensor_steps_ = tensor_steps_;
  tensor_steps_ = std::move(counts);
  if (!planning_) {
    try {
      WriteManifest(next_step, 1 - slot_, crcs, false, true);
    } catch (...) {
      group_hyper_ = before;
      prev_group_hyper_ = before_prev;
      tensor_steps_ = std::move(counts_before);
      prev_tensor_steps_ = std::move(counts_before_prev);
      throw;
    }
  }
  prev_crcs_ = crcs_;
  prev_step_ = step_;
  prev_slot_ = slot_;
  has_previous_ = true;
  crcs_ = crcs;
  step_ = next_step;
  slot_ = 1 - slot_;
}

void Store::CheckManifestUnchanged() const {
  // The lock is on the directory this writer opened: if the path now names another one (the
  // store moved away and something put in its place), this writer no longer owns what it would
  // commit into. A commit never follows a lost lock.
  if (lock_) {
    struct stat locked {}, now {};
    if (::fstat(*lock_, &locked) != 0 || ::stat(dir_.c_str(), &now) != 0 ||
        locked.st_dev != now.st_dev || locked.st_ino != now.st_ino) {
      Fail("store '" + dir_ + "': expected the directory this writer locked, found " +
           (::stat(dir_.c_str(), &now) != 0 ? std::string("nothing") : std::string("another one")) +
           " at that path (moved or replaced while the writer ran); nothing committed");
    }
  }
  // The lock makes this writer the only one; this check also catches a manifest replaced
  // behind the lock's back (a restore, another host on a shared file system): a commit never
  // lands on a manifest other than the one this writer started from.
  {
    const nlohmann::json now = ReadStoreJson(dir_ + "/manifest.json", "store '" + dir_ + "'");
    const int64_t on_disk = now.value("committed_step", int64_t{-1});
    const int64_t on_disk_slot = now.value("slot", int64_t{-1});
    if (on_disk != step_ || on_disk_slot != static_cast<int64_t>(slot_) ||
        now.value("store_id", std::string()) != store_id_) {
      Fail("store '" + dir_ + "': expected its manifest at committed step " +
           std::to_string(step_) + " (slot " + std::to_string(slot_) + ") as this writer opened "
           "it, found step " + std::to_string(on_disk) + " (slot " +
           std::to_string(on_disk_slot) + "): it was changed by someone else; nothing committed");
    }
  }
}

void Store::RollBack(const aio::AioConfig& aio_cfg) {
  RequireWriter("RollBack");
  if (planning_) {
    throw std::logic_error("RollBack: a planning store holds no state to roll back to");
  }
  if (!has_previous_) {
    Fail("store '" + dir_ + "' (committed step " + std::to_string(step_) + "): its manifest "
         "records no earlier state to roll back to (a store just created or rolled back, or "
         "last committed by an older csdkit)");
  }
  durability_warning_.clear();
  CheckManifestUnchanged();
  // The earlier state must still be whole: a step started after the last commit writes into
  // its slot.
  VerifySlot(prev_slot_, prev_crcs_, aio_cfg,
             "cannot roll back to step " + std::to_string(prev_step_) + ": ",
             " (a step after " + std::to_string(step_) + " began overwriting it)");
  const std::vector<OptimizerConfig> before = group_hyper_;
  group_hyper_ = prev_group_hyper_;
  std::vector<int64_t> counts_before = tensor_steps_;
  tensor_steps_ = prev_tensor_steps_;
  try {
    WriteManifest(prev_step_, prev_slot_, prev_crcs_, false, false);
  } catch (...) {
    group_hyper_ = before;
    tensor_steps_ = std::move(counts_before);
    throw;
  }
  crcs_ = prev_crcs_;
  step_ = prev_step_;
  slot_ = prev_slot_;
  has_previous_ = false;
}

Store Store::Open(const std::string& dir, const ParamLayout& expected, StoreAccess access) {
  Store s = Open(dir, access);
  if (!s.has_layout_) {
    Fail("store '" + dir + "': expected a store created for a model (layout fingerprint " +
         expected.Fingerprint() + "), found a store without a parameter layout");
  }
  if (s.layout_.Fingerprint() != expected.Fingerprint()) {
    Fail("store '" + dir + "': expected the layout of this model (fingerprint " +
         expected.Fingerprint() + ", " + std::to_string(expected.tensors().size()) +
         " tensors), found a store of another model (fingerprint " + s.layout_.Fingerprint() +
         ", " + std::to_string(s.layout_.tensors().size()) + " tensors)");
  }
  return s;
}

void Store::Verify(const aio::AioConfig& aio_cfg) const {
  if (planning_) {
    throw std::logic_error("Verify: a planning store holds no state to verify");
  }
  VerifySlot(slot(), crcs_, aio_cfg, "", "");
}

void Store::VerifySlot(unsigned s, const Checksums& crcs, const aio::AioConfig& aio_cfg,
                       const std::string& prefix, const std::string& suffix) const {
  aio::Engine engine(aio_cfg);
  AlignedBuffer buf(static_cast<std::size_t>(cfg_.subgroup_elems) * 4);
  for (unsigned d = 0; d < cfg_.devices; ++d) {
    for (const Subgroup& g : Subgroups(d)) {
      for (unsigned v = 0; v < vars_.size(); ++v) {
        std::vector<uint32_t> ac;
        std::string files;
        for (unsigned a : ArraysOf(v)) {
          const ArrayExtent e = Extent(a, g);
          engine.Read(file(d, a, s), e.offset, buf.data(), e.io_bytes);
          ac.push_back(Crc32(buf.data(), e.bytes));
          files += (files.empty() ? "" : " + ") + FilePath(d, a, s);
        }
        const uint32_t c = VarChecksum(v, g, ac.data());
        if (c != crcs[d][v][g.index]) {
          char b[64];
          std::snprintf(b, sizeof b, "expected CRC 0x%08x, found 0x%08x", crcs[d][v][g.index], c);
          Fail(prefix + "store '" + dir_ + "' is corrupt: " + files + " subgroup " +
               std::to_string(g.index) + " (elements " + std::to_string(g.begin) + ".." +
               std::to_string(g.begin + g.n) + "): " + b + suffix);
        }
      }
    }
  }
}

nlohmann::json Store::Describe() const {
  nlohmann::json j = cfg_.ToJson();
  j["dir"] = dir_;
  j["store_id"] = store_id_;
  j["planning"] = planning_;
  j["committed_step"] = step_;
  j["slot"] = slot();
  j["vars"] = vars_;
  // The arrays and their bytes per parameter (docs/state-formats.md); the bytes every step
  // reads and writes of them are these times the element count.
  nlohmann::json arrays = nlohmann::json::array();
  double per_param = 0;
  for (const StateArray& a : arrays_) {
    const double b = a.absmax ? 4.0 / hls::kQ8Block : a.elem_bytes;
    per_param += b;
    arrays.push_back({{"name", a.name}, {"var", vars_[a.var]}, {"bytes_per_param", b}});
  }
  j["arrays"] = arrays;
  j["state_bytes_per_param"] = per_param;
  if (has_layout_) {
    j["layout"] = {{"fingerprint", layout_.Fingerprint()},
                   {"tensors", layout_.tensors().size()},
                   {"groups", layout_.groups()}};
    nlohmann::json gh = nlohmann::json::array();
    for (const OptimizerConfig& h : group_hyper_) gh.push_back(HyperToJson(h));
    j["group_hyper"] = gh;
    // Tensors whose step count is behind the committed step (steps without a gradient).
    j["tensor_steps"] = TensorStepsToJson(tensor_steps_, step_);
  }
  nlohmann::json sh = nlohmann::json::array();
  for (const Shard& s : shards_) {
    sh.push_back({{"device", s.device}, {"begin", s.begin}, {"end", s.end},
                  {"subgroups", Subgroups(s.device).size()},
                  {"file_bytes", ArrayFileBytes(s.device, 0)}});
  }
  j["shards"] = sh;
  return j;
}

}  // namespace csdkit
