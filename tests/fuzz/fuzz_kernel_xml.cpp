// fuzz_kernel_xml: the kernel XML scanner (host/platform/src/kernel_xml.cpp), which reads an RTL
// kernel.xml or an xclbin's EMBEDDED_METADATA without an XML library.
//
// The input is the XML text; the harness looks for kernel "csd_update" in it and compares what
// it found with the argument table's signature. A separate target rather than a mode of
// fuzz_xclbin: the input is text, not a binary container, so it gets its own corpus, length
// limit and dictionary, and fuzz_xclbin reaches this scanner only for files XRT accepts.
//
// Expected outcome: XclbinError (no such kernel, an <arg> without its numeric attributes).
// Findings: anything else — a crash, a sanitizer report, an exception of another type, or an
// accepted signature that breaks what ParseKernelXml promises (the asked-for name, arguments in
// ascending id order).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "csdkit/platform/xclbin.h"
#include "fuzz_util.h"

namespace {
constexpr const char* kTarget = "fuzz_kernel_xml";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const csdkit::KernelSignature expected = csdkit::KernelSignature::UpdateKernel();
  const std::string xml(reinterpret_cast<const char*>(data), size);
  try {
    csdkit::KernelSignature sig;
    try {
      sig = csdkit::ParseKernelXml(xml, expected.name);
    } catch (const csdkit::XclbinError& e) {
      csdkit::fuzz::Refused(kTarget, e);
      return 0;
    }
    if (sig.name != expected.name) {
      csdkit::fuzz::Violation(
          kTarget, "asked for kernel " + expected.name + ", got one named '" + sig.name + "'");
    }
    for (size_t i = 1; i < sig.args.size(); ++i) {
      if (sig.args[i].index < sig.args[i - 1].index) {
        csdkit::fuzz::Violation(kTarget, "arguments out of id order: arg " + std::to_string(i) +
                                             " has id " + std::to_string(sig.args[i].index) +
                                             " after " + std::to_string(sig.args[i - 1].index));
      }
    }
    // The comparison a load makes next; it reports differences, it never throws.
    (void)csdkit::CompareSignatures(expected, sig, /*check_ports=*/true);
    (void)sig.MasterPorts();
    csdkit::fuzz::Accepted(kTarget, std::to_string(sig.args.size()) + " arguments");
  } catch (const std::exception& e) {
    csdkit::fuzz::Finding(kTarget, e);
  } catch (...) {
    csdkit::fuzz::FindingUnknown(kTarget);
  }
  return 0;
}
