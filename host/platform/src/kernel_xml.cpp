// Kernel XML (an RTL kernel.xml, an xclbin's EMBEDDED_METADATA) and kernel signatures: the
// expected signature from the argument table, the reader of <kernel> and <arg> elements, and the
// comparison of two signatures. See csdkit/platform/xclbin.h.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/hls/update_args.h"
#include "xclbin_internal.h"

namespace csdkit {

// ---- Kernel XML (kernel.xml, EMBEDDED_METADATA) -----------------------------------------------
//
// XRT reads arguments from EMBEDDED_METADATA but does not expose their address qualifier, and
// kernel.xml has no XRT reader at all, so a small scanner reads the attributes of the <kernel>
// and <arg> elements. It handles what v++, package_xo, xclbin_writer.cpp and the flows'
// generator (flows/tools/flow_files.cpp) write: elements with quoted attributes, comments, the
// five predefined entities.

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

namespace {

using xclbin_internal::Hex;
using xclbin_internal::Kind;
using xclbin_internal::Lower;

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

}  // namespace csdkit
