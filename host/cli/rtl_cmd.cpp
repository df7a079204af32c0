// `csdkit verify` (host model vs RTL, bit for bit, per output buffer) and `csdkit bench rtl`.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/emu/emu_device.h"
#include "csdkit/emu/rtl_kernel.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/platform/selftest.h"
#include "csdkit/system/device_set.h"
#include "options.h"

namespace csdkit::cli {

namespace {

std::string Hex(uint32_t x, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, x);
  return b;
}

// The inputs of element i of a problem, in hex (for mismatch reports).
std::string InputsOf(const Problem& p, uint64_t i) {
  std::string s = "theta=" + Hex(p.buf.theta.as<uint32_t>()[i], 8) +
                  " m=" + Hex(p.buf.m.as<uint32_t>()[i], 8) + " v=" + Hex(p.buf.v.as<uint32_t>()[i], 8);
  if (!p.spec.grad.sparse) {
    s += " g=" + (p.spec.grad.grad == DType::kFp32 ? Hex(p.buf.grad.as<uint32_t>()[i], 8)
                                                   : Hex(p.buf.grad.as<uint16_t>()[i], 4));
  }
  return s;
}

struct VerifyOpts {
  std::vector<std::string> optimizers = OptimizerNames();
  std::vector<std::string> grads = {"fp32", "fp16", "bf16"};
  std::vector<std::string> outs = {"none", "fp16", "bf16"};
  std::string sparse = "both", policy = "both";
  uint32_t n = 1000;
  unsigned seeds = 1;
  double topk = 0.05;
  bool json = false;
  DeviceOptions dev{"rtl", "stress"};
};

}  // namespace

void AddRtlCommands(CLI::App& app) {
  auto o = std::make_shared<VerifyOpts>();
  CLI::App* c = app.add_subcommand(
      "verify", "Run the same generated problems on the host model and the RTL (Verilator) and "
                "report bit-exactness per output buffer");
  c->add_option("--optimizer", o->optimizers, "optimizers (adamw adam sgd adagrad lion)")
      ->capture_default_str();
  c->add_option("--grad", o->grads, "gradient dtypes")->capture_default_str();
  c->add_option("--out", o->outs, "low-precision outputs (none fp16 bf16)")->capture_default_str();
  c->add_option("--sparse", o->sparse, "dense|sparse|both")
      ->check(CLI::IsMember({"dense", "sparse", "both"}))
      ->capture_default_str();
  c->add_option("--policy", o->policy, "ieee|ftz|both")
      ->check(CLI::IsMember({"ieee", "ftz", "both"}))
      ->capture_default_str();
  c->add_option("--n", o->n, "elements per problem")
      ->check(Count(1, uint64_t{1} << 26))
      ->capture_default_str();
  c->add_option("--seeds", o->seeds, "problems per configuration (seeds 1..K)")
      ->check(Count(1, 1000000))
      ->capture_default_str();
  c->add_option("--topk", o->topk, "Top-K ratio of the sparse problems")
      ->check(FiniteIn(0.0, 1.0, true))
      ->capture_default_str();
  c->add_flag("--json", o->json, "print JSON");
  o->dev.Add(c);
  c->callback([o] {
    if (o->dev.backend == "rtl" && !emu::RtlAvailable()) {
      throw std::runtime_error("--backend rtl: this build has no Verilated RTL");
    }
    nlohmann::json rows = nlohmann::json::array();
    int launches = 0, failed = 0;
    for (const std::string& opt : o->optimizers) {
      for (const std::string& gname : o->grads) {
        for (const std::string& oname : o->outs) {
          for (bool sparse : {false, true}) {
            if ((sparse && o->sparse == "dense") || (!sparse && o->sparse == "sparse")) continue;
            for (bool ftz : {false, true}) {
              if ((ftz && o->policy == "ieee") || (!ftz && o->policy == "ftz")) continue;
              for (unsigned seed = 1; seed <= o->seeds; ++seed) {
                ProblemSpec spec;
                spec.hyper = OptimizerConfig::Defaults(ParseOptimizer(opt));
                spec.grad.grad = ParseGradDType(gname);
                spec.grad.out = ParseOutDType(oname);
                spec.grad.ftz = ftz;
                spec.n = o->n;
                spec.topk = sparse ? o->topk : 0.0;
                spec.seed = seed;
                Problem p = Problem::Generate(spec);
                std::memset(p.buf.out16.data(), 0xab, p.buf.out16.size());
                UpdateBuffers exp = p.buf.Clone();
                RunUpdate(exp, p.spec.n, p.nnz, p.launch);
                DeviceSpec ds = o->dev.Spec(1);
                ds.rtl.seed = seed;
                DeviceSet devices(ds);
                const UpdateBuffers got = RunOnDevice(devices[0], p);
                emu::RtlLaunchStats st;
                if (emu::EmulatedSmartSsd* e = devices.emulated(0)) st = e->last_rtl_launch();
                nlohmann::json row{{"optimizer", opt}, {"grad", gname},      {"out", oname},
                                   {"sparse", sparse}, {"ftz", ftz},         {"seed", seed},
                                   {"n", o->n},        {"cycles", st.cycles}};
                bool ok = true;
                for (const auto& [nm, a, b, eb] :
                     {std::tuple{"theta", &exp.theta, &got.theta, 4u},
                      std::tuple{"m", &exp.m, &got.m, 4u}, std::tuple{"v", &exp.v, &got.v, 4u},
                      std::tuple{"out16", &exp.out16, &got.out16, 2u},
                      std::tuple{"status", &exp.status, &got.status, 4u}}) {
                  std::string d = DiffBuffers(nm, *a, *b, eb);
                  if (!d.empty()) {
                    ok = false;
                    // The inputs of the first mismatching element.
                    for (uint64_t i = 0; i * eb < a->size(); ++i) {
                      if (std::memcmp(a->data() + i * eb, b->data() + i * eb, eb) != 0) {
                        if (i < p.spec.n) d += "; inputs[" + std::to_string(i) + "]: " + InputsOf(p, i);
                        break;
                      }
                    }
                  }
                  row[nm] = d.empty() ? "bit-exact" : d;
                }
                ++launches;
                failed += ok ? 0 : 1;
                if (!o->json) {
                  std::printf("%-8s grad=%s out=%-4s %-6s %-4s seed=%u: %s (%llu cycles)\n",
                              opt.c_str(), gname.c_str(), oname.c_str(),
                              sparse ? "sparse" : "dense", ftz ? "ftz" : "ieee", seed,
                              ok ? "theta m v out16 status bit-exact" : "MISMATCH",
                              static_cast<unsigned long long>(st.cycles));
                  if (!ok) {
                    for (const char* nm : {"theta", "m", "v", "out16", "status"}) {
                      if (row[nm] != "bit-exact") {
                        std::printf("    %s\n", row[nm].get<std::string>().c_str());
                      }
                    }
                  }
                }
                rows.push_back(row);
              }
            }
          }
        }
      }
    }
    if (o->json) {
      std::cout << JsonText(nlohmann::json{{"launches", launches}, {"failed", failed}, {"results", rows}})
                << "\n";
    } else {
      std::printf("%d launches: %d bit-exact on every output buffer, %d mismatched\n", launches,
                  launches - failed, failed);
    }
    if (failed) throw CLI::RuntimeError(1);
  });
}

namespace {

nlohmann::json RtlBench(uint32_t n) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Variant& var : AllVariants()) {
    for (const char* mem : {"ideal", "ddr"}) {
      for (bool sparse : {false, true}) {
        if (sparse && std::string(var.name) != "adamw") continue;
        ProblemSpec spec;
        spec.hyper = var.cfg;
        spec.step = var.step;
        spec.grad.grad = DType::kFp16;
        spec.grad.out = DType::kFp16;
        spec.n = n;
        spec.topk = sparse ? 0.01 : 0.0;
        Problem p = Problem::Generate(spec);
        DeviceSpec ds;
        ds.backend = Backend::kRtl;
        ds.link_model = false;
        ds.rtl.memory = emu::ParseRtlMemory(mem);
        DeviceSet devices(ds);
        RunOnDevice(devices[0], p);
        const emu::RtlLaunchStats st = devices.emulated(0)->last_rtl_launch();
        hls::Mode md{};
        hls::DecodeMode(p.launch.mode, &md);
        const uint64_t words = hls::WordsFor(n, 4);
        // What the state and gradient streams must read: each state array once, plus the
        // gradient (dense words, or the compressed stream's words).
        uint64_t state_bytes = words * 64 * (1 + hls::UsesM(md) + hls::UsesV(md));
        uint64_t grad_bytes =
            sparse ? (hls::WordsFor(p.nnz, 2) + hls::WordsFor(p.nnz, 2) +
                      hls::WordsFor(hls::NumBlocks(n) + 1ull, 4)) * 64
                   : hls::WordsFor(n, 2) * 64;
        rows.push_back({{"variant", var.name},
                        {"memory", mem},
                        {"sparse", sparse},
                        {"n", n},
                        {"words", words},
                        {"cycles", st.cycles},
                        {"cycles_per_element", static_cast<double>(st.cycles) / n},
                        {"beats_per_cycle", static_cast<double>(words) / st.cycles},
                        {"sim_cycles_per_second", st.sim_seconds > 0 ? st.cycles / st.sim_seconds : 0},
                        {"read_bytes", st.read_bytes},
                        {"write_bytes", st.write_bytes},
                        {"state_plus_gradient_bytes", state_bytes + grad_bytes},
                        {"bundles", st.bundles}});
      }
    }
  }
  return {{"benchmark", "rtl"}, {"lanes", 16}, {"fp_unit_latency_cycles", emu::RtlUnitLatencies()},
          {"results", rows}};
}

}  // namespace

void AddRtlBench(CLI::App* bench) {
  auto n = std::make_shared<uint32_t>(1u << 20);
  CLI::App* c = bench->add_subcommand(
      "rtl", "RTL cycles per element per optimizer with ideal and DDR-like memory, beats per "
             "cycle, simulation speed, bytes read by the AXI slaves, fp unit latencies");
  c->add_option("--n", *n, "elements per launch")->capture_default_str();
  c->add_flag("--json", "JSON output (the only format)");
  c->callback([n] { std::cout << JsonText(RtlBench(*n)) << "\n"; });
}

}  // namespace csdkit::cli
