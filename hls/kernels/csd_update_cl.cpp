// The OpenCL entry point of csd_update: the HLS top (csd_update.cpp) compiled as C++ for OpenCL
// (clang -cl-std=clc++ -target spir64) into a SPIR binary that any OpenCL device with
// cl_khr_spir runs (PoCL on the CPU in CI). One source: this file adds only the kernel function;
// the kernel math, tiles and validation are csd_update.cpp and the L1 headers, unchanged.
//
// One work-item runs a whole launch, as an HLS task kernel does. Pointers arrive in the global
// address space and are passed on as generic pointers (OpenCL C 2.0 generic address space).
#include "csd_update.cpp"

kernel void csd_update_cl(global Word* theta, global Word* m, global Word* v,
                          global const Word* grad, global const Word* sp_idx,
                          global const Word* sp_blk, global Word* out16, global Word* status,
                          global Word* m_absmax, global Word* v_absmax, uint32_t n, uint32_t nnz,
                          uint32_t mode, uint32_t unscale, uint32_t lr, uint32_t beta1,
                          uint32_t omb1, uint32_t beta2, uint32_t omb2, uint32_t eps, uint32_t wd,
                          uint32_t c1, uint32_t c2, uint32_t seed_lo, uint32_t seed_hi,
                          uint32_t step_lo, uint32_t step_hi, uint32_t index_lo,
                          uint32_t index_hi) {
  csd_update(theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax, n, nnz, mode,
             unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo, seed_hi, step_lo,
             step_hi, index_lo, index_hi);
}
