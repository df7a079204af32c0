// `csdkit reshard`: a set of rank stores (csdkit.torch.distributed) re-split for another world
// size or device count, at the same committed step (csdkit/runtime/reshard.h does the work).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "csdkit/runtime/reshard.h"
#include "options.h"

namespace csdkit::cli {

namespace {

struct ReshardOpts {
  std::string src, dst;
  uint64_t world = 0;
  unsigned devices = 0;  // 0: not given (as the source's)
  uint64_t device_mem = uint64_t{4} << 30;
  std::string state;  // "": the source's
  bool json = false;
};

void Print(const ReshardResult& r) {
  std::printf("resharded %s (%llu ranks, %u device(s) each) into %s (%zu ranks, %u device(s) "
              "each) at committed step %lld\n",
              r.src.c_str(), static_cast<unsigned long long>(r.source_world), r.source_devices,
              r.dst.c_str(), r.ranks.size(), r.devices, static_cast<long long>(r.step));
  std::string vars;
  for (const std::string& v : r.vars) vars += (vars.empty() ? "" : ", ") + v;
  std::printf("  %llu elements, optimizer %s, state %s, format %s%s\n",
              static_cast<unsigned long long>(r.total_elements), r.optimizer.c_str(),
              vars.c_str(), r.state.c_str(),
              r.state == r.source_state ? "" : (" (from " + r.source_state + ")").c_str());
  for (const ReshardRank& k : r.ranks) {
    std::printf("  rank %llu: elements [%llu, %llu) (%llu) in %s\n",
                static_cast<unsigned long long>(k.rank), static_cast<unsigned long long>(k.begin),
                static_cast<unsigned long long>(k.end),
                static_cast<unsigned long long>(k.end - k.begin), k.store.c_str());
  }
}

}  // namespace

void AddReshardCommand(CLI::App& app) {
  auto o = std::make_shared<ReshardOpts>();
  CLI::App* c = app.add_subcommand(
      "reshard",
      "Re-split a set of rank stores (csdkit.torch.distributed: SRC/rank-<r>/ and "
      "SRC/rank-<r>.json) for another world size or device count, at the same committed step");
  c->add_option("--from", o->src, "the set to read (only read; its stores must not be in use)")
      ->required();
  c->add_option("--to", o->dst, "where the new set goes: a new or empty directory")->required();
  c->add_option("--world", o->world, "the new world size (ranks)")
      ->check(Count(1, uint64_t{1} << 40))
      ->required();
  c->add_option("--devices", o->devices, "devices per new rank store (default: as the source's)")
      ->check(Count(1, 256));
  c->add_option("--device-mem", o->device_mem,
                "device memory per device in bytes that the new stores' subgroups are sized for")
      ->check(Count(uint64_t{1} << 20, uint64_t{1} << 50))
      ->capture_default_str();
  c->add_option("--state", o->state,
                "the new stores' state format fp32|q8|q8-bf16 (docs/state-formats.md; default: "
                "the source's)")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}));
  c->add_flag("--json", o->json, "print JSON");
  c->callback([o] {
    ReshardOptions ro;
    ro.src = o->src;
    ro.dst = o->dst;
    ro.world = static_cast<int64_t>(o->world);
    if (o->devices != 0) ro.devices = o->devices;
    ro.device_mem = o->device_mem;
    if (!o->state.empty()) ro.state = ParseStateFmt(o->state);
    const ReshardResult r = Reshard(ro);
    RecordDone("wrote the resharded set '" + r.dst + "'");
    if (o->json) {
      std::cout << JsonText(r.ToJson()) << "\n";
    } else {
      Print(r);
    }
  });
}

}  // namespace csdkit::cli
