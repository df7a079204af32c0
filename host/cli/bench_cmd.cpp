// `csdkit bench ...`: benchmarks that print JSON.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "bench.h"
#include "commands.h"

namespace csdkit::cli {

void AddBenchCommand(CLI::App& app) {
  CLI::App* b = app.add_subcommand("bench", "Benchmarks (JSON output)");
  b->require_subcommand(1);
  auto o = std::make_shared<bench::KernelBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* k = b->add_subcommand(
      "kernel", "Host-model elements/s per optimizer, dtype and thread count, against a "
                "STREAM-triad bound measured in the same run");
  k->add_option("--n", o->n, "elements per configuration")->capture_default_str();
  k->add_option("--threads", o->max_threads, "largest thread count")->capture_default_str();
  k->add_option("--reps", o->reps, "repetitions (best of)")->capture_default_str();
  k->add_flag("--quick", o->quick, "only the target configuration (AdamW fp16/fp16)");
  k->add_flag("--json", *json, "print JSON only (default: JSON plus progress on a terminal)");
  k->callback([o, json]() {
    o->progress = !*json && isatty(STDERR_FILENO);
    std::cout << bench::KernelBench(*o).dump(2) << "\n";
  });
  AddIoBench(b);
}

}  // namespace csdkit::cli
