// csdkit_flows_check: the argument table (hls/include/csdkit/hls/update_args.h) against every
// place the hardware flows restate it, without Vitis or Vivado.
//
//   csdkit_flows_check --root SRC
//       the HLS top's parameter names and INTERFACE pragmas (hls/kernels/csd_update.cpp),
//       flows/generated/kernel.xml (arguments, offsets, sizes, ports), the v++ connectivity
//       config (one sp= per buffer argument), the numeric-contract directives of the HLS
//       configs (fmadd/fmacc/facc bound to none) and the packaging script's use of the
//       generated interface list.
//   csdkit_flows_check --root SRC --rtl [--search DIR]...
//       the RTL: the register offsets of the generated package csd_update_args_pkg and the
//       Vitis interfaces of the top module csd_update, wherever they are found under SRC/rtl
//       and the --search directories. Exits 77 (ctest: skipped) when neither exists yet.
//
// Every failure prints what was expected (EXP) and what was found (GOT). Exit 0 when all agree,
// 1 otherwise, 2 on bad usage.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "csdkit/hls/update_args.h"
#include "csdkit/platform/xclbin.h"

namespace fs = std::filesystem;

namespace {

int g_failures = 0;

void Ok(const std::string& what) { std::printf("ok   %s\n", what.c_str()); }

void Fail(const std::string& what, const std::string& exp, const std::string& got) {
  ++g_failures;
  std::printf("FAIL %s\n  EXP: %s\n  GOT: %s\n", what.c_str(), exp.c_str(), got.c_str());
}

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

std::string Join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string Hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%02x", v);
  return b;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Text without // and /* */ comments (so commented-out code is not mistaken for code).
std::string StripCComments(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      i = s.find('\n', i);
      if (i == std::string::npos) break;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t e = s.find("*/", i + 2);
      i = e == std::string::npos ? s.size() : e + 2;
    } else {
      o += s[i++];
    }
  }
  return o;
}

/// Lines of a config or Tcl file with '#' comments and surrounding blanks removed.
std::vector<std::string> CodeLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    const size_t h = l.find('#');
    if (h != std::string::npos) l.erase(h);
    const size_t b = l.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const size_t e = l.find_last_not_of(" \t\r");
    lines.push_back(l.substr(b, e - b + 1));
  }
  return lines;
}

std::vector<std::string> TableNames() {
  std::vector<std::string> v;
  for (const auto& a : csdkit::hls::kUpdateArgs) v.push_back(a.name);
  return v;
}

// ---- the HLS top --------------------------------------------------------------------------

void CheckHlsTop(const fs::path& root) {
  const fs::path src = root / "hls/kernels/csd_update.cpp";
  std::string text;
  if (!ReadFile(src, &text)) {
    Fail("HLS top readable", src.string(), "cannot read it");
    return;
  }
  const std::string code = StripCComments(text);
  // Parameter names, in order, of the extern "C" definition.
  const std::regex def(R"(extern\s+"C"\s+void\s+csd_update\s*\(([^)]*)\))");
  std::smatch m;
  if (!std::regex_search(code, m, def)) {
    Fail("HLS top: extern \"C\" void csd_update(...) found in " + src.string(), "a definition",
         "none");
    return;
  }
  std::vector<std::string> names;
  std::stringstream params(m[1].str());
  std::string p;
  const std::regex last_ident(R"(([A-Za-z_]\w*)\s*$)");
  while (std::getline(params, p, ',')) {
    std::smatch id;
    if (std::regex_search(p, id, last_ident)) names.push_back(id[1]);
  }
  if (names == TableNames()) {
    Ok("HLS top: the parameters of csd_update() are the table's arguments, in order");
  } else {
    Fail("HLS top: parameter names of csd_update() in " + src.string(), Join(TableNames()),
         Join(names));
  }
  // INTERFACE pragmas: m_axi bundle per pointer, one s_axilite register per argument.
  const std::regex maxi(
      R"(#pragma\s+HLS\s+INTERFACE\s+m_axi\s+port\s*=\s*(\w+)\s+bundle\s*=\s*(\w+))");
  const std::regex lite(
      R"(#pragma\s+HLS\s+INTERFACE\s+s_axilite\s+port\s*=\s*(\w+)\s+bundle\s*=\s*(\w+))");
  std::vector<std::string> maxi_got, maxi_exp, lite_got, lite_exp;
  for (std::sregex_iterator it(code.begin(), code.end(), maxi), e; it != e; ++it)
    maxi_got.push_back((*it)[1].str() + ":" + (*it)[2].str());
  for (std::sregex_iterator it(code.begin(), code.end(), lite), e; it != e; ++it)
    lite_got.push_back((*it)[1].str() + ":" + (*it)[2].str());
  for (const auto& a : csdkit::hls::kUpdateArgs) {
    if (a.kind == csdkit::hls::ArgKind::kPtr)
      maxi_exp.push_back(std::string(a.name) + ":" + a.bundle);
    lite_exp.push_back(std::string(a.name) + ":control");
  }
  lite_exp.push_back("return:control");
  if (maxi_got == maxi_exp) {
    Ok("HLS top: m_axi pragmas (port:bundle) follow the table");
  } else {
    Fail("HLS top: m_axi pragmas (port:bundle)", Join(maxi_exp), Join(maxi_got));
  }
  if (lite_got == lite_exp) {
    Ok("HLS top: s_axilite pragmas cover every argument on bundle control");
  } else {
    Fail("HLS top: s_axilite pragmas (port:bundle)", Join(lite_exp), Join(lite_got));
  }
  // The numeric contract: nothing in the kernel may ask for a fused operator.
  const std::regex fused(R"(#pragma\s+HLS\s+BIND_OP[^\n]*\b(fmadd|fmacc|facc)\b)",
                         std::regex::icase);
  if (std::regex_search(code, m, fused)) {
    Fail("HLS top: no BIND_OP to a fused operator (docs/numeric-contract.md)", "none", m[0].str());
  } else {
    Ok("HLS top: no BIND_OP pragma names fmadd/fmacc/facc");
  }
}

// ---- kernel.xml ---------------------------------------------------------------------------

void CheckKernelXml(const fs::path& gen) {
  const fs::path path = gen / "kernel.xml";
  std::string xml;
  if (!ReadFile(path, &xml)) {
    Fail("kernel.xml readable", path.string(), "cannot read it");
    return;
  }
  const csdkit::KernelSignature exp = csdkit::KernelSignature::UpdateKernel();
  try {
    const csdkit::KernelSignature got = csdkit::ParseKernelXml(xml, exp.name);
    const std::vector<std::string> diff = csdkit::CompareSignatures(exp, got, true);
    if (diff.empty()) {
      Ok("kernel.xml: " + std::to_string(got.args.size()) +
         " arguments (names, order, offsets, sizes, ports) follow the table");
    } else {
      Fail("kernel.xml arguments (" + path.string() + ")", "the table", Join(diff, "\n       "));
    }
  } catch (const csdkit::XclbinError& e) {
    Fail("kernel.xml parses (" + path.string() + ")", "kernel " + exp.name, e.what());
    return;
  }
  // Every interface the arguments use is declared, the control slave covers the registers.
  for (const std::string& port : exp.MasterPorts()) {
    const std::regex decl("<port\\s+name=\"" + port + "\"\\s+mode=\"master\"");
    if (!std::regex_search(xml, decl)) {
      Fail("kernel.xml declares master port " + port, "<port name=\"" + port + "\" mode=\"master\"",
           "absent");
    }
  }
  const std::regex slave(
      R"re(<port\s+name="s_axi_control"\s+mode="slave"\s+range="(0x[0-9A-Fa-f]+)")re");
  std::smatch m;
  if (!std::regex_search(xml, m, slave)) {
    Fail("kernel.xml declares the s_axi_control slave",
         "<port name=\"s_axi_control\" mode=\"slave\"", "absent");
  } else if (std::stoul(m[1].str(), nullptr, 16) < csdkit::hls::kUpdateRegsEnd) {
    Fail("kernel.xml s_axi_control range covers the register file",
         ">= " + Hex(csdkit::hls::kUpdateRegsEnd), m[1].str());
  } else {
    Ok("kernel.xml: ports " + Join(exp.MasterPorts()) + " and s_axi_control (range " + m[1].str() +
       ") declared");
  }
}

// ---- connectivity -------------------------------------------------------------------------

void CheckConnectivity(const fs::path& gen) {
  const fs::path path = gen / "csd_update.connectivity.cfg";
  std::string text;
  if (!ReadFile(path, &text)) {
    Fail("connectivity config readable", path.string(), "cannot read it");
    return;
  }
  std::string section;
  std::vector<std::string> nk;
  std::map<std::string, std::vector<std::string>> sp;  // cu.arg -> memories
  for (const std::string& l : CodeLines(text)) {
    if (l.front() == '[') {
      section = l;
      continue;
    }
    if (section != "[connectivity]") continue;
    if (l.rfind("nk=", 0) == 0) nk.push_back(l.substr(3));
    if (l.rfind("sp=", 0) == 0) {
      const std::string v = l.substr(3);
      const size_t colon = v.rfind(':');
      sp[v.substr(0, colon)].push_back(colon == std::string::npos ? "" : v.substr(colon + 1));
    }
  }
  const std::string cu = std::string(csdkit::hls::kUpdateKernelName) + "_1";
  const std::string nk_exp = std::string(csdkit::hls::kUpdateKernelName) + ":1:" + cu;
  if (nk == std::vector<std::string>{nk_exp}) {
    Ok("connectivity: nk=" + nk_exp);
  } else {
    Fail("connectivity: compute units (nk=)", nk_exp, nk.empty() ? "none" : Join(nk));
  }
  std::vector<std::string> exp, got;
  for (const auto& a : csdkit::hls::kUpdateArgs) {
    if (a.kind == csdkit::hls::ArgKind::kPtr)
      exp.push_back(cu + "." + a.name + ":" + csdkit::kSmartSsdMemoryBank);
  }
  for (const auto& [arg, mems] : sp) {
    for (const std::string& mem : mems) got.push_back(arg + ":" + mem);
  }
  std::vector<std::string> exp_sorted = exp;
  std::sort(exp_sorted.begin(), exp_sorted.end());
  std::sort(got.begin(), got.end());
  if (got == exp_sorted) {
    Ok("connectivity: every buffer argument (" + std::to_string(exp.size()) + ") on " +
       csdkit::kSmartSsdMemoryBank + ", no scalar, nothing else");
  } else {
    std::vector<std::string> missing, extra;
    std::set_difference(exp_sorted.begin(), exp_sorted.end(), got.begin(), got.end(),
                        std::back_inserter(missing));
    std::set_difference(got.begin(), got.end(), exp_sorted.begin(), exp_sorted.end(),
                        std::back_inserter(extra));
    Fail("connectivity: sp= lines (" + path.string() + ")", "sp=" + Join(exp_sorted, " sp="),
         "missing [" + Join(missing) + "], unexpected [" + Join(extra) + "]");
  }
}

// ---- HLS configuration: the numeric contract ----------------------------------------------

void CheckHlsConfigs(const fs::path& root) {
  static const char* const kFused[] = {"fmadd", "fmacc", "facc"};
  const fs::path tcl = root / "flows/hls/csd_update_pre.tcl";
  const fs::path cfg = root / "flows/hls/csd_update_hls.cfg";
  std::string t, c;
  if (!ReadFile(tcl, &t)) Fail("HLS pre-synthesis Tcl readable", tcl.string(), "cannot read it");
  if (!ReadFile(cfg, &c)) Fail("HLS config readable", cfg.string(), "cannot read it");
  const std::vector<std::string> tl = CodeLines(t), cl = CodeLines(c);
  for (const char* op : kFused) {
    const std::string want_t = std::string("config_op ") + op + " -impl none";
    std::vector<std::string> seen_t;
    for (const std::string& l : tl) {
      if (std::regex_search(l, std::regex(std::string("^config_op\\s+") + op + "\\b")))
        seen_t.push_back(l);
    }
    if (seen_t == std::vector<std::string>{want_t}) {
      Ok(tcl.filename().string() + ": " + want_t);
    } else {
      Fail(tcl.string() + ": exactly one binding of " + op, want_t,
           seen_t.empty() ? "none" : Join(seen_t, " | "));
    }
    const std::string want_c = std::string("syn.op=op:") + op + " impl:none";
    std::vector<std::string> seen_c;
    for (const std::string& l : cl) {
      if (std::regex_search(l, std::regex(std::string("^syn\\.op\\s*=\\s*op:") + op + "\\b")))
        seen_c.push_back(l);
    }
    if (seen_c == std::vector<std::string>{want_c}) {
      Ok(cfg.filename().string() + ": " + want_c);
    } else {
      Fail(cfg.string() + ": exactly one binding of " + op, want_c,
           seen_c.empty() ? "none" : Join(seen_c, " | "));
    }
  }
  // The unified-flow config names the same top.
  const std::string top = std::string("syn.top=") + csdkit::hls::kUpdateKernelName;
  if (std::find(cl.begin(), cl.end(), top) != cl.end()) {
    Ok(cfg.filename().string() + ": " + top);
  } else {
    Fail(cfg.string() + ": synthesis top", top, "absent");
  }
}

// ---- RTL packaging script -----------------------------------------------------------------

void CheckPackagingScript(const fs::path& root) {
  const fs::path tcl = root / "flows/rtl/package_xo.tcl";
  std::string t;
  if (!ReadFile(tcl, &t)) {
    Fail("package_xo.tcl readable", tcl.string(), "cannot read it");
    return;
  }
  // Interface names come from the generated csd_update_ports.tcl, never from the script.
  std::string code;
  for (const std::string& l : CodeLines(t)) code += l + "\n";
  std::smatch m;
  if (std::regex_search(code, m, std::regex(R"(\bm_axi_\w+|\bgmem\d+)"))) {
    Fail("package_xo.tcl names no interface itself (they come from csd_update_ports.tcl)", "none",
         m[0].str());
  } else if (code.find("$csd_master_ports") == std::string::npos ||
             code.find("$csd_control_port") == std::string::npos) {
    Fail("package_xo.tcl uses the generated interface list",
         "$csd_master_ports and $csd_control_port", "not both used");
  } else {
    Ok("package_xo.tcl: interfaces from the generated csd_update_ports.tcl");
  }
}

// ---- RTL ----------------------------------------------------------------------------------

bool ParseSvNumber(const std::string& lit, uint64_t* v) {
  std::string s;
  for (char c : lit) {
    if (c != '_') s += c;
  }
  std::smatch m;
  int base = 10;
  std::string digits = s;
  if (std::regex_match(s, m, std::regex(R"((\d*)'([sS]?)([hHdDbBoO])([0-9a-fA-FxXzZ]+))"))) {
    const char b = static_cast<char>(std::tolower(static_cast<unsigned char>(m[3].str()[0])));
    base = b == 'h' ? 16 : b == 'b' ? 2 : b == 'o' ? 8 : 10;
    digits = m[4];
  } else if (!std::regex_match(s, std::regex(R"(\d+)"))) {
    return false;
  }
  try {
    *v = std::stoull(digits, nullptr, base);
  } catch (...) {
    return false;
  }
  return true;
}

std::vector<fs::path> SvFiles(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> files;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (fs::recursive_directory_iterator it(d, fs::directory_options::skip_permission_denied, ec),
         e;
         it != e; it.increment(ec)) {
      if (ec) break;
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file(ec) && (ext == ".sv" || ext == ".svh" || ext == ".v")) {
        files.push_back(it->path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

/// The generated register package: every ARG_<NAME>_OFFSET, REGS_END, ARG_WORDS and
/// ARG_WORD_MASK against the table.
bool CheckArgsPackage(const fs::path& file, const std::string& code) {
  std::map<std::string, uint64_t> consts;
  std::map<std::string, std::string> texts;  // as written (the mask can exceed 64 bits)
  const std::regex lp(
      R"(localparam\s+[^=;]*?\b([A-Z][A-Z0-9_]*)\s*=\s*([0-9']?[0-9a-zA-Z_']*)\s*;)");
  for (std::sregex_iterator it(code.begin(), code.end(), lp), e; it != e; ++it) {
    uint64_t v = 0;
    texts[(*it)[1].str()] = (*it)[2].str();
    if (ParseSvNumber((*it)[2].str(), &v)) consts[(*it)[1].str()] = v;
  }
  std::vector<std::string> exp, got;
  for (const auto& a : csdkit::hls::kUpdateArgs) {
    std::string up;
    for (const char* c = a.name; *c != '\0'; ++c) up += static_cast<char>(std::toupper(*c));
    const std::string key = "ARG_" + up + "_OFFSET";
    exp.push_back(key + "=" + Hex(a.offset));
    got.push_back(key + "=" +
                  (consts.count(key) ? Hex(static_cast<uint32_t>(consts[key])) : "absent"));
  }
  // The control slave's shape: the argument words from 0x10 to the end of the register file,
  // and which of them are registers (bit k: the word at 0x10 + 4k).
  const uint32_t nwords = (csdkit::hls::kUpdateRegsEnd - 0x10) / 4;
  std::vector<bool> reg(nwords, false);
  for (const auto& a : csdkit::hls::kUpdateArgs) {
    const uint32_t w = (a.offset - 0x10) / 4;
    for (uint32_t j = 0; j < a.bytes / 4; ++j) reg[w + j] = true;
  }
  // Hex digits, most significant first, without leading zeros.
  std::string mask_hex;
  for (int d = static_cast<int>((nwords + 3) / 4) - 1; d >= 0; --d) {
    unsigned nib = 0;
    for (unsigned b = 0; b < 4; ++b) {
      const unsigned k = static_cast<unsigned>(d) * 4 + b;
      if (k < nwords && reg[k]) nib |= 1u << b;
    }
    if (mask_hex.empty() && nib == 0) continue;
    mask_hex += "0123456789abcdef"[nib];
  }
  auto hex_of_text = [](std::string t) {  // "<width>'h<digits>" -> "<digits>" (no leading 0s)
    const size_t h = t.find("'h");
    if (h == std::string::npos) return std::string("absent");
    t = t.substr(h + 2);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t nz = t.find_first_not_of('0');
    return nz == std::string::npos ? std::string("0") : t.substr(nz);
  };
  auto value = [&](const char* key) {
    if (!consts.count(key)) return std::string("absent");
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(consts[key]));
    return std::string(b);
  };
  char end_text[24], words_text[24];
  std::snprintf(end_text, sizeof end_text, "0x%x", csdkit::hls::kUpdateRegsEnd);
  std::snprintf(words_text, sizeof words_text, "0x%x", (csdkit::hls::kUpdateRegsEnd - 0x10) / 4);
  exp.push_back(std::string("REGS_END=") + end_text);
  got.push_back("REGS_END=" + value("REGS_END"));
  exp.push_back(std::string("ARG_WORDS=") + words_text);
  got.push_back("ARG_WORDS=" + value("ARG_WORDS"));
  exp.push_back("ARG_WORD_MASK=0x" + mask_hex);
  got.push_back("ARG_WORD_MASK=" + (texts.count("ARG_WORD_MASK")
                                        ? "0x" + hex_of_text(texts["ARG_WORD_MASK"])
                                        : std::string("absent")));
  if (exp == got) {
    Ok("RTL " + file.string() + ": " + std::to_string(csdkit::hls::kNumUpdateArgs) +
       " argument offsets, REGS_END, ARG_WORDS and ARG_WORD_MASK follow the table");
    return true;
  }
  std::vector<std::string> exp_diff, got_diff;  // only the constants that differ
  for (size_t i = 0; i < exp.size(); ++i) {
    if (exp[i] != got[i]) {
      exp_diff.push_back(exp[i]);
      got_diff.push_back(got[i]);
    }
  }
  Fail("RTL register offsets in " + file.string(), Join(exp_diff), Join(got_diff));
  return false;
}

/// The RTL top: the Vitis interfaces package_xo will infer from its port names.
void CheckRtlTop(const fs::path& file, const std::string& code, size_t at) {
  const size_t end = code.find(");", at);
  const std::string header =
      code.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::set<std::string> ports;
  const std::regex ident(R"(\b([A-Za-z_]\w*)\b)");
  for (std::sregex_iterator it(header.begin(), header.end(), ident), e; it != e; ++it) {
    ports.insert(Lower((*it)[1].str()));
  }
  std::vector<std::string> exp, missing;
  for (const std::string& p :
       {std::string("ap_clk"), std::string("ap_rst_n"), std::string("interrupt")}) {
    exp.push_back(p);
  }
  for (const std::string& bus : csdkit::KernelSignature::UpdateKernel().MasterPorts()) {
    for (const char* sig : {"_awaddr", "_wdata", "_araddr", "_rdata"}) exp.push_back(bus + sig);
  }
  for (const char* sig : {"_awaddr", "_wdata", "_araddr", "_rdata"})
    exp.push_back(std::string("s_axi_control") + sig);
  for (const std::string& p : exp) {
    if (!ports.count(p)) missing.push_back(p);
  }
  if (missing.empty()) {
    Ok("RTL top csd_update (" + file.string() +
       "): ap_clk, ap_rst_n, interrupt, s_axi_control_* and " +
       Join(csdkit::KernelSignature::UpdateKernel().MasterPorts()) +
       " (*_awaddr/_wdata/_araddr/_rdata)");
  } else {
    Fail(
        "RTL top csd_update ports (" + file.string() + ")",
        "ap_clk ap_rst_n interrupt and <if>_awaddr/_wdata/_araddr/_rdata for if in s_axi_control " +
            Join(csdkit::KernelSignature::UpdateKernel().MasterPorts()),
        "missing " + Join(missing));
  }
}

int CheckRtl(const fs::path& root, const std::vector<fs::path>& search) {
  std::vector<fs::path> dirs{root / "rtl"};
  dirs.insert(dirs.end(), search.begin(), search.end());
  bool found_pkg = false, found_top = false;
  const std::regex pkg(R"(\bpackage\s+csd_update_args_pkg\s*;)");
  const std::regex top(R"(\bmodule\s+csd_update\b)");
  for (const fs::path& f : SvFiles(dirs)) {
    std::string text;
    if (!ReadFile(f, &text)) continue;
    const std::string code = StripCComments(text);
    std::smatch m;
    if (std::regex_search(code, m, pkg)) {
      found_pkg = true;
      CheckArgsPackage(f, code);
    }
    if (std::regex_search(code, m, top)) {
      found_top = true;
      CheckRtlTop(f, code, static_cast<size_t>(m.position(0)));
    }
  }
  if (!found_pkg && !found_top) {
    std::printf(
        "skip: no RTL control registers yet (neither package csd_update_args_pkg nor module "
        "csd_update under %s)\n",
        Join([&] {
          std::vector<std::string> v;
          for (const fs::path& d : dirs) v.push_back(d.string());
          return v;
        }())
            .c_str());
    return 77;
  }
  if (!found_pkg) std::printf("note: package csd_update_args_pkg not found (not generated yet?)\n");
  if (!found_top) std::printf("note: RTL top module csd_update not found yet\n");
  return g_failures == 0 ? 0 : 1;
}

int Usage(const char* prog) {
  std::fprintf(stderr, "usage: %s --root SRC [--rtl [--search DIR]...]\n", prog);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path root;
  bool rtl = false;
  std::vector<fs::path> search;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rtl") {
      rtl = true;
    } else if (a == "--root" && i + 1 < argc) {
      root = argv[++i];
    } else if (a == "--search" && i + 1 < argc) {
      search.emplace_back(argv[++i]);
    } else {
      return Usage(argv[0]);
    }
  }
  if (root.empty()) return Usage(argv[0]);
  if (rtl) return CheckRtl(root, search);

  CheckHlsTop(root);
  CheckKernelXml(root / "flows/generated");
  CheckConnectivity(root / "flows/generated");
  CheckHlsConfigs(root);
  CheckPackagingScript(root);
  if (g_failures != 0) {
    std::printf(
        "%d check(s) failed: the flows disagree with the argument table "
        "(hls/include/csdkit/hls/update_args.h)\n",
        g_failures);
    return 1;
  }
  std::printf("all flow files agree with the argument table\n");
  return 0;
}
