// csd_update: the optimizer-updater kernel (SmartUpdate), with the fused sparse decoder.
//
// This one file is both the Vitis HLS input and, compiled with g++, the host bit-accurate model.
// Structure per launch: decode the mode; if the gradient is sparse, validate the whole stream
// (block table + indices) before anything is written; then, tile by tile, burst-load the state
// words, produce the binary32 gradient (unpack dense words, or merge-decode the sparse entries),
// run the per-element rule of rules.h, and burst-store the state and the low-precision copy.
// The status word is written last, always; on any error it is the only write.
//
// Buffers are whole 512-bit words (word.h). In the last word of a subgroup whose size is not a
// multiple of the lane count, lanes past n of theta/m/v are written back unchanged and lanes
// past n of out16 are written as zero.
#include "csd_update.h"

#include <type_traits>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/rules.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/word.h"

namespace hk = csdkit::hls;

// Keeps the compute stage a separate function in the host model so g++ vectorises it as a unit;
// HLS inlines as it sees fit.
#if defined(__SYNTHESIS__) || !defined(__GNUC__)
#define CSDKIT_NOINLINE
#else
#define CSDKIT_NOINLINE __attribute__((noinline))
#endif

namespace {

/// Elements per tile: a multiple of 32 (whole words of 16-bit data) dividing 2^16 (a tile never
/// straddles a sparse block).
constexpr uint32_t kTile = 1024;
static_assert(kTile % hk::kHalfLanes == 0 && hk::kBlockElems % kTile == 0, "tile size");
constexpr uint32_t kTileWords = kTile / hk::kLanes;

// Checks the signature above against the argument table: same count, order and C types.
template <typename... T>
struct TypeList {};
template <typename F>
struct ParamsOf;
template <typename... P>
struct ParamsOf<void(P...)> {
  using type = TypeList<P..., void>;
};
#define CSDKIT_ARG_TYPE(i, nm, ty, kd, dr, bd, off, doc) ty,
using TableTypes = TypeList<CSDKIT_UPDATE_ARGS(CSDKIT_ARG_TYPE) void>;
#undef CSDKIT_ARG_TYPE
static_assert(std::is_same<ParamsOf<decltype(csd_update)>::type, TableTypes>::value,
              "csd_update's signature disagrees with the argument table (update_args.h)");

/// The compute loop over elements [0, len) of a tile; see ComputeTile.
template <typename FtzT>
void ComputeLoop(const hk::RuleCtl& c, FtzT ftz, uint32_t out_f16, uint32_t len,
                 uint32_t* __restrict th, uint32_t* __restrict mm, uint32_t* __restrict vv,
                 const uint32_t* __restrict gb, uint16_t* __restrict lo) {
COMPUTE:
  for (uint32_t i = 0; i < len; ++i) {
#pragma HLS PIPELINE II = 1
#pragma HLS UNROLL factor = 16
    const hk::ElemOut o = hk::UpdateElement(c, ftz, hk::U2F(th[i]), hk::U2F(mm[i]),
                                            hk::U2F(vv[i]), hk::U2F(gb[i]));
    const uint32_t tn = hk::F2U(o.theta);
    th[i] = tn;
    mm[i] = hk::F2U(o.m);
    vv[i] = hk::F2U(o.v);
    lo[i] = static_cast<uint16_t>((static_cast<uint32_t>(hk::F32ToF16(tn)) & out_f16) |
                                  (static_cast<uint32_t>(hk::F32ToBf16(tn)) & ~out_f16));
  }
}

/// The compute stage of one tile: elements [0, len) are updated and get their low-precision
/// copy; state lanes past len are left as loaded (written back unchanged) and copy lanes up to
/// `count16` (the tile's whole 16-bit words) are zero.
CSDKIT_NOINLINE void ComputeTile(const hk::RuleCtl& ctl, uint32_t out_f16, uint32_t len,
                                 uint32_t count16, uint32_t* __restrict th,
                                 uint32_t* __restrict mm, uint32_t* __restrict vv,
                                 const uint32_t* __restrict gb, uint16_t* __restrict lo) {
  const hk::RuleCtl c = ctl;
#ifdef __SYNTHESIS__
  // One datapath; the policy is a run-time select inside each operation.
  ComputeLoop(c, c.ftz, out_f16, len, th, mm, vv, gb, lo);
#else
  // Host model: the same loop instantiated per policy, so the compiler folds the unused one.
  if (c.ftz) {
    ComputeLoop(c, std::true_type(), out_f16, len, th, mm, vv, gb, lo);
  } else {
    ComputeLoop(c, std::false_type(), out_f16, len, th, mm, vv, gb, lo);
  }
#endif
PAD_OUT:
  for (uint32_t i = len; i < count16; ++i) lo[i] = 0;
}

}  // namespace

extern "C" void csd_update(Word* theta, Word* m, Word* v, const Word* grad, const Word* sp_idx,
                           const Word* sp_blk, Word* out16, Word* status, uint32_t n,
                           uint32_t nnz, uint32_t mode, uint32_t unscale, uint32_t lr,
                           uint32_t beta1, uint32_t omb1, uint32_t beta2, uint32_t omb2,
                           uint32_t eps, uint32_t wd, uint32_t c1, uint32_t c2) {
#pragma HLS INTERFACE m_axi port = theta bundle = gmem0 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = m bundle = gmem1 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = v bundle = gmem2 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = grad bundle = gmem3 offset = slave max_read_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = sp_idx bundle = gmem4 offset = slave max_read_burst_length = 64
#pragma HLS INTERFACE m_axi port = sp_blk bundle = gmem5 offset = slave max_read_burst_length = 16
#pragma HLS INTERFACE m_axi port = out16 bundle = gmem6 offset = slave max_write_burst_length = 64
#pragma HLS INTERFACE m_axi port = status bundle = gmem5 offset = slave
#pragma HLS INTERFACE s_axilite port = theta bundle = control
#pragma HLS INTERFACE s_axilite port = m bundle = control
#pragma HLS INTERFACE s_axilite port = v bundle = control
#pragma HLS INTERFACE s_axilite port = grad bundle = control
#pragma HLS INTERFACE s_axilite port = sp_idx bundle = control
#pragma HLS INTERFACE s_axilite port = sp_blk bundle = control
#pragma HLS INTERFACE s_axilite port = out16 bundle = control
#pragma HLS INTERFACE s_axilite port = status bundle = control
#pragma HLS INTERFACE s_axilite port = n bundle = control
#pragma HLS INTERFACE s_axilite port = nnz bundle = control
#pragma HLS INTERFACE s_axilite port = mode bundle = control
#pragma HLS INTERFACE s_axilite port = unscale bundle = control
#pragma HLS INTERFACE s_axilite port = lr bundle = control
#pragma HLS INTERFACE s_axilite port = beta1 bundle = control
#pragma HLS INTERFACE s_axilite port = omb1 bundle = control
#pragma HLS INTERFACE s_axilite port = beta2 bundle = control
#pragma HLS INTERFACE s_axilite port = omb2 bundle = control
#pragma HLS INTERFACE s_axilite port = eps bundle = control
#pragma HLS INTERFACE s_axilite port = wd bundle = control
#pragma HLS INTERFACE s_axilite port = c1 bundle = control
#pragma HLS INTERFACE s_axilite port = c2 bundle = control
#pragma HLS INTERFACE s_axilite port = return bundle = control

  hk::Mode md;
  uint32_t err = hk::DecodeMode(mode, &md) ? 0u : hk::kErrBadMode;
  uint32_t err_pos = 0;
  if (err == 0u && md.sparse) err = hk::ValidateSparse(sp_blk, sp_idx, n, nnz, &err_pos);
  if (err == 0u && !md.sparse && nnz != 0u) err = hk::kErrCount;

  if (err == 0u) {
    const hk::Scalars sc = {unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2};
    const hk::RuleCtl ctl = hk::MakeRuleCtl(md, sc);
    const bool use_m = hk::UsesM(md);
    const bool use_v = hk::UsesV(md);
    const bool has_out = md.out != hk::DType::kFp32;
    const uint32_t out_f16 = hk::Mask(md.out == hk::DType::kFp16);
    uint32_t k = 0;  // next sparse entry

    uint32_t th[kTile], mm[kTile], vv[kTile], gb[kTile];
    uint16_t lo[kTile];
#pragma HLS ARRAY_PARTITION variable = th cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = mm cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = vv cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = gb cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = lo cyclic factor = 32

  TILES:
    for (uint32_t base = 0; base < n; base += kTile) {
      const uint32_t len = (n - base) < kTile ? (n - base) : kTile;
      const uint32_t words = (len + hk::kLanes - 1) / hk::kLanes;
      const uint32_t hwords = (len + hk::kHalfLanes - 1) / hk::kHalfLanes;
      const uint32_t w0 = base / hk::kLanes;
      const uint32_t h0 = base / hk::kHalfLanes;

    LOAD_STATE:
      for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
        const Word tw = theta[w0 + w];
        Word mw, vw;
        for (unsigned l = 0; l < hk::kLanes; ++l) mw[l] = vw[l] = 0u;
        if (use_m) mw = m[w0 + w];
        if (use_v) vw = v[w0 + w];
        for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
          th[w * hk::kLanes + l] = tw[l];
          mm[w * hk::kLanes + l] = mw[l];
          vv[w * hk::kLanes + l] = vw[l];
        }
      }

      if (md.sparse) {
        // Lanes past the block's end never match an entry (validated offsets < block size).
        const uint32_t blk_end = hk::BlkAt(sp_blk, (base >> hk::kBlockBits) + 1u);
        hk::MergeDecode(sp_idx, grad, md.grad, base & (hk::kBlockElems - 1u),
                        words * hk::kLanes, blk_end, &k, gb);
      } else if (md.grad == hk::DType::kFp32) {
      LOAD_GRAD32:
        for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
          const Word gw = grad[w0 + w];
          for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
            gb[w * hk::kLanes + l] = gw[l];
          }
        }
      } else {
        const bool f16 = md.grad == hk::DType::kFp16;
      LOAD_GRAD16:
        for (uint32_t w = 0; w < hwords; ++w) {
#pragma HLS PIPELINE II = 1
          const Word gw = grad[h0 + w];
          for (unsigned j = 0; j < hk::kHalfLanes; ++j) {
#pragma HLS UNROLL
            const uint16_t h = hk::GetHalf(gw, j);
            gb[w * hk::kHalfLanes + j] = f16 ? hk::F16ToF32(h) : hk::Bf16ToF32(h);
          }
        }
      }

      ComputeTile(ctl, out_f16, len, hwords * hk::kHalfLanes, th, mm, vv, gb, lo);

    STORE_STATE:
      for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
        Word tw, mw, vw;
        for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
          tw[l] = th[w * hk::kLanes + l];
          mw[l] = mm[w * hk::kLanes + l];
          vw[l] = vv[w * hk::kLanes + l];
        }
        theta[w0 + w] = tw;
        if (use_m) m[w0 + w] = mw;
        if (use_v) v[w0 + w] = vw;
      }

      if (has_out) {
      STORE_OUT:
        for (uint32_t w = 0; w < hwords; ++w) {
#pragma HLS PIPELINE II = 1
          Word ow;
          for (unsigned j = 0; j < hk::kHalfLanes; j += 2) {
#pragma HLS UNROLL
            ow[j >> 1] = static_cast<uint32_t>(lo[w * hk::kHalfLanes + j]) |
                         (static_cast<uint32_t>(lo[w * hk::kHalfLanes + j + 1]) << 16);
          }
          out16[h0 + w] = ow;
        }
      }
    }
  }

  Word st;
  for (unsigned l = 0; l < hk::kLanes; ++l) st[l] = 0u;
  st[hk::kStatusError] = err;
  st[hk::kStatusErrorPos] = err_pos;
  st[hk::kStatusElems] = err == 0u ? n : 0u;
  st[hk::kStatusNnz] = (err == 0u && md.sparse) ? nnz : 0u;
  st[hk::kStatusMagic] = hk::kStatusMagicValue;
  status[0] = st;
}
