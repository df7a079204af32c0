// `csdkit kernel`: one launch of the updater on a generated problem (random or special data),
// or on a golden-vector directory it replays and compares output buffer by output buffer.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/emu/emu_device.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/platform/golden.h"
#include "csdkit/platform/problem.h"
#include "csdkit/platform/selftest.h"
#include "csdkit/platform/sparse_codec.h"
#include "csdkit/system/device_set.h"
#include "options.h"

namespace csdkit::cli {

namespace {

struct KernelOpts {
  uint32_t n = 1u << 22;
  double topk = 0.0;
  int64_t step = 1;
  bool json = false, args = false;
  std::string dump, replay;
  std::string data = "random";
  double clip = 1.0;
  HyperOptions h{"fp32", "none", "data seed"};
  // model: the host model called directly; rtl, opencl: one device of the device set.
  DeviceOptions dev{"model", "ideal"};
  // The options that describe a generated problem (refused with --replay, whose problem comes
  // from problem.json).
  std::vector<CLI::Option*> problem_opts;
};

const char* BackendTitle(const std::string& backend) {
  return backend == "model" ? "host model" : backend == "rtl" ? "RTL (Verilator)" : "OpenCL";
}

std::string Hex(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

void PrintArgs(bool json) {
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const hls::ArgInfo& x : hls::kUpdateArgs) {
      a.push_back({{"index", x.index},
                   {"name", x.name},
                   {"kind", x.kind == hls::ArgKind::kPtr ? "pointer" : "scalar"},
                   {"direction", x.dir == hls::ArgDir::kIn ? "in"
                                 : x.dir == hls::ArgDir::kOut ? "out" : "inout"},
                   {"bundle", x.bundle},
                   {"offset", Hex(x.offset)},
                   {"bytes", x.bytes},
                   {"description", x.doc}});
    }
    std::cout << JsonText(nlohmann::json{{"kernel", hls::kUpdateKernelName}, {"args", a}}) << "\n";
    return;
  }
  std::printf("%s register map (ap_ctrl_hs; 0x00 ctrl, 0x04 gie, 0x08 ier, 0x0c isr)\n",
              hls::kUpdateKernelName);
  std::printf("%-3s %-8s %-7s %-6s %-6s %-6s %s\n", "#", "name", "kind", "dir", "bundle",
              "offset", "description");
  for (const hls::ArgInfo& x : hls::kUpdateArgs) {
    std::printf("%-3u %-8s %-7s %-6s %-6s 0x%02x   %s\n", x.index, x.name,
                x.kind == hls::ArgKind::kPtr ? "ptr64" : "u32",
                x.dir == hls::ArgDir::kIn ? "in" : x.dir == hls::ArgDir::kOut ? "out" : "inout",
                x.bundle, x.offset, x.doc);
  }
}

// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read: no check then).
uint64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Host memory a launch of this problem needs: its buffers (the footprint), again for --dump's
// copy of the inputs, and a dense gradient to compress for Top-K. Refused before anything is
// allocated when it exceeds what the machine has available.
void CheckHostMemory(const ProblemSpec& spec, bool dump) {
  const KernelLaunch k = MakeLaunch(spec.hyper, spec.grad, spec.step);
  const uint32_t nnz = spec.topk > 0 ? TopKCount(spec.n, spec.topk) : 0;
  uint64_t need = LaunchFootprint(k.mode, spec.n, nnz).total() * (dump ? 2 : 1);
  if (spec.topk > 0) need += uint64_t{spec.n} * DTypeBytes(spec.grad.grad);
  const uint64_t avail = MemAvailableBytes();
  if (avail != 0 && need > avail) {
    char b[160];
    std::snprintf(b, sizeof b, "%.2f GiB of host memory for its buffers, found %.2f GiB available",
                  need / 1073741824.0, avail / 1073741824.0);
    throw std::invalid_argument("--n " + std::to_string(spec.n) + ": expected a launch that fits "
                                "in memory; it needs " + b + " (MemAvailable); use a smaller --n");
  }
}

int RunKernel(const KernelOpts& o) {
  if (o.args) {
    PrintArgs(o.json);
    return 0;
  }
  ProblemSpec spec;
  spec.hyper = o.h.Config();
  spec.grad = o.h.Grad();
  spec.grad.clip_coef = o.clip;
  spec.n = o.n;
  spec.topk = o.topk;
  spec.seed = o.h.seed;
  spec.step = o.step;
  spec.data = ParseProblemData(o.data);
  (void)o.dev.Spec(1);  // the device options are checked for every backend, model included
  CheckHostMemory(spec, !o.dump.empty());
  if (!o.dump.empty()) PrepareNewDir("--dump", o.dump);  // refused before anything runs

  Problem p = Problem::Generate(spec);
  std::unique_ptr<UpdateBuffers> inputs;
  if (!o.dump.empty()) inputs = std::make_unique<UpdateBuffers>(p.buf.Clone());

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t cycles = 0;
  if (o.dev.backend == "model") {
    p.Run();
  } else {
    // The same launch on a device of the set: an emulated SmartSSD with the RTL, or an OpenCL
    // device (--platform, --xclbin, --device as for every command).
    DeviceSpec ds = o.dev.Spec(1);
    ds.rtl.seed = o.h.seed;
    DeviceSet devices(ds);
    p.buf = RunOnDevice(devices[0], p);
    if (emu::EmulatedSmartSsd* e = devices.emulated(0)) cycles = e->last_rtl_launch().cycles;
  }
  const uint32_t err = p.buf.status.as<uint32_t>()[hls::kStatusError];
  const auto t1 = std::chrono::steady_clock::now();
  const double sec = std::chrono::duration<double>(t1 - t0).count();
  const double eps = sec > 0 ? p.spec.n / sec : 0.0;
  const uint32_t err_pos = p.buf.status.as<uint32_t>()[hls::kStatusErrorPos];

  if (!o.dump.empty()) DumpProblem(o.dump, p, *inputs, p.buf);

  const auto outs = OutputArrays(p, p.buf);
  if (o.json) {
    nlohmann::json j;
    j["kernel"] = hls::kUpdateKernelName;
    j["backend"] = o.dev.backend;
    if (o.dev.backend == "rtl") j["cycles"] = cycles;
    j["optimizer"] = o.h.optimizer;
    j["grad"] = DTypeName(spec.grad.grad);
    j["out"] = OutDTypeName(spec.grad.out);
    j["n"] = p.spec.n;
    j["nnz"] = p.nnz;
    j["topk"] = p.spec.topk;
    j["ftz"] = o.h.ftz;
    j["seed"] = o.h.seed;
    j["data"] = o.data;
    j["step"] = o.step;
    j["mode"] = Hex(p.launch.mode);
    j["status"] = {{"error", err}, {"position", err_pos}, {"message", DescribeKernelError(err, err_pos)}};
    j["seconds"] = sec;
    j["elements_per_second"] = eps;
    nlohmann::json cs = nlohmann::json::object();
    for (const ArrayView& a : outs) cs[a.name] = Hex(Crc32(a));
    j["crc32"] = cs;
    if (!o.dump.empty()) j["dump"] = o.dump;
    std::cout << JsonText(j) << "\n";
  } else {
    std::printf(
        "csd_update %s: optimizer=%s grad=%s out=%s n=%u %s ftz=%s seed=%llu step=%lld "
        "data=%s\n",
        BackendTitle(o.dev.backend), o.h.optimizer.c_str(), DTypeName(spec.grad.grad),
        OutDTypeName(spec.grad.out), p.spec.n,
        p.spec.grad.sparse ? ("sparse nnz=" + std::to_string(p.nnz)).c_str() : "dense",
        o.h.ftz ? "on" : "off", static_cast<unsigned long long>(o.h.seed),
        static_cast<long long>(o.step), o.data.c_str());
    std::printf("status   %s\n", err == 0 ? "ok" : DescribeKernelError(err, err_pos).c_str());
    std::printf("time     %.3f ms, %.1f M elements/s\n", sec * 1e3, eps / 1e6);
    if (o.dev.backend == "rtl") {
      std::printf("cycles   %llu (%.3f per element, %.3f words per cycle)\n",
                  static_cast<unsigned long long>(cycles), static_cast<double>(cycles) / p.spec.n,
                  p.spec.n / 16.0 / static_cast<double>(cycles ? cycles : 1));
    }
    std::printf("%-8s %-5s %10s  %s\n", "output", "dtype", "count", "crc32");
    for (const ArrayView& a : outs) {
      std::printf("%-8s %-5s %10llu  %s\n", a.name.c_str(), a.dtype.c_str(),
                  static_cast<unsigned long long>(a.count), Hex(Crc32(a)).c_str());
    }
    if (!o.dump.empty()) std::printf("golden vectors written to %s/problem.json\n", o.dump.c_str());
  }
  return err == 0 ? 0 : 1;
}

// What lane k of the status word holds (mode.h), for a difference in it.
std::string StatusLane(uint64_t k) {
  switch (k) {
    case hls::kStatusError:
      return "lane 0 (error bits)";
    case hls::kStatusErrorPos:
      return "lane 1 (error position)";
    case hls::kStatusElems:
      return "lane 2 (elements updated)";
    case hls::kStatusNnz:
      return "lane 3 (sparse entries consumed)";
    case hls::kStatusCrcThetaIn:
      return "lane 4 (CRC-32 of theta as read)";
    case hls::kStatusCrcMIn:
      return "lane 5 (CRC-32 of m as read)";
    case hls::kStatusCrcVIn:
      return "lane 6 (CRC-32 of v as read)";
    case hls::kStatusCrcThetaOut:
      return "lane 7 (CRC-32 of theta as written)";
    case hls::kStatusCrcMOut:
      return "lane 8 (CRC-32 of m as written)";
    case hls::kStatusCrcVOut:
      return "lane 9 (CRC-32 of v as written)";
    case hls::kStatusNonFinite:
      return "lane 10 (non-finite values written)";
    case hls::kStatusNonFinitePos:
      return "lane 11 (first non-finite element)";
    case hls::kStatusAxiError:
      return "lane 12 (AXI error response)";
    case hls::kStatusMagic:
      return "lane 15 (magic)";
    default:
      return "lane " + std::to_string(k);
  }
}

// --replay DIR: the dumped launch on the chosen backend, every output compared with the dump.
// 0: all identical; 1: a difference; bad input throws (exit 2) before the launch.
int RunReplay(const KernelOpts& o) {
  for (const CLI::Option* opt : o.problem_opts) {
    if (opt->count() > 0) {
      throw std::invalid_argument("--replay: expected only --json and device options with it "
                                  "(the problem, its sizes and scalars come from " + o.replay +
                                  "/problem.json), found " + opt->get_name());
    }
  }
  (void)o.dev.Spec(1);
  GoldenIndex ix = ReadGoldenIndex(o.replay);
  const Problem& shape = ix.problem;
  // Inputs and expected outputs (LoadGolden) and the launch's own copy of the buffers.
  const uint64_t need =
      ix.HostBytes() + LaunchFootprint(shape.launch.mode, shape.spec.n, shape.nnz).total();
  const uint64_t avail = MemAvailableBytes();
  if (avail != 0 && need > avail) {
    char b[160];
    std::snprintf(b, sizeof b, "%.2f GiB of host memory, found %.2f GiB available",
                  need / 1073741824.0, avail / 1073741824.0);
    throw std::invalid_argument("'" + o.replay + "/problem.json': n = " +
                                std::to_string(shape.spec.n) + ": expected a launch that fits "
                                "in memory; its replay needs " + b + " (MemAvailable)");
  }
  const GoldenProblem g = LoadGolden(std::move(ix));
  const Problem& p = g.problem;

  UpdateBuffers got;
  uint64_t cycles = 0;
  if (o.dev.backend == "model") {
    got = p.buf.Clone();
    RunUpdate(got, p.spec.n, p.nnz, p.launch);
  } else {
    DeviceSet devices(o.dev.Spec(1));
    got = RunOnDevice(devices[0], p);
    if (emu::EmulatedSmartSsd* e = devices.emulated(0)) cycles = e->last_rtl_launch().cycles;
  }
  const uint32_t err = got.status.as<uint32_t>()[hls::kStatusError];
  const uint32_t err_pos = got.status.as<uint32_t>()[hls::kStatusErrorPos];
  const std::vector<BufferCompare> cmp = CompareOutputs(g, got);
  unsigned differ = 0;
  for (const BufferCompare& c : cmp) differ += c.differing != 0;
  const unsigned digits_of[] = {0, 2, 4, 0, 8};

  if (o.json) {
    nlohmann::json j;
    j["replay"] = o.replay;
    j["kernel"] = hls::kUpdateKernelName;
    j["backend"] = o.dev.backend;
    if (o.dev.backend == "rtl") j["cycles"] = cycles;
    j["optimizer"] = OptimizerName(p.spec.hyper.opt);
    j["grad"] = DTypeName(p.spec.grad.grad);
    j["out"] = OutDTypeName(p.spec.grad.out);
    j["sparse"] = p.spec.grad.sparse;
    j["ftz"] = p.spec.grad.ftz;
    j["n"] = p.spec.n;
    j["nnz"] = p.nnz;
    j["mode"] = Hex(p.launch.mode);
    j["status"] = {
        {"error", err}, {"position", err_pos}, {"message", DescribeKernelError(err, err_pos)}};
    j["notes"] = g.notes;
    nlohmann::json bufs = nlohmann::json::array();
    for (const BufferCompare& c : cmp) {
      const GoldenFile& f = *c.file;
      nlohmann::json b{{"name", f.name},
                       {"dtype", f.dtype},
                       {"count", f.count},
                       {"file", f.path},
                       {"identical", c.differing == 0},
                       {"differing", c.differing}};
      if (c.differing != 0) {
        const int digits = static_cast<int>(digits_of[f.bytes / std::max<uint64_t>(f.count, 1)]);
        char e[16], a[16];
        std::snprintf(e, sizeof e, "0x%0*x", digits, c.expected);
        std::snprintf(a, sizeof a, "0x%0*x", digits, c.actual);
        nlohmann::json first{{"index", c.first}, {"expected", e}, {"actual", a}};
        if (f.name == "status") {
          first["lane"] = StatusLane(c.first);
        } else {
          nlohmann::json in = nlohmann::json::object();
          for (const auto& [name, bits] : ElementInputs(p, c.first)) in[name] = bits;
          first["inputs"] = in;
        }
        b["first"] = first;
      }
      bufs.push_back(b);
    }
    j["buffers"] = bufs;
    j["identical"] = differ == 0;
    std::cout << JsonText(j) << "\n";
  } else {
    std::printf("replay %s on %s: optimizer=%s grad=%s out=%s n=%u %s ftz=%s mode=%s\n",
                o.replay.c_str(), BackendTitle(o.dev.backend), OptimizerName(p.spec.hyper.opt),
                DTypeName(p.spec.grad.grad), OutDTypeName(p.spec.grad.out), p.spec.n,
                p.spec.grad.sparse ? ("sparse nnz=" + std::to_string(p.nnz)).c_str() : "dense",
                p.spec.grad.ftz ? "on" : "off", Hex(p.launch.mode).c_str());
    for (const std::string& note : g.notes) std::printf("note     %s\n", note.c_str());
    std::printf("launch   %s\n", err == 0 ? "ok" : DescribeKernelError(err, err_pos).c_str());
    for (const BufferCompare& c : cmp) {
      const GoldenFile& f = *c.file;
      if (c.differing == 0) {
        std::printf("%-8s identical (%llu %s)\n", f.name.c_str(),
                    static_cast<unsigned long long>(f.count), f.dtype.c_str());
        continue;
      }
      const int digits = static_cast<int>(digits_of[f.bytes / std::max<uint64_t>(f.count, 1)]);
      // A status lane has no element inputs; an element of another buffer shows its own.
      const bool status = f.name == "status";
      const std::string where = status ? StatusLane(c.first) : "element " + std::to_string(c.first);
      std::string inputs;
      if (!status) {
        for (const auto& [name, bits] : ElementInputs(p, c.first)) inputs += " " + name + "=" + bits;
      }
      std::printf(
          "%-8s DIFFERS in %llu of %llu %s elements; first at %s: expected 0x%0*x, "
          "actual 0x%0*x%s%s\n",
          f.name.c_str(), static_cast<unsigned long long>(c.differing),
          static_cast<unsigned long long>(f.count), f.dtype.c_str(), where.c_str(), digits,
          c.expected, digits, c.actual, inputs.empty() ? "" : "; inputs", inputs.c_str());
    }
    if (differ == 0) {
      std::printf("replay: all %zu output buffers identical to the dump\n", cmp.size());
    } else {
      std::printf("replay: %u of %zu output buffers differ from the dump\n", differ, cmp.size());
    }
  }
  return differ == 0 ? 0 : 1;
}

}  // namespace

void AddKernelCommand(CLI::App& app) {
  auto o = std::make_shared<KernelOpts>();
  CLI::App* c = app.add_subcommand(
      "kernel",
      "Run the updater kernel on a generated problem and print elements/s and a "
      "CRC-32 of every output, or replay a golden-vector directory (--replay) and "
      "compare every output with it");
  std::vector<CLI::Option*>& gen = o->problem_opts;
  gen.push_back(c->add_option("--n", o->n, "elements")
                    ->check(CLI::Range(1u, 0xffffffffu))
                    ->capture_default_str());
  gen.push_back(c->add_option("--topk", o->topk, "Top-K sparse gradient with this ratio in (0,1]")
                    ->check(FiniteIn(0.0, 1.0, true)));
  gen.push_back(
      c->add_option("--step", o->step, "optimizer step number (from 1)")->capture_default_str());
  gen.push_back(c->add_option("--data", o->data,
                              "random: ordinary values; special: about a third of theta, m, v "
                              "and gradient elements NaN, inf, zero, subnormal, near overflow "
                              "or near 1 (docs/kernel-interface.md)")
                    ->check(CLI::IsMember({"random", "special"}))
                    ->capture_default_str());
  c->add_flag("--json", o->json, "print JSON");
  gen.push_back(c->add_option("--dump", o->dump,
                              "write inputs, outputs and problem.json (golden vectors) here"));
  c->add_option("--replay", o->replay,
                "run the launch of this golden-vector directory (--dump's format) on --backend "
                "and compare every output with it; exit 0 identical, 1 different, 2 bad input");
  gen.push_back(
      c->add_flag("--args", o->args, "print the kernel's argument table / register map and exit"));
  const size_t before = c->get_options().size();
  o->h.Add(c);
  const std::vector<CLI::Option*> all = c->get_options();
  gen.insert(gen.end(), all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  o->dev.Add(c);
  gen.push_back(c->add_option("--clip", o->clip, "clip coefficient folded into the unscale factor")
                    ->capture_default_str());
  c->callback([o]() {
    const int rc = o->replay.empty() ? RunKernel(*o) : RunReplay(*o);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace csdkit::cli
