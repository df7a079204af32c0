#include "csdkit/platform/topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace csdkit {

namespace fs = std::filesystem;

namespace {

const std::regex kBdf(R"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])");

uint32_t ReadHex(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!(f >> s)) throw TopologyError("cannot read '" + p.string() + "'");
  try {
    return static_cast<uint32_t>(std::stoul(s, nullptr, 16));
  } catch (const std::exception&) {
    throw TopologyError("'" + p.string() + "': expected a hex number, found '" + s + "'");
  }
}

// "0000:03:00.1" -> "0000:03:00" (the device, all functions).
std::string DeviceOf(const std::string& bdf) { return bdf.substr(0, bdf.size() - 2); }

}  // namespace

nlohmann::json SmartSsdCard::ToJson() const {
  return {{"fpga_functions", fpga_functions}, {"switch_port", switch_port},
          {"nvme_bdf", nvme_bdf}, {"nvme_controller", nvme_controller},
          {"namespaces", namespaces}};
}

std::vector<PciFunction> ScanPci(const std::string& root) {
  const fs::path dir = fs::path(root) / "bus/pci/devices";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw TopologyError("expected PCI devices under '" + dir.string() + "', found no directory");
  }
  std::vector<PciFunction> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    PciFunction f;
    f.bdf = e.path().filename().string();
    if (!std::regex_match(f.bdf, kBdf)) continue;
    const fs::path real = fs::canonical(e.path(), ec);
    if (ec) throw TopologyError("cannot resolve '" + e.path().string() + "': " + ec.message());
    for (const auto& part : real) {
      const std::string s = part.string();
      if (std::regex_match(s, kBdf)) f.path.push_back(s);
    }
    if (f.path.empty() || f.path.back() != f.bdf) {
      throw TopologyError("'" + e.path().string() + "' resolves to '" + real.string() +
                          "', expected a path ending in " + f.bdf);
    }
    f.vendor = static_cast<uint16_t>(ReadHex(real / "vendor"));
    f.device = static_cast<uint16_t>(ReadHex(real / "device"));
    f.class_code = ReadHex(real / "class");
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.bdf < b.bdf; });
  return out;
}

std::vector<SmartSsdCard> FindSmartSsds(const std::string& root) {
  const std::vector<PciFunction> all = ScanPci(root);
  // The upstream switch port of an endpoint: two levels up (endpoint <- downstream port <-
  // upstream port). An endpoint directly on a root port has none.
  auto switch_of = [](const PciFunction& f) -> std::string {
    return f.path.size() >= 3 ? f.path[f.path.size() - 3] : std::string();
  };
  std::map<std::string, std::vector<const PciFunction*>> nvme_by_switch;
  for (const PciFunction& f : all) {
    if (f.class_code == kNvmeClass) nvme_by_switch[switch_of(f)].push_back(&f);
  }
  // Group the Xilinx functions by device (a card exposes a management and a user function).
  std::map<std::string, std::vector<const PciFunction*>> fpgas;
  for (const PciFunction& f : all) {
    if (f.vendor == kXilinxVendor) fpgas[DeviceOf(f.bdf)].push_back(&f);
  }
  std::vector<SmartSsdCard> cards;
  std::set<std::string> claimed;
  for (const auto& [dev, funcs] : fpgas) {
    SmartSsdCard c;
    for (const PciFunction* f : funcs) c.fpga_functions.push_back(f->bdf);
    c.switch_port = switch_of(*funcs.front());
    if (c.switch_port.empty()) {
      throw TopologyError("FPGA " + dev + ": expected it behind a PCIe switch shared with its "
                          "NVMe controller, found it directly on root port " +
                          funcs.front()->path.front());
    }
    const auto it = nvme_by_switch.find(c.switch_port);
    if (it == nvme_by_switch.end()) {
      throw TopologyError("FPGA " + dev + ": expected an NVMe controller under the same PCIe "
                          "switch (" + c.switch_port + "), found none; is the SSD's NVMe "
                          "driver bound and the card fully enumerated?");
    }
    if (it->second.size() != 1) {
      std::string list;
      for (const PciFunction* n : it->second) list += (list.empty() ? "" : ", ") + n->bdf;
      throw TopologyError("FPGA " + dev + ": expected one NVMe controller under switch " +
                          c.switch_port + ", found " + std::to_string(it->second.size()) +
                          " (" + list + "); cannot tell which belongs to the card");
    }
    const PciFunction& n = *it->second.front();
    if (!claimed.insert(n.bdf).second) {
      throw TopologyError("NVMe controller " + n.bdf + " is under the switch of two FPGAs");
    }
    c.nvme_bdf = n.bdf;
    const fs::path nvme_dir = fs::path(root) / "bus/pci/devices" / n.bdf / "nvme";
    std::error_code ec;
    if (fs::is_directory(nvme_dir, ec)) {
      for (const auto& ctrl : fs::directory_iterator(nvme_dir)) {
        c.nvme_controller = ctrl.path().filename().string();
        for (const auto& ns : fs::directory_iterator(ctrl.path())) {
          const std::string name = ns.path().filename().string();
          if (name.rfind(c.nvme_controller + "n", 0) == 0) c.namespaces.push_back("/dev/" + name);
        }
      }
      std::sort(c.namespaces.begin(), c.namespaces.end());
    }
    cards.push_back(c);
  }
  return cards;
}

}  // namespace csdkit
