#include "csdkit/platform/checksum.h"

#include <zlib.h>

namespace csdkit {

uint32_t Crc32(const void* p, uint64_t len) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(p);
  while (len > 0) {
    const uInt chunk = static_cast<uInt>(len > (1u << 30) ? (1u << 30) : len);
    c = crc32(c, b, chunk);
    b += chunk;
    len -= chunk;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace csdkit
