// xclbin files: structural validation, inspection through XRT, the check against the argument
// table, and the writer of the emulated SmartSSD's xclbin. See csdkit/platform/xclbin.h.
#include "csdkit/platform/xclbin.h"

#include <fcntl.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

// XRT: the axlf structures (xclbin.h) and the xclbin parser (xrt::xclbin, libxrt_coreutil).
#include <experimental/xrt_xclbin.h>
#include <xclbin.h>

#include "csdkit/hls/update_args.h"

#ifndef CSDKIT_VERSION
#define CSDKIT_VERSION "0.0.0"
#endif

namespace csdkit {

namespace {

using Kind = XclbinError::Kind;

// The sections whose contents XRT's parser dereferences (see ValidateSection).
constexpr uint32_t kConnectionArgLimit = 4096;  // no kernel has more arguments than this

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// Platform names compared without regard to case or the separators VBNV strings use.
std::string NormalizePlatform(const std::string& p) {
  std::string n = Lower(p);
  for (char& c : n) {
    if (c == ':' || c == '.' || c == '-') c = '_';
  }
  return n;
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// A fixed-size char field as a string; `terminated` tells whether a NUL was found in it.
std::string FixedString(const void* p, size_t n, bool* terminated) {
  const char* c = static_cast<const char*>(p);
  const size_t len = strnlen(c, n);
  if (terminated != nullptr) *terminated = len < n;
  return std::string(c, len);
}

const char* SectionKindName(uint32_t kind) {
  switch (kind) {
    case BITSTREAM:
      return "BITSTREAM";
    case CLEARING_BITSTREAM:
      return "CLEARING_BITSTREAM";
    case EMBEDDED_METADATA:
      return "EMBEDDED_METADATA";
    case FIRMWARE:
      return "FIRMWARE";
    case DEBUG_DATA:
      return "DEBUG_DATA";
    case SCHED_FIRMWARE:
      return "SCHED_FIRMWARE";
    case MEM_TOPOLOGY:
      return "MEM_TOPOLOGY";
    case CONNECTIVITY:
      return "CONNECTIVITY";
    case IP_LAYOUT:
      return "IP_LAYOUT";
    case DEBUG_IP_LAYOUT:
      return "DEBUG_IP_LAYOUT";
    case DESIGN_CHECK_POINT:
      return "DESIGN_CHECK_POINT";
    case CLOCK_FREQ_TOPOLOGY:
      return "CLOCK_FREQ_TOPOLOGY";
    case MCS:
      return "MCS";
    case BMC:
      return "BMC";
    case BUILD_METADATA:
      return "BUILD_METADATA";
    case KEYVALUE_METADATA:
      return "KEYVALUE_METADATA";
    case USER_METADATA:
      return "USER_METADATA";
    case DNA_CERTIFICATE:
      return "DNA_CERTIFICATE";
    case PDI:
      return "PDI";
    case BITSTREAM_PARTIAL_PDI:
      return "BITSTREAM_PARTIAL_PDI";
    case PARTITION_METADATA:
      return "PARTITION_METADATA";
    case EMULATION_DATA:
      return "EMULATION_DATA";
    case SYSTEM_METADATA:
      return "SYSTEM_METADATA";
    case SOFT_KERNEL:
      return "SOFT_KERNEL";
    case ASK_FLASH:
      return "ASK_FLASH";
    case AIE_METADATA:
      return "AIE_METADATA";
    case ASK_GROUP_TOPOLOGY:
      return "ASK_GROUP_TOPOLOGY";
    case ASK_GROUP_CONNECTIVITY:
      return "ASK_GROUP_CONNECTIVITY";
    case SMARTNIC:
      return "SMARTNIC";
    case AIE_RESOURCES:
      return "AIE_RESOURCES";
    case OVERLAY:
      return "OVERLAY";
    case VENDER_METADATA:
      return "VENDER_METADATA";
    default:
      return "UNKNOWN";
  }
}

const char* MemTypeName(unsigned t) {
  switch (t) {
    case MEM_DDR3:
      return "ddr3";
    case MEM_DDR4:
      return "ddr4";
    case MEM_DRAM:
      return "dram";
    case MEM_STREAMING:
      return "streaming";
    case MEM_PREALLOCATED_GLOB:
      return "preallocated_global";
    case MEM_ARE:
      return "aurora";
    case MEM_HBM:
      return "hbm";
    case MEM_BRAM:
      return "bram";
    case MEM_URAM:
      return "uram";
    case MEM_STREAMING_CONNECTION:
      return "streaming_connection";
    case MEM_HOST:
      return "host";
    case MEM_PS_KERNEL:
      return "ps_kernel";
    default:
      return "unknown";
  }
}

const char* ControlName(unsigned c) {
  switch (c) {
    case AP_CTRL_HS:
      return "ap_ctrl_hs";
    case AP_CTRL_CHAIN:
      return "ap_ctrl_chain";
    case AP_CTRL_NONE:
      return "ap_ctrl_none";
    case AP_CTRL_ME:
      return "ap_ctrl_me";
    case ACCEL_ADAPTER:
      return "accel_adapter";
    case FAST_ADAPTER:
      return "fast_adapter";
    default:
      return "unknown";
  }
}

std::vector<char> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw XclbinError(Kind::kIo, "cannot open xclbin '" + path + "': " + std::strerror(errno) +
                                     " (give the path of a .xclbin file)");
  }
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw XclbinError(Kind::kIo, "cannot read xclbin '" + path + "': " + std::strerror(errno));
  }
  return data;
}

// ---- Structural validation ------------------------------------------------------------------
//
// XRT's xclbin parser takes the header's section table at its word: it copies m_sectionSize
// bytes from m_sectionOffset, indexes the m_count entries of MEM_TOPOLOGY / IP_LAYOUT /
// CONNECTIVITY, and reads names as NUL-terminated strings. Everything it will dereference is
// checked here first, against the bytes actually present.

[[noreturn]] void Malformed(const std::string& path, const std::string& what) {
  throw XclbinError(Kind::kFormat, "'" + path + "' is not a usable xclbin: " + what);
}

struct SectionRef {
  uint32_t kind;
  std::string name;
  uint64_t offset;
  uint64_t size;
};

/// Entry counts of the sections that index each other, for the connectivity check.
struct Counts {
  int64_t mem = -1, group_mem = -1, ip = -1;
};

void ValidateSection(const std::string& path, const char* base, const SectionRef& s, Counts* n) {
  const char* p = base + s.offset;
  const std::string where = std::string(SectionKindName(s.kind)) + " section";
  auto need = [&](uint64_t bytes, const std::string& what) {
    if (s.size < bytes) {
      Malformed(path, where + " has " + std::to_string(s.size) + " bytes, " + what + " needs " +
                          std::to_string(bytes));
    }
  };
  switch (s.kind) {
    case MEM_TOPOLOGY:
    case ASK_GROUP_TOPOLOGY: {
      need(sizeof(int32_t), "its entry count");
      const int32_t count = Load<int32_t>(p);
      if (count < 0)
        Malformed(path, where + " has a negative entry count " + std::to_string(count));
      const uint64_t first = offsetof(mem_topology, m_mem_data);
      if (count > 0) {
        need(first + uint64_t(count) * sizeof(mem_data),
             std::to_string(count) + " mem_data entries");
      }
      for (int32_t i = 0; i < count; ++i) {
        bool term = false;
        FixedString(p + first + i * sizeof(mem_data) + offsetof(mem_data, m_tag),
                    sizeof(mem_data::m_tag), &term);
        if (!term) Malformed(path, where + " entry " + std::to_string(i) + ": tag not terminated");
      }
      (s.kind == MEM_TOPOLOGY ? n->mem : n->group_mem) = count;
      break;
    }
    case IP_LAYOUT: {
      need(sizeof(int32_t), "its entry count");
      const int32_t count = Load<int32_t>(p);
      if (count < 0)
        Malformed(path, where + " has a negative entry count " + std::to_string(count));
      const uint64_t first = offsetof(ip_layout, m_ip_data);
      if (count > 0) {
        need(first + uint64_t(count) * sizeof(ip_data), std::to_string(count) + " ip_data entries");
      }
      for (int32_t i = 0; i < count; ++i) {
        bool term = false;
        FixedString(p + first + i * sizeof(ip_data) + offsetof(ip_data, m_name),
                    sizeof(ip_data::m_name), &term);
        if (!term) Malformed(path, where + " entry " + std::to_string(i) + ": name not terminated");
      }
      n->ip = count;
      break;
    }
    case CLOCK_FREQ_TOPOLOGY: {
      need(sizeof(int16_t), "its entry count");
      const int16_t count = Load<int16_t>(p);
      if (count < 0)
        Malformed(path, where + " has a negative entry count " + std::to_string(count));
      need(offsetof(clock_freq_topology, m_clock_freq) + uint64_t(count) * sizeof(clock_freq),
           std::to_string(count) + " clock entries");
      break;
    }
    case EMBEDDED_METADATA:
      if (s.size == 0) Malformed(path, where + " is empty");
      break;
    default:
      break;
  }
}

void ValidateConnectivity(const std::string& path, const char* base, const SectionRef& s,
                          int64_t mems, int64_t ips) {
  const char* p = base + s.offset;
  const std::string where = std::string(SectionKindName(s.kind)) + " section";
  if (s.size < sizeof(int32_t)) Malformed(path, where + " is too short for its entry count");
  const int32_t count = Load<int32_t>(p);
  const uint64_t first = offsetof(connectivity, m_connection);
  if (count < 0 || (count > 0 && s.size < first + uint64_t(count) * sizeof(connection))) {
    Malformed(path, where + " declares " + std::to_string(count) + " connections in " +
                        std::to_string(s.size) + " bytes");
  }
  for (int32_t i = 0; i < count; ++i) {
    const connection c = Load<connection>(p + first + i * sizeof(connection));
    const std::string e = where + " entry " + std::to_string(i) + ": ";
    if (c.arg_index < 0 || uint32_t(c.arg_index) >= kConnectionArgLimit) {
      Malformed(path, e + "argument index " + std::to_string(c.arg_index) + " out of range");
    }
    if (c.mem_data_index < 0 || c.mem_data_index >= mems) {
      Malformed(path, e + "memory index " + std::to_string(c.mem_data_index) + " but the memory " +
                          "topology has " + std::to_string(std::max<int64_t>(mems, 0)) +
                          " entries");
    }
    if (c.m_ip_layout_index < 0 || c.m_ip_layout_index >= ips) {
      Malformed(path, e + "IP index " + std::to_string(c.m_ip_layout_index) +
                          " but IP_LAYOUT has " + std::to_string(std::max<int64_t>(ips, 0)) +
                          " entries");
    }
  }
}

/// Checks the container; returns its section table.
std::vector<SectionRef> ValidateAxlf(const std::string& path, const std::vector<char>& data) {
  const size_t size = data.size();
  static const char kMagic[8] = {'x', 'c', 'l', 'b', 'i', 'n', '2', '\0'};
  if (size < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    std::string head;
    for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) {
      char b[4];
      std::snprintf(b, sizeof b, "%02x ", static_cast<unsigned char>(data[i]));
      head += b;
    }
    if (!head.empty()) head.pop_back();
    throw XclbinError(Kind::kFormat,
                      "'" + path +
                          "' is not an xclbin: expected the magic \"xclbin2\\0\" "
                          "(78 63 6c 62 69 6e 32 00) in its first 8 bytes, found " +
                          (head.empty() ? std::string("an empty file") : head) +
                          " (give the .xclbin that v++ --link wrote, or `csdkit xclbin emu`'s)");
  }
  if (size < sizeof(axlf)) {
    Malformed(path, "truncated: " + std::to_string(size) + " bytes, but the axlf header alone is " +
                        std::to_string(sizeof(axlf)) + " (copy the file again)");
  }
  const axlf* top = reinterpret_cast<const axlf*>(data.data());
  const uint64_t length = top->m_header.m_length;
  if (length < sizeof(axlf)) {
    Malformed(path, "the header's length " + std::to_string(length) +
                        " is smaller than the header itself");
  }
  if (size < length) {
    Malformed(path, "truncated: the header says " + std::to_string(length) +
                        " bytes, the file has " + std::to_string(size) + " (copy or rebuild it)");
  }
  if (size > length && top->m_signature_length <= 0) {
    Malformed(path, "the header says " + std::to_string(length) + " bytes but the file has " +
                        std::to_string(size) + " and no signature: trailing data after the xclbin");
  }
  bool term = false;
  FixedString(top->m_header.m_platformVBNV, sizeof top->m_header.m_platformVBNV, &term);
  if (!term) Malformed(path, "the platform name (VBNV) in the header is not NUL-terminated");

  const uint32_t nsec = top->m_header.m_numSections;
  if (nsec > XCLBIN_MAX_NUM_SECTION) {
    Malformed(path, "the header declares " + std::to_string(nsec) + " sections (at most " +
                        std::to_string(XCLBIN_MAX_NUM_SECTION) + ")");
  }
  const uint64_t table_end =
      offsetof(axlf, m_sections) + uint64_t(nsec) * sizeof(axlf_section_header);
  if (table_end > length) {
    Malformed(path, "the table of " + std::to_string(nsec) + " section headers ends at byte " +
                        std::to_string(table_end) + ", past the end of the file (" +
                        std::to_string(length) + ")");
  }
  std::vector<SectionRef> secs;
  for (uint32_t i = 0; i < nsec; ++i) {
    const axlf_section_header& h = top->m_sections[i];
    SectionRef s{h.m_sectionKind, FixedString(h.m_sectionName, sizeof h.m_sectionName, nullptr),
                 h.m_sectionOffset, h.m_sectionSize};
    if (s.offset > length || s.size > length - s.offset) {
      Malformed(path, "section " + std::to_string(i) + " (" + SectionKindName(s.kind) +
                          ") spans bytes " + std::to_string(s.offset) + " + " +
                          std::to_string(s.size) + ", past the end of the file (" +
                          std::to_string(length) + "): truncated or corrupted");
    }
    secs.push_back(s);
  }
  // XRT uses the first section of each kind (SOFT_KERNEL excepted); validate what it will read.
  Counts counts;
  std::set<uint32_t> seen;
  for (const SectionRef& s : secs) {
    if (seen.insert(s.kind).second) ValidateSection(path, data.data(), s, &counts);
  }
  seen.clear();
  for (const SectionRef& s : secs) {
    if (!seen.insert(s.kind).second) continue;
    if (s.kind == CONNECTIVITY) {
      ValidateConnectivity(path, data.data(), s, counts.mem, counts.ip);
    } else if (s.kind == ASK_GROUP_CONNECTIVITY) {
      ValidateConnectivity(path, data.data(), s,
                           counts.group_mem >= 0 ? counts.group_mem : counts.mem, counts.ip);
    }
  }
  return secs;
}

// ---- Kernel XML (kernel.xml, EMBEDDED_METADATA) -----------------------------------------------
//
// XRT reads arguments from EMBEDDED_METADATA but does not expose their address qualifier, and
// kernel.xml has no XRT reader at all, so a small scanner reads the attributes of the <kernel>
// and <arg> elements. It handles what v++, package_xo and this file write: elements with
// quoted attributes, comments, the five predefined entities.

using Attrs = std::map<std::string, std::string>;

std::string XmlUnescape(const std::string& s) {
  static const std::pair<const char*, char> kEnt[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool done = false;
    if (s[i] == '&') {
      for (const auto& e : kEnt) {
        const size_t n = std::strlen(e.first);
        if (s.compare(i, n, e.first) == 0) {
          out += e.second;
          i += n;
          done = true;
          break;
        }
      }
    }
    if (!done) out += s[i++];
  }
  return out;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct XmlTag {
  std::string name;  // "kernel", "/kernel", "arg", ...
  Attrs attrs;
  size_t end;  // position after '>'
};

/// The next tag at or after `pos` (comments, declarations and processing instructions skipped);
/// false at the end of the text.
bool NextTag(const std::string& xml, size_t pos, XmlTag* tag) {
  while (true) {
    const size_t lt = xml.find('<', pos);
    if (lt == std::string::npos) return false;
    if (xml.compare(lt, 4, "<!--") == 0) {
      const size_t e = xml.find("-->", lt + 4);
      if (e == std::string::npos) return false;
      pos = e + 3;
      continue;
    }
    if (xml.compare(lt, 2, "<?") == 0 || xml.compare(lt, 2, "<!") == 0) {
      const size_t e = xml.find('>', lt);
      if (e == std::string::npos) return false;
      pos = e + 1;
      continue;
    }
    size_t i = lt + 1;
    size_t j = i;
    while (j < xml.size() && !std::isspace(static_cast<unsigned char>(xml[j])) && xml[j] != '>' &&
           !(xml[j] == '/' && j > i))
      ++j;
    tag->name = xml.substr(i, j - i);
    tag->attrs.clear();
    i = j;
    while (i < xml.size()) {
      while (i < xml.size() && std::isspace(static_cast<unsigned char>(xml[i]))) ++i;
      if (i >= xml.size()) return false;
      if (xml[i] == '>') {
        tag->end = i + 1;
        return true;
      }
      if (xml[i] == '/') {
        ++i;
        continue;
      }
      size_t k = i;
      while (k < xml.size() && xml[k] != '=' && xml[k] != '>' &&
             !std::isspace(static_cast<unsigned char>(xml[k])))
        ++k;
      const std::string key = xml.substr(i, k - i);
      while (k < xml.size() && std::isspace(static_cast<unsigned char>(xml[k]))) ++k;
      if (k >= xml.size() || xml[k] != '=') {  // attribute without value: skip it
        i = k;
        continue;
      }
      ++k;
      while (k < xml.size() && std::isspace(static_cast<unsigned char>(xml[k]))) ++k;
      if (k >= xml.size() || (xml[k] != '"' && xml[k] != '\'')) return false;
      const char q = xml[k];
      const size_t e = xml.find(q, k + 1);
      if (e == std::string::npos) return false;
      tag->attrs[key] = XmlUnescape(xml.substr(k + 1, e - k - 1));
      i = e + 1;
    }
    return false;
  }
}

bool ParseNumber(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *v = x;
  return true;
}

// ---- JSON helpers ---------------------------------------------------------------------------

const char* TargetName(xrt::xclbin::target_type t) {
  switch (t) {
    case xrt::xclbin::target_type::hw:
      return "hw";
    case xrt::xclbin::target_type::hw_emu:
      return "hw_emu";
    case xrt::xclbin::target_type::sw_emu:
      return "sw_emu";
  }
  return "unknown";
}

std::string ArgSummary(const KernelArg& a) {
  std::ostringstream o;
  o << a.name << " (" << (a.global ? "buffer" : "scalar") << ", port " << a.port << ", offset "
    << Hex(a.offset) << ", size " << a.size << ")";
  return o.str();
}

}  // namespace

// ---- Kernel signature -----------------------------------------------------------------------

KernelSignature KernelSignature::UpdateKernel() {
  // C types of the arguments, as the table spells them.
#define CSDKIT_ARG_CTYPE(i, nm, ty, kd, dr, bd, off, doc) #ty,
  static const char* const kTypes[] = {CSDKIT_UPDATE_ARGS(CSDKIT_ARG_CTYPE)};
#undef CSDKIT_ARG_CTYPE
  static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == hls::kNumUpdateArgs, "table size");
  KernelSignature s;
  s.name = hls::kUpdateKernelName;
  for (const hls::ArgInfo& a : hls::kUpdateArgs) {
    KernelArg k;
    k.index = a.index;
    k.name = a.name;
    k.global = a.kind == hls::ArgKind::kPtr;
    k.port = k.global ? std::string("m_axi_") + a.bundle : std::string("s_axi_control");
    k.offset = a.offset;
    k.size = a.bytes;
    k.host_type = kTypes[a.index];
    s.args.push_back(k);
  }
  return s;
}

std::vector<std::string> KernelSignature::MasterPorts() const {
  std::vector<std::string> ports;
  for (const KernelArg& a : args) {
    if (a.global && std::find(ports.begin(), ports.end(), a.port) == ports.end()) {
      ports.push_back(a.port);
    }
  }
  return ports;
}

KernelSignature ParseKernelXml(const std::string& xml, const std::string& kernel_name) {
  XmlTag t;
  size_t pos = 0;
  std::vector<std::string> names;
  while (NextTag(xml, pos, &t)) {
    pos = t.end;
    if (t.name != "kernel") continue;
    names.push_back(t.attrs["name"]);
    if (t.attrs["name"] != kernel_name) continue;
    KernelSignature sig;
    sig.name = kernel_name;
    sig.control_protocol = t.attrs.count("hwControlProtocol") ? t.attrs["hwControlProtocol"] : "";
    std::vector<KernelArg> args;
    while (NextTag(xml, pos, &t) && t.name != "/kernel") {
      pos = t.end;
      if (t.name != "arg") continue;
      KernelArg a;
      uint64_t id = 0, off = 0, sz = 0, aq = 0;
      const std::string nm = t.attrs["name"];
      if (nm.empty() || !ParseNumber(t.attrs["id"], &id) || !ParseNumber(t.attrs["offset"], &off) ||
          !ParseNumber(t.attrs["size"], &sz) || !ParseNumber(t.attrs["addressQualifier"], &aq)) {
        throw XclbinError(Kind::kFormat,
                          "kernel '" + kernel_name + "' metadata: an <arg> element ('" + nm +
                              "') lacks a numeric id, offset, size or addressQualifier");
      }
      a.index = static_cast<unsigned>(id);
      a.name = nm;
      a.global = aq == 1;
      a.port = t.attrs["port"];
      a.offset = static_cast<uint32_t>(off);
      a.size = static_cast<uint32_t>(sz);
      a.host_type = t.attrs["type"];
      args.push_back(a);
    }
    std::stable_sort(args.begin(), args.end(),
                     [](const KernelArg& x, const KernelArg& y) { return x.index < y.index; });
    sig.args = std::move(args);
    return sig;
  }
  std::string found;
  for (const std::string& n : names) found += (found.empty() ? "" : ", ") + n;
  throw XclbinError(Kind::kFormat, "no kernel '" + kernel_name +
                                       "' in the kernel metadata (found: " +
                                       (found.empty() ? std::string("none") : found) + ")");
}

std::vector<std::string> CompareSignatures(const KernelSignature& exp, const KernelSignature& got,
                                           bool check_ports) {
  std::vector<std::string> d;
  if (exp.name != got.name)
    d.push_back("kernel name: expected " + exp.name + ", found " + got.name);
  if (!got.control_protocol.empty() && exp.control_protocol != got.control_protocol) {
    d.push_back("control protocol: expected " + exp.control_protocol + ", found " +
                got.control_protocol);
  }
  if (exp.args.size() != got.args.size()) {
    d.push_back("argument count: expected " + std::to_string(exp.args.size()) + ", found " +
                std::to_string(got.args.size()));
  }
  const size_t n = std::max(exp.args.size(), got.args.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string at = "arg " + std::to_string(i) + ": ";
    if (i >= got.args.size()) {
      d.push_back(at + "expected " + ArgSummary(exp.args[i]) + ", missing");
      continue;
    }
    if (i >= exp.args.size()) {
      d.push_back(at + "unexpected " + ArgSummary(got.args[i]));
      continue;
    }
    const KernelArg& e = exp.args[i];
    const KernelArg& g = got.args[i];
    const bool same = e.name == g.name && e.global == g.global && e.offset == g.offset &&
                      e.size == g.size && g.index == i &&
                      (!check_ports || Lower(e.port) == Lower(g.port));
    if (!same) d.push_back(at + "expected " + ArgSummary(e) + ", found " + ArgSummary(g));
  }
  return d;
}

// ---- Inspect and check ----------------------------------------------------------------------

nlohmann::json InspectXclbin(const std::string& path) {
  const std::vector<char> data = ReadWholeFile(path);
  const std::vector<SectionRef> secs = ValidateAxlf(path, data);
  const axlf* top = reinterpret_cast<const axlf*>(data.data());

  nlohmann::json j;
  j["file"] = path;
  j["bytes"] = data.size();
  j["format_version"] = std::to_string(top->m_header.m_versionMajor) + "." +
                        std::to_string(top->m_header.m_versionMinor) + "." +
                        std::to_string(top->m_header.m_versionPatch);
  j["timestamp"] = top->m_header.m_timeStamp;
  nlohmann::json sj = nlohmann::json::array();
  std::string xml;
  for (const SectionRef& s : secs) {
    sj.push_back({{"kind", SectionKindName(s.kind)},
                  {"kind_id", s.kind},
                  {"name", s.name},
                  {"offset", s.offset},
                  {"bytes", s.size}});
    if (s.kind == EMBEDDED_METADATA && xml.empty()) {
      xml.assign(data.data() + s.offset, s.size);
      while (!xml.empty() && xml.back() == '\0') xml.pop_back();
    }
    if (s.kind == BUILD_METADATA && !j.contains("build_metadata")) {
      const nlohmann::json b = nlohmann::json::parse(
          data.data() + s.offset, data.data() + s.offset + s.size, nullptr, false);
      if (!b.is_discarded()) j["build_metadata"] = b;
    }
    if (s.kind == CLOCK_FREQ_TOPOLOGY && !j.contains("clocks")) {
      const char* p = data.data() + s.offset;
      const int16_t count = Load<int16_t>(p);
      nlohmann::json cj = nlohmann::json::array();
      for (int16_t i = 0; i < count; ++i) {
        const clock_freq c = Load<clock_freq>(p + offsetof(clock_freq_topology, m_clock_freq) +
                                              i * sizeof(clock_freq));
        cj.push_back({{"name", FixedString(c.m_name, sizeof c.m_name, nullptr)},
                      {"mhz", c.m_freq_Mhz},
                      {"type", c.m_type == CT_DATA     ? "data"
                               : c.m_type == CT_KERNEL ? "kernel"
                               : c.m_type == CT_SYSTEM ? "system"
                                                       : "unused"}});
      }
      j["clocks"] = cj;
    }
  }
  j["sections"] = sj;

  // Everything below is XRT's reading of the file.
  try {
    const xrt::xclbin xb(data);
    j["platform"] = xb.get_xsa_name();
    j["uuid"] = xb.get_uuid().to_string();
    j["target"] = TargetName(xb.get_target_type());
    j["fpga_device"] = xml.empty() ? std::string() : xb.get_fpga_device_name();

    nlohmann::json mj = nlohmann::json::array();
    std::map<int32_t, std::string> mem_tag;
    for (const xrt::xclbin::mem& m : xb.get_mems()) {
      mem_tag[m.get_index()] = m.get_tag();
      mj.push_back({{"index", m.get_index()},
                    {"tag", m.get_tag()},
                    {"type", MemTypeName(static_cast<unsigned>(m.get_type()))},
                    {"used", m.get_used()},
                    {"base_address", Hex(m.get_base_address())},
                    {"size_kb", m.get_size_kb()}});
    }
    j["memories"] = mj;

    nlohmann::json kj = nlohmann::json::array();
    nlohmann::json cxj = nlohmann::json::array();
    for (const xrt::xclbin::kernel& k : xb.get_kernels()) {
      const std::string kname = k.get_name();
      // Address qualifiers come from the same EMBEDDED_METADATA that XRT read.
      std::map<unsigned, bool> global;
      try {
        for (const KernelArg& a : ParseKernelXml(xml, kname).args) global[a.index] = a.global;
      } catch (const XclbinError&) {
      }
      nlohmann::json aj = nlohmann::json::array();
      std::map<size_t, std::string> arg_name;
      for (const xrt::xclbin::arg& a : k.get_args()) {
        const size_t idx = a.get_index();
        arg_name[idx] = a.get_name();
        nlohmann::json mems = nlohmann::json::array();
        for (const xrt::xclbin::mem& m : a.get_mems()) mems.push_back(m.get_tag());
        nlohmann::json one{{"index", idx},         {"name", a.get_name()},
                           {"port", a.get_port()}, {"offset", Hex(a.get_offset())},
                           {"size", a.get_size()}, {"host_type", a.get_host_type()},
                           {"memories", mems}};
        if (global.count(static_cast<unsigned>(idx))) {
          one["address_qualifier"] = global[static_cast<unsigned>(idx)] ? "global" : "scalar";
        }
        aj.push_back(one);
      }
      nlohmann::json cus = nlohmann::json::array();
      for (const xrt::xclbin::ip& cu : k.get_cus()) {
        const std::string cu_name = cu.get_name();
        cus.push_back({{"name", cu_name},
                       {"base_address", Hex(cu.get_base_address())},
                       {"address_range", Hex(cu.get_size())},
                       {"control", ControlName(static_cast<unsigned>(cu.get_control_type()))}});
        const std::vector<xrt::xclbin::arg> cu_args = cu.get_args();
        for (size_t i = 0; i < cu_args.size(); ++i) {
          if (!cu_args[i]) continue;
          for (const xrt::xclbin::mem& m : cu_args[i].get_mems()) {
            cxj.push_back({{"compute_unit", cu_name},
                           {"arg_index", i},
                           {"arg", arg_name.count(i) ? arg_name[i] : std::string()},
                           {"memory", m.get_tag()}});
          }
        }
      }
      kj.push_back({{"name", kname}, {"compute_units", cus}, {"args", aj}});
    }
    j["kernels"] = kj;
    j["connectivity"] = cxj;
  } catch (const XclbinError&) {
    throw;
  } catch (const std::exception& e) {
    throw XclbinError(Kind::kFormat, "'" + path + "': XRT cannot read its metadata: " + e.what());
  }
  return j;
}

nlohmann::json CheckXclbin(const std::string& path, const XclbinExpectation& expected) {
  const nlohmann::json j = InspectXclbin(path);
  std::vector<std::string> issues;
  const std::string platform = j.value("platform", "");
  if (!expected.platform.empty() &&
      NormalizePlatform(platform) != NormalizePlatform(expected.platform)) {
    issues.push_back("platform: expected " + expected.platform + ", found '" + platform +
                     "' (rebuild for this platform with flows/, or use the file built for it)");
  }
  const KernelSignature& exp = expected.kernel;
  const nlohmann::json* kernel = nullptr;
  std::string found_names;
  for (const nlohmann::json& k : j["kernels"]) {
    found_names += (found_names.empty() ? "" : ", ") + k["name"].get<std::string>();
    if (k["name"] == exp.name) kernel = &k;
  }
  if (kernel == nullptr) {
    issues.push_back("kernel: expected " + exp.name + ", found " +
                     (found_names.empty() ? std::string("no kernel") : found_names));
  } else {
    KernelSignature got;
    got.name = exp.name;
    got.control_protocol.clear();  // compared per compute unit below
    std::vector<std::string> unconnected;
    for (const nlohmann::json& a : (*kernel)["args"]) {
      KernelArg k;
      k.index = a["index"].get<unsigned>();
      k.name = a["name"].get<std::string>();
      k.port = a["port"].get<std::string>();
      k.offset = static_cast<uint32_t>(std::stoul(a["offset"].get<std::string>(), nullptr, 16));
      k.size = a["size"].get<uint32_t>();
      // Without an address qualifier, the table's own view of the argument is assumed.
      k.global = a.contains("address_qualifier")
                     ? a["address_qualifier"] == "global"
                     : (k.index < exp.args.size() && exp.args[k.index].global);
      if (k.global && a["memories"].empty()) unconnected.push_back(k.name);
      got.args.push_back(k);
    }
    for (const std::string& d : CompareSignatures(exp, got, expected.check_ports)) {
      issues.push_back(d);
    }
    const nlohmann::json& cus = (*kernel)["compute_units"];
    if (cus.empty()) {
      issues.push_back("compute units: expected at least one " + exp.name +
                       " instance in IP_LAYOUT, found none");
    }
    for (const nlohmann::json& cu : cus) {
      if (cu["control"] != exp.control_protocol) {
        issues.push_back("compute unit " + cu["name"].get<std::string>() + ": control protocol " +
                         "expected " + exp.control_protocol + ", found " +
                         cu["control"].get<std::string>());
      }
    }
    for (const std::string& a : unconnected) {
      issues.push_back("connectivity: buffer argument " + a + " is connected to no memory (link " +
                       "with sp=" + exp.name + "_1." + a + ":" + kSmartSsdMemoryBank + ")");
    }
  }
  if (!issues.empty()) {
    std::string msg =
        "xclbin '" + path + "' refused: it does not match what csdkit expects (" + exp.name +
        ", argument table hls/include/csdkit/hls/update_args.h" +
        (expected.platform.empty() ? std::string() : ", platform " + expected.platform) + "):";
    for (const std::string& i : issues) msg += "\n  - " + i;
    msg +=
        "\nRebuild the xclbin from this source tree (make -C flows hw, or csdkit xclbin emu for "
        "emulation), or run the csdkit version it was built for.";
    throw XclbinError(Kind::kMismatch, msg);
  }
  return j;
}

// ---- Writer ---------------------------------------------------------------------------------

namespace {

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

// ---- Flow inputs ----------------------------------------------------------------------------

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
