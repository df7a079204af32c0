// `csdkit p2p-bench`: SSD <-> device bandwidth sweep of one device.
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "options.h"
#include "p2p_bench.h"

namespace csdkit::cli {

void AddP2pCommand(CLI::App& app) {
  auto o = std::make_shared<bench::P2pBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto dev = std::make_shared<DeviceOptions>("model", "stress");
  CLI::App* c = app.add_subcommand(
      "p2p-bench", "SSD -> device and device -> SSD bandwidth sweep over block sizes and queue "
                   "depths (emulated SmartSSD: its NVMe directory and device memory)");
  c->add_option("--dir", o->dir, "the device's NVMe namespace directory (O_DIRECT capable)")
      ->capture_default_str();
  c->add_option("--bytes", o->bytes, "bytes per measurement")->capture_default_str();
  c->add_option("--block-size", o->block_sizes, "block sizes to sweep (bytes)");
  c->add_option("--queue-depth", o->queue_depths, "queue depths to sweep");
  c->add_option("--reps", o->reps, "repetitions (best of)")->check(Count(1, 1000))->capture_default_str();
  dev->Add(c);
  c->add_flag("--json", *json, "print JSON");
  c->callback([o, json, dev] {
    o->device = dev->Spec(1);
    const nlohmann::json j = bench::P2pBench(*o);
    if (*json) {
      std::cout << JsonText(j) << "\n";
      return;
    }
    std::printf("device %u, %llu MiB per transfer (best of %u)\n", o->device.first,
                static_cast<unsigned long long>(o->bytes >> 20), o->reps);
    std::printf("%12s %6s %14s %14s\n", "block", "qd", "ssd->dev GB/s", "dev->ssd GB/s");
    for (const auto& r : j["results"]) {
      std::printf("%12llu %6u %14.2f %14.2f\n",
                  static_cast<unsigned long long>(r["block_size"].get<uint64_t>()),
                  r["queue_depth"].get<unsigned>(), r["ssd_to_device_gbs"].get<double>(),
                  r["device_to_ssd_gbs"].get<double>());
    }
  });
}

}  // namespace csdkit::cli
