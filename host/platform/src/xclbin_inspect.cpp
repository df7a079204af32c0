// Reading an xclbin through XRT (InspectXclbin) and checking it against the argument table before
// a load (CheckXclbin). See csdkit/platform/xclbin.h.
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

// XRT: the axlf structures (xclbin.h) and the xclbin parser (xrt::xclbin, libxrt_coreutil).
#include <experimental/xrt_xclbin.h>
#include <xclbin.h>

#include "csdkit/platform/json_file.h"
#include "xclbin_internal.h"

namespace csdkit {

namespace {

using xclbin_internal::FixedString;
using xclbin_internal::Hex;
using xclbin_internal::Kind;
using xclbin_internal::Load;
using xclbin_internal::Lower;
using xclbin_internal::SectionKindName;
using xclbin_internal::SectionRef;
using xclbin_internal::ValidateAxlf;

/// Platform names compared without regard to case or the separators VBNV strings use.
std::string NormalizePlatform(const std::string& p) {
  std::string n = Lower(p);
  for (char& c : n) {
    if (c == ':' || c == '.' || c == '-') c = '_';
  }
  return n;
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

// Reads an xclbin whole, after checking what it is: a regular file (not a directory or a device
// such as /dev/zero, which would be read without end), no larger than 4 GiB (the format's
// lengths are 64-bit but no device's xclbin comes near), starting with the xclbin2 magic; only
// then is memory for all of it allocated.
std::vector<char> ReadWholeFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw XclbinError(Kind::kIo, "cannot open xclbin '" + path + "': " + std::strerror(errno) +
                                     " (give the path of a .xclbin file)");
  }
  if (!S_ISREG(st.st_mode)) {
    throw XclbinError(Kind::kIo, "xclbin '" + path + "': expected a regular file, found " +
                                     (S_ISDIR(st.st_mode) ? "a directory" : "a special file") +
                                     " (give the path of a .xclbin file)");
  }
  constexpr uint64_t kMaxBytes = uint64_t{4} << 30;
  if (static_cast<uint64_t>(st.st_size) > kMaxBytes) {
    throw XclbinError(Kind::kFormat, "xclbin '" + path + "': expected at most 4 GiB, found " +
                                         std::to_string(st.st_size) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw XclbinError(Kind::kIo, "cannot open xclbin '" + path + "': " + std::strerror(errno) +
                                     " (give the path of a .xclbin file)");
  }
  static const char kMagic[8] = {'x', 'c', 'l', 'b', 'i', 'n', '2', '\0'};
  char head[sizeof kMagic] = {};
  in.read(head, sizeof head);
  if (in.gcount() != static_cast<std::streamsize>(sizeof head) ||
      std::memcmp(head, kMagic, sizeof kMagic) != 0) {
    throw XclbinError(Kind::kFormat, "file '" + path + "' is not an xclbin: expected the magic "
                                     "\"xclbin2\\0\" in its first 8 bytes, found something else");
  }
  std::vector<char> data(static_cast<size_t>(st.st_size));
  in.seekg(0);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (in.gcount() != static_cast<std::streamsize>(data.size())) {
    throw XclbinError(Kind::kIo, "cannot read xclbin '" + path + "': expected " +
                                     std::to_string(data.size()) + " bytes, read " +
                                     std::to_string(in.gcount()));
  }
  return data;
}

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

}  // namespace

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
      // Shown when it is JSON nested at most kMaxJsonDepth deep, left out otherwise.
      try {
        j["build_metadata"] = ParseJsonBounded(data.data() + s.offset,
                                               data.data() + s.offset + s.size, "build metadata");
      } catch (const JsonFileError&) {
      }
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

}  // namespace csdkit
