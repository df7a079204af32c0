// Small helpers shared by the Verilator benches that use the harness: the command line (seed,
// trace window, --full for the longer sweep), and a checker that counts failures and prints
// each with its context, GOT= and EXP= in hex.
#ifndef CSDKIT_EMU_HARNESS_BENCH_H_
#define CSDKIT_EMU_HARNESS_BENCH_H_

#include <cstdint>
#include <string>
#include <utility>

#include "csdkit/emu/harness/sim.h"

namespace csdkit {
namespace emu {

/// Options common to the benches.
struct BenchArgs {
  uint64_t seed = 0xc5d0a11c0ffeeull;  // or CSDKIT_TEST_SEED, or --seed
  bool full = false;                   // --full: the longer sweep (nightly)
  SimOptions sim;                      // trace flags and CSDKIT_TRACE*
};

/// Parses --seed S, --full and the trace flags (SimOptions::ParseFlag) after applying the
/// environment. On a bad argument prints the usage (with `extra_help`) and exits with status 2.
BenchArgs ParseBenchArgs(int argc, char** argv, const char* extra_help = "");

/// Counts and reports check failures. Prints at most max_reports in full.
class Checker {
 public:
  explicit Checker(std::string bench, uint64_t seed, unsigned max_reports = 20)
      : bench_(std::move(bench)), seed_(seed), max_reports_(max_reports) {}

  /// Records one check; on failure prints "FAIL <context>: GOT=0x.. EXP=0x.." (and the seed
  /// with the first failure). Returns ok.
  bool Eq(uint64_t got, uint64_t exp, const std::string& context);
  /// Records one check; on failure prints "FAIL <context>".
  bool True(bool ok, const std::string& context);

  uint64_t checks() const { return checks_; }
  uint64_t failures() const { return failures_; }
  /// Prints the summary line; returns the process exit status (0 pass, 1 fail).
  int Finish() const;

 private:
  void Report(const std::string& line);

  std::string bench_;
  uint64_t seed_;
  unsigned max_reports_;
  uint64_t checks_ = 0;
  uint64_t failures_ = 0;
};

/// printf into a std::string.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_BENCH_H_
