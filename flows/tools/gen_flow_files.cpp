// csdkit_gen_flow_files: writes the Vitis flow inputs that follow from the argument table
// (hls/include/csdkit/hls/update_args.h), so nobody types an offset or a bundle twice:
//
//   kernel.xml                   RTL kernel description for Vivado's package_xo
//   csd_update.connectivity.cfg  v++ --link config: the compute unit and every sp= line
//   csd_update_ports.tcl         interface names and VLNV for flows/rtl/package_xo.tcl
//
//   csdkit_gen_flow_files --out DIR [--bank NAME]    write the files (only those that change)
//   csdkit_gen_flow_files --check DIR [--bank NAME]  compare DIR's files with what would be
//                                                    written; exit 1 on any difference
//
// flows/generated/ holds checked-in copies (the Makefile uses them on machines without a CMake
// build); the `flows_generated` ctest runs --check on them.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/platform/xclbin.h"
#include "flow_files.h"

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

/// First line where two texts differ (1-based), with both lines.
std::string FirstDifference(const std::string& exp, const std::string& got) {
  size_t line = 1, i = 0;
  while (i < exp.size() && i < got.size() && exp[i] == got[i]) {
    if (exp[i] == '\n') ++line;
    ++i;
  }
  auto line_at = [](const std::string& s, size_t pos) {
    const size_t b = s.rfind('\n', pos == 0 ? 0 : pos - 1);
    const size_t start = (b == std::string::npos || pos == 0) ? 0 : b + 1;
    const size_t e = s.find('\n', start);
    return s.substr(start, e == std::string::npos ? std::string::npos : e - start);
  };
  return "line " + std::to_string(line) + "\n    EXP: " + line_at(exp, i) +
         "\n    GOT: " + line_at(got, i);
}

int Usage(const char* prog) {
  std::fprintf(stderr, "usage: %s (--out DIR | --check DIR) [--bank NAME]\n", prog);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, check, bank = csdkit::kSmartSsdMemoryBank;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(argv[0]);
    if (a == "--out") {
      out = argv[++i];
    } else if (a == "--check") {
      check = argv[++i];
    } else if (a == "--bank") {
      bank = argv[++i];
    } else {
      return Usage(argv[0]);
    }
  }
  if (out.empty() == check.empty()) return Usage(argv[0]);

  const csdkit::KernelSignature sig = csdkit::KernelSignature::UpdateKernel();
  const std::vector<std::pair<std::string, std::string>> files = {
      {"kernel.xml", csdkit::RtlKernelXml(sig)},
      {sig.name + ".connectivity.cfg", csdkit::ConnectivityConfig(sig, bank)},
      {sig.name + "_ports.tcl", csdkit::PackagingPortsTcl(sig)},
  };

  int rc = 0;
  for (const auto& [name, text] : files) {
    if (!check.empty()) {
      const std::string path = check + "/" + name;
      std::string have;
      if (!ReadFile(path, &have)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], path.c_str());
        rc = 1;
      } else if (have != text) {
        std::fprintf(stderr,
                     "%s: %s is stale: it differs from what the argument table generates, at %s\n"
                     "  Regenerate: csdkit_gen_flow_files --out %s (from the build tree)\n",
                     argv[0], path.c_str(), FirstDifference(text, have).c_str(), check.c_str());
        rc = 1;
      } else {
        std::printf("%s matches the argument table\n", path.c_str());
      }
      continue;
    }
    const std::string path = out + "/" + name;
    std::string have;
    if (ReadFile(path, &have) && have == text) continue;  // unchanged: keep the timestamp
    std::ofstream o(path, std::ios::binary | std::ios::trunc);
    o << text;
    o.close();
    if (!o) {
      std::fprintf(stderr, "%s: cannot write %s\n", argv[0], path.c_str());
      rc = 1;
    }
  }
  return rc;
}
