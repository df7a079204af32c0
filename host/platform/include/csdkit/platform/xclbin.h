// xclbin files: inspect, check before a load, and write the emulated SmartSSD's xclbin.
//
// An xclbin (Xilinx's "axlf" container) carries the FPGA image and the metadata the runtime needs
// to drive it: the platform it was built for, the kernels with their argument lists and register
// offsets, the compute units and which memory each argument is wired to. Reading goes through
// XRT's own parser (xrt::xclbin, Debian's libxrt_coreutil), after this file has checked the
// container's structure itself: XRT trusts the section offsets it reads, so a truncated or
// corrupted file would otherwise be read past its end.
//
// The expected kernel is derived from THE argument table (hls/include/csdkit/hls/update_args.h):
// the same description produces the emulated xclbin, the RTL kernel.xml and the v++ connectivity
// config (flows/tools/flow_files.h), so a card's xclbin and the emulation are checked by the same
// code against the same table.
#ifndef CSDKIT_XCLBIN_H_
#define CSDKIT_XCLBIN_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace csdkit {

/// Platform (VBNV / xsa name) of the Samsung SmartSSD shell the flows build for.
constexpr const char* kSmartSsdPlatform = "xilinx_u2_gen3x4_xdma_gc_2_202110_1";
/// Platform name written into the emulated SmartSSD's xclbin.
constexpr const char* kEmulatedSmartSsdPlatform = "csdkit_emulated_smartssd";
/// The SmartSSD shell's one DDR4 bank, as v++ connectivity and MEM_TOPOLOGY name it.
constexpr const char* kSmartSsdMemoryBank = "bank0";

/// Why an xclbin was refused. what() says what was expected, what was found, and what to do.
class XclbinError : public std::runtime_error {
 public:
  enum class Kind {
    kIo,        // the file cannot be read
    kFormat,    // not an xclbin, truncated, or structurally inconsistent
    kMismatch,  // a well-formed xclbin that does not match the expectation
  };
  XclbinError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// One kernel argument as xclbin metadata describes it.
struct KernelArg {
  unsigned index = 0;
  std::string name;
  bool global = false;    // addressQualifier 1 (a buffer pointer) or 0 (a scalar register)
  std::string port;       // Vitis interface: m_axi_<bundle> or s_axi_control (case-insensitive)
  uint32_t offset = 0;    // s_axilite byte offset of the (low) register
  uint32_t size = 0;      // register bytes: 8 for pointers, 4 for 32-bit scalars
  std::string host_type;  // C type (informational, not checked)
};

/// A kernel as an xclbin must present it: name, control protocol, arguments in order.
struct KernelSignature {
  std::string name;
  std::string control_protocol = "ap_ctrl_hs";
  std::vector<KernelArg> args;

  /// The updater kernel `csd_update`, from the argument table (update_args.h).
  static KernelSignature UpdateKernel();
  /// Distinct m_axi ports in first-use order (e.g. m_axi_gmem0 ... m_axi_gmem6).
  std::vector<std::string> MasterPorts() const;
};

/// Reads kernel `kernel_name` (name, hwControlProtocol, every <arg> in id order) from kernel
/// XML: an RTL kernel.xml or an xclbin's EMBEDDED_METADATA. Throws XclbinError (kFormat) when the
/// kernel is absent or an <arg> lacks its name, id, offset, size or addressQualifier.
KernelSignature ParseKernelXml(const std::string& xml, const std::string& kernel_name);

/// Every difference between two signatures, one line each ("arg 3: expected ..., found ...");
/// empty when they agree. Ports are compared case-insensitively, host types not at all.
std::vector<std::string> CompareSignatures(const KernelSignature& expected,
                                           const KernelSignature& found, bool check_ports);

/// What CheckXclbin requires of a file.
struct XclbinExpectation {
  KernelSignature kernel = KernelSignature::UpdateKernel();
  /// Required platform; empty accepts any. Compared after normalising case and the separators
  /// ':' '.' '-' to '_' ("xilinx:u2:gen3x4_xdma_gc_2:202110.1" equals kSmartSsdPlatform).
  std::string platform;
  /// Also compare each argument's interface port (m_axi bundle / s_axi_control).
  bool check_ports = true;
};

/// Reads an xclbin through XRT: platform (xsa name), uuid, target, sections, memories, kernels
/// with compute units and every argument (index, name, address qualifier, port, offset, size,
/// host type, memories), and the argument-to-memory connectivity of every compute unit.
/// Throws XclbinError (kIo, kFormat) for an unreadable, truncated or malformed file.
nlohmann::json InspectXclbin(const std::string& path);

/// Checks an xclbin before a load: well-formed (else kFormat), the expected kernel present with
/// exactly the expected arguments (names, order, offsets, sizes, address qualifiers and ports),
/// at least one ap_ctrl_hs compute unit, every buffer argument connected to a memory, and the
/// platform if one is required (else kMismatch). Every mismatch found is listed in the error.
/// Returns InspectXclbin's JSON on success.
nlohmann::json CheckXclbin(const std::string& path, const XclbinExpectation& expected = {});

/// What the emulated SmartSSD's xclbin describes.
struct EmulationXclbinOptions {
  KernelSignature kernel = KernelSignature::UpdateKernel();
  std::string platform = kEmulatedSmartSsdPlatform;
  std::string memory_tag = kSmartSsdMemoryBank;
  uint64_t memory_bytes = 4ull << 30;  // the SmartSSD's 4 GB DDR4
  std::string target = "sw_emu";       // header mode: sw_emu (model), hw_emu (RTL) or hw
  unsigned kernel_clock_mhz = 300;
  uint64_t cu_base_address = 0x1800000;
};

/// Writes a real xclbin (axlf header and the sections BUILD_METADATA, EMBEDDED_METADATA,
/// MEM_TOPOLOGY, IP_LAYOUT, CONNECTIVITY, CLOCK_FREQ_TOPOLOGY; no bitstream) describing the
/// emulated kernel, so emulation is loaded through the same CheckXclbin as a card. The uuid is
/// derived from the metadata (same description, same uuid). Throws XclbinError (kIo).
void WriteEmulationXclbin(const std::string& path, const EmulationXclbinOptions& options = {});

/// `s` with & < > " replaced by their entities, for an XML attribute value (the emulated
/// xclbin's metadata, the flows' kernel.xml).
std::string XmlEscape(const std::string& s);

}  // namespace csdkit

#endif  // CSDKIT_XCLBIN_H_
