// fuzz_ds_config: the DeepSpeed `aio` block reader, AioConfig::FromDeepSpeedConfig
// (host/platform/aio/aio_config.cpp), as `--ds-config FILE` and the Python package use it.
//
// The input is the text of a DeepSpeed configuration file, read as the kit reads every JSON
// (ParseJsonBounded: invalid JSON and nesting deeper than 64 levels refused while parsing).
// Expected outcomes: csdkit::JsonFileError and std::invalid_argument. Findings: anything else —
// a crash, a sanitizer report, an exception of another type (e.g. nlohmann's type_error from a
// get<> on a value of the wrong type), or an accepted configuration that breaks what the reader
// promises: it passes Validate(), and its DeepSpeed spelling (ToJson) reads back to the same
// configuration.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "csdkit/aio/aio_config.h"
#include "csdkit/platform/json_file.h"
#include "fuzz_util.h"

namespace {
constexpr const char* kTarget = "fuzz_ds_config";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using csdkit::aio::AioConfig;
  try {
    nlohmann::json ds;
    try {
      // The kit's one JSON reader (csdkit/platform/json_file.h): invalid JSON (a number beyond
      // binary64, "1e400", included) and nesting deeper than kMaxJsonDepth are refused while
      // parsing, as the manifest, record, problem.json and --ds-config readers refuse them.
      const char* text = reinterpret_cast<const char*>(data);
      ds = csdkit::ParseJsonBounded(text, text + size, "fuzz input");
    } catch (const csdkit::JsonFileError& e) {
      csdkit::fuzz::Refused(kTarget, e);
      return 0;
    }
    AioConfig c;
    try {
      c = AioConfig::FromDeepSpeedConfig(ds);
    } catch (const std::invalid_argument& e) {
      csdkit::fuzz::Refused(kTarget, e);
      return 0;
    }
    // An accepted configuration is valid and survives its own round trip; a throw here escapes
    // to the Finding below.
    c.Validate();
    const AioConfig back = AioConfig::FromJson(c.ToJson());
    if (back != c) {
      csdkit::fuzz::Violation(kTarget, "accepted " + c.ToString() +
                                           " but its ToJson() reads back as " + back.ToString());
    }
    csdkit::fuzz::Accepted(kTarget, c.ToString());
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
