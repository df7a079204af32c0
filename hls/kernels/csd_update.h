// Host-side declaration of the updater kernel top (the host model links csd_update.cpp).
#ifndef CSDKIT_KERNELS_CSD_UPDATE_H_
#define CSDKIT_KERNELS_CSD_UPDATE_H_

#include <cstdint>

#include "csdkit/hls/update_args.h"

using csdkit::hls::Word;

// The signature is spelled out below and checked against the table in csd_update.cpp.
extern "C" void csd_update(Word* theta, Word* m, Word* v, const Word* grad, const Word* sp_idx,
                           const Word* sp_blk, Word* out16, Word* status, Word* m_absmax,
                           Word* v_absmax, uint32_t n, uint32_t nnz, uint32_t mode,
                           uint32_t unscale, uint32_t lr, uint32_t beta1, uint32_t omb1,
                           uint32_t beta2, uint32_t omb2, uint32_t eps, uint32_t wd, uint32_t c1,
                           uint32_t c2, uint32_t seed_lo, uint32_t seed_hi, uint32_t step_lo,
                           uint32_t step_hi, uint32_t index_lo, uint32_t index_hi);

#if !defined(__SYNTHESIS__) && !defined(__OPENCL_CPP_VERSION__)
/// Host model only: the same launch through the one runtime-selected datapath the HLS, RTL and
/// OpenCL builds have (csd_update runs the host's specialised datapath, host/datapath.h). The
/// two give the same bits on every launch (tests/kernel_test.cpp).
extern "C" void csd_update_general(Word* theta, Word* m, Word* v, const Word* grad,
                                   const Word* sp_idx, const Word* sp_blk, Word* out16,
                                   Word* status, Word* m_absmax, Word* v_absmax, uint32_t n,
                                   uint32_t nnz, uint32_t mode, uint32_t unscale, uint32_t lr,
                                   uint32_t beta1, uint32_t omb1, uint32_t beta2, uint32_t omb2,
                                   uint32_t eps, uint32_t wd, uint32_t c1, uint32_t c2,
                                   uint32_t seed_lo, uint32_t seed_hi, uint32_t step_lo,
                                   uint32_t step_hi, uint32_t index_lo, uint32_t index_hi);
#endif

#endif  // CSDKIT_KERNELS_CSD_UPDATE_H_
