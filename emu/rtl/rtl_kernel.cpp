#include "csdkit/emu/rtl_kernel.h"

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "Vcsd_update_ftz.h"
#include "Vcsd_update_ftz_csd_update.h"
#include "Vcsd_update_ieee.h"
#include "Vcsd_update_ieee_csd_update.h"
#include "csdkit/emu/harness/ap_ctrl.h"
#include "csdkit/emu/harness/axi_mem_slave.h"
#include "csdkit/emu/harness/axil_master.h"
#include "csdkit/emu/harness/verilated_dut.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/update_args.h"

namespace csdkit::emu {

namespace {

template <typename Top>
RtlLaunchStats Run(const std::vector<RtlRegion>& regions, const UpdateLaunch<uint64_t>& launch,
                   const RtlOptions& o) {
  SimOptions so;
  so.timeout_cycles = o.timeout_cycles;
  so.trace_path = o.trace;
  so.trace_from = o.trace_from;
  so.trace_to = o.trace_to;
  so.ApplyEnvironment();
  VerilatedDut<Top> dut(o.seed);
  Sim sim(&dut, so);
  MemoryMap mem;
  for (const RtlRegion& r : regions) mem.Map(r.address, r.size, r.host, r.name);
  AxiSlaveOptions opt = AxiSlaveOptions::Ideal();
  if (o.memory == RtlMemory::kDdr) opt = AxiSlaveOptions::Ddr(o.seed);
  if (o.memory == RtlMemory::kStress) opt = AxiSlaveOptions::Stress(o.seed, o.gap);
  AxiMemSlave g0(&sim, "gmem0", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem0), &mem, opt);
  AxiMemSlave g1(&sim, "gmem1", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem1), &mem, opt);
  AxiMemSlave g2(&sim, "gmem2", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem2), &mem, opt);
  AxiMemSlave g3(&sim, "gmem3", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem3), &mem, opt);
  AxiMemSlave g4(&sim, "gmem4", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem4), &mem, opt);
  AxiMemSlave g5(&sim, "gmem5", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem5), &mem, opt);
  AxiMemSlave g6(&sim, "gmem6", CSDKIT_AXI_PORTS(dut.top(), m_axi_gmem6), &mem, opt);
  AxiMemSlave* const slaves[] = {&g0, &g1, &g2, &g3, &g4, &g5, &g6};
  for (const RtlErrorRange& e : o.error_ranges) {
    if (e.bundle >= 7) {
      throw std::invalid_argument("RtlOptions::error_ranges: bundle gmem" +
                                  std::to_string(e.bundle) + " does not exist (gmem0..gmem6)");
    }
    slaves[e.bundle]->AddErrorRange(e.address, e.size, e.resp);
  }
  AxiLiteMaster axil(&sim, CSDKIT_AXIL_PORTS(dut.top(), s_axi_control));
  ApCtrl ctl(&sim, &axil, hls::kUpdateArgs, InterruptSig(dut.top()));
  const auto t0 = std::chrono::steady_clock::now();
  sim.Reset();
  RtlLaunchStats st;
  launch.ForEachArg([&](const hls::ArgInfo& a, uint64_t value) { ctl.SetArg(a, value); });
  ctl.Start();
  st.cycles = ctl.WaitDone(ApCtrl::Wait::kPoll, o.timeout_cycles);
  st.sim_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.bundles = nlohmann::json::object();
  for (AxiMemSlave* s : {&g0, &g1, &g2, &g3, &g4, &g5, &g6}) {
    const AxiCounters& c = s->counters();
    st.read_bytes += c.rd_bytes;
    st.write_bytes += c.wr_bytes;
    st.bundles[s->name()] = {{"read_bytes", c.rd_bytes},   {"write_bytes", c.wr_bytes},
                             {"read_beats", c.rd_beats},   {"write_beats", c.wr_beats},
                             {"read_bursts", c.rd_bursts}, {"write_bursts", c.wr_bursts}};
  }
  return st;
}

}  // namespace

RtlLaunchStats RunRtlLaunch(const std::vector<RtlRegion>& regions,
                            const UpdateLaunch<uint64_t>& launch, const RtlOptions& o) {
  return (launch.mode & hls::kModeFtz) ? Run<Vcsd_update_ftz>(regions, launch, o)
                                       : Run<Vcsd_update_ieee>(regions, launch, o);
}

nlohmann::json RtlUnitLatencies() {
  using T = Vcsd_update_ieee_csd_update;
  return {{"add", T::AddLatency},   {"mul", T::MulLatency},   {"div", T::DivLatency},
          {"sqrt", T::SqrtLatency}, {"sign", T::SignLatency}, {"convert", T::CvtLatency}};
}

bool RtlAvailable() { return true; }

}  // namespace csdkit::emu
