// CRC-32 (zlib's polynomial) of a byte range of any length: the checksum of store subgroups,
// device buffers and golden vectors.
#ifndef CSDKIT_CHECKSUM_H_
#define CSDKIT_CHECKSUM_H_

#include <cstdint>

namespace csdkit {

/// CRC-32 of [p, p + len), fed to zlib in chunks below its 32-bit length limit.
uint32_t Crc32(const void* p, uint64_t len);

}  // namespace csdkit

#endif  // CSDKIT_CHECKSUM_H_
