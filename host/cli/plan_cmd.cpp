// `csdkit plan`: iteration time and its breakdown for a model on N devices in each mode, the
// optimizer step planned by the shipped scheduler on null devices (csdkit/planner/planner.h),
// the trainer's host path around it, and the iteration at each overlap level;
// `--paper` prints the calibration against the Smart-Infinity paper; `--plot DIR` writes PNGs
// through matplotlib (python/csdkit/plan_plot.py, run with the interpreter found at build time).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/planner/planner.h"
#include "options.h"
#include "plan_plot_script.h"

namespace csdkit::cli {

namespace {

using planner::PlanMode;
using planner::PlanPoint;

struct PlanOpts {
  std::string params;  // a count, "4e9" or "350M"/"4B" style
  std::string state = "fp32";
  uint64_t layers = 0, hidden = 0, vocab = 50257, seq = 1024;
  std::string gpu = "h100";
  unsigned batch = 4;
  double fwd_bwd = -1;
  std::string system = "kit";
  std::string uplink, gpu_link;
  double ssd_read = 0, ssd_write = 0, kernel = 0, raid_read = 0, raid_write = 0, host_update = 0;
  std::string ssd_shared;  // "", "on", "off"
  unsigned host_threads = 0;
  std::string host_path;   // "", "gpu", "dev", "none"
  double host_copy = 0, host_weights = 0, host_per_tensor = -1;  // GB/s, GB/s, microseconds
  double host_per_tensor_back = -1;                                // microseconds
  uint64_t tensors = 0;
  double bwd_ratio = 2.0;
  uint64_t grad_bucket = uint64_t{25} << 20;
  std::string shard_order = "contiguous";
  std::string overlap = "none";
  std::string devices = "1,2,4,8,10,16";
  std::vector<std::string> modes = {"baseline", "smart", "handler", "topk"};
  double topk = 0.01;
  uint64_t device_mem = uint64_t{4} << 30;
  uint32_t subgroup = 0;
  bool paper = false, json = false;
  std::string plot;
  std::string python = CSDKIT_PLOT_PYTHON;
};

// "4e9", "4000000000", "350M", "4.0B", "1.5T": a parameter count.
uint64_t ParseCount(const std::string& s) {
  const std::string want = "--params: expected a parameter count such as 350000000, 350M, 4e9 "
                           "or 4.0B (1 to 2^40), found '" + s + "'";
  if (s.empty() || s.size() > 32) throw std::invalid_argument(want);
  double scale = 1;
  std::string num = s;
  const char last = s.back();
  if (last == 'K' || last == 'M' || last == 'B' || last == 'G' || last == 'T') {
    scale = last == 'K' ? 1e3 : last == 'M' ? 1e6 : last == 'T' ? 1e12 : 1e9;
    num = s.substr(0, s.size() - 1);
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || errno == ERANGE || !std::isfinite(v) ||
      v < 1 || v * scale > static_cast<double>(uint64_t{1} << 40)) {
    throw std::invalid_argument(want);
  }
  return static_cast<uint64_t>(std::llround(v * scale));
}

// "gen3" / "gen4" / "gen5" (x16) or GB/s.
double ParseLink(const std::string& opt, const std::string& s) {
  if (s == "gen3" || s == "gen4" || s == "gen5") return planner::PcieX16(s[3] - '0');
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0 || v > 10000) {
    throw std::invalid_argument(opt + ": expected gen3, gen4, gen5 (PCIe x16) or a bandwidth in "
                                "GB/s in (0, 10000], found '" + s + "'");
  }
  return v * 1e9;
}

// "10", "1,2,4,10", "1-16", "1-4,8,16".
std::vector<unsigned> ParseDevices(const std::string& s) {
  const std::string want = "--devices: expected counts in [1, 256] as N, N,M,... or A-B, found '" +
                           s + "'";
  std::vector<unsigned> out;
  std::stringstream ss(s);
  std::string part;
  auto num = [&](const std::string& t) {
    if (t.empty() || t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument(want);
    }
    const unsigned v = static_cast<unsigned>(std::stoul(t));
    if (v < 1 || v > 256) throw std::invalid_argument(want);
    return v;
  };
  while (std::getline(ss, part, ',')) {
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      out.push_back(num(part));
    } else {
      const unsigned a = num(part.substr(0, dash)), b = num(part.substr(dash + 1));
      if (a > b) throw std::invalid_argument(want);
      for (unsigned n = a; n <= b; ++n) out.push_back(n);
    }
  }
  if (out.empty()) throw std::invalid_argument(want);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

planner::SystemProfile MakeSystem(const PlanOpts& o) {
  planner::SystemProfile s;
  if (o.system == "kit") {
    s = planner::KitSystem();
  } else if (o.system == "paper") {
    s = planner::PaperSystem();
  } else {
    throw std::invalid_argument("--system: expected kit or paper, found '" + o.system + "'");
  }
  bool changed = false;
  auto set = [&](double v, double* dst) {
    if (v > 0) {
      *dst = v * 1e9;
      changed = true;
    }
  };
  set(o.ssd_read, &s.csd.ssd_read);
  set(o.ssd_write, &s.csd.ssd_write);
  set(o.kernel, &s.csd.kernel_ddr);
  set(o.raid_read, &s.raid.ssd_read);
  set(o.raid_write, &s.raid.ssd_write);
  set(o.host_update, &s.raid.host_update);
  if (!o.uplink.empty()) {
    s.csd.uplink = s.raid.uplink = ParseLink("--uplink", o.uplink);
    changed = true;
  }
  if (!o.gpu_link.empty()) {
    s.gpu_link = ParseLink("--gpu-link", o.gpu_link);
    changed = true;
  }
  if (!o.ssd_shared.empty()) {
    s.csd.ssd_shared_channel = s.raid.ssd_shared_channel = o.ssd_shared == "on";
    changed = true;
  }
  if (o.host_threads != 0) {
    s.host_threads = o.host_threads;
    changed = true;
  }
  if (changed) s.name += " (modified)";
  // The trainer's host path: the system's own, or a named one, then option by option.
  if (!o.host_path.empty()) s.host = planner::HostPathByName(o.host_path);
  bool host_changed = false;
  if (o.host_copy > 0) {
    s.host.grad_fill = o.host_copy * 1e9;
    host_changed = true;
  }
  if (o.host_weights > 0) {
    s.host.weights_back = o.host_weights * 1e9;
    host_changed = true;
  }
  if (o.host_per_tensor >= 0) {  // each way, unless --host-per-tensor-back says otherwise
    s.host.per_tensor = s.host.per_tensor_back = o.host_per_tensor * 1e-6;
    host_changed = true;
  }
  if (o.host_per_tensor_back >= 0) {
    s.host.per_tensor_back = o.host_per_tensor_back * 1e-6;
    host_changed = true;
  }
  if (host_changed) {
    // A rate given alone on a path without one: the other direction stays free, and says so.
    s.host.name += " (modified)";
    s.host.source +=
        "; modified by --host-copy/--host-weights/--host-per-tensor/--host-per-tensor-back";
  }
  return s;
}

planner::PlanModel MakeModel(const PlanOpts& o) {
  planner::PlanModel m;
  if (!o.params.empty() && o.layers != 0) {
    throw std::invalid_argument("--params and --layers/--hidden: expected one way to give the "
                                "model, found both");
  }
  if (!o.params.empty()) {
    m.params = ParseCount(o.params);
  } else if (o.layers != 0 || o.hidden != 0) {
    if (o.layers == 0 || o.hidden == 0) {
      throw std::invalid_argument("--layers/--hidden: expected both for a GPT-2 shape, found " +
                                  std::string(o.layers == 0 ? "no --layers" : "no --hidden"));
    }
    m.params = planner::Gpt2Params(o.layers, o.hidden, o.vocab, o.seq);
  } else {
    throw std::invalid_argument("model: expected --params N or --layers L --hidden H, found "
                                "neither");
  }
  char name[64];
  std::snprintf(name, sizeof name, "%.2fB parameters", m.params / 1e9);
  m.name = name;
  if (o.fwd_bwd >= 0) {
    m.fwd_bwd = o.fwd_bwd;
    m.fwd_bwd_from = "given (--fwd-bwd)";
  } else {
    m.fwd_bwd = planner::FwdBwdSeconds(o.gpu, o.batch, m.params, &m.fwd_bwd_from);
  }
  m.device_mem = o.device_mem;
  m.subgroup = o.subgroup;
  m.state = ParseStateFmt(o.state);
  m.bwd_ratio = o.bwd_ratio;
  m.grad_bucket = o.grad_bucket;
  m.shard_order = planner::ParseShardOrder(o.shard_order);
  if (o.tensors != 0) {
    m.tensors = o.tensors;
    m.tensors_from = "given (--tensors)";
  } else if (o.layers != 0) {
    m.tensors = 12 * o.layers + 4;
    m.tensors_from = "GPT-2 shape: 12 per layer, 2 embeddings, the final norm's 2";
  } else {
    m.tensors = planner::EstimateTensors(m.params);
    m.tensors_from = "estimated from the parameter count (a GPT-2 shape of hidden 64 per layer)";
  }
  return m;
}

void PrintPaper(const std::vector<planner::PaperRow>& rows) {
  std::printf("%-58s %-66s %13s %7s %8s\n", "published figure", "setup", "paper", "plan",
              "dev");
  for (const auto& r : rows) {
    char paper[32];
    if (r.paper_lo == r.paper_hi) {
      std::snprintf(paper, sizeof paper, "%.2f", r.paper_lo);
    } else {
      std::snprintf(paper, sizeof paper, "%.2f-%.2f", r.paper_lo, r.paper_hi);
    }
    std::printf("%-58s %-66s %13s %7.2f %+7.1f%% %s\n", r.what.c_str(), r.setup.c_str(), paper,
                r.plan, 100 * r.deviation(), r.within() ? "" : "OUTSIDE 15%");
  }
}

// The busy fraction of what bounds the step (the busiest resource's for "workers").
double BoundBusy(const PlanPoint& p) {
  double most = 0, bound = -1;
  for (const auto& [k, v] : p.busy) {
    most = std::max(most, v);
    if (k == p.bottleneck) bound = v;
  }
  return bound >= 0 ? bound : most;
}

// Runs the plotting script with the interpreter; throws with its exit status.
void Plot(const PlanOpts& o, const std::string& json_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("--plot: fork: ") + std::strerror(errno));
  if (pid == 0) {
    execlp(o.python.c_str(), o.python.c_str(), "-c", kPlanPlotScript, json_path.c_str(),
           o.plot.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "--plot: cannot run %s: %s\n", o.python.c_str(), std::strerror(errno));
    _exit(127);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    throw std::runtime_error("--plot: the plotting script (" + o.python +
                             " with matplotlib) failed with status " +
                             std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
                             "; the plan itself is in " + json_path);
  }
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto o = std::make_shared<PlanOpts>();
  CLI::App* c = app.add_subcommand(
      "plan",
      "Plan training iterations on N SmartSSDs (baseline, SmartUpdate, with the transfer "
      "handler, with Top-K): the shipped scheduler on null devices in virtual time");
  c->add_option("--params", o->params, "model parameters: 350000000, 350M, 4e9, 4.0B");
  c->add_option("--layers", o->layers, "GPT-2 shape: layers (with --hidden)")
      ->check(Count(1, 100000));
  c->add_option("--hidden", o->hidden, "GPT-2 shape: hidden size")->check(Count(1, 1u << 20));
  c->add_option("--vocab", o->vocab, "GPT-2 shape: vocabulary")->check(Count(1, 1u << 24))
      ->capture_default_str();
  c->add_option("--seq", o->seq, "GPT-2 shape: sequence length (position embeddings)")
      ->check(Count(1, 1u << 24))
      ->capture_default_str();
  c->add_option("--gpu", o->gpu, "GPU profile of the table (docs/planner.md)")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "batch of the GPU profile")->check(Count(1, 1u << 16))
      ->capture_default_str();
  c->add_option("--fwd-bwd", o->fwd_bwd,
                "forward+backward seconds per iteration (instead of the GPU profile)")
      ->check(FiniteIn(0, 1e6, false));
  c->add_option("--system", o->system, "hardware profile: kit or paper (docs/planner.md)")
      ->check(CLI::IsMember({"kit", "paper"}))
      ->capture_default_str();
  c->add_option("--uplink", o->uplink, "shared uplink per direction: gen3, gen4, gen5 (x16) or GB/s");
  c->add_option("--gpu-link", o->gpu_link, "host <-> GPU link: gen3, gen4, gen5 (x16) or GB/s");
  c->add_option("--ssd-read", o->ssd_read, "SmartSSD SSD -> FPGA, GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--ssd-write", o->ssd_write, "SmartSSD FPGA -> SSD, GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--kernel", o->kernel, "FPGA kernel throughput, GB/s of memory traffic")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--ssd-shared-channel", o->ssd_shared,
                "on: an SSD's reads and writes share one channel; off: independent")
      ->check(CLI::IsMember({"on", "off"}));
  c->add_option("--raid-read", o->raid_read, "baseline NVMe SSD read, GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--raid-write", o->raid_write, "baseline NVMe SSD write, GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--host-threads", o->host_threads, "baseline CPU update threads")
      ->check(Count(1, 1024));
  c->add_option("--host-update", o->host_update,
                "baseline CPU update per thread, GB/s of memory traffic")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--host-path", o->host_path,
                "trainer host path: gpu (the GPU machine's), dev (this project's development "
                "machine) or none (default: the system's; kit: gpu, paper: none)")
      ->check(CLI::IsMember({"gpu", "dev", "none"}));
  c->add_option("--host-copy", o->host_copy,
                "host path: gradient fill into the transfer arena (copy, finiteness check, norm "
                "sum), GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--host-weights", o->host_weights,
                "host path: weights copied back into the parameters, GB/s")
      ->check(FiniteIn(0, 10000, true));
  c->add_option("--host-per-tensor", o->host_per_tensor,
                "host path: fixed cost per tensor, microseconds (both ways, unless "
                "--host-per-tensor-back gives the weights' own)")
      ->check(FiniteIn(0, 1e6, false));
  c->add_option("--host-per-tensor-back", o->host_per_tensor_back,
                "host path: fixed cost per tensor of the weights' way back, microseconds")
      ->check(FiniteIn(0, 1e6, false));
  c->add_option("--tensors", o->tensors,
                "parameter tensors of the model (default: from --layers, or estimated)")
      ->check(Count(1, uint64_t{1} << 32));
  c->add_option("--bwd-ratio", o->bwd_ratio,
                "backward seconds over forward seconds (fwd+bwd split; about 3 with activation "
                "checkpointing)")
      ->check(FiniteIn(0, 100, true))
      ->capture_default_str();
  c->add_option("--grad-bucket", o->grad_bucket,
                "gradient bytes handed over together during backward (overlap model)")
      ->check(Count(1, uint64_t{1} << 40))
      ->capture_default_str();
  c->add_option("--shard-order", o->shard_order,
                "overlap model, level step: contiguous (the kit's shards) or interleaved (a "
                "what-if: each device's subgroups spread over the model)")
      ->check(CLI::IsMember({"contiguous", "interleaved"}))
      ->capture_default_str();
  c->add_option("--overlap", o->overlap,
                "iteration the speedups, the scaling and the plots use: none (serial), weights, "
                "grads (the runtime today with overlap_backward=False / in the baseline mode) or "
                "step (with overlap_backward, SmartUpdate, when the update started during "
                "backward is confirmed)")
      ->check(CLI::IsMember({"none", "weights", "grads", "step"}))
      ->capture_default_str();
  c->add_option("--devices", o->devices, "device counts: N, N,M,..., A-B")->capture_default_str();
  c->add_option("--modes", o->modes, "modes: baseline, smart, handler, topk")
      ->delimiter(',')
      ->check(CLI::IsMember({"baseline", "smart", "handler", "topk"}));
  c->add_option("--topk", o->topk, "Top-K ratio of mode topk")
      ->check(FiniteIn(0, 1, true))
      ->capture_default_str();
  c->add_option("--device-mem", o->device_mem, "device memory per SmartSSD, bytes")
      ->check(Count(uint64_t{1} << 20, uint64_t{1} << 50))
      ->capture_default_str();
  c->add_option("--state", o->state, "state format of the stores: fp32, q8, q8-bf16")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
  c->add_option("--subgroup", o->subgroup, "elements per subgroup (default: as csdkit init)")
      ->check(Count(65536, 1u << 30));
  c->add_flag("--paper", o->paper,
              "print the calibration against the Smart-Infinity paper (system paper)");
  c->add_flag("--json", o->json, "print JSON");
  c->add_option("--plot", o->plot,
                "write plan.json, speedup.png and breakdown.png into this directory (created; "
                "files of these names in it are refused)");
  c->add_option("--python", o->python, "interpreter with matplotlib for --plot")
      ->capture_default_str();
  c->callback([o, c] {
    if (o->paper && c->count("--system") == 0) o->system = "paper";
    nlohmann::json out;
    if (o->paper) {
      if (o->system != "paper") {
        throw std::invalid_argument("--paper: expected --system paper (the calibration is of the "
                                    "paper's system), found --system " + o->system);
      }
      const planner::SystemProfile sys = MakeSystem(*o);
      const auto rows = planner::PaperCalibration(sys);
      out["paper"] = nlohmann::json::array();
      for (const auto& r : rows) out["paper"].push_back(r.ToJson());
      out["system"] = sys.ToJson();
      if (!o->json) PrintPaper(rows);
    }
    const bool have_model = !o->params.empty() || o->layers != 0 || o->hidden != 0;
    if (have_model || !o->paper) {
      const planner::PlanModel m = MakeModel(*o);
      const planner::SystemProfile sys = MakeSystem(*o);
      const std::vector<unsigned> ns = ParseDevices(o->devices);
      if (!o->plot.empty()) {
        // Refused before anything runs: never overwrite what this command did not write.
        for (const char* f : {"plan.json", "speedup.png", "breakdown.png"}) {
          const std::string p = o->plot + "/" + f;
          struct stat st{};
          if (::stat(p.c_str(), &st) == 0) {
            throw std::invalid_argument("--plot: expected a directory without " +
                                        std::string(f) + ", found " + p + " (remove it or "
                                        "choose another directory)");
          }
        }
      }
      const planner::Overlap level = planner::ParseOverlap(o->overlap);
      const planner::Overlap kLevels[] = {planner::Overlap::kNone, planner::Overlap::kWeights,
                                          planner::Overlap::kGrads, planner::Overlap::kStep};
      std::vector<PlanPoint> pts;
      std::map<unsigned, const PlanPoint*> base;  // the baseline's point per N
      for (unsigned n : ns) {
        for (const std::string& ms : o->modes) {
          const PlanMode mode = planner::ParsePlanMode(ms);
          pts.push_back(planner::PlanIteration(m, sys, mode, n,
                                               mode == PlanMode::kTopK ? o->topk : 0.0));
        }
      }
      for (const PlanPoint& p : pts) {
        if (p.mode == PlanMode::kBaseline) base[p.devices] = &p;
      }
      // The iteration the speedups and the scaling use: at the --overlap level.
      const auto iter = [level](const PlanPoint& p) { return p.Iteration(level); };
      const double base1 = base.count(ns.front()) ? iter(*base[ns.front()]) : 0.0;
      out["model"] = m.ToJson();
      out["system"] = sys.ToJson();
      out["overlap"] = {
          {"level", planner::OverlapName(level)},
          {"runtime_today",
           "with overlap_backward (CPU or CUDA parameters, csdkit.torch.distributed): grads, "
           "and step in SmartUpdate from the second step when the update started during "
           "backward is confirmed (contiguous shards); with overlap_backward=False: weights"}};
      out["points"] = nlohmann::json::array();
      for (const PlanPoint& p : pts) {
        nlohmann::json j = p.ToJson();
        // Keys after "seconds" only (see PlanPoint::ToJson): speedup_*.
        if (base.count(p.devices)) {
          j["speedup_vs_baseline"] = iter(*base[p.devices]) / iter(p);
          for (planner::Overlap l : kLevels) {
            j["speedup_vs_baseline_by_overlap"][planner::OverlapName(l)] =
                base[p.devices]->Iteration(l) / p.Iteration(l);
          }
        }
        for (planner::Overlap l : kLevels) {
          j["speedup_overlap_vs_serial"][planner::OverlapName(l)] =
              p.iteration() / p.Iteration(l);
        }
        if (base1 > 0) {
          j["throughput_vs_baseline_at_" + std::to_string(ns.front())] = base1 / iter(p);
        }
        out["points"].push_back(j);
      }
      // Where each mode stops scaling: the fewest devices that reach 90% of the throughput of
      // the most devices planned, and what bounds the step there.
      out["scaling"] = nlohmann::json::object();
      for (const std::string& ms : o->modes) {
        const PlanMode mode = planner::ParsePlanMode(ms);
        std::vector<const PlanPoint*> mp;
        for (const PlanPoint& p : pts) {
          if (p.mode == mode) mp.push_back(&p);
        }
        if (mp.size() < 2) continue;
        const PlanPoint& last = *mp.back();
        unsigned sat = last.devices;
        for (const PlanPoint* p : mp) {
          if (iter(last) / iter(*p) >= 0.9) {
            sat = p->devices;
            break;
          }
        }
        const double busy = BoundBusy(last);
        out["scaling"][ms] = {{"reaches_90pct_at", sat},
                              {"max_devices", last.devices},
                              {"bound_at_max", last.bottleneck},
                              {"busy_at_max", busy}};
      }
      if (!o->json) {
        const auto rate = [](double bps) {
          char b[32];
          if (bps > 0) {
            std::snprintf(b, sizeof b, "%.2f GB/s", bps / 1e9);
          } else {
            std::snprintf(b, sizeof b, "no copy");
          }
          return std::string(b);
        };
        std::printf("model %s; forward+backward %.3f s (%s), backward %.3g x forward; %llu "
                    "tensors (%s)\nsystem %s; host path %s (gradient fill %s + %.1f us per "
                    "tensor, weights back %s + %.1f us per tensor)\n",
                    m.name.c_str(), m.fwd_bwd, m.fwd_bwd_from.c_str(), m.bwd_ratio,
                    static_cast<unsigned long long>(pts.front().tensors), m.tensors_from.c_str(),
                    sys.name.c_str(), sys.host.name.c_str(), rate(sys.host.grad_fill).c_str(),
                    sys.host.per_tensor * 1e6, rate(sys.host.weights_back).c_str(),
                    sys.host.per_tensor_back * 1e6);
        const auto times = [](double x) {
          char b[32];
          std::snprintf(b, sizeof b, "%.3fx", x);
          return std::string(b);
        };
        std::printf("%4s %-9s %8s %8s %8s %9s %8s %9s %9s %8s %10s  %s\n", "N", "mode",
                    "fwd+bwd", "grad out", "host", "step", "wts in", "serial",
                    ("@" + o->overlap).c_str(), "speedup", "shared GB", "bound by (busy)");
        for (size_t i = 0; i < pts.size(); ++i) {
          const PlanPoint& p = pts[i];
          const nlohmann::json& j = out["points"][i];
          const double most = BoundBusy(p);
          std::printf("%4u %-9s %8.3f %8.3f %8.3f %9.3f %8.3f %9.3f %9.3f %8s %10.2f  %s "
                      "(%.0f%%)\n",
                      p.devices, planner::PlanModeName(p.mode), p.fwd_bwd, p.grad_out,
                      p.grad_fill + p.weights_back, p.step, p.weights_in, p.iteration(),
                      iter(p),
                      j.contains("speedup_vs_baseline")
                          ? times(j["speedup_vs_baseline"].get<double>()).c_str()
                          : "-",
                      p.bytes.Shared() / 1e9, p.bottleneck.c_str(), 100 * most);
        }
        std::printf("iteration at each overlap level, seconds (gain over serial); the runtime "
                    "today: with overlap_backward grads, and step (contiguous shards, "
                    "SmartUpdate) when the update started during backward is confirmed; without "
                    "it weights; this plan: %s shards\n",
                    planner::ShardOrderName(m.shard_order));
        std::printf("%4s %-9s %9s %17s %17s %17s\n", "N", "mode", "serial", "weights",
                    "grads", "step");
        for (const PlanPoint& p : pts) {
          std::printf("%4u %-9s %9.3f", p.devices, planner::PlanModeName(p.mode),
                      p.iteration());
          for (planner::Overlap l : {planner::Overlap::kWeights, planner::Overlap::kGrads,
                                     planner::Overlap::kStep}) {
            std::printf(" %9.3f (%s)", p.Iteration(l),
                        times(p.iteration() / p.Iteration(l)).c_str());
          }
          std::printf("\n");
        }
        for (const auto& [ms, j] : out["scaling"].items()) {
          std::printf("%s: 90%% of the throughput on %u devices is reached with %u; on %u the "
                      "step is bound by %s (%.0f%% busy)\n",
                      ms.c_str(), j["max_devices"].get<unsigned>(),
                      j["reaches_90pct_at"].get<unsigned>(), j["max_devices"].get<unsigned>(),
                      j["bound_at_max"].get<std::string>().c_str(),
                      100 * j["busy_at_max"].get<double>());
        }
      }
    }
    if (o->json) std::cout << JsonText(out) << "\n";
    if (!o->plot.empty()) {
      ::mkdir(o->plot.c_str(), 0777);
      struct stat st{};
      if (::stat(o->plot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw std::invalid_argument("--plot: expected a directory, found '" + o->plot + "'");
      }
      const std::string jp = o->plot + "/plan.json";
      std::ofstream f(jp);
      f << out.dump(1) << "\n";
      if (!f) throw std::runtime_error("--plot: cannot write " + jp);
      f.close();
      Plot(*o, jp);
      if (!o->json) std::printf("wrote %s/plan.json, speedup.png, breakdown.png\n", o->plot.c_str());
    }
  });
}

}  // namespace csdkit::cli
