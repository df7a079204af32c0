// `csdkit selftest`: every kernel configuration on a device against the host model, bit for bit.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/platform/selftest.h"
#include "csdkit/system/device_set.h"
#include "options.h"

namespace csdkit::cli {

namespace {

struct SelfTestOpts {
  DeviceOptions dev{"opencl", "stress"};
  std::vector<uint32_t> sizes = {1, 17, 4097, 70001};
  std::vector<std::string> states = {"fp32"};
  bool ftz_only = false, json = false, verbose = false;
};

}  // namespace

void AddSelfTestCommand(CLI::App& app) {
  auto o = std::make_shared<SelfTestOpts>();
  CLI::App* c = app.add_subcommand(
      "selftest", "Run every kernel configuration (optimizer x dtypes x dense/sparse x policy x "
                  "sizes, with special values) on a device and compare with the host model");
  o->dev.Add(c);
  c->add_option("--sizes", o->sizes, "element counts to test")->capture_default_str();
  c->add_option("--state", o->states,
                "state formats fp32 q8 q8-bf16 (a q8 format rounds each size up to whole blocks "
                "of 256)")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
  c->add_flag("--ftz-only", o->ftz_only,
              "only the FTZ/DAZ policy (what an HLS-built xclbin implements)");
  c->add_flag("--verbose", o->verbose, "one line per launch");
  c->add_flag("--json", o->json, "print JSON");
  c->callback([o] {
    DeviceSet devices(o->dev.Spec(1));
    Device& dev = devices[0];
    SelfTestOptions so;
    so.sizes = o->sizes;
    so.ieee = !o->ftz_only;
    so.states.clear();
    for (const std::string& st : o->states) so.states.push_back(ParseStateFmt(st));
    so.on_case = [o](const std::string& what, const std::string& diff) {
      if (o->json) return;
      if (!diff.empty()) std::printf("MISMATCH %s: %s\n", what.c_str(), diff.c_str());
      else if (o->verbose) std::printf("ok       %s\n", what.c_str());
    };
    const SelfTestReport r = SelfTest(dev, so);
    if (o->json) {
      nlohmann::json j = r.ToJson();
      j["device"] = dev.Describe();
      std::cout << JsonText(j) << "\n";
    } else {
      std::printf("%s: %d launches, %d bit-exact with the host model, %d mismatched\n",
                  dev.Describe().c_str(), r.launches, r.launches - r.failed, r.failed);
    }
    if (r.failed != 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace csdkit::cli
