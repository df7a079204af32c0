// SmartSSD discovery by PCIe topology on fake sysfs trees: 1 and 10 cards, enumeration order
// deliberately unrelated to the pairing, and broken layouts refused with clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "csdkit/platform/topology.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& name)
      : root_(std::string(CSDKIT_TEST_DIR) + "/sysfs_" + name) {
    fs::remove_all(root_);
    fs::create_directories(root_ + "/bus/pci/devices");
  }
  const std::string& root() const { return root_; }

  // Adds a function at the end of `chain` (BDFs from the root port down).
  void Add(const std::vector<std::string>& chain, uint16_t vendor, uint16_t device,
           uint32_t cls) {
    std::string rel = "devices/pci0000:00";
    for (const std::string& b : chain) rel += "/" + b;
    const fs::path dir = fs::path(root_) / rel;
    fs::create_directories(dir);
    Write(dir / "vendor", vendor);
    Write(dir / "device", device);
    Write(dir / "class", cls);
    const fs::path link = fs::path(root_) / "bus/pci/devices" / chain.back();
    if (!fs::exists(fs::symlink_status(link))) {
      fs::create_symlink(fs::path("../../..") / rel, link);
    }
  }
  void AddNamespace(const std::string& bdf, const std::string& ctrl, int ns) {
    fs::create_directories(fs::path(root_) / "bus/pci/devices" / bdf / "nvme" / ctrl /
                           (ctrl + "n" + std::to_string(ns)));
  }
  // One SmartSSD behind switch bus `bus`: root port 00:0x.0 -> switch upstream bus:00.0 ->
  // downstream ports (bus+1):00.0 and (bus+1):01.0 -> FPGA (bus+2):00.{0,1}, NVMe (bus+3):00.0.
  void AddCard(int root_port, int bus, const std::string& ctrl, bool with_nvme = true) {
    auto b = [](int bus_no, int dev, int fn) {
      char s[16];
      std::snprintf(s, sizeof s, "0000:%02x:%02x.%d", bus_no, dev, fn);
      return std::string(s);
    };
    const std::string rp = b(0, root_port, 0), up = b(bus, 0, 0), dn0 = b(bus + 1, 0, 0),
                      dn1 = b(bus + 1, 1, 0);
    Add({rp}, 0x8086, 0x1234, 0x060400);
    Add({rp, up}, 0x10b5, 0x8717, 0x060400);
    Add({rp, up, dn0}, 0x10b5, 0x8717, 0x060400);
    Add({rp, up, dn1}, 0x10b5, 0x8717, 0x060400);
    Add({rp, up, dn0, b(bus + 2, 0, 0)}, 0x10ee, 0x6987, 0x120000);
    Add({rp, up, dn0, b(bus + 2, 0, 1)}, 0x10ee, 0x6988, 0x120000);
    if (with_nvme) {
      Add({rp, up, dn1, b(bus + 3, 0, 0)}, 0x144d, 0xa824, kNvmeClass);
      AddNamespace(b(bus + 3, 0, 0), ctrl, 1);
    }
  }

 private:
  static void Write(const fs::path& p, uint32_t v) {
    std::ofstream f(p);
    f << "0x" << std::hex << v << "\n";
  }
  std::string root_;
};

TEST(Topology, OneCard) {
  FakeSysfs s("one");
  s.AddCard(1, 0x10, "nvme0");
  const auto cards = FindSmartSsds(s.root());
  ASSERT_EQ(cards.size(), 1u);
  EXPECT_EQ(cards[0].fpga_functions, (std::vector<std::string>{"0000:12:00.0", "0000:12:00.1"}));
  EXPECT_EQ(cards[0].switch_port, "0000:10:00.0");
  EXPECT_EQ(cards[0].nvme_bdf, "0000:13:00.0");
  EXPECT_EQ(cards[0].nvme_controller, "nvme0");
  EXPECT_EQ(cards[0].namespaces, std::vector<std::string>{"/dev/nvme0n1"});
}

TEST(Topology, TenCardsPairedByTopologyNotOrder) {
  FakeSysfs s("ten");
  // NVMe controller names run backwards relative to the buses, so pairing by enumeration order
  // (k-th FPGA with nvme<k>) would be wrong for every card.
  for (int k = 0; k < 10; ++k) s.AddCard(1 + k, 0x10 + 0x10 * k, "nvme" + std::to_string(9 - k));
  const auto cards = FindSmartSsds(s.root());
  ASSERT_EQ(cards.size(), 10u);
  for (int k = 0; k < 10; ++k) {
    char nv[16];
    std::snprintf(nv, sizeof nv, "0000:%02x:00.0", 0x13 + 0x10 * k);
    EXPECT_EQ(cards[k].nvme_bdf, nv) << "card " << k;
    EXPECT_EQ(cards[k].nvme_controller, "nvme" + std::to_string(9 - k)) << "card " << k;
  }
}

void ExpectTopologyError(const std::string& root, const std::string& part) {
  try {
    FindSmartSsds(root);
    ADD_FAILURE() << "accepted; expected an error containing '" << part << "'";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Topology, BrokenLayoutsRefused) {
  {
    FakeSysfs s("missing_nvme");
    s.AddCard(1, 0x10, "nvme0", /*with_nvme=*/false);
    ExpectTopologyError(s.root(), "found none");
  }
  {
    FakeSysfs s("ambiguous");
    s.AddCard(1, 0x10, "nvme0");
    // A second NVMe controller under the same switch.
    s.Add({"0000:00:01.0", "0000:10:00.0", "0000:11:02.0"}, 0x10b5, 0x8717, 0x060400);
    s.Add({"0000:00:01.0", "0000:10:00.0", "0000:11:02.0", "0000:14:00.0"}, 0x144d, 0xa824,
          kNvmeClass);
    ExpectTopologyError(s.root(), "found 2");
  }
  {
    FakeSysfs s("root_port");
    s.Add({"0000:00:02.0"}, 0x10ee, 0x6987, 0x120000);
    ExpectTopologyError(s.root(), "directly on root port");
  }
  {
    FakeSysfs s("bad_class");
    s.AddCard(1, 0x10, "nvme0");
    std::ofstream(s.root() + "/devices/pci0000:00/0000:00:01.0/class") << "zz\n";
    ExpectTopologyError(s.root(), "expected a hex number");
  }
  ExpectTopologyError(std::string(CSDKIT_TEST_DIR) + "/no_such_sysfs", "found no directory");
}

TEST(Topology, NoCardsIsNotAnError) {
  FakeSysfs s("empty");
  s.Add({"0000:00:01.0"}, 0x8086, 0x1234, 0x060400);
  EXPECT_TRUE(FindSmartSsds(s.root()).empty());
}

}  // namespace
}  // namespace csdkit
