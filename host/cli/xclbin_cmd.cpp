// `csdkit xclbin inspect | check | emu`: read an xclbin through XRT, check it against the
// argument table before a load, write the emulated SmartSSD's xclbin.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "csdkit/platform/xclbin.h"
#include "options.h"

namespace csdkit::cli {

void AddXclbinCommand(CLI::App& app);

namespace {

/// Exit status for a refused file: 1 when it is not what was expected, 2 when it cannot be read.
[[noreturn]] void Refuse(const XclbinError& e) {
  std::fprintf(stderr, "csdkit xclbin: %s\n", e.what());
  throw CLI::RuntimeError(e.kind() == XclbinError::Kind::kIo ? 2 : 1);
}

std::string Str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

void PrintInspection(const nlohmann::json& j) {
  std::printf("xclbin %s: %llu bytes, target %s, format %s\n", Str(j, "file").c_str(),
              static_cast<unsigned long long>(j["bytes"].get<uint64_t>()), Str(j, "target").c_str(),
              Str(j, "format_version").c_str());
  std::printf("  platform  %s\n", Str(j, "platform").c_str());
  std::printf("  uuid      %s\n", Str(j, "uuid").c_str());
  if (!Str(j, "fpga_device").empty())
    std::printf("  device    %s\n", Str(j, "fpga_device").c_str());
  std::printf("  sections ");
  for (const auto& s : j["sections"]) {
    std::printf(" %s(%llu)", s["kind"].get<std::string>().c_str(),
                static_cast<unsigned long long>(s["bytes"].get<uint64_t>()));
  }
  std::printf("\n");
  if (j.contains("clocks")) {
    for (const auto& c : j["clocks"]) {
      std::printf("  clock     %s %u MHz (%s)\n", c["name"].get<std::string>().c_str(),
                  c["mhz"].get<unsigned>(), c["type"].get<std::string>().c_str());
    }
  }
  for (const auto& m : j["memories"]) {
    std::printf("  memory    %d %s %s %llu MiB at %s%s\n", m["index"].get<int>(),
                m["tag"].get<std::string>().c_str(), m["type"].get<std::string>().c_str(),
                static_cast<unsigned long long>(m["size_kb"].get<uint64_t>() >> 10),
                m["base_address"].get<std::string>().c_str(),
                m["used"].get<bool>() ? "" : " (unused)");
  }
  for (const auto& k : j["kernels"]) {
    std::printf("  kernel    %s, %zu compute unit(s), %zu arguments\n",
                k["name"].get<std::string>().c_str(), k["compute_units"].size(), k["args"].size());
    for (const auto& cu : k["compute_units"]) {
      std::printf("    cu %s at %s, %s, range %s\n", cu["name"].get<std::string>().c_str(),
                  cu["base_address"].get<std::string>().c_str(),
                  cu["control"].get<std::string>().c_str(),
                  cu["address_range"].get<std::string>().c_str());
    }
    std::printf("    %-3s %-8s %-9s %-14s %-6s %-4s %s\n", "#", "name", "qualifier", "port",
                "offset", "size", "memories");
    for (const auto& a : k["args"]) {
      std::string mems;
      for (const auto& m : a["memories"]) mems += (mems.empty() ? "" : ",") + m.get<std::string>();
      std::printf("    %-3zu %-8s %-9s %-14s %-6s %-4llu %s\n", a["index"].get<size_t>(),
                  a["name"].get<std::string>().c_str(), Str(a, "address_qualifier").c_str(),
                  a["port"].get<std::string>().c_str(), a["offset"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(a["size"].get<uint64_t>()),
                  mems.empty() ? "-" : mems.c_str());
    }
  }
}

}  // namespace

void AddXclbinCommand(CLI::App& app) {
  CLI::App* x = app.add_subcommand(
      "xclbin",
      "xclbin files: inspect (through XRT), check against the argument table before "
      "a load, write the emulated SmartSSD's xclbin");
  x->require_subcommand(1);

  {
    auto file = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    CLI::App* c = x->add_subcommand("inspect",
                                    "print platform, uuid, sections, memories, kernels, "
                                    "arguments and connectivity");
    c->add_option("FILE", *file, "the .xclbin")->required();
    c->add_flag("--json", *json, "print JSON");
    c->callback([file, json] {
      try {
        const nlohmann::json j = InspectXclbin(*file);
        if (*json) {
          std::cout << JsonText(j) << "\n";
        } else {
          PrintInspection(j);
        }
      } catch (const XclbinError& e) {
        Refuse(e);
      }
    });
  }

  {
    auto file = std::make_shared<std::string>();
    auto platform = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    CLI::App* c = x->add_subcommand(
        "check",
        "check before a load: kernel csd_update with exactly the argument table's "
        "arguments (names, order, offsets, sizes, ports), an ap_ctrl_hs compute unit, "
        "every buffer connected to memory; exit 1 if refused, 2 if unreadable");
    c->add_option("FILE", *file, "the .xclbin")->required();
    c->add_option("--platform", *platform,
                  std::string("required platform (") + kSmartSsdPlatform + " for the card, " +
                      kEmulatedSmartSsdPlatform + " for emulation); default: any");
    c->add_flag("--json", *json, "print the inspection JSON when the check passes");
    c->callback([file, platform, json] {
      XclbinExpectation exp;
      exp.platform = *platform;
      try {
        const nlohmann::json j = CheckXclbin(*file, exp);
        if (*json) {
          std::cout << JsonText(j) << "\n";
          return;
        }
        std::printf(
            "ok: %s: kernel %s, %zu arguments as in the argument table (update_args.h), "
            "platform %s%s, uuid %s\n",
            file->c_str(), exp.kernel.name.c_str(), exp.kernel.args.size(),
            Str(j, "platform").c_str(), platform->empty() ? " (not required)" : "",
            Str(j, "uuid").c_str());
      } catch (const XclbinError& e) {
        Refuse(e);
      }
    });
  }

  {
    auto file = std::make_shared<std::string>();
    auto o = std::make_shared<EmulationXclbinOptions>();
    CLI::App* c = x->add_subcommand(
        "emu",
        "write the xclbin of the emulated SmartSSD (metadata of csd_update from the "
        "argument table, no bitstream); then check it as a card's would be");
    c->add_option("FILE", *file, "the .xclbin to write")->required();
    c->add_option("--platform", o->platform, "platform name in the header")->capture_default_str();
    c->add_option("--target", o->target, "sw_emu (host model), hw_emu (RTL) or hw")
        ->check(CLI::IsMember({"sw_emu", "hw_emu", "hw"}))
        ->capture_default_str();
    c->add_option("--clock-mhz", o->kernel_clock_mhz, "kernel clock recorded in the file")
        ->check(CLI::Range(1, 65535))
        ->capture_default_str();
    c->callback([file, o] {
      try {
        WriteEmulationXclbin(*file, *o);
        XclbinExpectation exp;
        exp.kernel = o->kernel;
        exp.platform = o->platform;
        const nlohmann::json j = CheckXclbin(*file, exp);
        std::printf(
            "wrote %s: kernel %s (%zu arguments), platform %s, target %s, memory %s, "
            "%llu bytes, uuid %s; check passed\n",
            file->c_str(), o->kernel.name.c_str(), o->kernel.args.size(), o->platform.c_str(),
            o->target.c_str(), o->memory_tag.c_str(),
            static_cast<unsigned long long>(j["bytes"].get<uint64_t>()), Str(j, "uuid").c_str());
      } catch (const XclbinError& e) {
        Refuse(e);
      }
    });
  }
}

}  // namespace csdkit::cli
