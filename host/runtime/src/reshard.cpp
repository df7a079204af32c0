#include "csdkit/runtime/reshard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <stdexcept>
#include <utility>

#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/json_file.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/platform/pause_point.h"
#include "csdkit/runtime/layout.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "csdkit/runtime/work_dir.h"
#include "store_internal.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;
// The records keep their members' order (rank 0's record is copied with four members changed).
using Json = nlohmann::ordered_json;

[[noreturn]] void Fail(const std::string& msg) { throw StoreError(msg); }

// A record member as the messages show it: its JSON text, or "none".
std::string Show(const Json& j, const char* key) {
  return j.contains(key) ? j.at(key).dump() : std::string("none");
}

bool AsUint(const Json& v, uint64_t* out) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    *out = v.get<uint64_t>();
    return true;
  }
  return false;
}

// "[a, b, c]": numbers v[0 .. n-1] of a list of n; a long list shows its first six, "...", the
// last (v.back()) and the count.
std::string ListText(const std::vector<uint64_t>& v, uint64_t n) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (n > 10 && i == 6) {
      return s + ", ..., " + std::to_string(v.back()) + "] (" + std::to_string(n) + " in all)";
    }
    s += (i ? ", " : "") + std::to_string(v[i]);
  }
  return s + "]";
}

std::string ListText(const std::vector<uint64_t>& v) { return ListText(v, v.size()); }

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The absolute path, without a trailing separator (as the messages and results show it).
std::string Absolute(const std::string& p, const char* what) {
  if (p.empty()) throw std::invalid_argument(std::string(what) + ": expected a path, found none");
  std::string s = fs::absolute(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

void SyncPath(const std::string& path, bool dir) {
  const int fd = ::open(path.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) Fail("cannot open '" + path + "' to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) Fail("fsync of '" + path + "' failed: " + std::strerror(e));
}

// `text` into `path` durably: written and synced, then renamed over `path` from `tmp` (the
// caller syncs the directory once every record is in place).
void WriteRecord(const std::string& path, const std::string& tmp, const std::string& text) {
  // Exclusive: the destination belongs to this command, so nothing of this name exists there
  // unless someone else put it there — then it is refused, not written through or over.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) Fail("cannot create '" + tmp + "': " + std::strerror(errno));
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int e = errno;
      ::close(fd);
      Fail("cannot write '" + tmp + "': " + std::strerror(e));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) Fail("fsync of '" + tmp + "' failed: " + std::strerror(e));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Fail("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

// ---------------------------------------------------------------------------------------------
// The records.

struct RankSet {
  std::vector<Json> records;       // rank order
  std::vector<std::string> paths;  // SRC/rank-<r>.json
  std::vector<RankSlice> slices;   // each rank's range (checked against the rule)
  uint64_t world = 0, total = 0;
};

RankSet ReadRankSet(const std::string& src) {
  static const std::regex kName("rank-([0-9]+)\\.json");
  std::map<uint64_t, std::string> found;  // rank -> path
  std::error_code ec;
  fs::directory_iterator it(src, ec), end;
  if (ec) Fail("cannot list '" + src + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kName)) continue;
    const std::string digits = m[1].str();
    if (digits.size() > 18) Fail("'" + it->path().string() + "': expected a rank number, found " +
                                 std::to_string(digits.size()) + " digits");
    const uint64_t r = std::stoull(digits);
    const std::string path = src + "/" + name;
    if (!found.emplace(r, path).second) {
      Fail("'" + found[r] + "' and '" + path + "' are both records of rank " + std::to_string(r) +
           " (expected one file rank-" + std::to_string(r) + ".json)");
    }
  }
  if (ec) Fail("cannot list '" + src + "': " + ec.message());
  if (found.empty()) {
    Fail("'" + src + "': no partition record (rank-<r>.json) found: not a set of "
         "csdkit.torch.distributed stores");
  }
  std::map<uint64_t, Json> recs;
  for (const auto& [r, path] : found) {
    Json j;
    try {
      // A regular file, nested at most kMaxJsonDepth deep: a FIFO named rank-<r>.json is
      // refused before it is opened for reading (it would wait for a writer forever).
      j = ReadJsonFile<Json>(path);
    } catch (const JsonFileError& e) {
      Fail(std::string("partition record: ") + e.what());
    }
    if (!j.is_object()) {
      Fail("'" + path + "': expected a JSON object (a partition record), found a JSON " +
           j.type_name());
    }
    recs.emplace(r, std::move(j));
  }
  RankSet set;
  const uint64_t r0 = found.begin()->first;
  const std::string& p0 = found.begin()->second;
  const Json& j0 = recs.at(r0);
  if (!j0.contains("world_size") || !AsUint(j0.at("world_size"), &set.world) || set.world == 0) {
    Fail("'" + p0 + "': expected member 'world_size' to be an integer >= 1, found " +
         Show(j0, "world_size"));
  }
  if (found.size() != set.world || found.rbegin()->first != set.world - 1) {
    std::vector<uint64_t> ranks, missing;
    uint64_t below = 0;  // found ranks below the world size
    for (const auto& kv : found) {
      ranks.push_back(kv.first);
      below += kv.first < set.world;
    }
    for (uint64_t r = 0; r < set.world && missing.size() < 6; ++r) {
      if (!found.count(r)) missing.push_back(r);
    }
    const uint64_t n_missing = set.world - below;
    std::string text = n_missing == 0 ? "" : "; missing " + ListText(missing);
    if (n_missing > missing.size()) {
      text += " and " + std::to_string(n_missing - missing.size()) + " more";
    }
    Fail("'" + src + "': expected the records of ranks 0 .. " + std::to_string(set.world - 1) +
         " (world size " + std::to_string(set.world) + " in '" + p0 + "'), found ranks " +
         ListText(ranks) + text);
  }
  static const char* const kSame[] = {"format", "world_size", "total_elements", "fingerprint",
                                      "dtype"};
  for (const auto& [r, rec] : recs) {
    const std::string& path = found.at(r);
    if (!rec.contains("format") || rec.at("format") != kPartitionFormat) {
      Fail("'" + path + "': expected format '" + kPartitionFormat + "', found " +
           Show(rec, "format"));
    }
    std::vector<std::string> bad;
    std::string a = "[", b = "[";
    for (const char* k : kSame) {
      const Json none;
      const Json& x = j0.contains(k) ? j0.at(k) : none;
      const Json& y = rec.contains(k) ? rec.at(k) : none;
      if (x == y) continue;
      a += (bad.empty() ? "" : ", ") + Show(j0, k);
      b += (bad.empty() ? "" : ", ") + Show(rec, k);
      bad.push_back(k);
    }
    if (!bad.empty()) {
      Fail("'" + p0 + "' and '" + path + "' differ in " + Join(bad) + ": " + a + "] vs " + b +
           "] (the records of one set of stores must describe one model and one world size)");
    }
    uint64_t rank = 0;
    if (!rec.contains("rank") || !AsUint(rec.at("rank"), &rank) || rank != r) {
      Fail("'" + path + "': expected rank " + std::to_string(r) + ", found " + Show(rec, "rank"));
    }
  }
  if (!j0.contains("total_elements") || !AsUint(j0.at("total_elements"), &set.total) ||
      set.total == 0) {
    Fail("'" + p0 + "': expected member 'total_elements' to be an integer >= 1, found " +
         Show(j0, "total_elements"));
  }
  try {
    set.slices = PartitionSlices(set.total, set.world, "'" + p0 + "' (world_size)");
  } catch (const std::invalid_argument& e) {
    Fail(e.what());  // a record that no trainer could have written
  }
  for (uint64_t r = 0; r < set.world; ++r) {
    const Json& rec = recs.at(r);
    uint64_t b = 0, e = 0;
    const bool ok = rec.contains("begin") && rec.contains("end") && AsUint(rec.at("begin"), &b) &&
                    AsUint(rec.at("end"), &e);
    if (!ok || b != set.slices[r].begin || e != set.slices[r].end) {
      Fail("'" + found.at(r) + "': expected elements [" + std::to_string(set.slices[r].begin) +
           ", " + std::to_string(set.slices[r].end) + ") of " + std::to_string(set.total) +
           " (the partition over " + std::to_string(set.world) + " ranks), found [" +
           Show(rec, "begin") + ", " + Show(rec, "end") + ")");
    }
    set.records.push_back(rec);
    set.paths.push_back(found.at(r));
  }
  return set;
}

// ---------------------------------------------------------------------------------------------
// The source stores' layouts: pieces of the model's tensors.

// A layout entry of a rank store: elements [a, b) of tensor `index` of torch param group
// `group`.
struct PieceName {
  uint64_t group = 0, index = 0, a = 0, b = 0;
};

bool ParsePiece(const std::string& name, PieceName* p) {
  static const std::regex kPiece(
      "param_groups\\[([0-9]{1,18})\\]\\.params\\[([0-9]{1,18})\\]"
      "\\[([0-9]{1,18}):([0-9]{1,18})\\]");
  std::smatch m;
  if (!std::regex_match(name, m, kPiece)) return false;
  p->group = std::stoull(m[1].str());
  p->index = std::stoull(m[2].str());
  p->a = std::stoull(m[3].str());
  p->b = std::stoull(m[4].str());
  return true;
}

std::string TensorName(uint64_t group, uint64_t index) {
  return "param_groups[" + std::to_string(group) + "].params[" + std::to_string(index) + "]";
}

// One tensor of the whole model, as the pieces put it together.
struct ModelTensor {
  uint64_t group = 0, index = 0;  // torch param group, index in it
  uint64_t begin = 0;             // first flattened element (no padding)
  uint64_t numel = 0;             // elements seen so far (then: all of them)
  int64_t steps = 0;              // its step count (Store::tensor_steps): every piece's
};

struct SourceRank {
  std::string dir;
  RankSlice slice;
  ParamLayout layout;
  std::vector<uint64_t> at;  // each layout entry's first flattened element
};

// What the source stores hold, learned by opening each once.
struct Source {
  std::vector<SourceRank> ranks;
  std::vector<ModelTensor> tensors;         // flattening order
  std::map<uint64_t, OptimizerConfig> hyper;  // per torch param group: as the source recorded it
  StoreConfig config;                       // rank 0's
  std::vector<std::string> vars;
  int64_t step = 0;
};

std::string ConfigText(const StoreConfig& c) {
  return std::string("optimizer ") + OptimizerName(c.hyper.opt) + ", grad " + DTypeName(c.grad) +
         ", out " + OutDTypeName(c.out) + ", state " + StateFmtName(c.state);
}

Source ReadSource(const std::string& src, const RankSet& set) {
  Source s;
  std::map<std::pair<uint64_t, uint64_t>, ModelTensor> tensors;
  std::vector<int64_t> steps;
  std::string count_mismatch;  // the first tensor whose pieces' step counts differ
  const std::string tile = "'" + src + "': the stores' pieces do not tile the model: ";
  for (uint64_t r = 0; r < set.world; ++r) {
    SourceRank sr;
    sr.dir = src + "/rank-" + std::to_string(r);
    sr.slice = set.slices[r];
    const Store st = Store::Open(sr.dir, StoreAccess::kRead);
    if (st.layout() == nullptr) {
      Fail("store '" + sr.dir + "': expected a store of csdkit.torch.distributed (with a "
           "parameter layout), found one without a layout (created by `csdkit init`)");
    }
    sr.layout = *st.layout();
    if (r == 0) {
      s.config = st.config();
      s.vars = st.vars();
    } else if (st.vars() != s.vars) {
      Fail("store '" + sr.dir + "' keeps " + Join(st.vars()) + ", rank 0's ('" +
           s.ranks[0].dir + "') keeps " + Join(s.vars));
    } else if (ConfigText(st.config()) != ConfigText(s.config)) {
      Fail("store '" + sr.dir + "': expected " + ConfigText(s.config) + " (as rank 0's '" +
           s.ranks[0].dir + "'), found " + ConfigText(st.config()));
    }
    steps.push_back(st.step());
    uint64_t at = sr.slice.begin;
    for (size_t ti = 0; ti < sr.layout.tensors().size(); ++ti) {
      const TensorSpec& t = sr.layout.tensors()[ti];
      const int64_t count = st.tensor_steps().at(ti);
      PieceName p;
      if (!ParsePiece(t.name, &p)) {
        Fail("store '" + sr.dir + "': layout entry '" + t.name + "' is not a piece written by "
             "csdkit.torch.distributed (expected param_groups[<g>].params[<i>][<a>:<b>])");
      }
      if (p.b <= p.a || p.b - p.a != t.numel) {
        Fail("store '" + sr.dir + "': layout entry '" + t.name + "' has " +
             std::to_string(t.numel) + " elements, its name says " +
             (p.b <= p.a ? std::string("none") : std::to_string(p.b - p.a)));
      }
      const auto key = std::make_pair(p.group, p.index);
      const auto it = tensors.find(key);
      if (p.a == 0) {
        if (it != tensors.end()) {
          Fail(tile + "store '" + sr.dir + "' entry '" + t.name + "' (element " +
               std::to_string(at) + ") starts " + TensorName(p.group, p.index) +
               ", which an earlier piece started at element " + std::to_string(it->second.begin));
        }
        tensors.emplace(key, ModelTensor{p.group, p.index, at, p.b, count});
      } else {
        if (it == tensors.end() || it->second.numel != p.a || it->second.begin + p.a != at) {
          Fail(tile + "store '" + sr.dir + "' entry '" + t.name + "' is at element " +
               std::to_string(at) + ", expected " +
               (it == tensors.end()
                    ? "a piece [0:...] of that tensor before it"
                    : "the piece [" + std::to_string(it->second.numel) + ":...] of that tensor "
                      "at element " + std::to_string(it->second.begin + it->second.numel)));
        }
        it->second.numel = p.b;
        if (it->second.steps != count && count_mismatch.empty()) {  // reported below
          count_mismatch = "store '" + sr.dir + "' entry '" + t.name + "': step count " +
                           std::to_string(count) + ", but the tensor's earlier piece has " +
                           std::to_string(it->second.steps) +
                           " (the pieces of a tensor step together)";
        }
      }
      s.hyper.emplace(p.group, st.group_hyper().at(t.group));
      sr.at.push_back(at);
      at += t.numel;
    }
    if (at != sr.slice.end) {
      Fail("store '" + sr.dir + "': its layout covers elements [" +
           std::to_string(sr.slice.begin) + ", " + std::to_string(at) + "), its record '" +
           set.paths[r] + "' [" + std::to_string(sr.slice.begin) + ", " +
           std::to_string(sr.slice.end) + ")");
    }
    s.ranks.push_back(std::move(sr));
  }  // each store is closed (its lock released) before the next is opened
  if (std::any_of(steps.begin(), steps.end(), [&](int64_t x) { return x != steps[0]; })) {
    std::string list;
    for (size_t r = 0; r < steps.size(); ++r) {
      list += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + ": " +
              std::to_string(steps[r]);
    }
    Fail("the stores under '" + src + "' are at different committed steps (" + list +
         "): a rank stopped between the others' commits; resume() the old world size first (it "
         "rolls the group back to the common step) or repair the set");
  }
  if (!count_mismatch.empty()) Fail(count_mismatch);
  s.step = steps[0];
  for (const auto& kv : tensors) s.tensors.push_back(kv.second);
  std::sort(s.tensors.begin(), s.tensors.end(),
            [](const ModelTensor& a, const ModelTensor& b) { return a.begin < b.begin; });
  // The whole model must be a layout a trainer can have: torch groups in order, each group's
  // tensors together (every new rank's layout is a cut of it).
  std::vector<uint64_t> groups;
  for (const auto& kv : s.hyper) groups.push_back(kv.first);
  std::vector<TensorSpec> specs;
  for (const ModelTensor& t : s.tensors) {
    const unsigned g = static_cast<unsigned>(
        std::lower_bound(groups.begin(), groups.end(), t.group) - groups.begin());
    specs.push_back({TensorName(t.group, t.index), t.numel, g});
  }
  try {
    ParamLayout whole(std::move(specs));
  } catch (const std::invalid_argument& e) {
    Fail("'" + src + "': the stores' pieces do not form a model's layout: " + e.what());
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The new ranks.

struct NewPiece {
  uint64_t begin = 0, end = 0;  // flattened range
  int64_t steps = 0;            // the tensor's step count
};

struct NewRank {
  RankSlice slice;
  std::string dir, record;
  std::vector<NewPiece> pieces;
  ParamLayout layout;
  std::vector<OptimizerConfig> hyper;
  StoreConfig config;
};

std::vector<NewRank> PlanNewRanks(const Source& s, const std::vector<RankSlice>& slices,
                                  unsigned devices, uint64_t device_mem, hls::StateFmt state,
                                  const std::string& dst) {
  std::vector<NewRank> out;
  size_t first = 0;  // the first tensor that may overlap the next slice
  for (size_t r = 0; r < slices.size(); ++r) {
    NewRank n;
    n.slice = slices[r];
    n.dir = dst + "/rank-" + std::to_string(r);
    n.record = n.dir + ".json";
    const std::string what = "new rank " + std::to_string(r) + " ('" + n.dir + "', elements [" +
                             std::to_string(n.slice.begin) + ", " + std::to_string(n.slice.end) +
                             "))";
    std::vector<TensorSpec> specs;
    std::vector<uint64_t> groups;  // torch param groups in order of appearance
    while (first < s.tensors.size() &&
           s.tensors[first].begin + s.tensors[first].numel <= n.slice.begin) {
      ++first;
    }
    for (size_t t = first; t < s.tensors.size() && s.tensors[t].begin < n.slice.end; ++t) {
      const ModelTensor& mt = s.tensors[t];
      const uint64_t a = std::max(n.slice.begin, mt.begin);
      const uint64_t b = std::min(n.slice.end, mt.begin + mt.numel);
      if (a >= b) continue;
      if (std::find(groups.begin(), groups.end(), mt.group) == groups.end()) {
        groups.push_back(mt.group);
      }
      n.pieces.push_back({a, b, mt.steps});
      specs.push_back({TensorName(mt.group, mt.index) + "[" + std::to_string(a - mt.begin) + ":" +
                           std::to_string(b - mt.begin) + "]",
                       b - a,
                       static_cast<unsigned>(
                           std::find(groups.begin(), groups.end(), mt.group) - groups.begin())});
    }
    try {
      n.layout = ParamLayout(std::move(specs));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(what + ": " + e.what());
    }
    for (const uint64_t g : groups) n.hyper.push_back(s.hyper.at(g));
    StoreConfig& c = n.config;
    c = s.config;
    c.devices = devices;
    c.state = state;
    c.hyper = n.hyper.at(0);
    // The flattened size the store will have (a q8 store places every piece on a block).
    c.params = hls::IsQ8(state) ? ParamLayout(n.layout.tensors(), hls::kQ8Block).total()
                                : n.layout.total();
    try {
      // As a trainer session sizes a store it creates: the largest subgroup that fits the
      // device memory, at most 1 Mi elements so that loads and compute overlap.
      const uint64_t shard = (c.params + devices - 1) / devices;
      const uint32_t fit = SubgroupForMemory(device_mem, c.hyper, c.grad, c.out, shard);
      c.subgroup_elems = std::min<uint32_t>(fit, 1u << 20);
      store_internal::CheckStoreConfig(c, true);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(what + ", " + std::to_string(devices) + " device(s) of " +
                                  std::to_string(device_mem) + " bytes: " + e.what());
    }
    if (StateVariables(c.hyper) != s.vars) {
      throw std::invalid_argument(what + ": its store would keep " +
                                  Join(StateVariables(c.hyper)) +
                                  " (the settings of its first param group), the source stores "
                                  "keep " + Join(s.vars) + ": the state cannot be carried over");
    }
    out.push_back(std::move(n));
  }
  return out;
}

// Fills `bufs` (one per variable: the new rank's slice) from the source stores it overlaps,
// opening each for reading in turn.
void ReadSlice(const Source& s, const NewRank& n, std::vector<std::vector<float>>* bufs) {
  const uint64_t lo = n.slice.begin, hi = n.slice.end;
  for (const SourceRank& sr : s.ranks) {
    if (sr.slice.end <= lo || sr.slice.begin >= hi) continue;
    const Store st = Store::Open(sr.dir, sr.layout, StoreAccess::kRead);
    if (st.step() != s.step) {
      Fail("store '" + sr.dir + "': expected committed step " + std::to_string(s.step) +
           " (as when this reshard read it first), found step " + std::to_string(st.step()) +
           ": it changed meanwhile; nothing of the new set is kept");
    }
    const size_t nt = sr.layout.tensors().size();
    for (size_t v = 0; v < s.vars.size(); ++v) {
      std::vector<float*> dst(nt, nullptr);
      std::vector<size_t> partial;  // pieces crossing the slice's edges: read whole, then cut
      for (size_t t = 0; t < nt; ++t) {
        const uint64_t a = sr.at[t], b = a + sr.layout.tensors()[t].numel;
        if (b <= lo || a >= hi) continue;
        if (a >= lo && b <= hi) {
          dst[t] = (*bufs)[v].data() + (a - lo);
        } else {
          partial.push_back(t);
        }
      }
      std::vector<std::vector<float>> tmp(partial.size());
      for (size_t k = 0; k < partial.size(); ++k) {
        tmp[k].resize(sr.layout.tensors()[partial[k]].numel);
        dst[partial[k]] = tmp[k].data();
      }
      ExportState(st, s.vars[v], dst);
      for (size_t k = 0; k < partial.size(); ++k) {
        const uint64_t a = sr.at[partial[k]], b = a + tmp[k].size();
        const uint64_t x = std::max(a, lo), y = std::min(b, hi);
        std::copy(tmp[k].begin() + (x - a), tmp[k].begin() + (y - a),
                  (*bufs)[v].begin() + (x - lo));
      }
    }
  }
}

}  // namespace

std::vector<RankSlice> PartitionSlices(uint64_t total, uint64_t world, const std::string& what) {
  if (world == 0) throw std::invalid_argument(what + ": expected a world size >= 1, found 0");
  const uint64_t chunk = total / world + (total % world != 0);
  const uint64_t owners = chunk == 0 ? 0 : total / chunk + (total % chunk != 0);
  if (owners < world) {
    // The ranks owners .. world - 1 own nothing.
    std::vector<uint64_t> empty;
    for (uint64_t r = owners; r < world && empty.size() < 6; ++r) empty.push_back(r);
    if (world - owners > 10) empty.push_back(world - 1);
    const std::string list = ListText(empty, world - owners);
    throw std::invalid_argument(what + ": partition of " + std::to_string(total) +
                                " elements over " + std::to_string(world) + " ranks (chunk " +
                                std::to_string(chunk) + "): ranks " + list +
                                " would own no element; use at most " + std::to_string(owners) +
                                " ranks for this model");
  }
  std::vector<RankSlice> out(world);
  for (uint64_t r = 0; r < world; ++r) {
    out[r].begin = std::min(total, r * chunk);
    out[r].end = std::min(total, (r + 1) * chunk);
  }
  return out;
}

nlohmann::json ReshardResult::ToJson() const {
  nlohmann::json ranks_j = nlohmann::json::array();
  for (const ReshardRank& r : ranks) {
    ranks_j.push_back({{"rank", r.rank}, {"begin", r.begin}, {"end", r.end},
                       {"elements", r.end - r.begin}, {"store", r.store}, {"record", r.record}});
  }
  return {{"source", src},
          {"destination", dst},
          {"step", step},
          {"total_elements", total_elements},
          {"source_world_size", source_world},
          {"world_size", ranks.size()},
          {"source_devices", source_devices},
          {"devices", devices},
          {"optimizer", optimizer},
          {"vars", vars},
          {"source_state", source_state},
          {"state", state},
          {"ranks", ranks_j}};
}

// The destination of one reshard, owned by it: the directory's descriptor holds an exclusive
// flock (the same lock a store's writer takes on a store directory) until the command ends.
// `made` lists the directories this command created, the destination last, so that a failure
// removes exactly those (each only if empty again) and nothing it did not make.
class Destination {
 public:
  Destination() = default;
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;
  Destination(Destination&& o) noexcept : fd_(o.fd_), made_(std::move(o.made_)) { o.fd_ = -1; }
  ~Destination() {
    if (fd_ >= 0) ::close(fd_);
  }
  void RemoveMade() {
    for (auto p = made_.rbegin(); p != made_.rend(); ++p) ::rmdir(p->c_str());
    made_.clear();
  }
  int fd_ = -1;
  std::vector<std::string> made_;
};

Destination ClaimDestination(const std::string& dst) {
  Destination out;
  std::error_code ec;
  try {
    // Parents first, each created by this command recorded (removed again on failure).
    try {
      CreateMissingDirs(fs::path(dst).parent_path().string(), &out.made_);
    } catch (const std::runtime_error& e) {
      Fail(std::string("reshard: a parent of the destination: ") + e.what());
    }
    // mkdir fails if the destination exists: only then is an existing one considered, and
    // only if it is an empty directory.
    bool made_dst = ::mkdir(dst.c_str(), 0777) == 0;
    if (!made_dst && errno != EEXIST) {
      Fail("reshard: cannot create the destination '" + dst + "': " + std::strerror(errno));
    }
    out.fd_ = ::open(dst.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (out.fd_ < 0) {
      Fail("reshard: destination '" + dst + "' exists and is not an empty directory (" +
           (errno == ENOTDIR ? std::string("it is not a directory")
                             : std::string("cannot open it: ") + std::strerror(errno)) +
           "; refusing to write over it)");
    }
    if (::flock(out.fd_, LOCK_EX | LOCK_NB) != 0) {
      // Someone else holds it: what is there is theirs, including a directory this command made
      // an instant before the other locked it (so it is not among this command's `made_`).
      Fail("reshard: expected the destination '" + dst + "' to belong to this command, found "
           "it in use by another command (a reshard or a store writer has it locked); "
           "choose another destination or wait for that one");
    }
    if (made_dst) out.made_.push_back(dst);
    const fs::directory_iterator it(dst, ec);
    if (ec) Fail("reshard: cannot list the destination '" + dst + "': " + ec.message());
    if (it != fs::directory_iterator()) {
      Fail("reshard: destination '" + dst + "' exists and is not an empty directory (found '" +
           it->path().filename().string() + "' in it; refusing to write over it)");
    }
  } catch (...) {
    out.RemoveMade();
    throw;
  }
  return out;
}

ReshardResult Reshard(const ReshardOptions& o) {
  if (o.world < 1) {
    throw std::invalid_argument("world: expected a world size >= 1, found " +
                                std::to_string(o.world));
  }
  if (o.devices && (*o.devices < 1 || *o.devices > 256)) {
    throw std::invalid_argument("devices: expected 1..256 devices per rank store, found " +
                                std::to_string(*o.devices));
  }
  const std::string src = Absolute(o.src, "source"), dst = Absolute(o.dst, "destination");
  std::error_code ec;
  if (!fs::is_directory(src, ec)) Fail("reshard: source '" + src + "' is not a directory");
  if (dst == src || dst.rfind(src + "/", 0) == 0 || src.rfind(dst + "/", 0) == 0) {
    Fail("reshard: expected a destination apart from the source '" + src + "', found '" + dst +
         "' (one inside the other)");
  }
  PausePoint("reshard-start");
  // The destination belongs to this command from here on (or the command is refused before it
  // has read anything): created exclusively, or an existing empty directory, locked either way.
  Destination out = ClaimDestination(dst);
  PausePoint("reshard-claimed");
  RankSet set;
  Source source;
  std::vector<NewRank> plan;
  unsigned devices = 0;
  try {
    set = ReadRankSet(src);
    const std::vector<RankSlice> slices =
        PartitionSlices(set.total, static_cast<uint64_t>(o.world));
    source = ReadSource(src, set);
    devices = o.devices ? static_cast<unsigned>(*o.devices) : source.config.devices;
    plan = PlanNewRanks(source, slices, devices, o.device_mem, o.state.value_or(source.config.state),
                        dst);
  } catch (...) {
    out.RemoveMade();  // a source refused: the destination is left as it was found
    throw;
  }

  ReshardResult res;
  res.src = src;
  res.dst = dst;
  res.step = source.step;
  res.total_elements = set.total;
  res.source_world = set.world;
  res.source_devices = source.config.devices;
  res.devices = devices;
  res.optimizer = OptimizerName(source.config.hyper.opt);
  res.vars = source.vars;
  res.source_state = StateFmtName(source.config.state);
  res.state = StateFmtName(o.state.value_or(source.config.state));

  // From here on a failure removes what this call made inside the destination (it is locked:
  // no one else put anything there), then the directories it made (ClaimDestination).
  std::vector<std::string> made;  // entries made inside DST
  auto undo = [&] {
    std::error_code e;
    for (auto p = made.rbegin(); p != made.rend(); ++p) fs::remove_all(*p, e);
    out.RemoveMade();
  };
  try {
    for (const NewRank& n : plan) {
      const uint64_t len = n.slice.end - n.slice.begin;
      std::vector<std::vector<float>> bufs(source.vars.size(), std::vector<float>(len));
      ReadSlice(source, n, &bufs);
      // theta is the first variable of every optimizer (StateVariables).
      Store st = Store::CreateForModel(n.dir, n.config, n.layout, n.hyper, bufs[0].data(),
                                       DType::kFp32);
      made.push_back(n.dir);
      StateImport in;
      in.step = source.step;
      in.theta_dtype = DType::kFp32;
      in.group_hyper = n.hyper;
      for (const NewPiece& pc : n.pieces) in.tensor_steps.push_back(pc.steps);
      for (size_t v = 0; v < source.vars.size(); ++v) {
        std::vector<const float*> p;
        for (const NewPiece& pc : n.pieces) {
          p.push_back(bufs[v].data() + (pc.begin - n.slice.begin));
        }
        if (source.vars[v] == "theta") {
          in.theta.assign(p.begin(), p.end());
        } else if (source.vars[v] == "m") {
          in.m = p;
        } else {
          in.v = p;
        }
      }
      ImportState(st, in);
    }
    // The records last: a set interrupted before this point has stores without records,
    // which resume() refuses.
    for (size_t r = 0; r < plan.size(); ++r) {
      Json rec = set.records[0];
      rec["world_size"] = plan.size();
      rec["rank"] = r;
      rec["begin"] = plan[r].slice.begin;
      rec["end"] = plan[r].slice.end;
      const std::string tmp = plan[r].record + ".tmp";
      made.push_back(tmp);
      made.push_back(plan[r].record);
      WriteRecord(plan[r].record, tmp, rec.dump(1) + "\n");
    }
    SyncPath(dst, true);
  } catch (...) {
    undo();
    throw;
  }
  for (size_t r = 0; r < plan.size(); ++r) {
    res.ranks.push_back({r, plan[r].slice.begin, plan[r].slice.end, plan[r].dir, plan[r].record});
  }
  return res;
}

}  // namespace csdkit
