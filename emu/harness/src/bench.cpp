#include "csdkit/emu/harness/bench.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace csdkit {
namespace emu {

std::string Format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

BenchArgs ParseBenchArgs(int argc, char** argv, const char* extra_help) {
  BenchArgs a;
  auto usage = [&]() {
    std::fprintf(stderr,
                 "usage: %s [--seed S] [--full] [--trace FILE.fst [--trace-from N] "
                 "[--trace-to N]]\n"
                 "  --seed S          random seed (default 0x%" PRIx64
                 ", or $CSDKIT_TEST_SEED)\n"
                 "  --full            the longer sweep\n%s%s",
                 argv[0], a.seed, SimOptions::FlagsHelp(), extra_help);
    std::exit(2);
  };
  try {
    if (const char* s = std::getenv("CSDKIT_TEST_SEED"); s != nullptr && *s != '\0') {
      a.seed = std::strtoull(s, nullptr, 0);
    }
    a.sim.ApplyEnvironment();
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (a.sim.ParseFlag(argc, argv, &i)) continue;
      if (arg == "--seed" && i + 1 < argc) {
        a.seed = std::strtoull(argv[++i], nullptr, 0);
      } else if (arg == "--full") {
        a.full = true;
      } else {
        std::fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], arg.c_str());
        usage();
      }
    }
  } catch (const SimError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    usage();
  }
  return a;
}

void Checker::Report(const std::string& line) {
  if (failures_ == 1) {
    std::printf("%s: first failure with seed 0x%" PRIx64 " (rerun with --seed 0x%" PRIx64 ")\n",
                bench_.c_str(), seed_, seed_);
  }
  if (failures_ <= max_reports_) std::printf("FAIL %s\n", line.c_str());
}

bool Checker::Eq(uint64_t got, uint64_t exp, const std::string& context) {
  ++checks_;
  if (got == exp) return true;
  ++failures_;
  Report(Format("%s: GOT=0x%" PRIx64 " EXP=0x%" PRIx64, context.c_str(), got, exp));
  return false;
}

bool Checker::True(bool ok, const std::string& context) {
  ++checks_;
  if (ok) return true;
  ++failures_;
  Report(context);
  return false;
}

int Checker::Finish() const {
  if (failures_ == 0) {
    std::printf("%s: PASS (%" PRIu64 " checks, seed 0x%" PRIx64 ")\n", bench_.c_str(), checks_,
                seed_);
    return 0;
  }
  std::printf("%s: FAIL (%" PRIu64 " of %" PRIu64 " checks failed, seed 0x%" PRIx64 ")\n",
              bench_.c_str(), failures_, checks_, seed_);
  return 1;
}

}  // namespace emu
}  // namespace csdkit
