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

uint32_t Crc32OfZeros(uint64_t len) {
  // run = CRC of 2^bit zero bytes; the result grows by the runs of len's set bits, low first
  // (all runs are zeros, so their order does not matter).
  const Bytef zero = 0;
  uLong run = crc32(crc32(0L, Z_NULL, 0), &zero, 1);
  uLong c = crc32(0L, Z_NULL, 0);
  for (uint64_t bit = 1; len != 0; bit <<= 1) {
    if (len & 1) c = crc32_combine64(c, run, static_cast<z_off64_t>(bit));
    len >>= 1;
    if (len != 0) run = crc32_combine64(run, run, static_cast<z_off64_t>(bit));
  }
  return static_cast<uint32_t>(c);
}

}  // namespace csdkit
