// Internals shared by the xclbin sources of csdkit_xclbin (xclbin_container.cpp, kernel_xml.cpp,
// xclbin_inspect.cpp, xclbin_writer.cpp); not part of the public API (csdkit/platform/xclbin.h).
// XRT's headers stay out of here: only the .cpp files see the axlf structures.
#ifndef CSDKIT_PLATFORM_XCLBIN_INTERNAL_H_
#define CSDKIT_PLATFORM_XCLBIN_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "csdkit/platform/xclbin.h"

namespace csdkit {
namespace xclbin_internal {

using Kind = XclbinError::Kind;

// ---- Text (xclbin_container.cpp) ------------------------------------------------------------

/// `v` in lower-case hex with a 0x prefix ("0x1c").
std::string Hex(uint64_t v);
/// `s` in lower / upper case (ASCII).
std::string Lower(std::string s);
std::string Upper(std::string s);

// ---- The axlf container (xclbin_container.cpp) ----------------------------------------------

/// A T read from bytes of any alignment.
template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// A fixed-size char field as a string; `terminated` tells whether a NUL was found in it.
std::string FixedString(const void* p, size_t n, bool* terminated);

/// The name of an axlf section kind ("MEM_TOPOLOGY"); "UNKNOWN" for a kind XRT does not define.
const char* SectionKindName(uint32_t kind);

/// One entry of the axlf header's section table.
struct SectionRef {
  uint32_t kind;
  std::string name;
  uint64_t offset;
  uint64_t size;
};

/// Checks the container `data` (read from `path`) against everything XRT's parser will
/// dereference; returns its section table. Throws XclbinError (kFormat) with what is wrong.
std::vector<SectionRef> ValidateAxlf(const std::string& path, const std::vector<char>& data);

}  // namespace xclbin_internal
}  // namespace csdkit

#endif  // CSDKIT_PLATFORM_XCLBIN_INTERNAL_H_
