// The xclbin (axlf) container: structural validation before XRT reads a file, and the small text
// helpers the xclbin sources share. See csdkit/platform/xclbin.h and xclbin_internal.h.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

// XRT: the axlf structures.
#include <xclbin.h>

#include "xclbin_internal.h"

namespace csdkit {
namespace xclbin_internal {

// ---- Text helpers ---------------------------------------------------------------------------

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

// ---- Fields of the axlf structures ----------------------------------------------------------

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

// ---- Structural validation ------------------------------------------------------------------
//
// XRT's xclbin parser takes the header's section table at its word: it copies m_sectionSize
// bytes from m_sectionOffset, indexes the m_count entries of MEM_TOPOLOGY / IP_LAYOUT /
// CONNECTIVITY, and reads names as NUL-terminated strings. Everything it will dereference is
// checked here first, against the bytes actually present.

namespace {

// The sections whose contents XRT's parser dereferences (see ValidateSection).
constexpr uint32_t kConnectionArgLimit = 4096;  // no kernel has more arguments than this

[[noreturn]] void Malformed(const std::string& path, const std::string& what) {
  throw XclbinError(Kind::kFormat, "'" + path + "' is not a usable xclbin: " + what);
}

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

}  // namespace

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

}  // namespace xclbin_internal
}  // namespace csdkit
