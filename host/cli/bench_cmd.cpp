// `csdkit bench ...`: benchmarks that print JSON.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "bench.h"
#include "step_bench.h"
#include "commands.h"
#include "options.h"

namespace csdkit::cli {

void AddBenchCommand(CLI::App& app) {
  CLI::App* b = app.add_subcommand("bench", "Benchmarks (JSON output)");
  b->require_subcommand(1);
  auto o = std::make_shared<bench::KernelBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* k = b->add_subcommand(
      "kernel", "Host-model elements/s per optimizer, dtype and thread count, against a "
                "STREAM-triad bound measured in the same run");
  k->add_option("--n", o->n, "elements per configuration")
      ->check(Count(1024, uint64_t{1} << 30))
      ->capture_default_str();
  k->add_option("--threads", o->max_threads, "largest thread count")
      ->check(Count(1, 256))
      ->capture_default_str();
  k->add_option("--min-threads", o->min_threads, "smallest thread count (default 1)")
      ->check(Count(1, 256))
      ->capture_default_str();
  k->add_option("--reps", o->reps, "repetitions (best of)")->check(Count(1, 1000))->capture_default_str();
  k->add_option("--optimizer", o->optimizer, "time only this optimizer's configurations")
      ->check(CLI::IsMember({"adamw", "adam", "sgd", "adagrad", "lion"}));
  k->add_flag("--quick", o->quick, "only the target configuration (AdamW fp16/fp16)");
  k->add_option("--state", o->states,
                "state formats to time, each configuration in each: fp32 q8 q8-bf16 (q8-bf16's "
                "fp16-copy configurations get a bf16 copy)")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
  k->add_option("--split", o->splits,
                "how the work is split between the threads, each split timed: fixed (n / threads "
                "elements per thread, as the runtime deals subgroups) and pieces (dense "
                "configurations: the same problems handed out in pieces of --piece elements to "
                "whichever thread is free)")
      ->check(CLI::IsMember({"fixed", "pieces"}))
      ->capture_default_str();
  k->add_option("--piece", o->piece, "elements per piece of --split pieces (a multiple of 256)")
      ->check(Count(256, uint64_t{1} << 30))
      ->capture_default_str();
  k->add_flag("--no-general", [o](int64_t) { o->general = false; },
              "time only the specialised datapath, not also the general one");
  k->add_flag("--no-torch", [o](int64_t) { o->torch = false; },
              "do not time PyTorch's CPU AdamW beside the fp32 AdamW configuration");
  k->add_option("--python", o->python, "Python interpreter with torch for the AdamW comparison")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  auto pages = std::make_shared<std::string>("thp");
  k->add_option("--pages", *pages,
                "page size behind the timed arrays: thp (transparent huge pages, as the runtime "
                "allocates) or 4k (as malloc gives; to compare with another program's figures)")
      ->check(CLI::IsMember({"thp", "4k"}))
      ->capture_default_str();
  k->add_flag("--json", *json, "print JSON only (default: JSON plus progress on a terminal)");
  k->callback([o, json, pages]() {
    o->pages = *pages == "4k" ? AlignedBuffer::Pages::kSmall : AlignedBuffer::Pages::kHuge;
    if (o->min_threads > o->max_threads) {
      throw CLI::ValidationError("--min-threads", "expected at most --threads (" +
                                 std::to_string(o->max_threads) + "), found " +
                                 std::to_string(o->min_threads));
    }
    if (o->piece % 256 != 0) {
      throw CLI::ValidationError("--piece", "expected a multiple of 256 elements (whole q8 "
                                 "blocks), found " + std::to_string(o->piece));
    }
    o->progress = !*json && isatty(STDERR_FILENO);
    std::cout << JsonText(bench::KernelBench(*o)) << "\n";
  });
  AddIoBench(b);
  AddRtlBench(b);

  auto so = std::make_shared<bench::StepBenchOptions>();
  auto sdev = std::make_shared<DeviceOptions>("model", "stress");
  CLI::App* st = b->add_subcommand(
      "step", "Step time of SmartUpdate and the baseline on emulated SmartSSDs, and SmartUpdate's "
              "step time against max(I/O only, compute only)");
  st->add_option("--dir", so->dir, "work directory (needs O_DIRECT)")->capture_default_str();
  st->add_option("--devices", so->devices, "SmartSSDs")->check(Count(1, 256))->capture_default_str();
  st->add_option("--params", so->params, "model parameters")->check(Count(1, uint64_t{1} << 40))->capture_default_str();
  st->add_option("--subgroup", so->subgroup, "elements per subgroup (multiple of 65536)")
      ->capture_default_str();
  st->add_option("--reps", so->reps, "repetitions (best of)")->check(Count(1, 1000))->capture_default_str();
  st->add_option("--topk", so->topk, "Top-K sparse gradients with this ratio in (0,1]")->check(FiniteIn(0.0, 1.0, true));
  st->add_flag("--keep", so->keep, "keep the store");
  auto states = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"fp32"});
  st->add_option("--state", *states, "state formats to step, each on its own store: fp32 q8 q8-bf16")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
  st->add_flag("--json", "JSON output (the only format)");
  sdev->Add(st);
  st->callback([so, sdev, states] {
    so->device_spec = sdev->Spec(so->devices);
    so->states.clear();
    for (const std::string& s : *states) so->states.push_back(ParseStateFmt(s));
    std::cout << JsonText(bench::StepBench(*so)) << "\n";
  });
}

}  // namespace csdkit::cli
