// The steps of the specialised datapath's q8 formats (datapath.h, UpdateQ8) on their own, on
// the instruction set in use (host builds only). UpdateQ8 runs them inside its chunk loop; they
// are exposed so that tests can drive each over inputs a launch rarely produces (every code of
// both maps with special absmax values, every threshold and its neighbours, counters that
// wrap) and compare it with the state_q8.h function it replaces, bit for bit.
#ifndef CSDKIT_HLS_HOST_DATAPATH_Q8_H_
#define CSDKIT_HLS_HOST_DATAPATH_Q8_H_

#include <cstdint>

namespace csdkit {
namespace hls {
namespace host {

/// DequantQ8 of `blocks` blocks of codes (block b's absmax absmax[b]; the signed map for m, the
/// unsigned one for v) under the IEEE or the FTZ/DAZ policy, into binary32 bit patterns.
void DequantQ8Blocks(const uint8_t* codes, const uint32_t* absmax, uint32_t blocks,
                     bool is_signed, bool ftz, uint32_t* out);

/// QuantizeBlockQ8 of `blocks` whole blocks of binary32 values (bit patterns) into codes and one
/// absmax each. Returns the number of blocks with a non-finite value.
uint32_t QuantizeQ8Blocks(const uint32_t* x, uint32_t blocks, bool is_signed, bool ftz,
                          uint8_t* codes, uint32_t* absmax);

/// RoundBf16Stochastic of theta[0, len) with the bits Random16(seed, step, index + i), into dst;
/// len a multiple of 128, index of 8. Returns the number of non-finite results.
uint64_t RoundBf16Span(const uint32_t* theta, uint32_t len, uint64_t seed, uint64_t step,
                       uint64_t index, uint16_t* dst);

}  // namespace host
}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_HOST_DATAPATH_Q8_H_
