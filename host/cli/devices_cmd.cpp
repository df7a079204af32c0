// `csdkit devices`: OpenCL platforms and devices (through the ICD loader; the PCIe address of
// Xilinx devices) and the SmartSSDs found by PCIe topology in sysfs.
#ifdef CSDKIT_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <CL/cl_ext_xilinx.h>
#endif

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "csdkit/platform/topology.h"
#include "options.h"

namespace csdkit::cli {

namespace {

#ifndef CSDKIT_HAVE_OPENCL
// A build without the OpenCL backend lists no platforms and says why (the SmartSSD pairing by
// sysfs needs no OpenCL).
nlohmann::json OpenClInventory(std::string* note) {
  *note = "this build has no OpenCL (configure with the OpenCL headers and ICD loader, XRT's "
          "headers and clang)";
  return nlohmann::json::array();
}
#else
std::string PlatformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

nlohmann::json OpenClInventory(std::string* note) {
  nlohmann::json out = nlohmann::json::array();
  cl_uint np = 0;
  const cl_int rc = clGetPlatformIDs(0, nullptr, &np);
  if (rc != CL_SUCCESS || np == 0) {
    *note = rc == CL_PLATFORM_NOT_FOUND_KHR || np == 0
                ? "no OpenCL platform (install an ICD: pocl-opencl-icd, or XRT for Xilinx cards)"
                : "clGetPlatformIDs failed with " + std::to_string(rc);
    return out;
  }
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  for (cl_platform_id p : ps) {
    nlohmann::json pj{{"name", PlatformString(p, CL_PLATFORM_NAME)},
                      {"vendor", PlatformString(p, CL_PLATFORM_VENDOR)},
                      {"version", PlatformString(p, CL_PLATFORM_VERSION)}};
    const bool xilinx = pj["name"].get<std::string>().find("Xilinx") != std::string::npos;
    cl_uint nd = 0;
    nlohmann::json devs = nlohmann::json::array();
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) == CL_SUCCESS && nd > 0) {
      std::vector<cl_device_id> ds(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
      for (cl_device_id d : ds) {
        nlohmann::json dj{{"name", DeviceString(d, CL_DEVICE_NAME)},
                          {"version", DeviceString(d, CL_DEVICE_VERSION)}};
        cl_ulong mem = 0;
        clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
        dj["global_mem_bytes"] = mem;
        // XRT reports the PCIe address of a card (cl_ext_xilinx.h).
        if (xilinx) dj["pcie_bdf"] = DeviceString(d, CL_DEVICE_PCIE_BDF);
        devs.push_back(dj);
      }
    }
    pj["devices"] = devs;
    out.push_back(pj);
  }
  return out;
}
#endif  // CSDKIT_HAVE_OPENCL

}  // namespace

void AddDevicesCommand(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto sysfs = std::make_shared<std::string>("/sys");
  CLI::App* c = app.add_subcommand(
      "devices", "OpenCL platforms and devices, and SmartSSDs (FPGA + NVMe paired by PCIe "
                 "topology)");
  c->add_flag("--json", *json, "print JSON");
  c->add_option("--sysfs", *sysfs, "sysfs root (for inspecting a copied or fake tree)")
      ->capture_default_str();
  c->callback([json, sysfs] {
    std::string note;
    const nlohmann::json cl = OpenClInventory(&note);
    nlohmann::json cards = nlohmann::json::array();
    std::string topo_error;
    try {
      for (const SmartSsdCard& card : FindSmartSsds(*sysfs)) cards.push_back(card.ToJson());
    } catch (const TopologyError& e) {
      topo_error = e.what();
    }
    if (*json) {
      nlohmann::json j{{"opencl_platforms", cl}, {"smartssds", cards}};
      if (!note.empty()) j["opencl_note"] = note;
      if (!topo_error.empty()) j["smartssd_error"] = topo_error;
      std::cout << JsonText(j) << "\n";
    } else {
      std::printf("OpenCL platforms:%s\n", note.empty() ? "" : (" none: " + note).c_str());
      for (const auto& p : cl) {
        std::printf("  %s (%s)\n", p["name"].get<std::string>().c_str(),
                    p["version"].get<std::string>().c_str());
        for (const auto& d : p["devices"]) {
          std::printf("    %s, %llu MiB%s\n", d["name"].get<std::string>().c_str(),
                      static_cast<unsigned long long>(d["global_mem_bytes"].get<uint64_t>() >> 20),
                      d.contains("pcie_bdf") ? (", PCIe " + d["pcie_bdf"].get<std::string>()).c_str()
                                             : "");
        }
      }
      std::printf("SmartSSDs (sysfs %s): %zu\n", sysfs->c_str(), cards.size());
      for (size_t k = 0; k < cards.size(); ++k) {
        const auto& c = cards[k];
        std::string ns;
        for (const auto& n : c["namespaces"]) ns += " " + n.get<std::string>();
        std::printf("  card %zu: FPGA %s, switch %s, NVMe %s (%s)%s\n", k,
                    c["fpga_functions"][0].get<std::string>().c_str(),
                    c["switch_port"].get<std::string>().c_str(),
                    c["nvme_bdf"].get<std::string>().c_str(),
                    c["nvme_controller"].get<std::string>().c_str(), ns.c_str());
      }
      if (!topo_error.empty()) std::printf("  error: %s\n", topo_error.c_str());
    }
    if (!topo_error.empty()) throw CLI::RuntimeError(1);
  });
}

}  // namespace csdkit::cli
