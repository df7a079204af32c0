// Finding SmartSSDs on a host: each card's FPGA and its NVMe controller sit under one PCIe
// switch, so they are paired by PCIe topology read from sysfs — never by enumeration order.
//
// sysfs facts used (Linux): /sys/bus/pci/devices/<BDF> is a link into /sys/devices/pci<dom:bus>/
// ... whose path lists every bridge from the root port down; each function directory has
// `vendor`, `device` and `class` files; an NVMe controller has nvme/nvme<N>/nvme<N>n<M>
// namespace directories. The root is a parameter so tests can use fake trees.
#ifndef CSDKIT_TOPOLOGY_H_
#define CSDKIT_TOPOLOGY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace csdkit {

/// A PCIe function as sysfs shows it.
struct PciFunction {
  std::string bdf;                  // e.g. 0000:03:00.1
  uint16_t vendor = 0, device = 0;
  uint32_t class_code = 0;          // 24-bit class/subclass/prog-if
  std::vector<std::string> path;    // BDFs from the root port down to this function
};

/// One SmartSSD: its FPGA functions, the switch they share with the NVMe controller, the NVMe
/// controller and its block devices.
struct SmartSsdCard {
  std::vector<std::string> fpga_functions;  // Xilinx functions of the card (mgmt, user)
  std::string switch_port;                  // BDF of the switch's upstream port
  std::string nvme_bdf;                     // the card's NVMe controller
  std::string nvme_controller;              // e.g. nvme2
  std::vector<std::string> namespaces;      // e.g. /dev/nvme2n1
  nlohmann::json ToJson() const;
};

/// A layout that cannot be paired: the message names the functions involved and what was
/// expected.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr uint16_t kXilinxVendor = 0x10ee;
constexpr uint32_t kNvmeClass = 0x010802;

/// Every PCI function under `sysfs_root` (normally "/sys"). Throws TopologyError when the
/// tree is unreadable.
std::vector<PciFunction> ScanPci(const std::string& sysfs_root);

/// Pairs each Xilinx FPGA with the NVMe controller under the same switch, sorted by FPGA BDF.
/// Throws TopologyError for an FPGA without an NVMe controller beside it, with more than one,
/// or one whose NVMe controller is claimed twice.
std::vector<SmartSsdCard> FindSmartSsds(const std::string& sysfs_root);

}  // namespace csdkit

#endif  // CSDKIT_TOPOLOGY_H_
