// AxiLiteMaster: the host's side of a kernel's s_axi_control port — 32-bit register writes and
// reads, each blocking (it runs the simulation until the response), with seeded random gaps:
// AWVALID and WVALID raised independently after random delays (so AW may lead, follow or come
// with W), BREADY/RREADY held low at random. Every other component keeps running meanwhile.
//
//   AxiLiteMaster ctl(&sim, CSDKIT_AXIL_PORTS(dut.top(), s_axi_control));
//   ctl.Write(0x10, 0x1000);
//   uint32_t v = ctl.Read(0x00);
#ifndef CSDKIT_EMU_HARNESS_AXIL_MASTER_H_
#define CSDKIT_EMU_HARNESS_AXIL_MASTER_H_

#include <cstdint>
#include <random>

#include "csdkit/emu/harness/signal.h"
#include "csdkit/emu/harness/sim.h"

namespace csdkit {
namespace emu {

/// The ports of an AXI4-Lite slave (the Vitis s_axi_control signals; no AxPROT).
struct AxiLitePorts {
  Sig aw_valid, aw_ready, aw_addr;
  Sig w_valid, w_ready, w_data, w_strb;
  Sig b_valid, b_ready, b_resp;
  Sig ar_valid, ar_ready, ar_addr;
  Sig r_valid, r_ready, r_data, r_resp;
};

/// Binds `top`->`prefix`_AWVALID and so on (prefix: s_axi_control).
#define CSDKIT_AXIL_PORTS(top, prefix)                           \
  ([&]() {                                                       \
    ::csdkit::emu::AxiLitePorts p_;                              \
    p_.aw_valid = ::csdkit::emu::Sig((top)->prefix##_AWVALID);   \
    p_.aw_ready = ::csdkit::emu::Sig((top)->prefix##_AWREADY);   \
    p_.aw_addr = ::csdkit::emu::Sig((top)->prefix##_AWADDR);     \
    p_.w_valid = ::csdkit::emu::Sig((top)->prefix##_WVALID);     \
    p_.w_ready = ::csdkit::emu::Sig((top)->prefix##_WREADY);     \
    p_.w_data = ::csdkit::emu::Sig((top)->prefix##_WDATA);       \
    p_.w_strb = ::csdkit::emu::Sig((top)->prefix##_WSTRB);       \
    p_.b_valid = ::csdkit::emu::Sig((top)->prefix##_BVALID);     \
    p_.b_ready = ::csdkit::emu::Sig((top)->prefix##_BREADY);     \
    p_.b_resp = ::csdkit::emu::Sig((top)->prefix##_BRESP);       \
    p_.ar_valid = ::csdkit::emu::Sig((top)->prefix##_ARVALID);   \
    p_.ar_ready = ::csdkit::emu::Sig((top)->prefix##_ARREADY);   \
    p_.ar_addr = ::csdkit::emu::Sig((top)->prefix##_ARADDR);     \
    p_.r_valid = ::csdkit::emu::Sig((top)->prefix##_RVALID);     \
    p_.r_ready = ::csdkit::emu::Sig((top)->prefix##_RREADY);     \
    p_.r_data = ::csdkit::emu::Sig((top)->prefix##_RDATA);       \
    p_.r_resp = ::csdkit::emu::Sig((top)->prefix##_RRESP);       \
    return p_;                                                   \
  }())

struct AxiLiteOptions {
  uint64_t seed = 1;
  /// Probability per cycle that a valid is not yet raised / a ready is held low.
  double gap = 0.0;
  /// Cycles one access may take before it fails.
  uint64_t timeout_cycles = 10000;
};

class AxiLiteMaster : public Component {
 public:
  AxiLiteMaster(Sim* sim, const AxiLitePorts& ports,
                const AxiLiteOptions& options = AxiLiteOptions());
  ~AxiLiteMaster() override;
  AxiLiteMaster(const AxiLiteMaster&) = delete;
  AxiLiteMaster& operator=(const AxiLiteMaster&) = delete;

  /// Writes a register; returns BRESP (0 OKAY).
  uint8_t Write(uint32_t addr, uint32_t data, uint8_t strb = 0xf);
  /// Reads a register; stores RRESP in *resp when given.
  uint32_t Read(uint32_t addr, uint8_t* resp = nullptr);

  /// New gap/timeout options (the random stream restarts from the new seed).
  void SetOptions(const AxiLiteOptions& options) {
    options_ = options;
    rng_.seed(options.seed);
  }

  uint64_t writes() const { return writes_; }
  uint64_t reads() const { return reads_; }

  void Drive(uint64_t cycle) override;
  void Sample(uint64_t cycle) override;
  void Reset() override;

 private:
  bool Gap();

  Sim* sim_;
  AxiLitePorts ports_;
  AxiLiteOptions options_;
  std::mt19937_64 rng_;
  uint64_t writes_ = 0, reads_ = 0;

  // The access in progress.
  uint32_t addr_ = 0, data_ = 0;
  uint8_t strb_ = 0;
  bool aw_todo_ = false, w_todo_ = false, b_todo_ = false;  // write phases not yet done
  bool ar_todo_ = false, r_todo_ = false;                   // read phases not yet done
  bool aw_shown_ = false, w_shown_ = false, ar_shown_ = false;
  bool b_ready_ = false, r_ready_ = false;
  uint8_t resp_ = 0;
  uint32_t rdata_ = 0;
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_AXIL_MASTER_H_
