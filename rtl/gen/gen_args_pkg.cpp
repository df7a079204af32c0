// gen_args_pkg: generates the SystemVerilog that follows from a kernel's C++ argument table,
// so the offsets and bundles are written once (in the table) and the RTL follows from them:
//
//   gen_args_pkg --kernel csd_update|csd_axi_copy [--out FILE] [--check FILE]
//   gen_args_pkg --wrapper TOP --core CORE.sv [--out FILE] [--check FILE]
//
// --out writes FILE only if its content changes (so a rebuild does not re-Verilate for
// nothing); without --out the text goes to stdout. --check compares FILE with what would be
// generated and fails (exit 1) if it differs.
//
// --kernel: the package `<kernel>_args_pkg` of the argument registers. It holds: per argument
// its byte offset (ARG_<NAME>_OFFSET) and word index in the argument area (ARG_<NAME>_WORD);
// the argument area's size in 32-bit words (ARG_WORDS, from 0x10 to the end of the register
// file) and which of those words are registers (ARG_WORD_MASK); the packed struct args_t with
// one field per argument (64 bits for a pointer, 32 for a scalar, in table order, first
// argument in the most significant bits); and args_from_words(), which assembles args_t from
// csd_axil_ctrl's args_o.
//
// --wrapper: the Vitis port wrapper TOP of a hand-written core module (Tops() below): the
// module with the port names Vitis (and the C++ harness) expect, `ap_clk`, `ap_rst_n`,
// `s_axi_control_*` and `interrupt` (if the top has a control slave) and one `m_axi_<bundle>_*`
// group per distinct bundle of the argument table's pointers. It instantiates the core and
// only renames: the flat ports into the packed structs of csd_axi_pkg and back. The core's
// header (CORE.sv) is read for the rest, so nothing is written twice: its parameters are
// declared again with their defaults and docs and forwarded; its ports named by the convention
//   clk_i, rst_ni                   <- ap_clk, ap_rst_n
//   ctrl_req_i, ctrl_resp_o         <-> s_axi_control_* (axil_req_t / axil_resp_t)
//   interrupt_o                     -> interrupt
//   <bundle>_req_o, <bundle>_resp_i <-> m_axi_<bundle>_* (axi_req_t / axi_resp_t)
// are connected to those, and every other port is brought out as it is (same name, type and
// doc). The core's header must be in the house style: one parameter or port per line, each
// after its `///` doc; a line the reader does not understand is an error.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "csd_axi_copy_args.h"
#include "csdkit/hls/update_args.h"

namespace {

using csdkit::hls::ArgDir;
using csdkit::hls::ArgInfo;
using csdkit::hls::ArgKind;

constexpr uint32_t kArgBase = 0x10;
/// Width of the offset constants (the control port's address space is csd_axi_pkg's
/// LITE_ADDR_WIDTH bits, 9 today: offsets below 0x200).
constexpr unsigned kOffsetBits = 12;
/// The control port's register file must end within its address space (LITE_ADDR_WIDTH).
constexpr uint32_t kLiteAddrSpace = 0x200;

/// True when a table follows the Vitis ap_ctrl_hs layout from 0x10 with indices 0..n-1.
constexpr bool FollowsVitisLayout(const ArgInfo* args, unsigned n) {
  uint32_t off = kArgBase;
  for (unsigned i = 0; i < n; ++i) {
    if (args[i].index != i || args[i].offset != off) return false;
    off += args[i].kind == ArgKind::kPtr ? 12u : 8u;
  }
  return true;
}
static_assert(FollowsVitisLayout(csdkit::axi_tb::kCopyArgs, csdkit::axi_tb::kNumCopyArgs),
              "csd_axi_copy argument offsets must follow the Vitis layout");

struct Table {
  const char* kernel;
  const char* source;
  const ArgInfo* args;
  unsigned n;
};

const Table kTables[] = {
    {csdkit::hls::kUpdateKernelName, "hls/include/csdkit/hls/update_args.h",
     csdkit::hls::kUpdateArgs, csdkit::hls::kNumUpdateArgs},
    {csdkit::axi_tb::kCopyKernelName, "rtl/axi/tb/csd_axi_copy_args.h", csdkit::axi_tb::kCopyArgs,
     csdkit::axi_tb::kNumCopyArgs},
};

std::string Upper(const char* s) {
  std::string u;
  for (; *s != '\0'; ++s) u += static_cast<char>(std::toupper(static_cast<unsigned char>(*s)));
  return u;
}

std::string Hex(uint32_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d'h%0*x", digits * 4, digits, v);
  return buf;
}

/// The whole package text of one table.
std::string Generate(const Table& t) {
  const ArgInfo& last = t.args[t.n - 1];
  const uint32_t end = last.offset + (last.kind == ArgKind::kPtr ? 12u : 8u);
  const uint32_t words = (end - kArgBase) / 4;
  if (end > kLiteAddrSpace) {
    std::fprintf(stderr, "gen_args_pkg: the register file of %s ends at 0x%x, past the control "
                 "port's address space (0x%x)\n", t.kernel, end, kLiteAddrSpace);
    std::exit(1);
  }
  // Bit k: word k is a register. Printed as hex digits, most significant first.
  std::vector<bool> reg(words, false);
  for (unsigned i = 0; i < t.n; ++i) {
    const uint32_t w = (t.args[i].offset - kArgBase) / 4;
    const unsigned data_words = t.args[i].kind == ArgKind::kPtr ? 2u : 1u;
    for (unsigned j = 0; j < data_words; ++j) reg[w + j] = true;
  }
  std::string mask_text = std::to_string(words) + "'h";
  for (int d = static_cast<int>((words + 3) / 4) - 1; d >= 0; --d) {
    unsigned nib = 0;
    for (unsigned b = 0; b < 4; ++b) {
      const unsigned k = static_cast<unsigned>(d) * 4 + b;
      if (k < words && reg[k]) nib |= 1u << b;
    }
    mask_text += "0123456789abcdef"[nib];
  }
  size_t name_w = 0;
  for (unsigned i = 0; i < t.n; ++i) name_w = std::max(name_w, std::strlen(t.args[i].name));

  std::ostringstream o;
  o << "// " << t.kernel << "_args_pkg: the argument registers of `" << t.kernel
    << "` (ap_ctrl_hs, s_axi_control).\n"
    << "// GENERATED by rtl/gen/gen_args_pkg.cpp from " << t.source << ": do not edit.\n"
    << "//\n"
    << "//  #   name" << std::string(name_w > 4 ? name_w - 4 : 0, ' ')
    << "  kind    bundle  offset  description\n";
  for (unsigned i = 0; i < t.n; ++i) {
    const ArgInfo& a = t.args[i];
    char line[256];
    std::snprintf(line, sizeof(line), "//  %-3u %-*s  %-6s  %-6s  0x%02x    %s\n", a.index,
                  static_cast<int>(name_w), a.name, a.kind == ArgKind::kPtr ? "ptr64" : "u32",
                  a.bundle, a.offset, a.doc);
    o << line;
  }
  o << "\n`default_nettype none\n\n"
    << "package " << t.kernel << "_args_pkg;\n\n"
    << "  /// Arguments of the kernel.\n"
    << "  localparam int unsigned NUM_ARGS = " << t.n << ";\n"
    << "  /// First byte past the register file.\n"
    << "  localparam logic [" << kOffsetBits - 1 << ":0] REGS_END = " << Hex(end, 3) << ";\n"
    << "  /// 32-bit words of the argument area (0x10 up to REGS_END).\n"
    << "  localparam int unsigned ARG_WORDS = " << words << ";\n"
    << "  /// Bit k: the word at 0x10 + 4k is a register (1) or reserved (0).\n"
    << "  localparam logic [ARG_WORDS-1:0] ARG_WORD_MASK = " << mask_text << ";\n\n";
  for (unsigned i = 0; i < t.n; ++i) {
    const ArgInfo& a = t.args[i];
    const std::string up = Upper(a.name);
    const bool ptr = a.kind == ArgKind::kPtr;
    o << "  /// " << a.name << " (" << (ptr ? "64-bit pointer" : "32-bit scalar")
      << (ptr ? std::string(", bundle ") + a.bundle : std::string()) << "): "
      << a.doc << ".\n"
      << "  localparam logic [" << kOffsetBits - 1 << ":0] ARG_" << up
      << "_OFFSET = " << Hex(a.offset, 3) << ";\n"
      << "  localparam int unsigned ARG_" << up << "_WORD = " << (a.offset - kArgBase) / 4
      << ";\n";
  }
  o << "\n  /// Every argument, in table order (the first in the most significant bits).\n"
    << "  typedef struct packed {\n";
  for (unsigned i = 0; i < t.n; ++i) {
    const ArgInfo& a = t.args[i];
    o << "    logic [" << (a.kind == ArgKind::kPtr ? 63 : 31) << ":0] " << a.name << ";\n";
  }
  o << "  } args_t;\n\n"
    << "  /// The arguments from the argument words of csd_axil_ctrl (args_o).\n"
    << "  function automatic args_t args_from_words(logic [ARG_WORDS*32-1:0] words);\n"
    << "    args_t a;\n";
  for (unsigned i = 0; i < t.n; ++i) {
    const ArgInfo& a = t.args[i];
    const std::string up = Upper(a.name);
    if (a.kind == ArgKind::kPtr) {
      o << "    a." << a.name << " = {words[32*(ARG_" << up << "_WORD+1) +: 32], words[32*ARG_"
        << up << "_WORD +: 32]};\n";
    } else {
      o << "    a." << a.name << " = words[32*ARG_" << up << "_WORD +: 32];\n";
    }
  }
  o << "    return a;\n"
    << "  endfunction\n\n"
    << "endpackage\n";
  return o.str();
}

// ---- Port wrappers ------------------------------------------------------------------------

/// A bundle that is not a table's (a bench's), with what it carries.
struct BundleDoc {
  const char* name;
  const char* doc;
};

/// A Vitis port wrapper: its module name, the core it wraps, and where its ports come from.
struct TopSpec {
  const char* top;                   // the module Vitis and the C++ harness see
  const char* core;                  // the hand-written module it instantiates
  const char* purpose;               // what the top is, for its header comment
  bool control;                      // s_axi_control_* and interrupt
  const Table* args;                 // one m_axi bundle per distinct bundle of its pointers
  std::vector<BundleDoc> bundles;    // further bundles (a bench's), after the table's
  const char* exports_doc;           // comment above the exports
  std::vector<const char*> exports;  // localparams declared in the top (for the simulation)
};

const std::vector<TopSpec>& Tops() {
  static const std::vector<TopSpec> tops = {
      {"csd_update",
       "csd_update_kernel",
       "the Vitis RTL-kernel top of the updater kernel",
       true,
       &kTables[0],
       {},
       "Pipeline latencies of the fp units, visible to the simulation (`csdkit bench rtl` "
       "reports them; the harness reads them from the top); the core's lanes are built from "
       "these units.",
       {"int unsigned AddLatency /*verilator public*/ = csd_fp_pkg::ADD_LATENCY",
        "int unsigned MulLatency /*verilator public*/ = csd_fp_pkg::MUL_LATENCY",
        "int unsigned DivLatency /*verilator public*/ =\n"
        "      csd_fp_pkg::digit_latency(csd_update_pkg::DIGIT_BITS_PER_STAGE)",
        "int unsigned SqrtLatency /*verilator public*/ =\n"
        "      csd_fp_pkg::digit_latency(csd_update_pkg::DIGIT_BITS_PER_STAGE)",
        "int unsigned SignLatency /*verilator public*/ = csd_fp_pkg::SIGN_LATENCY",
        "int unsigned CvtLatency /*verilator public*/ = csd_fp_pkg::CVT_LATENCY"}},
      {"csd_axi_copy_top",
       "csd_axi_copy_kernel",
       "the Vitis RTL-kernel top of the copy test kernel (tb_csd_axi_copy_top.cpp)",
       true,
       &kTables[1],
       {},
       nullptr,
       {}},
      {"csd_axi_master_tb_top",
       "csd_axi_master_tb",
       "the top of the AXI master bench (tb_csd_axi_masters.cpp)",
       false,
       nullptr,
       {{"gmem", "the read master and the write master (one buffer read and written)"}},
       nullptr,
       {}},
      {"csd_update_ctrl_tb_top",
       "csd_update_ctrl_tb",
       "the top of the control slave bench (tb_csd_update_ctrl.cpp)",
       true,
       nullptr,
       {},
       nullptr,
       {}},
  };
  return tops;
}

/// A parameter or a port of the core's header, as written there.
struct Decl {
  std::string dir;   // "input" / "output"; empty for a parameter
  std::string type;  // whitespace collapsed ("wire logic [7:0]", "int unsigned")
  std::string name;
  std::string value;             // a parameter's default
  std::vector<std::string> doc;  // the `///` lines above it, without the marker
  std::string section;           // a `// ----` line above it (ports), if any
};

struct CoreHeader {
  std::string imports;  // "csd_axi_pkg::*" ...: the package imports of the header
  std::vector<Decl> params;
  std::vector<Decl> ports;
};

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Collapse(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : Trim(s)) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// Reads the header (parameter and port lists) of `module` from the text of its file.
bool ParseCore(const std::string& text, const std::string& path, const std::string& module,
               CoreHeader* core, std::string* err) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);

  const std::regex module_re("^\\s*module\\s+" + module + "\\b(.*)$");
  const std::regex import_re("import\\s+([^;]+);");
  const std::regex param_re("^parameter\\s+([^,;=()]+?)\\s+(\\w+)\\s*=\\s*([^;]+?)\\s*,?$");
  const std::regex port_re("^(input|output)\\s+([^,;=()]+?)\\s+(\\w+)\\s*,?$");
  size_t i = 0;
  std::smatch m;
  for (; i < lines.size(); ++i) {
    if (std::regex_match(lines[i], m, module_re)) break;
  }
  if (i == lines.size()) {
    *err = path + ": no `module " + module + "` in this file";
    return false;
  }
  const std::string rest = m[1].str();
  std::string tail = rest;
  for (std::sregex_iterator it(rest.begin(), rest.end(), import_re), end; it != end; ++it) {
    if (!core->imports.empty()) core->imports += ", ";
    core->imports += Collapse((*it)[1].str());
  }
  tail = std::regex_replace(rest, import_re, "");
  tail = Collapse(tail);
  enum { kParams, kPorts } state;
  if (tail == "#(") {
    state = kParams;
  } else if (tail == "(") {
    state = kPorts;
  } else {
    *err = path + ":" + std::to_string(i + 1) + ": the module line of " + module +
           " should end in `#(` or `(`";
    return false;
  }
  std::vector<std::string> doc;
  std::string section;
  for (++i; i < lines.size(); ++i) {
    const std::string line = Trim(lines[i]);
    const std::string where = path + ":" + std::to_string(i + 1) + ": ";
    if (line.empty()) continue;
    if (line.rfind("///", 0) == 0) {
      doc.push_back(Trim(line.substr(3)));
      continue;
    }
    if (line.rfind("// ----", 0) == 0) {
      section = line;
      doc.clear();
      continue;
    }
    if (line.rfind("//", 0) == 0) continue;
    if (line == ");") {
      if (state != kPorts) {
        *err = where + "the parameter list of " + module + " ends without a port list";
        return false;
      }
      return true;
    }
    if (state == kParams && Collapse(line) == ") (") {
      state = kPorts;
      doc.clear();
      continue;
    }
    if (state == kParams && line.rfind("localparam", 0) == 0) {
      doc.clear();  // derived: not a parameter of the top
      continue;
    }
    Decl d;
    if (state == kParams && std::regex_match(line, m, param_re)) {
      d.type = Collapse(m[1].str());
      d.name = m[2].str();
      d.value = Trim(m[3].str());
      d.doc = doc;
      core->params.push_back(d);
    } else if (state == kPorts && std::regex_match(line, m, port_re)) {
      d.dir = m[1].str();
      d.type = Collapse(m[2].str());
      d.name = m[3].str();
      d.doc = doc;
      d.section = section;
      core->ports.push_back(d);
      section.clear();
    } else {
      *err = where + "cannot read this line of the header of " + module +
             " (one parameter or port per line, docs in `///` lines): " + line;
      return false;
    }
    doc.clear();
  }
  *err = path + ": the header of " + module + " does not end in `);`";
  return false;
}

/// One signal of a Vitis port group: its suffix, whether the kernel drives it, its width (""
/// for one bit), the struct field it maps to, and its doc.
struct Sig {
  const char* suffix;
  bool out;
  const char* width;
  const char* field;
  const char* doc;
};

// s_axi_control: the fields of axil_req_t (in) and axil_resp_t (out).
const Sig kLiteSigs[] = {
    {"AWVALID", false, "", "aw_valid", "AW valid"},
    {"AWREADY", true, "", "aw_ready", "AW ready"},
    {"AWADDR", false, "[LITE_ADDR_WIDTH-1:0]", "aw_addr", "AW byte address"},
    {"WVALID", false, "", "w_valid", "W valid"},
    {"WREADY", true, "", "w_ready", "W ready"},
    {"WDATA", false, "[LITE_DATA_WIDTH-1:0]", "w.data", "W data"},
    {"WSTRB", false, "[LITE_DATA_WIDTH/8-1:0]", "w.strb", "W byte strobes"},
    {"ARVALID", false, "", "ar_valid", "AR valid"},
    {"ARREADY", true, "", "ar_ready", "AR ready"},
    {"ARADDR", false, "[LITE_ADDR_WIDTH-1:0]", "ar_addr", "AR byte address"},
    {"RVALID", true, "", "r_valid", "R valid"},
    {"RREADY", false, "", "r_ready", "R ready"},
    {"RDATA", true, "[LITE_DATA_WIDTH-1:0]", "r.data", "R data"},
    {"RRESP", true, "[1:0]", "r.resp", "R response (always OKAY)"},
    {"BVALID", true, "", "b_valid", "B valid"},
    {"BREADY", false, "", "b_ready", "B ready"},
    {"BRESP", true, "[1:0]", "b_resp", "B response (always OKAY)"},
};

// m_axi_<bundle>: the fields of axi_req_t (out) and axi_resp_t (in), in the Vitis order.
const Sig kAxiSigs[] = {
    {"AWVALID", true, "", "aw_valid", "AW valid"},
    {"AWREADY", false, "", "aw_ready", "AW ready"},
    {"AWADDR", true, "[ADDR_WIDTH-1:0]", "aw.addr", "AW address"},
    {"AWID", true, "[ID_WIDTH-1:0]", "aw.id", "AW ID"},
    {"AWLEN", true, "[7:0]", "aw.len", "AW length (beats - 1)"},
    {"AWSIZE", true, "[2:0]", "aw.size", "AW size"},
    {"AWBURST", true, "[1:0]", "aw.burst", "AW burst type"},
    {"AWLOCK", true, "", "aw.lock", "AW lock"},
    {"AWCACHE", true, "[3:0]", "aw.cache", "AW cache"},
    {"AWPROT", true, "[2:0]", "aw.prot", "AW protection"},
    {"AWQOS", true, "[3:0]", "aw.qos", "AW QoS"},
    {"AWREGION", true, "[3:0]", "aw.region", "AW region"},
    {"WVALID", true, "", "w_valid", "W valid"},
    {"WREADY", false, "", "w_ready", "W ready"},
    {"WDATA", true, "[DATA_WIDTH-1:0]", "w.data", "W data"},
    {"WSTRB", true, "[STRB_WIDTH-1:0]", "w.strb", "W strobes"},
    {"WLAST", true, "", "w.last", "W last"},
    {"BVALID", false, "", "b_valid", "B valid"},
    {"BREADY", true, "", "b_ready", "B ready"},
    {"BRESP", false, "[1:0]", "b.resp", "B response"},
    {"BID", false, "[ID_WIDTH-1:0]", "b.id", "B ID"},
    {"ARVALID", true, "", "ar_valid", "AR valid"},
    {"ARREADY", false, "", "ar_ready", "AR ready"},
    {"ARADDR", true, "[ADDR_WIDTH-1:0]", "ar.addr", "AR address"},
    {"ARID", true, "[ID_WIDTH-1:0]", "ar.id", "AR ID"},
    {"ARLEN", true, "[7:0]", "ar.len", "AR length (beats - 1)"},
    {"ARSIZE", true, "[2:0]", "ar.size", "AR size"},
    {"ARBURST", true, "[1:0]", "ar.burst", "AR burst type"},
    {"ARLOCK", true, "", "ar.lock", "AR lock"},
    {"ARCACHE", true, "[3:0]", "ar.cache", "AR cache"},
    {"ARPROT", true, "[2:0]", "ar.prot", "AR protection"},
    {"ARQOS", true, "[3:0]", "ar.qos", "AR QoS"},
    {"ARREGION", true, "[3:0]", "ar.region", "AR region"},
    {"RVALID", false, "", "r_valid", "R valid"},
    {"RREADY", true, "", "r_ready", "R ready"},
    {"RDATA", false, "[DATA_WIDTH-1:0]", "r.data", "R data"},
    {"RLAST", false, "", "r.last", "R last"},
    {"RID", false, "[ID_WIDTH-1:0]", "r.id", "R ID"},
    {"RRESP", false, "[1:0]", "r.resp", "R response"},
};

const char* DirText(ArgDir d) {
  switch (d) {
    case ArgDir::kIn:
      return "read";
    case ArgDir::kOut:
      return "written";
    case ArgDir::kInOut:
      return "read and written";
  }
  return "";
}

/// A bundle of the top: its name, a short summary (port group heading) and a longer doc.
struct Bundle {
  std::string name, summary, doc;
};

std::vector<Bundle> BundlesOf(const TopSpec& spec) {
  std::vector<Bundle> out;
  if (spec.args != nullptr) {
    for (unsigned i = 0; i < spec.args->n; ++i) {
      const ArgInfo& a = spec.args->args[i];
      if (a.kind != ArgKind::kPtr) continue;
      auto it =
          std::find_if(out.begin(), out.end(), [&](const Bundle& b) { return b.name == a.bundle; });
      if (it == out.end()) {
        out.push_back({a.bundle, "", ""});
        it = out.end() - 1;
      } else {
        it->summary += ", ";
        it->doc += "; ";
      }
      it->summary += std::string(a.name) + " (" + DirText(a.dir) + ")";
      it->doc += std::string(a.name) + " (" + DirText(a.dir) + "): " + a.doc;
    }
  }
  for (const BundleDoc& b : spec.bundles) out.push_back({b.name, b.doc, b.doc});
  return out;
}

/// Left-justifies `s` in `w` columns.
std::string Pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

/// Wraps `text` into comment lines of at most 100 columns: the first starts with `lead`, the
/// others with `cont`.
std::string Wrap(const std::string& lead, const std::string& cont, const std::string& text) {
  std::string out, line = lead;
  std::istringstream words(text);
  bool empty = true;  // nothing after the lead yet
  for (std::string w; words >> w;) {
    if (!empty && line.size() + 1 + w.size() > 100) {
      out += line + "\n";
      line = cont;
      empty = true;
    }
    line += (empty ? "" : " ") + w;
    empty = false;
  }
  return out + line + "\n";
}

/// The whole wrapper text of one top, from its spec and its core's header.
bool GenerateWrapper(const TopSpec& spec, const CoreHeader& core, std::string* text,
                     std::string* err) {
  const std::vector<Bundle> bundles = BundlesOf(spec);

  // The core ports the wrapper connects itself, with their directions.
  std::vector<std::pair<std::string, std::string>> mapped = {{"clk_i", "input"},
                                                             {"rst_ni", "input"}};
  if (spec.control) {
    mapped.insert(mapped.end(),
                  {{"ctrl_req_i", "input"}, {"ctrl_resp_o", "output"}, {"interrupt_o", "output"}});
  }
  for (const Bundle& b : bundles) {
    mapped.push_back({b.name + "_req_o", "output"});
    mapped.push_back({b.name + "_resp_i", "input"});
  }
  std::set<std::string> mapped_names;
  for (const auto& [name, dir] : mapped) {
    auto it = std::find_if(core.ports.begin(), core.ports.end(),
                           [&n = name](const Decl& d) { return d.name == n; });
    if (it == core.ports.end() || it->dir != dir) {
      *err = std::string(spec.core) + " has no " + dir + " port " + name + " (the wrapper " +
             spec.top + " connects it)";
      return false;
    }
    mapped_names.insert(name);
  }
  std::vector<const Decl*> forwarded;
  for (const Decl& d : core.ports) {
    if (mapped_names.count(d.name) != 0) continue;
    if (d.name == "ap_clk" || d.name == "ap_rst_n" || d.name == "interrupt" ||
        d.name.rfind("m_axi_", 0) == 0 || d.name.rfind("s_axi_", 0) == 0) {
      *err = std::string(spec.core) + ": port " + d.name + " would clash with a Vitis port name";
      return false;
    }
    forwarded.push_back(&d);
  }

  // Every port declaration of the top: section heading, doc, "dir type", name.
  struct PortLine {
    std::string section;
    std::vector<std::string> doc;
    std::string decl, name;
  };
  std::vector<PortLine> ports;
  auto decl_of = [](bool out, const std::string& width) {
    return std::string(out ? "output logic" : "input  wire logic") +
           (width.empty() ? "" : " " + width);
  };
  ports.push_back({"", {"Kernel clock."}, decl_of(false, ""), "ap_clk"});
  ports.push_back({"",
                   {"Kernel reset, active low, synchronous (registered once inside the core)."},
                   decl_of(false, ""),
                   "ap_rst_n"});
  if (spec.control) {
    bool first = true;
    for (const Sig& s : kLiteSigs) {
      ports.push_back({first ? "// ---- s_axi_control: AXI4-Lite control slave ----" : "",
                       {std::string("Control ") + s.doc + "."},
                       decl_of(s.out, s.width),
                       std::string("s_axi_control_") + s.suffix});
      first = false;
    }
    ports.push_back({"",
                     {"Interrupt (ap_done / ap_ready, as enabled by GIE and IER)."},
                     "output logic",
                     "interrupt"});
  }
  for (const Bundle& b : bundles) {
    bool first = true;
    for (const Sig& s : kAxiSigs) {
      ports.push_back({first ? "// ---- m_axi_" + b.name + ": " + b.summary + " ----" : "",
                       {b.name + " " + s.doc + "."},
                       decl_of(s.out, s.width),
                       "m_axi_" + b.name + "_" + s.suffix});
      first = false;
    }
  }
  for (const Decl* d : forwarded) {
    ports.push_back(
        {d->section, d->doc, (d->dir == "input" ? "input  " : "output ") + d->type, d->name});
  }
  size_t decl_w = 0;
  for (const PortLine& p : ports) decl_w = std::max(decl_w, p.decl.size());

  std::ostringstream o;
  o << Wrap("// ", "// ",
            std::string(spec.top) + ": " + spec.purpose + ", the Vitis port wrapper of " +
                spec.core + ".");
  std::string sources = "the port list of " + std::string(spec.core);
  if (spec.args != nullptr) sources = std::string(spec.args->source) + " and " + sources;
  o << Wrap("// ", "// ",
            "GENERATED by rtl/gen/gen_args_pkg.cpp from " + sources + ": do not edit.")
    << "//\n";
  std::string structs;
  if (spec.control) structs = "axil_req_t / axil_resp_t for s_axi_control";
  if (!bundles.empty()) {
    if (!structs.empty()) structs += ", ";
    structs += "axi_req_t / axi_resp_t per m_axi bundle";
  }
  o << Wrap("// ", "// ",
            "It only renames: the flat Vitis ports into the packed structs of csd_axi_pkg (" +
                structs + ") and back. " +
                (core.params.empty() ? "The other" : "The parameters and the other") +
                " ports of " + spec.core + " are passed through as they are.");
  if (!bundles.empty()) {
    o << "//\n// Bundles:\n";
    size_t w = 0;
    for (const Bundle& b : bundles) w = std::max(w, b.name.size());
    for (const Bundle& b : bundles) {
      o << Wrap("//   " + Pad(b.name, w) + "  ", "//   " + std::string(w + 4, ' '), b.doc);
    }
  }
  std::string imports = "csd_axi_pkg::*";
  if (!core.imports.empty()) {
    imports = core.imports;
    if (imports.find("csd_axi_pkg::*") == std::string::npos) imports += ", csd_axi_pkg::*";
  }
  o << "\n`default_nettype none\n\n"
    << "module " << spec.top << " import " << imports << ";";
  if (!core.params.empty()) {
    o << " #(\n";
    for (size_t i = 0; i < core.params.size(); ++i) {
      const Decl& d = core.params[i];
      for (const std::string& l : d.doc) o << "  /// " << l << "\n";
      o << "  parameter " << d.type << " " << d.name << " = " << d.value
        << (i + 1 < core.params.size() ? ",\n" : "\n");
    }
    o << ") (\n";
  } else {
    o << " (\n";
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    const PortLine& p = ports[i];
    if (!p.section.empty()) o << "\n  " << p.section << "\n";
    for (const std::string& l : p.doc) o << "  /// " << l << "\n";
    o << "  " << Pad(p.decl, decl_w + 1) << p.name << (i + 1 < ports.size() ? ",\n" : "\n");
  }
  o << ");\n";

  if (!spec.exports.empty()) {
    o << "\n";
    if (spec.exports_doc != nullptr) o << Wrap("  // ", "  // ", spec.exports_doc);
    for (const char* e : spec.exports) o << "  localparam " << e << ";\n";
  }

  // Structs between the flat ports and the core.
  o << "\n";
  if (spec.control) o << "  axil_req_t  ctrl_req;\n  axil_resp_t ctrl_resp;\n";
  for (const Bundle& b : bundles) {
    o << "  axi_req_t   " << b.name << "_req;\n  axi_resp_t  " << b.name << "_resp;\n";
  }

  // Flat ports <-> struct fields: inputs into the request (control) or response (bundles),
  // outputs from the other.
  auto flatten = [&](const std::string& title, const std::string& prefix, const Sig* sigs, size_t n,
                     const std::string& in_struct, const std::string& out_struct) {
    size_t w = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string lhs =
          sigs[i].out ? prefix + sigs[i].suffix : in_struct + "." + sigs[i].field;
      w = std::max(w, lhs.size());
    }
    o << "\n  // ---- " << title << " ----\n";
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < n; ++i) {
        const Sig& s = sigs[i];
        if (s.out != (pass == 1)) continue;
        if (s.out) {
          o << "  assign " << Pad(prefix + s.suffix, w) << " = " << out_struct << "." << s.field
            << ";\n";
        } else {
          o << "  assign " << Pad(in_struct + "." + s.field, w) << " = " << prefix << s.suffix
            << ";\n";
        }
      }
    }
  };
  if (spec.control) {
    flatten("s_axi_control", "s_axi_control_", kLiteSigs, std::size(kLiteSigs), "ctrl_req",
            "ctrl_resp");
  }
  for (const Bundle& b : bundles) {
    flatten("m_axi_" + b.name, "m_axi_" + b.name + "_", kAxiSigs, std::size(kAxiSigs),
            b.name + "_resp", b.name + "_req");
  }

  // The core.
  std::vector<std::pair<std::string, std::string>> conns = {{"clk_i", "ap_clk"},
                                                            {"rst_ni", "ap_rst_n"}};
  if (spec.control) {
    conns.insert(
        conns.end(),
        {{"ctrl_req_i", "ctrl_req"}, {"ctrl_resp_o", "ctrl_resp"}, {"interrupt_o", "interrupt"}});
  }
  for (const Bundle& b : bundles) {
    conns.push_back({b.name + "_req_o", b.name + "_req"});
    conns.push_back({b.name + "_resp_i", b.name + "_resp"});
  }
  for (const Decl* d : forwarded) conns.push_back({d->name, d->name});
  o << "\n  // ---- The core ----\n  " << spec.core;
  if (!core.params.empty()) {
    size_t w = 0;
    for (const Decl& d : core.params) w = std::max(w, d.name.size());
    o << " #(\n";
    for (size_t i = 0; i < core.params.size(); ++i) {
      const std::string& n = core.params[i].name;
      o << "    ." << Pad(n, w) << "(" << n << ")" << (i + 1 < core.params.size() ? ",\n" : "\n");
    }
    o << "  )";
  }
  o << " u_core (\n";
  size_t w = 0;
  for (const auto& c : conns) w = std::max(w, c.first.size());
  for (size_t i = 0; i < conns.size(); ++i) {
    o << "    ." << Pad(conns[i].first, w) << "(" << conns[i].second << ")"
      << (i + 1 < conns.size() ? ",\n" : "\n");
  }
  o << "  );\n\nendmodule\n";
  *text = o.str();
  return true;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

int Usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s --kernel NAME [--out FILE] [--check FILE]\n"
               "       %s --wrapper TOP --core CORE.sv [--out FILE] [--check FILE]\n  kernels:",
               prog, prog);
  for (const Table& t : kTables) std::fprintf(stderr, " %s", t.kernel);
  std::fprintf(stderr, "\n  tops:");
  for (const TopSpec& t : Tops()) std::fprintf(stderr, " %s (core %s)", t.top, t.core);
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kernel, wrapper, core_path, out, check;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(argv[0]);
    if (a == "--kernel") {
      kernel = argv[++i];
    } else if (a == "--wrapper") {
      wrapper = argv[++i];
    } else if (a == "--core") {
      core_path = argv[++i];
    } else if (a == "--out") {
      out = argv[++i];
    } else if (a == "--check") {
      check = argv[++i];
    } else {
      return Usage(argv[0]);
    }
  }
  if (kernel.empty() == wrapper.empty()) return Usage(argv[0]);

  std::string text, what, source;
  if (!kernel.empty()) {
    const Table* table = nullptr;
    for (const Table& t : kTables) {
      if (kernel == t.kernel) table = &t;
    }
    if (table == nullptr) {
      std::fprintf(stderr, "%s: unknown kernel '%s'\n", argv[0], kernel.c_str());
      return Usage(argv[0]);
    }
    text = Generate(*table);
    what = std::string("the argument table of ") + table->kernel;
    source = table->source;
  } else {
    const TopSpec* spec = nullptr;
    for (const TopSpec& t : Tops()) {
      if (wrapper == t.top) spec = &t;
    }
    if (spec == nullptr) {
      std::fprintf(stderr, "%s: unknown top '%s'\n", argv[0], wrapper.c_str());
      return Usage(argv[0]);
    }
    if (core_path.empty()) {
      std::fprintf(stderr, "%s: --wrapper %s needs --core <the file of module %s>\n", argv[0],
                   spec->top, spec->core);
      return 2;
    }
    std::string core_text, err;
    CoreHeader core;
    if (!ReadFile(core_path, &core_text)) {
      std::fprintf(stderr, "%s: cannot read %s (the core of %s)\n", argv[0], core_path.c_str(),
                   spec->top);
      return 1;
    }
    if (!ParseCore(core_text, core_path, spec->core, &core, &err) ||
        !GenerateWrapper(*spec, core, &text, &err)) {
      std::fprintf(stderr, "%s: %s\n", argv[0], err.c_str());
      return 1;
    }
    what = std::string("the wrapper of ") + spec->core;
    source = core_path + (spec->args != nullptr ? std::string(" and ") + spec->args->source : "");
  }

  if (!check.empty()) {
    std::string have;
    if (!ReadFile(check, &have)) {
      std::fprintf(stderr, "%s: cannot read %s (build the target that generates it)\n", argv[0],
                   check.c_str());
      return 1;
    }
    if (have != text) {
      std::fprintf(stderr, "%s: %s is out of date with %s (%s); rebuild to regenerate it\n",
                   argv[0], check.c_str(), what.c_str(), source.c_str());
      return 1;
    }
    std::printf("%s: up to date with %s\n", check.c_str(), source.c_str());
    return 0;
  }
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::string have;
  if (ReadFile(out, &have) && have == text) return 0;  // unchanged: keep the timestamp
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], out.c_str());
    return 1;
  }
  return 0;
}
