// CRC-32 (zlib's polynomial) of a byte range of any length: the checksum of store subgroups,
// device buffers and golden vectors.
#ifndef CSDKIT_CHECKSUM_H_
#define CSDKIT_CHECKSUM_H_

#include <cstdint>

namespace csdkit {

/// CRC-32 of [p, p + len), fed to zlib in chunks below its 32-bit length limit.
uint32_t Crc32(const void* p, uint64_t len);

/// CRC-32 of `len` zero bytes, without touching memory: built from the CRCs of power-of-two
/// runs of zeros with zlib's crc32_combine64, so it costs O(log^2 len) whatever the length.
/// Equal to Crc32 over a zero-filled buffer of that length. The null (planning) device reports
/// it for its memory, which reads as zeros.
uint32_t Crc32OfZeros(uint64_t len);

}  // namespace csdkit

#endif  // CSDKIT_CHECKSUM_H_
