// A bandwidth model of a SmartSSD system in virtual time, so that a run on emulated devices can
// report what its schedule would take on the cards, and a run on null devices can plan one.
//
// Resources: per device, the SSD's read channel, its write channel (one channel for both when
// the profile says reads and writes share the flash: ssd_shared_channel) and the FPGA kernel
// (bounded by its DDR bandwidth); shared by all devices, the host's PCIe uplink, one resource
// per direction (PCIe is full duplex: host -> devices carries gradients and the baseline's
// write-backs, devices -> host the weights and the baseline's state reads). An operation holds
// each resource on its path for bytes / (that resource's bandwidth) seconds and ends when the
// slowest of them is done: a baseline read from one SSD at 3 GB/s holds an 8 GB/s uplink for
// only 3/8 of its time, so several SSDs share the uplink up to its bandwidth, as on a PCIe
// switch. Host computation (the baseline's CPU update) occupies only its worker, for
// bytes / host_update seconds.
//
// RECORD, THEN SCHEDULE. The runtime's workers are threads, and the order in which threads
// reach a shared resource in real time changes from run to run. So the model does not book an
// operation when it is issued: it appends it to its worker's list (VirtualClock::worker; the
// worker's own order is its program order, the same on every run). When the window's time is
// asked for (Horizon), it runs a discrete-event schedule of all lists: repeatedly the worker
// whose clock is earliest (ties: the lower worker number) starts its next operation when it and
// every resource on its path are free, first come first served. The result depends only on
// what each worker issued, never on thread timing: a step is planned to the same virtual
// seconds on every run, and on null devices exactly as on emulated ones. Operations issued
// without a clock (a dump's read-backs, a one-off launch) are outside every worker's schedule:
// their bytes are counted by the device, but they take no virtual time.
#ifndef CSDKIT_EMU_LINK_MODEL_H_
#define CSDKIT_EMU_LINK_MODEL_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "csdkit/platform/device.h"

namespace csdkit::emu {

/// Bandwidths in bytes per second.
struct LinkProfile {
  double ssd_read = 3.0e9;    // NVMe -> FPGA (P2P), also NVMe -> host
  double ssd_write = 1.6e9;   // FPGA -> NVMe (P2P), also host -> NVMe
  double uplink = 8.0e9;      // the host's shared PCIe link, each direction, all devices together
  double kernel_ddr = 19.2e9; // FPGA DDR4-2400 x64: the updater kernel is DDR-bound
  /// The baseline's CPU update, per host thread: bytes of the launch's memory traffic
  /// (LaunchMemoryTraffic) per second. An assumption of the profile, not a measurement: about
  /// 140 M AdamW elements per second per core (28 bytes each with fp16 gradients and copy).
  double host_update = 4.0e9;
  /// Whether an SSD's reads and writes share one channel (flash that cannot read and write at
  /// full speed at once): then a device's reads and writes queue on one resource.
  bool ssd_shared_channel = false;

  /// The SmartSSD figures of the Smart-Infinity paper's system (the defaults above).
  static LinkProfile SmartSsd() { return LinkProfile(); }
  nlohmann::json ToJson() const;
};

class LinkModel {
 public:
  LinkModel(const LinkProfile& p, unsigned devices);

  /// Transfers are recorded in chunks of this size (see BookTransfer).
  static constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  /// Records a transfer on `link` of `device` for the clock's worker (nothing without a clock),
  /// as operations of at most kChunkBytes each: concurrent transfers of several workers then
  /// take turns on a shared resource, as an I/O engine's requests do.
  void BookTransfer(unsigned device, Link link, uint64_t bytes, VirtualClock* vc);
  /// Records a kernel launch that streams `bytes` through the device's DDR.
  void BookKernel(unsigned device, uint64_t bytes, VirtualClock* vc);
  /// Records host computation that streams `bytes` through host memory (one host thread).
  void BookHost(uint64_t bytes, VirtualClock* vc);

  /// The virtual end of the last operation of the window's schedule (see RECORD, THEN
  /// SCHEDULE); 0 when nothing was recorded.
  double Horizon() const;
  /// Operations recorded in the window (for tests and reports).
  uint64_t Operations() const;
  /// Forgets the window's operations (a new step starts at 0).
  void Reset();
  const LinkProfile& profile() const { return p_; }

 private:
  // One operation of a worker: up to two resources (index into free_at of the schedule), each
  // held for its own time from the common start; the operation lasts `seconds` (at least the
  // longest hold) and starts after `delay` seconds of the worker's own time
  // (VirtualClock::now).
  struct Op {
    uint32_t res[2];
    double hold[2];
    uint8_t nres;
    double seconds;
    double delay;
  };
  struct Hold {
    uint32_t res;
    double seconds;
  };
  uint32_t SsdRead(unsigned d) const { return 3 * d; }
  uint32_t SsdWrite(unsigned d) const { return p_.ssd_shared_channel ? 3 * d : 3 * d + 1; }
  uint32_t Kernel(unsigned d) const { return 3 * d + 2; }
  uint32_t UplinkDown() const { return 3 * devices_; }
  uint32_t UplinkUp() const { return 3 * devices_ + 1; }
  void Record(VirtualClock* vc, std::initializer_list<Hold> holds, double seconds = 0.0);

  LinkProfile p_;
  unsigned devices_;
  mutable std::mutex mu_;
  std::map<unsigned, std::vector<Op>> ops_;  // per worker, in its issue order
  uint64_t count_ = 0;
};

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_LINK_MODEL_H_
