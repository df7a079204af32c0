// The Vitis flow inputs that follow from a kernel signature (KernelSignature::UpdateKernel(), i.e.
// the argument table hls/include/csdkit/hls/update_args.h): the RTL kernel description, the v++
// link config and the interface list of the packaging script. csdkit_gen_flow_files writes them
// into flows/generated/ (flows/README.md).
#ifndef CSDKIT_FLOWS_FLOW_FILES_H_
#define CSDKIT_FLOWS_FLOW_FILES_H_

#include <string>

#include "csdkit/platform/xclbin.h"

namespace csdkit {

/// IP VLNV of the packaged RTL kernel (kernel.xml and package_xo.tcl must agree on it).
constexpr const char* kRtlKernelVendor = "csdkit.org";
constexpr const char* kRtlKernelLibrary = "kernel";
constexpr const char* kRtlKernelVersion = "1.0";

/// The RTL kernel description (kernel.xml) that Vivado's package_xo takes for `sig`.
std::string RtlKernelXml(const KernelSignature& sig);
/// The v++ link config: one compute unit `<kernel>_1`, every buffer argument on `bank`.
std::string ConnectivityConfig(const KernelSignature& sig, const std::string& bank);
/// Tcl variables for flows/rtl/package_xo.tcl: kernel name, VLNV parts and interface names.
std::string PackagingPortsTcl(const KernelSignature& sig);

}  // namespace csdkit

#endif  // CSDKIT_FLOWS_FLOW_FILES_H_
