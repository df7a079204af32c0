// The updater's RTL (the generated top csd_update around rtl/kernels/updater/csd_update_kernel.sv)
// run by Verilator behind the harness of
// emu/harness: seven AXI4 memory slaves over the caller's buffers (device address = host
// address), the AXI4-Lite control port and ap_ctrl_hs — a launch looks like a launch on a card:
// write arguments, start, wait for done, read status from memory.
#ifndef CSDKIT_EMU_RTL_KERNEL_H_
#define CSDKIT_EMU_RTL_KERNEL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/platform/update_launch.h"

namespace csdkit::emu {

/// Memory timing behind the m_axi bundles.
enum class RtlMemory {
  kIdeal,   // latency 1, no gaps
  kDdr,     // DDR-like latency (40-100 cycles per burst), no gaps
  kStress,  // random latency and valid/ready gaps on every channel (seeded)
};
RtlMemory ParseRtlMemory(const std::string& s);

/// Error-response injection (tests of the kernel's status lane 12): bursts of bundle gmem<bundle>
/// that touch [address, address + size) are answered with `resp` (2 SLVERR, 3 DECERR) instead
/// of OKAY (AxiMemSlave::AddErrorRange: such a read returns zeros, such a write is dropped).
struct RtlErrorRange {
  unsigned bundle;  // k of gmem<k> (0..6)
  uint64_t address;
  uint64_t size;
  uint8_t resp = 2;
};

struct RtlOptions {
  RtlMemory memory = RtlMemory::kStress;
  uint64_t seed = 1;          // memory timing and initial register values
  double gap = 0.2;           // kStress: probability of a gap per channel and cycle
  std::string trace;          // FST file ("" = none; also CSDKIT_TRACE)
  uint64_t trace_from = 0, trace_to = UINT64_MAX;
  uint64_t timeout_cycles = 2'000'000'000;
  std::vector<RtlErrorRange> error_ranges;  // none by default
};

/// One region of device memory the kernel may access.
struct RtlRegion {
  uint64_t address;  // device address (the host address of the buffer)
  uint64_t size;
  void* host;
  std::string name;
};

struct RtlLaunchStats {
  uint64_t cycles = 0;            // ap_start to ap_done
  double sim_seconds = 0;         // wall time of the simulation
  uint64_t read_bytes = 0, write_bytes = 0;  // over all bundles
  nlohmann::json bundles;         // per-bundle slave counters
};

/// Runs one launch of csd_update on the RTL. The policy of the build (the Verilated model with
/// FtzDaz = 0 or 1) is chosen from the mode word's ftz bit. `launch` gives every argument of
/// the table (buffers as device addresses), written to the control registers in table order.
/// Returns the cycles; the status word is in memory at the `status` address. Throws
/// SimError/std::runtime_error on a harness rule violation (a burst crossing 4 KiB, an access
/// outside every region, a timeout).
RtlLaunchStats RunRtlLaunch(const std::vector<RtlRegion>& regions,
                            const UpdateLaunch<uint64_t>& launch, const RtlOptions& o);

/// Pipeline latencies of the fp units the RTL is built from (cycles).
nlohmann::json RtlUnitLatencies();

/// True when this build has the Verilated RTL.
bool RtlAvailable();

}  // namespace csdkit::emu

#endif  // CSDKIT_EMU_RTL_KERNEL_H_
