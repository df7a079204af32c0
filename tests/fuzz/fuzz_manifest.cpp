// fuzz_manifest: the store manifest reader, Store::FromManifest (host/runtime/src/store.cpp),
// which Store::Open runs on every store's manifest.json before it touches any other file.
//
// The input is the text of a manifest.json. It is parsed, then handed to FromManifest twice:
// once as it is, and — when it is a JSON object — once more with "manifest_crc" set to
// Store::ManifestCrc of it. The manifest's CRC is the first check after the format, so without
// the second call almost every mutation would stop there; with it the fuzzer reaches the
// configuration, layout, shard and checksum checks behind it.
//
// The text is parsed as Store::Open reads a manifest (ParseJsonBounded: invalid JSON and nesting
// deeper than 64 levels refused while parsing, so no deep document reaches FromManifest).
// Expected outcomes: csdkit::JsonFileError, csdkit::StoreError and std::invalid_argument.
// Findings: anything else — a crash, a sanitizer report, std::bad_alloc (FromManifest promises
// never to allocate more than the manifest's own size), an exception of another type (e.g.
// nlohmann's type_error from a get<> on the wrong type), or an accepted manifest whose store
// breaks what the store promises: shards that tile [0, params) in device order, and per device
// subgroups that tile its shard, agree with SubgroupCount, belong to an existing param group
// and have a checksum for every variable.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "csdkit/runtime/store.h"
#include "csdkit/platform/json_file.h"
#include "fuzz_util.h"

namespace {

constexpr const char* kTarget = "fuzz_manifest";

void Check(bool ok, const std::string& what) {
  if (!ok) csdkit::fuzz::Violation(kTarget, "accepted manifest, but " + what);
}

/// What an accepted manifest's store must satisfy (public API only; no file is touched).
void CheckStore(const csdkit::Store& s) {
  const csdkit::StoreConfig& cfg = s.config();
  const std::vector<csdkit::Shard>& shards = s.shards();
  Check(shards.size() == cfg.devices,
        std::to_string(shards.size()) + " shards for " + std::to_string(cfg.devices) + " devices");
  uint64_t next = 0;
  for (unsigned d = 0; d < shards.size(); ++d) {
    const csdkit::Shard& sh = shards[d];
    const std::string at = "device " + std::to_string(d) + ": ";
    Check(sh.device == d && sh.begin == next && sh.end >= sh.begin,
          at + "shard [" + std::to_string(sh.begin) + ", " + std::to_string(sh.end) +
              ") does not continue at " + std::to_string(next));
    next = sh.end;
    const std::vector<csdkit::Subgroup> subs = s.Subgroups(d);
    Check(subs.size() == s.SubgroupCount(d), at + std::to_string(subs.size()) +
                                                 " subgroups, SubgroupCount says " +
                                                 std::to_string(s.SubgroupCount(d)));
    uint64_t in_shard = 0;
    for (const csdkit::Subgroup& g : subs) {
      const std::string gat = at + "subgroup " + std::to_string(g.index) + ": ";
      Check(g.device == d && g.begin == in_shard && g.n > 0,
            gat + "begins at " + std::to_string(g.begin) + " with " + std::to_string(g.n) +
                " elements, expected a non-empty subgroup at " + std::to_string(in_shard));
      Check(g.group < s.group_hyper().size(), gat + "param group " + std::to_string(g.group) +
                                                  " of " + std::to_string(s.group_hyper().size()));
      for (unsigned v = 0; v < s.vars().size(); ++v) (void)s.checksum(d, v, g.index);
      in_shard += g.n;
    }
    Check(in_shard == sh.size(), at + "subgroups cover " + std::to_string(in_shard) +
                                     " elements of a shard of " + std::to_string(sh.size()));
  }
  Check(next == cfg.params,
        "shards end at " + std::to_string(next) + ", params " + std::to_string(cfg.params));
}

void Read(const nlohmann::json& manifest) {
  try {
    const csdkit::Store s = csdkit::Store::FromManifest(manifest, "fuzz manifest");
    CheckStore(s);
    csdkit::fuzz::Accepted(kTarget, std::to_string(s.config().devices) + " devices, " +
                                        std::to_string(s.config().params) + " parameters");
  } catch (const csdkit::StoreError& e) {
    csdkit::fuzz::Refused(kTarget, e);
  } catch (const std::invalid_argument& e) {
    csdkit::fuzz::Refused(kTarget, e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    nlohmann::json j;
    try {
      // The kit's one JSON reader (csdkit/platform/json_file.h): invalid JSON (a number beyond
      // binary64, "1e400", included) and nesting deeper than kMaxJsonDepth are refused while
      // parsing, as the manifest, record, problem.json and --ds-config readers refuse them.
      const char* text = reinterpret_cast<const char*>(data);
      j = csdkit::ParseJsonBounded(text, text + size, "fuzz input");
    } catch (const csdkit::JsonFileError& e) {
      csdkit::fuzz::Refused(kTarget, e);
      return 0;
    }
    Read(j);
    if (j.is_object()) {
      j["manifest_crc"] = csdkit::Store::ManifestCrc(j);
      Read(j);
    }
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
