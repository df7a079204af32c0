// The writer of the emulated SmartSSD's xclbin (WriteEmulationXclbin): an axlf container with the
// metadata sections XRT reads and no bitstream. See csdkit/platform/xclbin.h.
#include <fcntl.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

// XRT: the axlf structures.
#include <xclbin.h>

#include "xclbin_internal.h"

#ifndef CSDKIT_VERSION
#define CSDKIT_VERSION "0.0.0"
#endif

namespace csdkit {

namespace {

using xclbin_internal::Hex;
using xclbin_internal::Kind;
using xclbin_internal::Upper;

/// EMBEDDED_METADATA in the layout v++ writes (project > platform > device > core > kernel),
/// the kernel's interfaces named as v++ names those of an HLS kernel.
std::string EmbeddedMetadataXml(const EmulationXclbinOptions& o) {
  const KernelSignature& k = o.kernel;
  const std::string cu = k.name + "_1";
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<project name=\"" << XmlEscape(k.name) << "\">\n"
    << "  <platform vendor=\"csdkit\" boardid=\"emulated_smartssd\" name=\""
    << XmlEscape(o.platform) << "\" featureRomTime=\"0\">\n"
    << "    <version major=\"1\" minor=\"0\"/>\n"
    << "    <description>csdkit emulated SmartSSD (host model of the kernel, no bitstream)"
       "</description>\n"
    << "    <device name=\"fpga0\" fpgaDevice=\"emulated:xcku15p\" addrWidth=\"64\">\n"
    << "      <core name=\"OCL_REGION_0\" target=\"" << XmlEscape(o.target)
    << "\" type=\"clc_region\" clockFreq=\"" << o.kernel_clock_mhz
    << "MHz\" numComputeUnits=\"1\">\n"
    << "        <kernel name=\"" << XmlEscape(k.name)
    << "\" language=\"c\" vlnv=\"csdkit:emulation:" << XmlEscape(k.name)
    << ":1.0\" preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" "
    << "debug=\"false\" interrupt=\"true\" hwControlProtocol=\"" << XmlEscape(k.control_protocol)
    << "\">\n";
  for (const std::string& p : k.MasterPorts()) {
    x << "          <port name=\"" << Upper(p) << "\" mode=\"master\" range=\"0xFFFFFFFFFFFFFFFF\" "
      << "dataWidth=\"512\" portType=\"addressable\" base=\"0x0\"/>\n";
  }
  x << "          <port name=\"S_AXI_CONTROL\" mode=\"slave\" range=\"0x1000\" dataWidth=\"32\" "
    << "portType=\"addressable\" base=\"0x0\"/>\n";
  for (const KernelArg& a : k.args) {
    x << "          <arg name=\"" << XmlEscape(a.name) << "\" addressQualifier=\""
      << (a.global ? 1 : 0) << "\" id=\"" << a.index << "\" port=\"" << Upper(a.port)
      << "\" size=\"" << Hex(a.size) << "\" offset=\"" << Hex(a.offset)
      << "\" hostOffset=\"0x0\" hostSize=\"" << Hex(a.size) << "\" type=\""
      << XmlEscape(a.host_type) << "\"/>\n";
  }
  x << "          <instance name=\"" << XmlEscape(cu) << "\">\n"
    << "            <addrRemap base=\"" << Hex(o.cu_base_address)
    << "\" range=\"0x10000\" port=\"S_AXI_CONTROL\"/>\n"
    << "          </instance>\n"
    << "        </kernel>\n";
  for (const std::string& p : k.MasterPorts()) {
    x << "        <connection srcType=\"kernel\" srcInst=\"" << XmlEscape(cu) << "\" srcPort=\""
      << Upper(p) << "\" dstType=\"core\" dstInst=\"OCL_REGION_0\" dstPort=\""
      << XmlEscape(o.memory_tag) << "\"/>\n";
  }
  x << "      </core>\n"
    << "    </device>\n"
    << "  </platform>\n"
    << "</project>\n";
  return x.str();
}

template <typename T>
void Append(std::vector<char>* v, const T& x) {
  const char* p = reinterpret_cast<const char*>(&x);
  v->insert(v->end(), p, p + sizeof x);
}

void CopyName(void* dst, size_t cap, const std::string& s, const char* what) {
  if (s.size() >= cap) {
    throw XclbinError(Kind::kIo, std::string(what) + " '" + s + "' is longer than " +
                                     std::to_string(cap - 1) + " characters");
  }
  std::memset(dst, 0, cap);
  std::memcpy(dst, s.data(), s.size());
}

std::vector<char> MemTopologySection(const EmulationXclbinOptions& o) {
  std::vector<char> v(offsetof(mem_topology, m_mem_data), '\0');
  const int32_t count = 1;
  std::memcpy(v.data(), &count, sizeof count);
  mem_data m;
  std::memset(&m, 0, sizeof m);
  m.m_type = MEM_DDR4;
  m.m_used = 1;
  m.m_size = o.memory_bytes / 1024;  // KB
  m.m_base_address = 0;
  CopyName(m.m_tag, sizeof m.m_tag, o.memory_tag, "memory tag");
  Append(&v, m);
  return v;
}

std::vector<char> IpLayoutSection(const EmulationXclbinOptions& o) {
  std::vector<char> v(offsetof(ip_layout, m_ip_data), '\0');
  const int32_t count = 1;
  std::memcpy(v.data(), &count, sizeof count);
  ip_data ip;
  std::memset(&ip, 0, sizeof ip);
  ip.m_type = IP_KERNEL;
  // Interrupt enabled, interrupt id 0, control protocol in bits [15:8].
  const uint32_t ctrl = o.kernel.control_protocol == "ap_ctrl_chain"  ? AP_CTRL_CHAIN
                        : o.kernel.control_protocol == "ap_ctrl_none" ? AP_CTRL_NONE
                                                                      : AP_CTRL_HS;
  ip.properties = IP_INT_ENABLE_MASK | (ctrl << IP_CONTROL_SHIFT);
  ip.m_base_address = o.cu_base_address;
  CopyName(ip.m_name, sizeof ip.m_name, o.kernel.name + ":" + o.kernel.name + "_1", "CU name");
  Append(&v, ip);
  return v;
}

std::vector<char> ConnectivitySection(const EmulationXclbinOptions& o) {
  std::vector<char> v(offsetof(connectivity, m_connection), '\0');
  int32_t count = 0;
  for (const KernelArg& a : o.kernel.args) {
    if (!a.global) continue;
    connection c{static_cast<int32_t>(a.index), 0, 0};
    Append(&v, c);
    ++count;
  }
  std::memcpy(v.data(), &count, sizeof count);
  return v;
}

std::vector<char> ClockSection(const EmulationXclbinOptions& o) {
  std::vector<char> v(offsetof(clock_freq_topology, m_clock_freq), '\0');
  const int16_t count = 1;
  std::memcpy(v.data(), &count, sizeof count);
  clock_freq c;
  std::memset(&c, 0, sizeof c);
  c.m_freq_Mhz = static_cast<uint16_t>(o.kernel_clock_mhz);
  c.m_type = CT_DATA;
  CopyName(c.m_name, sizeof c.m_name, "DATA_CLK", "clock name");
  Append(&v, c);
  return v;
}

std::vector<char> BuildMetadataSection(const EmulationXclbinOptions& o) {
  const nlohmann::json j{
      {"build_metadata",
       {{"xclbin",
         {{"generated_by",
           {{"name", "csdkit"}, {"version", CSDKIT_VERSION}, {"cl", "csdkit xclbin emu"}}},
          {"target", o.target},
          {"emulation", true},
          {"kernels", {o.kernel.name}},
          {"argument_table", "hls/include/csdkit/hls/update_args.h"}}},
        {"dsa",
         {{"name", o.platform},
          {"vendor", "csdkit"},
          {"board_id", "emulated_smartssd"},
          {"description", "emulated Samsung SmartSSD (KU15P, 4 GB DDR4, NVMe)"}}}}}};
  const std::string s = j.dump(2);
  return std::vector<char>(s.begin(), s.end());
}

uint16_t ModeFor(const std::string& target) {
  if (target == "sw_emu") return XCLBIN_SW_EMU;
  if (target == "hw_emu") return XCLBIN_HW_EMU;
  if (target == "hw") return XCLBIN_FLAT;
  throw XclbinError(Kind::kIo, "xclbin target '" + target + "': expected sw_emu, hw_emu or hw");
}

void WriteFileAtomically(const std::string& path, const std::vector<char>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw XclbinError(Kind::kIo, "cannot create '" + tmp + "': " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw XclbinError(Kind::kIo, "cannot write '" + tmp + "': " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw XclbinError(Kind::kIo, "cannot write '" + tmp + "': " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw XclbinError(Kind::kIo,
                      "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(e));
  }
}

}  // namespace

void WriteEmulationXclbin(const std::string& path, const EmulationXclbinOptions& o) {
  if (o.kernel_clock_mhz == 0 || o.kernel_clock_mhz > 0xffff) {
    throw XclbinError(Kind::kIo, "kernel clock " + std::to_string(o.kernel_clock_mhz) +
                                     " MHz: expected 1..65535");
  }
  const std::string xml = EmbeddedMetadataXml(o);
  struct Section {
    uint32_t kind;
    const char* name;
    std::vector<char> data;
  };
  std::vector<Section> secs;
  secs.push_back({BUILD_METADATA, "build_metadata", BuildMetadataSection(o)});
  secs.push_back({EMBEDDED_METADATA, "metadata", std::vector<char>(xml.begin(), xml.end())});
  secs.push_back({MEM_TOPOLOGY, "mem_topology", MemTopologySection(o)});
  secs.push_back({IP_LAYOUT, "ip_layout", IpLayoutSection(o)});
  secs.push_back({CONNECTIVITY, "connectivity", ConnectivitySection(o)});
  secs.push_back({CLOCK_FREQ_TOPOLOGY, "clock_freq", ClockSection(o)});

  const size_t header = offsetof(axlf, m_sections) + secs.size() * sizeof(axlf_section_header);
  auto align8 = [](size_t x) { return (x + 7) & ~size_t{7}; };
  std::vector<uint64_t> offsets;
  size_t total = align8(header);
  for (const Section& s : secs) {
    offsets.push_back(total);
    total = align8(total + s.data.size());
  }
  std::vector<char> out(total, '\0');

  axlf top;
  std::memset(&top, 0, sizeof top);
  std::memcpy(top.m_magic, "xclbin2", 8);
  top.m_signature_length = -1;
  std::memset(top.reserved, 0xff, sizeof top.reserved);
  std::memset(top.m_keyBlock, 0xff, sizeof top.m_keyBlock);
  top.m_header.m_length = total;
  top.m_header.m_timeStamp = static_cast<uint64_t>(std::time(nullptr));
  top.m_header.m_versionMajor = 2;  // the "xclbin2" container
  top.m_header.m_mode = ModeFor(o.target);
  CopyName(top.m_header.m_platformVBNV, sizeof top.m_header.m_platformVBNV, o.platform,
           "platform name");
  // A name-based (SHA-1) uuid of everything the file describes: the same description always
  // gets the same uuid, a different one (another table, platform or memory) another.
  {
    static const uuid_t kNamespace = {0x6c, 0x1e, 0x4a, 0x3d, 0x9b, 0x52, 0x4f, 0x0e,
                                      0xa1, 0x7c, 0x2d, 0x85, 0x30, 0xc4, 0x5e, 0x91};
    std::string name = xml;
    for (const Section& s : secs) {
      if (s.kind != BUILD_METADATA && s.kind != EMBEDDED_METADATA)
        name.append(s.data.begin(), s.data.end());
    }
    uuid_t u;
    uuid_generate_sha1(u, kNamespace, name.data(), name.size());
    std::memcpy(top.m_header.uuid, u, sizeof u);
    std::memcpy(&top.m_uniqueId, u, sizeof top.m_uniqueId);
  }
  top.m_header.m_numSections = static_cast<uint32_t>(secs.size());
  std::memcpy(out.data(), &top, offsetof(axlf, m_sections));
  for (size_t i = 0; i < secs.size(); ++i) {
    axlf_section_header h;
    std::memset(&h, 0, sizeof h);
    h.m_sectionKind = secs[i].kind;
    CopyName(h.m_sectionName, sizeof h.m_sectionName, secs[i].name, "section name");
    h.m_sectionOffset = offsets[i];
    h.m_sectionSize = secs[i].data.size();
    std::memcpy(out.data() + offsetof(axlf, m_sections) + i * sizeof h, &h, sizeof h);
    std::memcpy(out.data() + offsets[i], secs[i].data.data(), secs[i].data.size());
  }
  WriteFileAtomically(path, out);
}

}  // namespace csdkit
