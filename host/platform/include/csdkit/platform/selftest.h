// Running the updater kernel on any Device and comparing it with the host model: the basis of
// `csdkit selftest` (a card, the OpenCL backend, the emulated devices) and of the backend tests.
#ifndef CSDKIT_PLATFORM_SELFTEST_H_
#define CSDKIT_PLATFORM_SELFTEST_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "csdkit/platform/device.h"
#include "csdkit/platform/problem.h"

namespace csdkit {

/// A named optimizer configuration; together the variants set every flag of the datapath.
struct Variant {
  const char* name;
  OptimizerConfig cfg;
  int64_t step;
};
std::vector<Variant> AllVariants();

/// Copies every buffer of `p` into device memory (each allocated with its UpdateBufferRole),
/// launches csd_update on `dev`, and returns every buffer read back whole (padding included, so
/// a stray write shows).
UpdateBuffers RunOnDevice(Device& dev, const Problem& p);

/// Compares two buffers byte for byte over their full (padded) size; "" when equal, else the
/// array's name, `context`, the first mismatching elements (index, EXP, GOT in hex) and the
/// count.
std::string DiffBuffers(const char* name, const AlignedBuffer& exp, const AlignedBuffer& got,
                        unsigned elem_bytes, const std::string& context = "");

/// Checks the integrity lanes of a launch's status word (`got`: the buffers read back after
/// launching problem `p`) against the host's own computation over the buffers: zlib's CRC-32 of
/// each state array as given and as returned (0 for state the optimizer does not use), the
/// count and first index of non-finite words written, no AXI error. "" when all agree, else
/// each differing lane with EXP and GOT in hex.
std::string CheckStatusLanes(const Problem& p, const UpdateBuffers& got);

struct SelfTestOptions {
  std::vector<uint32_t> sizes = {1, 17, 4097, 70001};
  bool ieee = true;   // also run the IEEE policy (an HLS-built card implements FTZ only)
  bool ftz = true;
  uint64_t seed = 1;
  /// The state formats to run (docs/state-formats.md). A q8 format runs each size rounded up to
  /// whole blocks of 256, half of its launches on special data (Problem::Generate's), and not
  /// the fp16 copy of q8-bf16 (refused by the contract).
  std::vector<hls::StateFmt> states = {hls::StateFmt::kFp32};
  /// Called after each launch with a one-line description and "" or the mismatch report.
  std::function<void(const std::string&, const std::string&)> on_case;
};

struct SelfTestReport {
  int launches = 0;
  int failed = 0;
  std::vector<std::string> failures;  // the first few reports
  nlohmann::json ToJson() const;
};

/// Every state format x optimizer variant x gradient dtype x output dtype x dense/sparse x
/// policy x size, with generated vectors and special values, on `dev` against the host model,
/// bit for bit.
SelfTestReport SelfTest(Device& dev, const SelfTestOptions& o);

}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_SELFTEST_H_
