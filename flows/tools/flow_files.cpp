// The Vitis flow inputs generated from a kernel signature. See flow_files.h.
#include "flow_files.h"

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

namespace csdkit {

namespace {

// Hex numbers and escaped attribute values spelt as the xclbin library spells them in the emulated
// xclbin's metadata (its helpers are private to host/platform/src).
std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

std::string RtlKernelXml(const KernelSignature& k) {
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<!-- RTL kernel description of " << XmlEscape(k.name) << " for package_xo.\n"
    << "     GENERATED from hls/include/csdkit/hls/update_args.h by csdkit_gen_flow_files;\n"
    << "     do not edit (flows/README.md). -->\n"
    << "<root versionMajor=\"1\" versionMinor=\"6\">\n"
    << "  <kernel name=\"" << XmlEscape(k.name) << "\" language=\"ip_c\" vlnv=\""
    << kRtlKernelVendor << ":" << kRtlKernelLibrary << ":" << XmlEscape(k.name) << ":"
    << kRtlKernelVersion
    << "\" attributes=\"\" preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" "
    << "interrupt=\"true\" hwControlProtocol=\"" << XmlEscape(k.control_protocol) << "\">\n"
    << "    <ports>\n"
    << "      <port name=\"s_axi_control\" mode=\"slave\" range=\"0x1000\" dataWidth=\"32\" "
    << "portType=\"addressable\" base=\"0x0\"/>\n";
  for (const std::string& p : k.MasterPorts()) {
    x << "      <port name=\"" << p << "\" mode=\"master\" range=\"0xFFFFFFFFFFFFFFFF\" "
      << "dataWidth=\"512\" portType=\"addressable\" base=\"0x0\"/>\n";
  }
  x << "    </ports>\n"
    << "    <args>\n";
  for (const KernelArg& a : k.args) {
    char off[16];
    std::snprintf(off, sizeof off, "0x%03x", a.offset);
    // Host types as Vitis' RTL kernel descriptions spell them (the table's Word means nothing
    // outside this project): an untyped buffer pointer, an unsigned 32-bit scalar.
    const char* type = a.global ? "void*" : a.size == 4 ? "uint" : "ulong";
    x << "      <arg name=\"" << XmlEscape(a.name) << "\" addressQualifier=\"" << (a.global ? 1 : 0)
      << "\" id=\"" << a.index << "\" port=\"" << a.port << "\" size=\"" << Hex(a.size)
      << "\" offset=\"" << off << "\" type=\"" << type << "\" hostOffset=\"0x0\" hostSize=\""
      << Hex(a.size) << "\"/>\n";
  }
  x << "    </args>\n"
    << "  </kernel>\n"
    << "</root>\n";
  return x.str();
}

std::string ConnectivityConfig(const KernelSignature& k, const std::string& bank) {
  const std::string cu = k.name + "_1";
  std::ostringstream c;
  c << "# v++ --link configuration of " << k.name << ": one compute unit, every buffer argument\n"
    << "# on the SmartSSD's DDR bank. GENERATED from hls/include/csdkit/hls/update_args.h by\n"
    << "# csdkit_gen_flow_files; do not edit (flows/README.md).\n"
    << "[connectivity]\n"
    << "nk=" << k.name << ":1:" << cu << "\n";
  for (const KernelArg& a : k.args) {
    if (a.global) c << "sp=" << cu << "." << a.name << ":" << bank << "\n";
  }
  return c.str();
}

std::string PackagingPortsTcl(const KernelSignature& k) {
  std::ostringstream t;
  t << "# Interfaces of the RTL kernel " << k.name << ", sourced by flows/rtl/package_xo.tcl.\n"
    << "# GENERATED from hls/include/csdkit/hls/update_args.h by csdkit_gen_flow_files;\n"
    << "# do not edit (flows/README.md).\n"
    << "set csd_kernel_name " << k.name << "\n"
    << "set csd_kernel_vendor " << kRtlKernelVendor << "\n"
    << "set csd_kernel_library " << kRtlKernelLibrary << "\n"
    << "set csd_kernel_version " << kRtlKernelVersion << "\n"
    << "set csd_control_port s_axi_control\n"
    << "set csd_master_ports [list";
  for (const std::string& p : k.MasterPorts()) t << " " << p;
  t << "]\n";
  return t.str();
}

}  // namespace csdkit
