// `csdkit init | step | info | run`: the runtime on emulated SmartSSDs.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/runtime/scheduler.h"
#include "csdkit/runtime/sizing.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/runtime/store.h"
#include "csdkit/runtime/work_dir.h"
#include "csdkit/system/device_set.h"
#include "options.h"

namespace csdkit::cli {

namespace {

// A store's devices (the device set, device k serving shard k) and its scheduler.
struct StoreDevices {
  DeviceSet devices;
  Scheduler scheduler;

  StoreDevices(Store& store, const DeviceOptions& o)
      : devices(o.Spec(store.config().devices, /*emulation_xclbin=*/true)), scheduler(store, devices) {}
};

bool Tty() { return isatty(STDERR_FILENO) != 0; }

std::function<void(uint64_t, uint64_t)> ProgressBar(const std::string& label) {
  if (!Tty()) return {};
  return [label](uint64_t done, uint64_t total) {
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r%-24s [%.*s%*s] %llu/%llu subgroups", label.c_str(), fill,
                 "##############################", width - fill, "",
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    if (done == total) std::fprintf(stderr, "\r%*s\r", 80, "");
    std::fflush(stderr);
  };
}

std::string Gb(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.3f GB", b / 1e9);
  return s;
}

// --------------------------------------------------------------------------------------------

struct InitOpts {
  unsigned devices = 4;
  uint64_t params = 100000000;
  std::string dir;
  uint32_t subgroup = 0;
  uint64_t device_mem = uint64_t{4} << 30;
  HyperOptions h{"fp16", "fp16", "seed of the initial state and synthetic gradients"};
  bool json = false;
};

Store DoInit(const InitOpts& o) {
  StoreConfig c;
  c.params = o.params;
  c.devices = o.devices;
  c.hyper = o.h.Config();
  const GradSpec g = o.h.Grad();
  c.grad = g.grad;
  c.out = g.out;
  c.ftz = g.ftz;
  c.loss_scale = g.loss_scale;
  c.seed = o.h.seed;
  c.state = g.state;
  const uint64_t shard = (o.params + o.devices - 1) / o.devices;
  const uint32_t fit = SubgroupForMemory(o.device_mem, c.hyper, c.grad, c.out, shard);
  if (o.subgroup != 0) {
    if (o.subgroup > fit) {
      throw std::invalid_argument(
          "--subgroup: expected at most " + std::to_string(fit) + " elements (two workers' "
          "buffers in " + std::to_string(o.device_mem) + " bytes of device memory), found " +
          std::to_string(o.subgroup));
    }
    c.subgroup_elems = o.subgroup;
  } else {
    c.subgroup_elems = SubgroupForState(
        DefaultSubgroup(o.device_mem, c.hyper, c.grad, c.out, shard), c.state);
  }
  return Store::Create(o.dir, c);
}

void AddInit(CLI::App& app) {
  auto o = std::make_shared<InitOpts>();
  CLI::App* c = app.add_subcommand("init", "Create emulated devices and a deterministic initial "
                                           "optimizer state (committed as step 0)");
  c->add_option("--devices", o->devices, "number of SmartSSDs")->check(Count(1, 256))->capture_default_str();
  c->add_option("--params", o->params, "model parameters")->check(Count(1, uint64_t{1} << 40))->capture_default_str();
  c->add_option("--dir", o->dir, "store directory (one subdirectory per device)")->required();
  c->add_option("--subgroup", o->subgroup,
                "elements per subgroup (multiple of 65536; default: fits --device-mem, <= 4Mi)");
  c->add_option("--device-mem", o->device_mem, "device memory per SmartSSD in bytes")
      ->capture_default_str();
  c->add_flag("--json", o->json, "print JSON");
  o->h.Add(c);
  c->callback([o] {
    Store s = DoInit(*o);
    RecordDone("created store '" + o->dir + "' at step 0");
    if (o->json) {
      std::cout << JsonText(s.Describe()) << "\n";
    } else {
      std::printf("created %s: %llu params on %u devices, %s, state %s, subgroup %u elements, "
                  "step 0\n",
                  o->dir.c_str(), static_cast<unsigned long long>(s.config().params),
                  s.config().devices, OptimizerName(s.config().hyper.opt),
                  StateFmtName(s.config().state), s.config().subgroup_elems);
    }
  });
}

// --------------------------------------------------------------------------------------------

struct StepOpts {
  std::string dir, mode = "smart";
  int steps = 1;
  double topk = 0.0, clip = 1.0;
  unsigned threads = 0;
  int64_t overflow_step = -1;
  bool json = false;
  bool no_pin = false;
  bool serial = false;  // --serial: no overlap (SmartUpdate without the handler)
  bool allow_nonfinite = false;  // --allow-nonfinite: commit a step that writes NaN/inf
  std::string dump_dir;                 // --dump-launches
  std::vector<std::string> dump_only;   // --dump-only, as given
  DeviceOptions dev{"model", "stress"};
};

// --dump-only's DEVICE:SUBGROUP pairs, checked against the store.
std::vector<std::pair<unsigned, uint32_t>> ParseDumpOnly(const std::vector<std::string>& items,
                                                         const Store& store) {
  std::vector<std::pair<unsigned, uint32_t>> r;
  for (const std::string& it : items) {
    const size_t colon = it.find(':');
    auto whole = [](const std::string& t, uint64_t* v) {
      if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) {
        return false;
      }
      *v = std::stoull(t);
      return true;
    };
    uint64_t d = 0, sg = 0;
    if (colon == std::string::npos || !whole(it.substr(0, colon), &d) ||
        !whole(it.substr(colon + 1), &sg)) {
      throw std::invalid_argument("--dump-only: expected DEVICE:SUBGROUP (whole numbers, e.g. "
                                  "0:3), found '" + it + "'");
    }
    if (d >= store.config().devices) {
      throw std::invalid_argument("--dump-only: expected a device below " +
                                  std::to_string(store.config().devices) + " (the store's), found " +
                                  it);
    }
    const size_t n = store.Subgroups(static_cast<unsigned>(d)).size();
    if (sg >= n) {
      throw std::invalid_argument("--dump-only: expected a subgroup of device " +
                                  std::to_string(d) + " below " + std::to_string(n) + ", found " +
                                  it);
    }
    r.push_back({static_cast<unsigned>(d), static_cast<uint32_t>(sg)});
  }
  return r;
}

std::vector<StepReport> DoSteps(Store& store, StoreDevices& sys, const StepOpts& o,
                                const std::string& label) {
  std::vector<StepReport> reps;
  for (int i = 0; i < o.steps; ++i) {
    const int64_t t = store.step() + 1;
    // A planning store (--backend null) gets the gradient's sizes only.
    const GradientSet g =
        store.planning() ? GradientSet::Planned(store, o.topk)
                         : GradientSet::Synthetic(store, t, o.topk, t == o.overflow_step ? 0 : -1);
    StepOptions so;
    so.mode = ParseUpdateMode(o.mode);
    so.clip_coef = o.clip;
    so.host_threads = o.threads;
    so.pin_host_threads = !o.no_pin;
    so.overlap = !o.serial;
    so.allow_nonfinite = o.allow_nonfinite;
    so.progress = ProgressBar(label + " step " + std::to_string(t));
    if (!o.dump_dir.empty()) {
      so.dump_dir = o.dump_dir + "/step-" + std::to_string(t);
      if (::mkdir(so.dump_dir.c_str(), 0755) != 0) {
        throw std::runtime_error("--dump-launches: expected to create '" + so.dump_dir +
                                 "', found " + std::strerror(errno));
      }
      so.dump_only = ParseDumpOnly(o.dump_only, store);
    }
    reps.push_back(sys.scheduler.Step(g, so));
    if (!store.planning()) {
      RecordDone("store '" + store.dir() + "' is at committed step " +
                 std::to_string(store.step()));
    }
  }
  return reps;
}

void PrintStepLine(const StepReport& r, uint64_t m_bytes) {
  if (r.skipped) {
    std::printf("step %lld (%s): SKIPPED: %s\n", static_cast<long long>(r.step),
                UpdateModeName(r.mode), r.skip_reason.c_str());
    return;
  }
  std::printf("step %lld (%s): %.3f s, shared link %s (%.2f M), device-internal %s, "
              "SmartSSD estimate %.3f s\n",
              static_cast<long long>(r.step), UpdateModeName(r.mode), r.seconds,
              Gb(r.bytes.Shared()).c_str(), static_cast<double>(r.bytes.Shared()) / m_bytes,
              Gb(r.bytes[Link::kSsdToFpga] + r.bytes[Link::kFpgaToSsd]).c_str(),
              r.virtual_seconds);
  if (r.nonfinite_values > 0) {
    std::printf("step %lld: committed with %llu non-finite values in the weights or state "
                "(--allow-nonfinite)\n",
                static_cast<long long>(r.step),
                static_cast<unsigned long long>(r.nonfinite_values));
  }
}

void AddStep(CLI::App& app) {
  auto o = std::make_shared<StepOpts>();
  CLI::App* c = app.add_subcommand("step", "Run optimizer steps with deterministic synthetic "
                                           "gradients on a store");
  c->add_option("--dir", o->dir, "store directory")->required();
  c->add_option("--steps", o->steps, "steps to run")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->add_option("--mode", o->mode, "smart (SmartUpdate on the devices) or baseline "
                                   "(states through the host)")
      ->check(CLI::IsMember({"smart", "baseline"}))
      ->capture_default_str();
  c->add_option("--topk", o->topk, "Top-K sparse gradients with this ratio in (0,1]")->check(FiniteIn(0.0, 1.0, true));
  c->add_option("--clip", o->clip, "clip coefficient folded into the unscale factor")
      ->capture_default_str();
  c->add_option("--threads", o->threads, "baseline host threads (default: all)")->check(Count(1, 1024));
  c->add_flag("--serial", o->serial,
              "smart mode: one worker per device, each subgroup written back before the next "
              "load (SmartUpdate without the transfer handler's overlap)");
  c->add_flag("--no-pin", o->no_pin,
              "leave the baseline's host threads unbound (default: one per CPU of the "
              "process's affinity mask, when it has enough)");
  c->add_flag("--allow-nonfinite", o->allow_nonfinite,
              "commit a step even if it writes NaN or infinity into the weights or optimizer "
              "state (default: such a step is refused, naming the first element, and the "
              "store keeps its previous step)");
  c->add_option("--overflow-at", o->overflow_step,
                "make the gradient of this step non-finite (to see the step skipped)")
      ->check(Count(1, static_cast<uint64_t>(INT64_MAX)));
  c->add_flag("--json", o->json, "print JSON");
  c->add_option("--dump-launches", o->dump_dir,
                "write every launch's inputs and outputs as golden vectors in DIR/step-<k>/"
                "device-<d>-subgroup-<s>/ (replay with `csdkit kernel --replay`); DIR is "
                "created or must be empty");
  c->add_option("--dump-only", o->dump_only,
                "dump only these launches: DEVICE:SUBGROUP pairs, comma-separated")
      ->delimiter(',')
      ->needs(c->get_option("--dump-launches"));
  o->dev.allow_null = true;
  o->dev.Add(c);
  c->callback([o] {
    // --backend null plans the store's next steps: the store is opened for reading (its
    // configuration, layout and step), the steps run on a planning copy of it (Store::PlanCopy)
    // with null devices, and nothing in the store's files is read or written.
    const bool plan = o->dev.backend == "null";
    if (plan && !o->dump_dir.empty()) {
      throw std::invalid_argument("--dump-launches: expected a backend that moves data, found "
                                  "--backend null (a plan has no launch data)");
    }
    if (plan && o->overflow_step >= 0) {
      throw std::invalid_argument("--overflow-at: expected a backend that moves data, found "
                                  "--backend null (a planned gradient has no values)");
    }
    Store opened = Store::Open(o->dir, plan ? StoreAccess::kRead : StoreAccess::kWrite);
    std::optional<Store> planned;
    if (plan) planned.emplace(opened.PlanCopy());
    Store& store = plan ? *planned : opened;
    ParseDumpOnly(o->dump_only, store);  // refused before anything runs
    if (!o->dump_dir.empty()) PrepareNewDir("--dump-launches", o->dump_dir);
    StoreDevices sys(store, o->dev);
    const auto reps = DoSteps(store, sys, *o, o->mode);
    const uint64_t m_bytes = store.config().params * 2;
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : reps) j.push_back(r.ToJson());
      std::cout << JsonText(nlohmann::json{{"store", opened.Describe()},
                                           {"backend", o->dev.backend},
                                           {"steps", j}})
                << "\n";
    } else if (plan) {
      for (const auto& r : reps) PrintStepLine(r, m_bytes);
      std::printf("planned on null devices; the store stays at step %lld\n",
                  static_cast<long long>(opened.step()));
    } else {
      for (const auto& r : reps) {
        PrintStepLine(r, m_bytes);
        if (r.dumped_launches > 0) {
          std::printf("  %llu launches dumped to %s/step-%lld\n",
                      static_cast<unsigned long long>(r.dumped_launches), o->dump_dir.c_str(),
                      static_cast<long long>(r.step));
        }
      }
      std::printf("committed step %lld\n", static_cast<long long>(store.step()));
    }
    // Committed but perhaps not durable: a distinct exit status (3), not a failure to retry.
    bool warned = false;
    for (const auto& r : reps) {
      if (r.warning.empty()) continue;
      std::fprintf(stderr, "csdkit: warning: %s\n", r.warning.c_str());
      warned = true;
    }
    if (warned) throw CLI::RuntimeError(3);
  });
}

// --------------------------------------------------------------------------------------------

void AddInfo(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto verify = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("info", "Describe a store (and verify its checksums)");
  c->add_option("--dir", *dir, "store directory")->required();
  c->add_flag("--verify", *verify, "read the committed slot and check every subgroup's CRC");
  c->add_flag("--json", *json, "print JSON");
  c->callback([dir, verify, json] {
    Store s = Store::Open(*dir, StoreAccess::kRead);
    if (*verify) s.Verify();
    nlohmann::json j = s.Describe();
    if (*verify) j["verified"] = true;
    if (*json) {
      std::cout << JsonText(j) << "\n";
      return;
    }
    const StoreConfig& c = s.config();
    std::printf("store %s (id %s)\n", dir->c_str(), j["store_id"].get<std::string>().c_str());
    std::printf("  %llu params on %u devices, optimizer %s, grad %s, out %s%s\n",
                static_cast<unsigned long long>(c.params), c.devices, OptimizerName(c.hyper.opt),
                DTypeName(c.grad), OutDTypeName(c.out), c.ftz ? ", FTZ" : "");
    std::printf("  committed step %lld (slot %u), subgroup %u elements, state: ",
                static_cast<long long>(s.step()), s.slot(), c.subgroup_elems);
    for (const auto& v : s.vars()) std::printf("%s ", v.c_str());
    std::printf("\n");
    // The format and what it keeps per parameter (read and written once each per step).
    double per_param = 0;
    std::string arrays;
    for (const StateArray& a : s.arrays()) {
      per_param += a.absmax ? 4.0 / hls::kQ8Block : a.elem_bytes;
      arrays += (arrays.empty() ? "" : ", ") + a.name;
    }
    std::printf("  state format %s: %s; %.4g bytes per parameter\n", StateFmtName(c.state),
                arrays.c_str(), per_param);
    for (const Shard& sh : s.shards()) {
      std::printf("  dev%u: elements [%llu, %llu), %zu subgroups\n", sh.device,
                  static_cast<unsigned long long>(sh.begin),
                  static_cast<unsigned long long>(sh.end), s.Subgroups(sh.device).size());
    }
    if (*verify) std::printf("  checksums: all subgroups verified\n");
  });
}

// --------------------------------------------------------------------------------------------

struct RunOpts {
  std::string dir = "csdkit-run";
  unsigned devices = 4;
  uint64_t params = 100000000;
  int steps = 3;
  double topk = 0.0;
  bool json = false, keep = false;
  uint32_t subgroup = 0;
  HyperOptions h{"fp16", "fp16", "seed of the initial state and synthetic gradients"};
  DeviceOptions dev{"model", "stress"};
};

bool SameFiles(const Store& a, const Store& b, std::string* diff) {
  for (unsigned d = 0; d < a.config().devices; ++d) {
    for (unsigned v = 0; v < a.vars().size(); ++v) {
      for (uint32_t j = 0; j < a.Subgroups(d).size(); ++j) {
        if (a.checksum(d, v, j) != b.checksum(d, v, j)) {
          *diff = "device " + std::to_string(d) + " " + a.vars()[v] + " subgroup " +
                  std::to_string(j);
          return false;
        }
      }
    }
  }
  return true;
}

void AddRun(CLI::App& app) {
  auto o = std::make_shared<RunOpts>();
  CLI::App* c = app.add_subcommand(
      "run", "The main job: a store of emulated SmartSSDs, a few steps with SmartUpdate and with "
             "the baseline from the same initial state, a table of time and traffic per link");
  c->add_option("--dir", o->dir, "work directory (created; two stores inside)")
      ->capture_default_str();
  c->add_option("--devices", o->devices, "SmartSSDs")->check(Count(1, 256))->capture_default_str();
  c->add_option("--params", o->params, "model parameters")->check(Count(1, uint64_t{1} << 40))->capture_default_str();
  c->add_option("--steps", o->steps, "steps per mode")->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--topk", o->topk, "Top-K sparse gradients with this ratio in (0,1]")->check(FiniteIn(0.0, 1.0, true));
  c->add_option("--subgroup", o->subgroup, "elements per subgroup (multiple of 65536)");
  c->add_flag("--json", o->json, "print JSON");
  c->add_flag("--keep", o->keep, "keep the stores afterwards");
  o->h.Add(c);
  o->dev.Add(c);
  c->callback([o] {
    namespace fs = std::filesystem;
    const std::string sdir[2] = {o->dir + "/baseline", o->dir + "/smart"};
    const char* mode[2] = {"baseline", "smart"};
    std::vector<StepReport> reps[2];
    nlohmann::json desc;
    // The two stores are this command's own: it never removes what it did not create. An
    // existing --dir is used if neither store is in it (the default ./csdkit-run, kept).
    struct stat st {};
    const bool dir_exists = ::stat(o->dir.c_str(), &st) == 0;
    if (dir_exists && !S_ISDIR(st.st_mode)) {
      throw std::invalid_argument("--dir: expected a directory for the two stores, found '" +
                                  o->dir + "', which is not a directory");
    }
    for (const std::string& d : sdir) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(d, ec))) {
        throw std::invalid_argument("--dir: expected no '" + d + "' (run creates it and removes "
                                    "it afterwards unless --keep), found one; remove it or "
                                    "choose another --dir");
      }
    }
    // What this command creates — the stores, the directories it made — is removed when it
    // ends, on failure too, unless --keep.
    WorkDir work = dir_exists ? WorkDir() : WorkDir::Prepare("--dir", o->dir);
    for (const std::string& d : sdir) work.Own(d);
    for (int m = 0; m < 2; ++m) {
      InitOpts io;
      io.devices = o->devices;
      io.params = o->params;
      io.dir = sdir[m];
      io.subgroup = o->subgroup;
      io.device_mem = o->dev.device_mem;
      io.h = o->h;
      if (!o->json && Tty()) std::fprintf(stderr, "initialising %s ...\r", sdir[m].c_str());
      Store store = DoInit(io);
      desc = store.Describe();
      StoreDevices sys(store, o->dev);
      StepOpts so;
      so.mode = mode[m];
      so.steps = o->steps;
      so.topk = o->topk;
      so.dev = o->dev;
      reps[m] = DoSteps(store, sys, so, mode[m]);
    }
    Store a = Store::Open(sdir[0], StoreAccess::kRead), b = Store::Open(sdir[1], StoreAccess::kRead);
    std::string diff;
    const bool same = SameFiles(a, b, &diff);
    const uint64_t m_bytes = o->params * 2;
    auto avg = [&](int m, auto f) {
      double s = 0;
      for (const auto& r : reps[m]) s += f(r);
      return s / reps[m].size();
    };
    auto avg_bytes = [&](int m, Link l) {
      return avg(m, [l](const StepReport& r) { return static_cast<double>(r.bytes[l]); });
    };
    const double shared[2] = {
        avg(0, [](const StepReport& r) { return static_cast<double>(r.bytes.Shared()); }),
        avg(1, [](const StepReport& r) { return static_cast<double>(r.bytes.Shared()); })};
    if (o->json) {
      nlohmann::json j;
      j["store"] = desc;
      j["m_bytes"] = m_bytes;
      for (int m = 0; m < 2; ++m) {
        nlohmann::json s = nlohmann::json::array();
        for (const auto& r : reps[m]) s.push_back(r.ToJson());
        j[mode[m]] = {{"steps", s},
                      {"avg_seconds", avg(m, [](const StepReport& r) { return r.seconds; })},
                      {"avg_virtual_seconds",
                       avg(m, [](const StepReport& r) { return r.virtual_seconds; })},
                      {"avg_shared_bytes", shared[m]},
                      {"avg_shared_M", shared[m] / m_bytes}};
      }
      j["shared_link_ratio_smart_over_baseline"] = shared[0] > 0 ? shared[1] / shared[0] : 0;
      j["bit_identical"] = same;
      if (!same) j["first_difference"] = diff;
      std::cout << JsonText(j) << "\n";
    } else {
      std::printf("csdkit run: %u emulated SmartSSDs, %llu parameters (M = %.1f MB of fp16), "
                  "%s, grad %s, out %s, %s, %d steps per mode\n\n",
                  o->devices, static_cast<unsigned long long>(o->params), m_bytes / 1e6,
                  o->h.optimizer.c_str(), o->h.grad.c_str(), o->h.out.c_str(),
                  o->topk > 0 ? ("Top-K " + std::to_string(o->topk)).c_str() : "dense",
                  o->steps);
      std::printf("%-9s %9s %11s %11s %11s %11s %11s %11s %11s %8s %11s\n", "mode", "s/step",
                  "ssd->fpga", "fpga->ssd", "host->dev", "dev->host", "nvme->host",
                  "host->nvme", "shared", "shared/M", "SmartSSD s");
      for (int m = 0; m < 2; ++m) {
        std::printf("%-9s %9.3f %11s %11s %11s %11s %11s %11s %11s %8.2f %11.3f\n", mode[m],
                    avg(m, [](const StepReport& r) { return r.seconds; }),
                    Gb(avg_bytes(m, Link::kSsdToFpga)).c_str(),
                    Gb(avg_bytes(m, Link::kFpgaToSsd)).c_str(),
                    Gb(avg_bytes(m, Link::kHostToDevice)).c_str(),
                    Gb(avg_bytes(m, Link::kDeviceToHost)).c_str(),
                    Gb(avg_bytes(m, Link::kNvmeToHost)).c_str(),
                    Gb(avg_bytes(m, Link::kHostToNvme)).c_str(), Gb(shared[m]).c_str(),
                    shared[m] / m_bytes,
                    avg(m, [](const StepReport& r) { return r.virtual_seconds; }));
      }
      std::printf("\nshared-link traffic, smart / baseline: %.4f (%.1fx less)\n",
                  shared[0] > 0 ? shared[1] / shared[0] : 0.0,
                  shared[1] > 0 ? shared[0] / shared[1] : 0.0);
      const double v0 = avg(0, [](const StepReport& r) { return r.virtual_seconds; });
      const double v1 = avg(1, [](const StepReport& r) { return r.virtual_seconds; });
      if (v1 > 0) {
        std::printf("SmartSSD hardware estimate (link model): baseline %.3f s, smart %.3f s per "
                    "step (%.2fx)\n", v0, v1, v0 / v1);
      }
      std::printf("state after %d steps in both modes: %s\n", o->steps,
                  same ? "bit-identical" : ("DIFFERENT at " + diff).c_str());
    }
    if (o->keep) work.Keep();
    if (!same) throw CLI::RuntimeError(1);
  });
}

}  // namespace

void AddRuntimeCommands(CLI::App& app) {
  AddInit(app);
  AddStep(app);
  AddInfo(app);
  AddRun(app);
}

}  // namespace csdkit::cli
