// A bandwidth model of a SmartSSD system in virtual time, so that a run on emulated devices can
// report what its schedule would take on the cards.
//
// Resources: per device, the SSD's read channel, its write channel and the FPGA kernel (bounded
// by its DDR bandwidth); shared by all devices, the host's PCIe uplink. A transfer occupies every
// resource on its path for bytes / (slowest bandwidth on the path) seconds, starting when the
// issuing worker and all those resources are free (VirtualClock). Operations are booked in the
// order they are issued ("greedy in issue order"), which is how the runtime's workers issue them;
// concurrency between workers appears because each worker has its own clock.
#ifndef CSDKIT_EMU_LINK_MODEL_H_
#define CSDKIT_EMU_LINK_MODEL_H_

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "csdkit/platform/device.h"

namespace csdkit::emu {

/// Bandwidths in bytes per second.
struct LinkProfile {
  double ssd_read = 3.0e9;    // NVMe -> FPGA (P2P), also NVMe -> host
  double ssd_write = 1.6e9;   // FPGA -> NVMe (P2P), also host -> NVMe
  double uplink = 8.0e9;      // the host's shared PCIe link, all devices together
  double kernel_ddr = 19.2e9; // FPGA DDR4-2400 x64: the updater kernel is DDR-bound

  /// The SmartSSD figures of the Smart-Infinity paper's system (the defaults above).
  static LinkProfile SmartSsd() { return LinkProfile(); }
  nlohmann::json ToJson() const;
};

class LinkModel {
 public:
  LinkModel(const LinkProfile& p, unsigned devices);

  /// Books a transfer on `link` of `device` and returns its virtual end; advances *vc to it.
  double BookTransfer(unsigned device, Link link, uint64_t bytes, VirtualClock* vc);
  /// Books a kernel launch that streams `bytes` through the device's DDR.
  double BookKernel(unsigned device, uint64_t bytes, VirtualClock* vc);

  /// The latest virtual end of anything booked.
  double Horizon() const;
  /// Forgets all bookings (a new step starts at 0).
  void Reset();
  const LinkProfile& profile() const { return p_; }

 private:
  struct Resource {
    double free_at = 0.0;
  };
  double Book(std::initializer_list<Resource*> rs, double seconds, VirtualClock* vc);

  LinkProfile p_;
  mutable std::mutex mu_;
  std::vector<Resource> ssd_read_, ssd_write_, kernel_;
  Resource uplink_;
  double horizon_ = 0.0;
};

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_LINK_MODEL_H_
