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
#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
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

// The inputs of element i of a problem, in hex (for mismatch reports): theta, m, v as stored
// (q8 formats: theta binary32 or bf16, a moment's code and its block's absmax).
std::string InputsOf(const Problem& p, uint64_t i) {
  std::string s;
  const hls::StateFmt st = p.spec.grad.state;
  if (st == hls::StateFmt::kFp32) {
    s = "theta=" + Hex(p.buf.theta.as<uint32_t>()[i], 8) +
        " m=" + Hex(p.buf.m.as<uint32_t>()[i], 8) + " v=" + Hex(p.buf.v.as<uint32_t>()[i], 8);
  } else {
    const uint64_t b = i / hls::kQ8Block;
    s = "theta=" + (st == hls::StateFmt::kQ8Bf16 ? Hex(p.buf.theta.as<uint16_t>()[i], 4)
                                                 : Hex(p.buf.theta.as<uint32_t>()[i], 8)) +
        " m=" + Hex(p.buf.m.as<uint8_t>()[i], 2) + "/" + Hex(p.buf.m_absmax.as<uint32_t>()[b], 8) +
        " v=" + Hex(p.buf.v.as<uint8_t>()[i], 2) + "/" + Hex(p.buf.v_absmax.as<uint32_t>()[b], 8);
  }
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
  std::vector<std::string> states = {"fp32"};
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
  c->add_option("--state", o->states,
                "state formats fp32 q8 q8-bf16 (q8 formats: n rounded up to whole blocks of 256; "
                "q8-bf16 has no fp16 copy)")
      ->check(CLI::IsMember({"fp32", "q8", "q8-bf16"}))
      ->capture_default_str();
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
          for (const std::string& sname : o->states) {
            const hls::StateFmt state = ParseStateFmt(sname);
            if (state == hls::StateFmt::kQ8Bf16 && oname == "fp16") continue;  // refused
            // q8 formats: whole blocks of 256.
            const uint32_t n = hls::IsQ8(state) ? (o->n + 255u) / 256u * 256u : o->n;
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
                  spec.grad.state = state;
                  spec.n = n;
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
                  nlohmann::json row{{"optimizer", opt}, {"grad", gname},  {"out", oname},
                                     {"state", sname},   {"sparse", sparse}, {"ftz", ftz},
                                     {"seed", seed},     {"n", n},           {"cycles", st.cycles}};
                  bool ok = true;
                  // Bytes per stored value, and elements per value (an absmax covers a block).
                  const bool q8 = hls::IsQ8(state);
                  const unsigned tb = state == hls::StateFmt::kQ8Bf16 ? 2u : 4u, mb = q8 ? 1u : 4u;
                  for (const auto& [nm, a, b, eb, per] :
                       {std::tuple{"theta", &exp.theta, &got.theta, tb, 1u},
                        std::tuple{"m", &exp.m, &got.m, mb, 1u},
                        std::tuple{"v", &exp.v, &got.v, mb, 1u},
                        std::tuple{"m_absmax", &exp.m_absmax, &got.m_absmax, 4u, 256u},
                        std::tuple{"v_absmax", &exp.v_absmax, &got.v_absmax, 4u, 256u},
                        std::tuple{"out16", &exp.out16, &got.out16, 2u, 1u},
                        std::tuple{"status", &exp.status, &got.status, 4u, 0u}}) {
                    std::string d = DiffBuffers(nm, *a, *b, eb);
                    if (!d.empty()) {
                      ok = false;
                      // The inputs of the first mismatching element.
                      for (uint64_t i = 0; i * eb < a->size(); ++i) {
                        if (std::memcmp(a->data() + i * eb, b->data() + i * eb, eb) != 0) {
                          const uint64_t e = i * per;
                          if (per != 0 && e < p.spec.n) {
                            d += "; inputs[" + std::to_string(e) + "]: " + InputsOf(p, e);
                          }
                          break;
                        }
                      }
                    }
                    row[nm] = d.empty() ? "bit-exact" : d;
                  }
                  ++launches;
                  failed += ok ? 0 : 1;
                  if (!o->json) {
                    std::printf("%-8s grad=%s out=%-4s %s%-6s %-4s seed=%u: %s (%llu cycles)\n",
                                opt.c_str(), gname.c_str(), oname.c_str(),
                                q8 ? ("state=" + sname + " ").c_str() : "",
                                sparse ? "sparse" : "dense", ftz ? "ftz" : "ieee", seed,
                                !ok ? "MISMATCH"
                                    : q8 ? "theta m v m_absmax v_absmax out16 status bit-exact"
                                         : "theta m v out16 status bit-exact",
                                static_cast<unsigned long long>(st.cycles));
                    if (!ok) {
                      for (const char* nm :
                           {"theta", "m", "v", "m_absmax", "v_absmax", "out16", "status"}) {
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
