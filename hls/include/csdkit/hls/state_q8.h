// The compressed state formats of docs/state-formats.md (issue 28), their numeric core in HLS
// style: the 8-bit blockwise moments (`q8`: dynamic-exponent maps, one binary32 absmax per block
// of 256) and θ in bf16 rounded stochastically with Philox4x32-10 bits (`q8-bf16`).
//
// Integer code where the contract speaks of bits, the contract's binary32 operations (fp32.h,
// with the launch's IEEE or FTZ/DAZ policy) where it speaks of binary32 arithmetic. The tables
// are embedded (the contract: never recomputed at run time), generated from the independent
// numpy reference (tests/reference/state_formats.py); tests/state_q8_test.cpp checks every
// function here against that reference's golden vectors bit for bit and the generator against
// the Random123 library. The kernel (hls/kernels/csd_update.cpp) reads and writes its q8 state
// with these functions.
#ifndef CSDKIT_HLS_STATE_Q8_H_
#define CSDKIT_HLS_STATE_Q8_H_

#include <cstdint>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp32.h"

namespace csdkit {
namespace hls {

/// Elements per block: each moment has one absmax per block.
constexpr int kQ8Block = 256;

// The maps and their thresholds as binary32 bit patterns, in index order: the signed map's 128
// magnitudes M and 127 thresholds TM, the unsigned map's 256 values U and 255 thresholds TU
// (docs/state-formats.md, "The quantization maps"; SHA-256 of their little-endian bytes in
// tests/reference/state_formats.py --tables).
constexpr uint32_t kQ8SignedMag[128] = {
    0x00000000u, 0x365a1a93u, 0x370205ffu, 0x37b24207u, 0x38378034u, 0x388aefb3u,
    0x38ba1f4bu, 0x3923d70au, 0x398ce704u, 0x39c7e282u, 0x3a016f00u, 0x3a1eecc0u,
    0x3a3c6a7fu, 0x3a59e83eu, 0x3a7765feu, 0x3aa7ef9eu, 0x3af1a9fcu, 0x3b1db22du,
    0x3b428f5cu, 0x3b676c8bu, 0x3b8624ddu, 0x3b989375u, 0x3bab020cu, 0x3bbd70a4u,
    0x3bcfdf3bu, 0x3be24dd3u, 0x3bf4bc6au, 0x3c039581u, 0x3c0ccccdu, 0x3c160419u,
    0x3c1f3b64u, 0x3c3ae148u, 0x3c68f5c3u, 0x3c8b851fu, 0x3ca28f5cu, 0x3cb9999au,
    0x3cd0a3d7u, 0x3ce7ae14u, 0x3cfeb852u, 0x3d0ae148u, 0x3d166666u, 0x3d21eb85u,
    0x3d2d70a4u, 0x3d38f5c3u, 0x3d447ae1u, 0x3d500000u, 0x3d5b851fu, 0x3d670a3du,
    0x3d728f5cu, 0x3d7e147bu, 0x3d84cccdu, 0x3d8a8f5cu, 0x3d9051ecu, 0x3d96147bu,
    0x3d9bd70au, 0x3da1999au, 0x3da75c29u, 0x3dad1eb8u, 0x3db2e148u, 0x3db8a3d7u,
    0x3dbe6666u, 0x3dc428f6u, 0x3dc9eb85u, 0x3ddb3333u, 0x3df80000u, 0x3e0a6666u,
    0x3e18cccdu, 0x3e273333u, 0x3e35999au, 0x3e440000u, 0x3e526666u, 0x3e60cccdu,
    0x3e6f3333u, 0x3e7d999au, 0x3e860000u, 0x3e8d3333u, 0x3e946666u, 0x3e9b999au,
    0x3ea2cccdu, 0x3eaa0000u, 0x3eb13333u, 0x3eb86666u, 0x3ebf999au, 0x3ec6cccdu,
    0x3ece0000u, 0x3ed53333u, 0x3edc6666u, 0x3ee3999au, 0x3eeacccdu, 0x3ef20000u,
    0x3ef93333u, 0x3f003333u, 0x3f03cccdu, 0x3f076666u, 0x3f0b0000u, 0x3f0e999au,
    0x3f123333u, 0x3f15cccdu, 0x3f196666u, 0x3f1d0000u, 0x3f20999au, 0x3f243333u,
    0x3f27cccdu, 0x3f2b6666u, 0x3f2f0000u, 0x3f32999au, 0x3f363333u, 0x3f39cccdu,
    0x3f3d6666u, 0x3f410000u, 0x3f44999au, 0x3f483333u, 0x3f4bcccdu, 0x3f4f6666u,
    0x3f530000u, 0x3f56999au, 0x3f5a3333u, 0x3f5dcccdu, 0x3f616666u, 0x3f650000u,
    0x3f68999au, 0x3f6c3333u, 0x3f6fcccdu, 0x3f736666u, 0x3f770000u, 0x3f7a999au,
    0x3f7e3333u, 0x3f800000u,
};
constexpr uint32_t kQ8SignedThr[127] = {
    0x35da1a93u, 0x36b88ca4u, 0x37734506u, 0x3808509cu, 0x3866afcdu, 0x38a2877fu,
    0x39007358u, 0x395ed289u, 0x39aa64c3u, 0x39e56041u, 0x3a102de0u, 0x3a2daba0u,
    0x3a4b295eu, 0x3a68a71eu, 0x3a91d14eu, 0x3acccccdu, 0x3b0b4396u, 0x3b3020c4u,
    0x3b54fdf4u, 0x3b79db22u, 0x3b8f5c29u, 0x3ba1cac0u, 0x3bb43958u, 0x3bc6a7f0u,
    0x3bd91687u, 0x3beb851eu, 0x3bfdf3b6u, 0x3c083127u, 0x3c116873u, 0x3c1a9fbeu,
    0x3c2d0e56u, 0x3c51eb86u, 0x3c800000u, 0x3c970a3eu, 0x3cae147bu, 0x3cc51eb8u,
    0x3cdc28f6u, 0x3cf33333u, 0x3d051eb8u, 0x3d10a3d7u, 0x3d1c28f6u, 0x3d27ae14u,
    0x3d333334u, 0x3d3eb852u, 0x3d4a3d70u, 0x3d55c290u, 0x3d6147aeu, 0x3d6cccccu,
    0x3d7851ecu, 0x3d81eb85u, 0x3d87ae14u, 0x3d8d70a4u, 0x3d933334u, 0x3d98f5c2u,
    0x3d9eb852u, 0x3da47ae2u, 0x3daa3d70u, 0x3db00000u, 0x3db5c290u, 0x3dbb851eu,
    0x3dc147aeu, 0x3dc70a3eu, 0x3dd28f5cu, 0x3de9999au, 0x3e033333u, 0x3e11999au,
    0x3e200000u, 0x3e2e6666u, 0x3e3ccccdu, 0x3e4b3333u, 0x3e59999au, 0x3e680000u,
    0x3e766666u, 0x3e826666u, 0x3e89999au, 0x3e90ccccu, 0x3e980000u, 0x3e9f3334u,
    0x3ea66666u, 0x3ead999au, 0x3eb4ccccu, 0x3ebc0000u, 0x3ec33334u, 0x3eca6666u,
    0x3ed1999au, 0x3ed8ccccu, 0x3ee00000u, 0x3ee73334u, 0x3eee6666u, 0x3ef5999au,
    0x3efcccccu, 0x3f020000u, 0x3f05999au, 0x3f093333u, 0x3f0ccccdu, 0x3f106666u,
    0x3f140000u, 0x3f17999au, 0x3f1b3333u, 0x3f1ecccdu, 0x3f226666u, 0x3f260000u,
    0x3f29999au, 0x3f2d3333u, 0x3f30cccdu, 0x3f346666u, 0x3f380000u, 0x3f3b999au,
    0x3f3f3333u, 0x3f42cccdu, 0x3f466666u, 0x3f4a0000u, 0x3f4d999au, 0x3f513333u,
    0x3f54cccdu, 0x3f586666u, 0x3f5c0000u, 0x3f5f999au, 0x3f633333u, 0x3f66cccdu,
    0x3f6a6666u, 0x3f6e0000u, 0x3f71999au, 0x3f753333u, 0x3f78cccdu, 0x3f7c6666u,
    0x3f7f199au,
};
constexpr uint32_t kQ8Unsigned[256] = {
    0x00000000u, 0x34ae7ba9u, 0x35500998u, 0x360e9b39u, 0x3692ccf7u, 0x36de4c51u,
    0x3714e5d6u, 0x3783126fu, 0x37e1719fu, 0x381fe868u, 0x384f1801u, 0x387e4799u,
    0x3896bb99u, 0x38ae5365u, 0x38c5eb31u, 0x3906594bu, 0x394154cau, 0x397c5048u,
    0x399ba5e3u, 0x39b923a3u, 0x39d6a162u, 0x39f41f21u, 0x3a08ce70u, 0x3a178d50u,
    0x3a264c30u, 0x3a350b0fu, 0x3a43c9efu, 0x3a5288ceu, 0x3a6147aeu, 0x3a70068eu,
    0x3a7ec56du, 0x3a958106u, 0x3aba5e35u, 0x3adf3b64u, 0x3b020c4au, 0x3b147ae1u,
    0x3b26e979u, 0x3b395810u, 0x3b4bc6a8u, 0x3b5e353fu, 0x3b70a3d7u, 0x3b818937u,
    0x3b8ac083u, 0x3b93f7cfu, 0x3b9d2f1bu, 0x3ba66666u, 0x3baf9db2u, 0x3bb8d4feu,
    0x3bc20c4au, 0x3bcb4396u, 0x3bd47ae1u, 0x3bddb22du, 0x3be6e979u, 0x3bf020c5u,
    0x3bf95810u, 0x3c0147aeu, 0x3c05e354u, 0x3c0a7efau, 0x3c0f1aa0u, 0x3c13b646u,
    0x3c1851ecu, 0x3c1ced91u, 0x3c218937u, 0x3c2f5c29u, 0x3c466666u, 0x3c5d70a4u,
    0x3c747ae1u, 0x3c85c28fu, 0x3c9147aeu, 0x3c9ccccdu, 0x3ca851ecu, 0x3cb3d70au,
    0x3cbf5c29u, 0x3ccae148u, 0x3cd66666u, 0x3ce1eb85u, 0x3ced70a4u, 0x3cf8f5c3u,
    0x3d023d71u, 0x3d080000u, 0x3d0dc28fu, 0x3d13851fu, 0x3d1947aeu, 0x3d1f0a3du,
    0x3d24cccdu, 0x3d2a8f5cu, 0x3d3051ecu, 0x3d36147bu, 0x3d3bd70au, 0x3d41999au,
    0x3d475c29u, 0x3d4d1eb8u, 0x3d52e148u, 0x3d58a3d7u, 0x3d5e6666u, 0x3d6428f6u,
    0x3d69eb85u, 0x3d6fae14u, 0x3d7570a4u, 0x3d7b3333u, 0x3d807ae1u, 0x3d835c29u,
    0x3d863d71u, 0x3d891eb8u, 0x3d8c0000u, 0x3d8ee148u, 0x3d91c28fu, 0x3d94a3d7u,
    0x3d97851fu, 0x3d9a6666u, 0x3d9d47aeu, 0x3da028f6u, 0x3da30a3du, 0x3da5eb85u,
    0x3da8cccdu, 0x3dabae14u, 0x3dae8f5cu, 0x3db170a4u, 0x3db451ecu, 0x3db73333u,
    0x3dba147bu, 0x3dbcf5c3u, 0x3dbfd70au, 0x3dc2b852u, 0x3dc5999au, 0x3dc87ae1u,
    0x3dcb5c29u, 0x3dd40000u, 0x3de26666u, 0x3df0cccdu, 0x3dff3333u, 0x3e06cccdu,
    0x3e0e0000u, 0x3e153333u, 0x3e1c6666u, 0x3e23999au, 0x3e2acccdu, 0x3e320000u,
    0x3e393333u, 0x3e406666u, 0x3e47999au, 0x3e4ecccdu, 0x3e560000u, 0x3e5d3333u,
    0x3e646666u, 0x3e6b999au, 0x3e72cccdu, 0x3e7a0000u, 0x3e80999au, 0x3e843333u,
    0x3e87cccdu, 0x3e8b6666u, 0x3e8f0000u, 0x3e92999au, 0x3e963333u, 0x3e99cccdu,
    0x3e9d6666u, 0x3ea10000u, 0x3ea4999au, 0x3ea83333u, 0x3eabcccdu, 0x3eaf6666u,
    0x3eb30000u, 0x3eb6999au, 0x3eba3333u, 0x3ebdcccdu, 0x3ec16666u, 0x3ec50000u,
    0x3ec8999au, 0x3ecc3333u, 0x3ecfcccdu, 0x3ed36666u, 0x3ed70000u, 0x3eda999au,
    0x3ede3333u, 0x3ee1cccdu, 0x3ee56666u, 0x3ee90000u, 0x3eec999au, 0x3ef03333u,
    0x3ef3cccdu, 0x3ef76666u, 0x3efb0000u, 0x3efe999au, 0x3f01199au, 0x3f02e666u,
    0x3f04b333u, 0x3f068000u, 0x3f084ccdu, 0x3f0a199au, 0x3f0be666u, 0x3f0db333u,
    0x3f0f8000u, 0x3f114ccdu, 0x3f13199au, 0x3f14e666u, 0x3f16b333u, 0x3f188000u,
    0x3f1a4ccdu, 0x3f1c199au, 0x3f1de666u, 0x3f1fb333u, 0x3f218000u, 0x3f234ccdu,
    0x3f25199au, 0x3f26e666u, 0x3f28b333u, 0x3f2a8000u, 0x3f2c4ccdu, 0x3f2e199au,
    0x3f2fe666u, 0x3f31b333u, 0x3f338000u, 0x3f354ccdu, 0x3f37199au, 0x3f38e666u,
    0x3f3ab333u, 0x3f3c8000u, 0x3f3e4ccdu, 0x3f40199au, 0x3f41e666u, 0x3f43b333u,
    0x3f458000u, 0x3f474ccdu, 0x3f49199au, 0x3f4ae666u, 0x3f4cb333u, 0x3f4e8000u,
    0x3f504ccdu, 0x3f52199au, 0x3f53e666u, 0x3f55b333u, 0x3f578000u, 0x3f594ccdu,
    0x3f5b199au, 0x3f5ce666u, 0x3f5eb333u, 0x3f608000u, 0x3f624ccdu, 0x3f64199au,
    0x3f65e666u, 0x3f67b333u, 0x3f698000u, 0x3f6b4ccdu, 0x3f6d199au, 0x3f6ee666u,
    0x3f70b333u, 0x3f728000u, 0x3f744ccdu, 0x3f76199au, 0x3f77e666u, 0x3f79b333u,
    0x3f7b8000u, 0x3f7d4ccdu, 0x3f7f199au, 0x3f800000u,
};
constexpr uint32_t kQ8UnsignedThr[255] = {
    0x342e7ba9u, 0x3513a3b6u, 0x35c29d9fu, 0x365a1a94u, 0x36b88ca4u, 0x370205ffu,
    0x374d855au, 0x37b24207u, 0x3808509cu, 0x38378034u, 0x3866afcdu, 0x388aefb3u,
    0x38a2877fu, 0x38ba1f4bu, 0x38e94ee4u, 0x3923d70au, 0x395ed289u, 0x398ce704u,
    0x39aa64c3u, 0x39c7e282u, 0x39e56042u, 0x3a016f00u, 0x3a102de0u, 0x3a1eecc0u,
    0x3a2daba0u, 0x3a3c6a7fu, 0x3a4b295eu, 0x3a59e83eu, 0x3a68a71eu, 0x3a7765feu,
    0x3a8a71deu, 0x3aa7ef9eu, 0x3accccccu, 0x3af1a9fcu, 0x3b0b4396u, 0x3b1db22du,
    0x3b3020c4u, 0x3b428f5cu, 0x3b54fdf4u, 0x3b676c8bu, 0x3b79db22u, 0x3b8624ddu,
    0x3b8f5c29u, 0x3b989375u, 0x3ba1cac0u, 0x3bab020cu, 0x3bb43958u, 0x3bbd70a4u,
    0x3bc6a7f0u, 0x3bcfdf3cu, 0x3bd91687u, 0x3be24dd3u, 0x3beb851fu, 0x3bf4bc6au,
    0x3bfdf3b6u, 0x3c039581u, 0x3c083127u, 0x3c0ccccdu, 0x3c116873u, 0x3c160419u,
    0x3c1a9fbeu, 0x3c1f3b64u, 0x3c2872b0u, 0x3c3ae148u, 0x3c51eb85u, 0x3c68f5c2u,
    0x3c800000u, 0x3c8b851eu, 0x3c970a3eu, 0x3ca28f5cu, 0x3cae147bu, 0x3cb9999au,
    0x3cc51eb8u, 0x3cd0a3d7u, 0x3cdc28f6u, 0x3ce7ae14u, 0x3cf33334u, 0x3cfeb852u,
    0x3d051eb8u, 0x3d0ae148u, 0x3d10a3d7u, 0x3d166666u, 0x3d1c28f6u, 0x3d21eb85u,
    0x3d27ae14u, 0x3d2d70a4u, 0x3d333334u, 0x3d38f5c2u, 0x3d3eb852u, 0x3d447ae2u,
    0x3d4a3d70u, 0x3d500000u, 0x3d55c290u, 0x3d5b851eu, 0x3d6147aeu, 0x3d670a3eu,
    0x3d6cccccu, 0x3d728f5cu, 0x3d7851ecu, 0x3d7e147au, 0x3d81eb85u, 0x3d84cccdu,
    0x3d87ae14u, 0x3d8a8f5cu, 0x3d8d70a4u, 0x3d9051ecu, 0x3d933333u, 0x3d96147bu,
    0x3d98f5c2u, 0x3d9bd70au, 0x3d9eb852u, 0x3da1999au, 0x3da47ae1u, 0x3da75c29u,
    0x3daa3d70u, 0x3dad1eb8u, 0x3db00000u, 0x3db2e148u, 0x3db5c290u, 0x3db8a3d7u,
    0x3dbb851fu, 0x3dbe6666u, 0x3dc147aeu, 0x3dc428f6u, 0x3dc70a3eu, 0x3dc9eb85u,
    0x3dcfae14u, 0x3ddb3333u, 0x3de9999au, 0x3df80000u, 0x3e033333u, 0x3e0a6666u,
    0x3e11999au, 0x3e18ccccu, 0x3e200000u, 0x3e273334u, 0x3e2e6666u, 0x3e35999au,
    0x3e3cccccu, 0x3e440000u, 0x3e4b3334u, 0x3e526666u, 0x3e59999au, 0x3e60ccccu,
    0x3e680000u, 0x3e6f3334u, 0x3e766666u, 0x3e7d999au, 0x3e826666u, 0x3e860000u,
    0x3e89999au, 0x3e8d3333u, 0x3e90cccdu, 0x3e946666u, 0x3e980000u, 0x3e9b999au,
    0x3e9f3333u, 0x3ea2cccdu, 0x3ea66666u, 0x3eaa0000u, 0x3ead999au, 0x3eb13333u,
    0x3eb4cccdu, 0x3eb86666u, 0x3ebc0000u, 0x3ebf999au, 0x3ec33333u, 0x3ec6cccdu,
    0x3eca6666u, 0x3ece0000u, 0x3ed1999au, 0x3ed53333u, 0x3ed8cccdu, 0x3edc6666u,
    0x3ee00000u, 0x3ee3999au, 0x3ee73333u, 0x3eeacccdu, 0x3eee6666u, 0x3ef20000u,
    0x3ef5999au, 0x3ef93333u, 0x3efccccdu, 0x3f003334u, 0x3f020000u, 0x3f03ccccu,
    0x3f05999au, 0x3f076666u, 0x3f093334u, 0x3f0b0000u, 0x3f0cccccu, 0x3f0e999au,
    0x3f106666u, 0x3f123334u, 0x3f140000u, 0x3f15ccccu, 0x3f17999au, 0x3f196666u,
    0x3f1b3334u, 0x3f1d0000u, 0x3f1eccccu, 0x3f20999au, 0x3f226666u, 0x3f243334u,
    0x3f260000u, 0x3f27ccccu, 0x3f29999au, 0x3f2b6666u, 0x3f2d3334u, 0x3f2f0000u,
    0x3f30ccccu, 0x3f32999au, 0x3f346666u, 0x3f363334u, 0x3f380000u, 0x3f39ccccu,
    0x3f3b999au, 0x3f3d6666u, 0x3f3f3334u, 0x3f410000u, 0x3f42ccccu, 0x3f44999au,
    0x3f466666u, 0x3f483334u, 0x3f4a0000u, 0x3f4bccccu, 0x3f4d999au, 0x3f4f6666u,
    0x3f513334u, 0x3f530000u, 0x3f54ccccu, 0x3f56999au, 0x3f586666u, 0x3f5a3334u,
    0x3f5c0000u, 0x3f5dccccu, 0x3f5f999au, 0x3f616666u, 0x3f633334u, 0x3f650000u,
    0x3f66ccccu, 0x3f68999au, 0x3f6a6666u, 0x3f6c3334u, 0x3f6e0000u, 0x3f6fccccu,
    0x3f71999au, 0x3f736666u, 0x3f753334u, 0x3f770000u, 0x3f78ccccu, 0x3f7a999au,
    0x3f7c6666u, 0x3f7e3334u, 0x3f7f8ccdu,
};

/// Dequantizes one code of a block whose absmax is `absmax`: signed map (m, momentum, Lion's
/// m): (−1)^(c >> 7) · (M[c & 0x7F] · absmax); unsigned map (v, Adagrad's sum): U[c] · absmax.
/// One binary32 multiplication under the policy of `f`; the sign is applied after it, so a −0
/// code reads as −0.
inline float DequantQ8(uint8_t code, float absmax, bool is_signed, const Fp32& f) {
  const uint32_t table = is_signed ? kQ8SignedMag[code & 0x7Fu] : kQ8Unsigned[code];
  const float mag = f.Mul(U2F(table), absmax);
  const uint32_t neg = is_signed && (code & 0x80u) != 0u ? kSignMask : 0u;
  return U2F(F2U(mag) ^ neg);
}

/// The number of entries of the ascending table `thr` (n of them, binary32 bit patterns of
/// non-negative values) that are <= q (a non-negative binary32, as bits): the magnitude index
/// before the non-zero rule. Seven or eight halvings (a parallel compare in the RTL).
inline uint32_t Q8Index(uint32_t q, const uint32_t* thr, uint32_t n) {
  uint32_t lo = 0, len = n;  // invariant: the answer is in [lo, lo + len]
  while (len > 0) {
    const uint32_t mid = len / 2;  // (not `half`: a type in C++ for OpenCL)
    if (thr[lo + mid] <= q) {  // non-negative binary32: bit order is value order
      lo += mid + 1;
      len -= mid + 1;
    } else {
      len = mid;
    }
  }
  return lo;
}

/// Quantizes one block's new binary32 values x[0..n) (n = kQ8Block but where a test wants a
/// partial block) into codes[0..n) and *absmax, by the contract's steps: a block with a NaN or
/// an infinity stores the canonical NaN as absmax and codes 0; absmax = max |x| as read under
/// the policy; a block whose absmax is below 2^-126 stores +0 and sign-only codes; else
/// r = 1 / absmax (one division, nearest even), q = |x| · r under the policy, the index is the
/// number of thresholds <= q, and a non-zero value never gets index 0. Signed codes keep the
/// sign bit of x (−0 included); the unsigned map encodes |x|.
inline void QuantizeBlockQ8(const float* x, int n, bool is_signed, const Fp32& f,
                            uint8_t* codes, float* absmax) {
  bool finite = true;
  uint32_t amax = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t u = F2U(x[i]);
    finite &= !IsNonFinite(u);
    const uint32_t mag = F2U(f.Mul(U2F(u & ~kSignMask), 1.0f));  // |x| as read (DAZ)
    amax = mag > amax ? mag : amax;
  }
  if (!finite) {
    for (int i = 0; i < n; ++i) codes[i] = 0;
    *absmax = U2F(kCanonicalNan);
    return;
  }
  if (amax < 0x00800000u) {  // zero or subnormal: the tiny block
    for (int i = 0; i < n; ++i) {
      codes[i] = is_signed ? static_cast<uint8_t>((F2U(x[i]) >> 31) << 7) : 0u;
    }
    *absmax = 0.0f;
    return;
  }
  const float a = U2F(amax);
  const float r = 1.0f / a;  // a >= 2^-126: a plain binary32 division, nearest even
  const uint32_t* thr = is_signed ? kQ8SignedThr : kQ8UnsignedThr;
  const uint32_t nthr = is_signed ? 127u : 255u;
  for (int i = 0; i < n; ++i) {
    const uint32_t u = F2U(x[i]);
    const float mag = f.Mul(U2F(u & ~kSignMask), 1.0f);  // |x| as read (DAZ)
    const uint32_t q = F2U(f.Mul(mag, r));
    uint32_t k = Q8Index(q, thr, nthr);
    if (k == 0u && F2U(mag) != 0u) k = 1u;  // a non-zero value never becomes zero
    codes[i] = static_cast<uint8_t>(is_signed ? ((u >> 31) << 7) | k : k);
  }
  *absmax = a;
}

/// Philox4x32-10 (Salmon et al., SC'11; Random123's philox4x32_R(10, ctr, key)): the four
/// output words of counter ctr[0..3] under key key[0..1].
inline void Philox4x32x10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// The eight 16-bit random numbers of the store elements 8e .. 8e + 7 in the step `step` being
/// committed, under the store's 64-bit `seed`: one Philox of counter (e lo, e hi, step lo,
/// step hi) under key (seed lo, seed hi); element j = index & 7 takes the low (j even) or high
/// (j odd) half of word j >> 1, so r[j] is element 8e + j's.
inline void Random16Group(uint64_t seed, uint64_t step, uint64_t e, uint32_t r[8]) {
  const uint32_t ctr[4] = {static_cast<uint32_t>(e), static_cast<uint32_t>(e >> 32),
                           static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  uint32_t w[4];
  Philox4x32x10(ctr, key, w);
  for (unsigned j = 0; j < 8u; ++j) r[j] = (w[j >> 1] >> (16u * (j & 1u))) & 0xFFFFu;
}

/// The 16 random bits R of store element `index` in the step `step` being committed, under
/// the store's 64-bit `seed`: its number of Random16Group(seed, step, index >> 3).
inline uint32_t Random16(uint64_t seed, uint64_t step, uint64_t index) {
  uint32_t r[8];
  Random16Group(seed, step, index >> 3, r);
  return r[index & 7u];
}

/// θ' (binary32, canonical NaN) to bf16 with stochastic rounding: (bits + R) >> 16, NaN to
/// 0x7fc0. A bf16 value is unchanged; otherwise it rounds away from zero with probability
/// (low 16 bits) / 2^16, to infinity above the largest finite bf16.
inline uint16_t RoundBf16Stochastic(float theta, uint32_t r16) {
  const uint32_t b = F2U(theta);
  if ((b & ~kSignMask) > kExpMask) return 0x7fc0u;
  return static_cast<uint16_t>((b + (r16 & 0xFFFFu)) >> 16);
}

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_STATE_Q8_H_
