// csd_update: the optimizer-updater kernel (SmartUpdate), with the fused sparse decoder.
//
// This one file is both the Vitis HLS input and, compiled with g++, the host bit-accurate model.
// Structure per launch: decode the mode; if the gradient is sparse, validate the whole stream
// (block table + indices) before anything is written; then, tile by tile, burst-load the state
// words, produce the binary32 gradient (unpack dense words, or merge-decode the sparse entries),
// run the per-element rule of rules.h, and burst-store the state and the low-precision copy.
// The status word is written last, always; on any error it is the only write. Besides the error
// and counts it reports the integrity lanes (mode.h): the CRC-32 of theta, m and v as read and as
// written, advanced one 512-bit word at a time as the words stream (crc.h), and the number and
// first position of the non-finite values written.
//
// Buffers are whole 512-bit words (word.h). In the last word of a subgroup whose size is not a
// multiple of the lane count, lanes past n of theta/m/v are written back unchanged and lanes
// past n of out16 are written as zero.
//
// The compressed state formats (docs/state-formats.md, mode bits [14:13]): n is a whole number
// of blocks of 256 (a tile of 1024 holds four); a moment arrives as 8-bit codes (64 per word)
// and one binary32 absmax per block (m_absmax, v_absmax: 16 per word), is dequantized into the
// tile's binary32 array, updated by the same rule, and requantized block by block (state_q8.h);
// q8-bf16 theta arrives as bf16 (widened exactly) and leaves rounded stochastically with the
// Philox bits of (seed, step, index_lo/hi + element). The absmax word of a tile's blocks is
// held across the four tiles that share it and written once, its lanes past the launch's last
// block unchanged.
#include "csd_update.h"

#include <type_traits>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/crc.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/mode.h"
#include "csdkit/hls/rules.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/hls/word.h"

// The host model (g++/clang for the host, not Vitis HLS, not OpenCL) also has the datapath
// specialised per launch configuration (host/datapath.h): csd_update runs it, and
// csd_update_general runs the one runtime-selected datapath below, as the hardware does.
#if !defined(__SYNTHESIS__) && !defined(__OPENCL_CPP_VERSION__)
#define CSDKIT_HOST_MODEL 1
#include "datapath.h"
#endif

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
#ifndef __OPENCL_CPP_VERSION__  // (checked by the host build; OpenCL has no function types)
static_assert(std::is_same<ParamsOf<decltype(csd_update)>::type, TableTypes>::value,
              "csd_update's signature disagrees with the argument table (update_args.h)");
#endif

/// Host model only: asks the cache hierarchy for the next tile's words while this tile computes,
/// so the model's load and compute phases overlap as the hardware's dataflow stages do. No
/// effect on any value; not part of the HLS build.
inline void PrefetchWords(const Word* p, uint32_t words) {
#if !defined(__SYNTHESIS__) && !defined(__OPENCL_CPP_VERSION__) && defined(__GNUC__)
  for (uint32_t w = 0; w < words; ++w) __builtin_prefetch(&p[w], 0, 3);
#else
  (void)p;
  (void)words;
#endif
}

/// Burst-loads `words` words of binary32 gradient into a tile array.
CSDKIT_NOINLINE void LoadWords(const Word* src, uint32_t words, uint32_t* __restrict dst) {
LOAD_WORDS:
  for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
    const Word x = src[w];
    for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
      dst[w * hk::kLanes + l] = x[l];
    }
  }
}

/// The integrity lanes of a launch as they accumulate (mode.h, kStatusCrcThetaIn and on).
struct Integrity {
  uint32_t crc_in[3];   // raw CRC registers (crc.h) of theta, m, v as read
  uint32_t crc_out[3];  // ... and as written
  uint32_t abs_in[2];   // q8: raw CRC registers of m's and v's absmax values as read
  uint32_t abs_out[2];  // ... and as written
  uint64_t nonfinite;   // non-finite values written (wide: up to 3n)
  uint32_t nf_pos;      // first element with one, or kStatusNoPosition
};

/// Valid lanes of word w of a tile of `len` elements: 16, or fewer in the tile's last word.
inline unsigned ValidLanes(uint32_t len, uint32_t w) {
  const uint32_t rem = len - w * hk::kLanes;
  return rem < hk::kLanes ? rem : hk::kLanes;
}

/// Burst-loads `words` state words of theta (and of m, v when the optimizer has them) into the
/// tile arrays, advancing each array's CRC (crc[0..2]) over the tile's `len` elements: lanes past
/// len in the last word are loaded but not part of the CRC. The three arrays stream side by side
/// over their own bundles, one word of each per iteration.
CSDKIT_NOINLINE void LoadState(const Word* theta, const Word* m, const Word* v, bool use_m,
                               bool use_v, uint32_t words, uint32_t len,
                               uint32_t* __restrict th, uint32_t* __restrict mm,
                               uint32_t* __restrict vv, uint32_t* crc) {
  uint32_t c[3] = {crc[0], crc[1], crc[2]};
  const bool on[3] = {true, use_m, use_v};
LOAD_STATE:
  for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
    Word x[3];
    x[0] = theta[w];
    if (use_m) x[1] = m[w];
    if (use_v) x[2] = v[w];
    for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
      if (!use_m) x[1][l] = 0u;  // defined values for the CRC step that is then not taken
      if (!use_v) x[2][l] = 0u;
      th[w * hk::kLanes + l] = x[0][l];
      mm[w * hk::kLanes + l] = x[1][l];
      vv[w * hk::kLanes + l] = x[2][l];
    }
    hk::Crc32Beats<3>(c, x, on, ValidLanes(len, w));
  }
  crc[0] = c[0];
  crc[1] = c[1];
  crc[2] = c[2];
}

/// Burst-stores `words` state words of theta (and m, v when the optimizer has them) from the
/// tile arrays, advancing each array's output CRC over the tile's `len` elements and counting
/// the non-finite values among them; `base` is the tile's first element, for the position of
/// the launch's first non-finite value (tiles run in element order, so the first word that has
/// one holds it).
CSDKIT_NOINLINE void StoreState(const uint32_t* __restrict th, const uint32_t* __restrict mm,
                                const uint32_t* __restrict vv, bool use_m, bool use_v,
                                uint32_t words, uint32_t len, uint32_t base, Word* theta, Word* m,
                                Word* v, Integrity* ig) {
  uint32_t c[3] = {ig->crc_out[0], ig->crc_out[1], ig->crc_out[2]};
  const bool on[3] = {true, use_m, use_v};
  uint64_t count = ig->nonfinite;
  uint32_t pos = ig->nf_pos;
STORE_STATE:
  for (uint32_t w = 0; w < words; ++w) {
#pragma HLS PIPELINE II = 1
    const unsigned lanes = ValidLanes(len, w);
    Word x[3];
    uint32_t any = 0;  // lanes where theta, m or v is non-finite
    uint32_t nf = 0;   // non-finite values in this word of the three arrays
  PACK_STATE:
    for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
      const uint32_t i = w * hk::kLanes + l;
      x[0][l] = th[i];
      x[1][l] = mm[i];
      x[2][l] = vv[i];
      const bool valid = l < lanes;
      const bool nt = valid && hk::IsNonFinite(th[i]);
      const bool nm = valid && use_m && hk::IsNonFinite(mm[i]);
      const bool nv = valid && use_v && hk::IsNonFinite(vv[i]);
      nf += (nt ? 1u : 0u) + (nm ? 1u : 0u) + (nv ? 1u : 0u);
      any |= (nt || nm || nv ? 1u : 0u) << l;
    }
    theta[w] = x[0];
    if (use_m) m[w] = x[1];
    if (use_v) v[w] = x[2];
    hk::Crc32Beats<3>(c, x, on, lanes);
    // The lowest lane of `any` (a priority encoder).
    unsigned first = 0;
  FIRST_NONFINITE:
    for (unsigned l = hk::kLanes; l-- > 0;) {
#pragma HLS UNROLL
      if ((any >> l) & 1u) first = l;
    }
    if (pos == hk::kStatusNoPosition && any != 0u) pos = base + w * hk::kLanes + first;
    count += nf;
  }
  ig->crc_out[0] = c[0];
  ig->crc_out[1] = c[1];
  ig->crc_out[2] = c[2];
  ig->nonfinite = count;
  ig->nf_pos = pos;
}

/// The q8 formats' per-launch constants: which moments and theta format, the policy, and the
/// stochastic rounding's key and step.
struct Q8Ctl {
  bool use_m, use_v, bf16;
  bool ftz;
  uint64_t seed, step, index0;
};

/// q8 formats: burst-loads a tile of `len` elements (whole blocks; the tile's first block has
/// lane `lane0` of the held absmax words mabs/vabs) into the tile arrays as binary32 — theta as
/// stored (bf16 widened exactly), each moment dequantized (m signed map, v unsigned) — and
/// advances the CRC registers over the bytes as stored: theta's (crc[0]), a moment's codes
/// (crc[1], crc[2]) and its absmax values (abs[0], abs[1]), each array in element order.
CSDKIT_NOINLINE void LoadStateQ8(const Word* theta, const Word* m, const Word* v, const Word& mabs,
                                 const Word& vabs, const Q8Ctl& q, uint32_t len, uint32_t lane0,
                                 uint32_t* __restrict th, uint32_t* __restrict mm,
                                 uint32_t* __restrict vv, uint32_t* crc, uint32_t* abs_crc) {
  const hk::Fp32 f(q.ftz);
  if (q.bf16) {
  LOAD_THETA_BF16:
    for (uint32_t w = 0; w < len / hk::kHalfLanes; ++w) {
#pragma HLS PIPELINE II = 1
      const Word x = theta[w];
      for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
        th[w * hk::kHalfLanes + 2 * l] = x[l] << 16;
        th[w * hk::kHalfLanes + 2 * l + 1] = x[l] & 0xffff0000u;
      }
      crc[0] = hk::Crc32Beat(crc[0], x, hk::kLanes);
    }
  } else {
  LOAD_THETA:
    for (uint32_t w = 0; w < len / hk::kLanes; ++w) {
#pragma HLS PIPELINE II = 1
      const Word x = theta[w];
      for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
        th[w * hk::kLanes + l] = x[l];
      }
      crc[0] = hk::Crc32Beat(crc[0], x, hk::kLanes);
    }
  }
  constexpr uint32_t kCodeWords = hk::kQ8Block / 64;  // 64 codes per word
  for (unsigned a = 0; a < 2; ++a) {
    const bool on = a == 0 ? q.use_m : q.use_v;
    const Word* const src = a == 0 ? m : v;
    const Word& abs = a == 0 ? mabs : vabs;
    uint32_t* const dst = a == 0 ? mm : vv;
    if (!on) continue;
  LOAD_BLOCKS:
    for (uint32_t b = 0; b < len / hk::kQ8Block; ++b) {
      const uint32_t amax = abs[lane0 + b];
    LOAD_CODES:
      for (uint32_t w = 0; w < kCodeWords; ++w) {
#pragma HLS PIPELINE II = 1
        const Word x = src[b * kCodeWords + w];
        for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
          for (unsigned k = 0; k < 4; ++k) {
            const uint8_t c = static_cast<uint8_t>(x[l] >> (8 * k));
            dst[b * hk::kQ8Block + w * 64 + 4 * l + k] =
                hk::F2U(hk::DequantQ8(c, hk::U2F(amax), a == 0, f));
          }
        }
        crc[1 + a] = hk::Crc32Beat(crc[1 + a], x, hk::kLanes);
      }
      abs_crc[a] = hk::Crc32Word(abs_crc[a], amax);
    }
  }
}

/// q8 formats: requantizes and burst-stores a tile of `len` elements (whole blocks) from the
/// tile arrays: theta as binary32, or (q8-bf16) rounded stochastically to bf16 — th then holds
/// the stored value widened, for the low-precision copy — and each moment block by block as
/// codes and an absmax written into lane lane0 + b of the held word. Advances the output CRCs
/// over the bytes as stored (as LoadStateQ8: codes and absmax values apart) and counts the non-finite values written: theta's,
/// and every element of a moment block whose absmax is non-finite (the block reads back as
/// NaN). `base` is the tile's first element.
CSDKIT_NOINLINE void StoreStateQ8(uint32_t* __restrict th, const uint32_t* __restrict mm,
                                  const uint32_t* __restrict vv, const Q8Ctl& q, uint32_t len,
                                  uint32_t lane0, uint32_t base, Word* theta, Word* m, Word* v,
                                  Word& mabs, Word& vabs, Integrity* ig) {
  const hk::Fp32 f(q.ftz);
  uint64_t count = ig->nonfinite;
  uint32_t pos = ig->nf_pos;
  constexpr uint32_t kCodeWords = hk::kQ8Block / 64;
STORE_BLOCKS:
  for (uint32_t b = 0; b < len / hk::kQ8Block; ++b) {
    const uint32_t b0 = b * hk::kQ8Block;
    bool bad[hk::kQ8Block];  // elements that read back non-finite
    for (uint32_t i = 0; i < hk::kQ8Block; ++i) bad[i] = false;
    // theta
    if (q.bf16) {
    ROUND_THETA:
      for (uint32_t i = 0; i < hk::kQ8Block; i += 8) {
        uint32_t r[8];
        hk::Random16Group(q.seed, q.step, (q.index0 + base + b0 + i) >> 3, r);
        for (unsigned j = 0; j < 8u; ++j) {
          const uint16_t h = hk::RoundBf16Stochastic(hk::U2F(th[b0 + i + j]), r[j]);
          th[b0 + i + j] = static_cast<uint32_t>(h) << 16;
        }
      }
    STORE_THETA_BF16:
      for (uint32_t w = 0; w < hk::kQ8Block / hk::kHalfLanes; ++w) {
#pragma HLS PIPELINE II = 1
        Word x;
        for (unsigned l = 0; l < hk::kLanes; ++l) {
          const uint32_t i = b0 + w * hk::kHalfLanes + 2 * l;
          x[l] = (th[i] >> 16) | (th[i + 1] & 0xffff0000u);
        }
        theta[b0 / hk::kHalfLanes + w] = x;
        ig->crc_out[0] = hk::Crc32Beat(ig->crc_out[0], x, hk::kLanes);
      }
    } else {
    STORE_THETA:
      for (uint32_t w = 0; w < hk::kQ8Block / hk::kLanes; ++w) {
#pragma HLS PIPELINE II = 1
        Word x;
        for (unsigned l = 0; l < hk::kLanes; ++l) x[l] = th[b0 + w * hk::kLanes + l];
        theta[b0 / hk::kLanes + w] = x;
        ig->crc_out[0] = hk::Crc32Beat(ig->crc_out[0], x, hk::kLanes);
      }
    }
    for (uint32_t i = 0; i < hk::kQ8Block; ++i) bad[i] = hk::IsNonFinite(th[b0 + i]);
    // the moments
    for (unsigned a = 0; a < 2; ++a) {
      if (!(a == 0 ? q.use_m : q.use_v)) continue;
      const uint32_t* const src = a == 0 ? mm : vv;
      Word* const dst = a == 0 ? m : v;
      Word& abs = a == 0 ? mabs : vabs;
      float x[hk::kQ8Block];
      for (uint32_t i = 0; i < hk::kQ8Block; ++i) x[i] = hk::U2F(src[b0 + i]);
      uint8_t codes[hk::kQ8Block];
      float amax;
      hk::QuantizeBlockQ8(x, hk::kQ8Block, a == 0, f, codes, &amax);
    STORE_CODES:
      for (uint32_t w = 0; w < kCodeWords; ++w) {
#pragma HLS PIPELINE II = 1
        Word y;
        for (unsigned l = 0; l < hk::kLanes; ++l) {
          const uint32_t i = w * 64 + 4 * l;
          y[l] = static_cast<uint32_t>(codes[i]) | (static_cast<uint32_t>(codes[i + 1]) << 8) |
                 (static_cast<uint32_t>(codes[i + 2]) << 16) |
                 (static_cast<uint32_t>(codes[i + 3]) << 24);
        }
        dst[b * kCodeWords + w] = y;
        ig->crc_out[1 + a] = hk::Crc32Beat(ig->crc_out[1 + a], y, hk::kLanes);
      }
      abs[lane0 + b] = hk::F2U(amax);
      ig->abs_out[a] = hk::Crc32Word(ig->abs_out[a], hk::F2U(amax));
      if (hk::IsNonFinite(hk::F2U(amax))) {
        for (uint32_t i = 0; i < hk::kQ8Block; ++i) bad[i] = true;
        count += hk::kQ8Block;
      }
    }
    uint32_t first = hk::kStatusNoPosition;
    for (uint32_t i = hk::kQ8Block; i-- > 0;) {
      if (bad[i]) first = i;
      count += hk::IsNonFinite(th[b0 + i]) ? 1u : 0u;
    }
    if (pos == hk::kStatusNoPosition && first != hk::kStatusNoPosition) pos = base + b0 + first;
  }
  ig->nonfinite = count;
  ig->nf_pos = pos;
}

/// Loads `hwords` words of fp16 (f16) or bf16 gradient and widens them exactly to binary32.
template <bool kF16>
CSDKIT_NOINLINE void LoadHalves(const Word* src, uint32_t hwords, uint32_t* __restrict dst) {
LOAD_GRAD16:
  for (uint32_t w = 0; w < hwords; ++w) {
#pragma HLS PIPELINE II = 1
    const Word x = src[w];
    for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
      const uint32_t pair = x[l];
      const uint16_t lo = static_cast<uint16_t>(pair), hi = static_cast<uint16_t>(pair >> 16);
      dst[w * hk::kHalfLanes + 2 * l] = kF16 ? hk::F16ToF32(lo) : hk::Bf16ToF32(lo);
      dst[w * hk::kHalfLanes + 2 * l + 1] = kF16 ? hk::F16ToF32(hi) : hk::Bf16ToF32(hi);
    }
  }
}

/// Narrows the first `len` updated weights to fp16 (kF16) or bf16 and stores `hwords` words;
/// lanes past `len` are zero.
template <bool kF16>
CSDKIT_NOINLINE void StoreHalves(const uint32_t* __restrict th, uint32_t len, uint32_t hwords, Word* dst) {
STORE_OUT:
  for (uint32_t w = 0; w < hwords; ++w) {
#pragma HLS PIPELINE II = 1
    uint16_t h[hk::kHalfLanes];
    if (kF16) {
      hk::F32ToF16Array(&th[w * hk::kHalfLanes], h, hk::kHalfLanes);
    } else {
    NARROW_BF16:
      for (unsigned j = 0; j < hk::kHalfLanes; ++j) {
#pragma HLS UNROLL
        h[j] = hk::F32ToBf16(th[w * hk::kHalfLanes + j]);
      }
    }
    Word x;
  PACK:
    for (unsigned l = 0; l < hk::kLanes; ++l) {
#pragma HLS UNROLL
      const uint32_t i = w * hk::kHalfLanes + 2 * l;
      const uint32_t lo = h[2 * l], hi = h[2 * l + 1];
      x[l] = (i < len ? lo : 0u) | ((i + 1 < len ? hi : 0u) << 16);
    }
    dst[w] = x;
  }
}

/// The compute loop over elements [0, len) of a tile; see ComputeTile.
template <typename FtzT>
void ComputeLoop(const hk::RuleCtl& c, FtzT ftz, uint32_t len, uint32_t* __restrict th,
                 uint32_t* __restrict mm, uint32_t* __restrict vv,
                 const uint32_t* __restrict gb) {
COMPUTE:
  for (uint32_t i = 0; i < len; ++i) {
#pragma HLS PIPELINE II = 1
#pragma HLS UNROLL factor = 16
    const hk::ElemOut o = hk::UpdateElement(c, ftz, hk::U2F(th[i]), hk::U2F(mm[i]),
                                            hk::U2F(vv[i]), hk::U2F(gb[i]));
    th[i] = hk::F2U(o.theta);
    mm[i] = hk::F2U(o.m);
    vv[i] = hk::F2U(o.v);
  }
}

/// The compute stage of one tile: elements [0, len) are updated; state lanes past len are left
/// as loaded (and so written back unchanged).
CSDKIT_NOINLINE void ComputeTile(const hk::RuleCtl& ctl, uint32_t len, uint32_t* __restrict th,
                                 uint32_t* __restrict mm, uint32_t* __restrict vv,
                                 const uint32_t* __restrict gb) {
  const hk::RuleCtl c = ctl;
#ifdef __SYNTHESIS__
  // One datapath; the policy is a run-time select inside each operation.
  ComputeLoop(c, c.ftz, len, th, mm, vv, gb);
#else
  // Host model: the same loop instantiated per policy, so the compiler folds the unused one.
  if (c.ftz) {
    ComputeLoop(c, std::true_type(), len, th, mm, vv, gb);
  } else {
    ComputeLoop(c, std::false_type(), len, th, mm, vv, gb);
  }
#endif
}

}  // namespace

#ifdef CSDKIT_HOST_MODEL
namespace {

/// The launch's integrity lanes into a span's own record (host::SpanIntegrity or
/// host::Q8Integrity: the CRCs of theta, m, v and the non-finite count and position), and back.
template <typename Lanes>
void LanesToSpan(const Integrity& ig, uint32_t base, Lanes* l) {
  for (unsigned a = 0; a < 3; ++a) {
    l->crc_in[a] = ig.crc_in[a];
    l->crc_out[a] = ig.crc_out[a];
  }
  l->nonfinite = ig.nonfinite;
  l->first = ig.nf_pos;
  l->origin = base;
}

template <typename Lanes>
void LanesFromSpan(const Lanes& l, Integrity* ig) {
  for (unsigned a = 0; a < 3; ++a) {
    ig->crc_in[a] = l.crc_in[a];
    ig->crc_out[a] = l.crc_out[a];
  }
  ig->nonfinite = l.nonfinite;
  ig->nf_pos = l.first;
}

/// Host model, specialised datapath: updates the span s (elements base .. base + s.len - 1 of
/// the launch) and advances the launch's integrity lanes over it: the same values LoadState and
/// StoreState give, computed by the specialised datapath (datapath.h: folded into its loops, or
/// around them in cache-sized chunks).
void HostSpan(const hk::Mode& md, const hk::RuleCtl& ctl, hk::host::Span s, uint32_t base,
              Integrity* ig) {
  hk::host::SpanIntegrity si;
  LanesToSpan(*ig, base, &si);
  s.integrity = &si;
  hk::host::Update(md, ctl, s);
  LanesFromSpan(si, ig);
}

/// Host model, specialised datapath, q8 formats: updates the q8 span s (elements base ..
/// base + s.len - 1 of the launch, whole blocks) and advances the launch's integrity lanes over
/// it, the absmax streams' CRCs included: the same bytes and values LoadStateQ8 and
/// StoreStateQ8 give (datapath.h, UpdateQ8).
void HostSpanQ8(const hk::Mode& md, const hk::RuleCtl& ctl, const hk::host::Q8Span& s,
                uint32_t base, Integrity* ig) {
  hk::host::Q8Integrity qi;
  LanesToSpan(*ig, base, &qi);
  for (unsigned a = 0; a < 2; ++a) {
    qi.abs_in[a] = ig->abs_in[a];
    qi.abs_out[a] = ig->abs_out[a];
  }
  hk::host::UpdateQ8(md, ctl, s, &qi);
  LanesFromSpan(qi, ig);
  for (unsigned a = 0; a < 2; ++a) {
    ig->abs_in[a] = qi.abs_in[a];
    ig->abs_out[a] = qi.abs_out[a];
  }
}

}  // namespace
#endif

namespace {

/// The whole launch; kHostFast (host model only) runs the specialised datapath instead of the
/// tile stages' general one, with the same decode, validation, padding and status.
template <bool kHostFast>
void UpdateTop(Word* theta, Word* m, Word* v, const Word* grad, const Word* sp_idx,
               const Word* sp_blk, Word* out16, Word* status, Word* m_absmax, Word* v_absmax,
               uint32_t n, uint32_t nnz, uint32_t mode, uint32_t unscale, uint32_t lr,
               uint32_t beta1, uint32_t omb1, uint32_t beta2, uint32_t omb2, uint32_t eps,
               uint32_t wd, uint32_t c1, uint32_t c2, uint32_t seed_lo, uint32_t seed_hi,
               uint32_t step_lo, uint32_t step_hi, uint32_t index_lo, uint32_t index_hi) {
#pragma HLS INTERFACE m_axi port = theta bundle = gmem0 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = m bundle = gmem1 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = v bundle = gmem2 offset = slave max_read_burst_length = 64 max_write_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = grad bundle = gmem3 offset = slave max_read_burst_length = 64 num_read_outstanding = 16
#pragma HLS INTERFACE m_axi port = sp_idx bundle = gmem4 offset = slave max_read_burst_length = 64
#pragma HLS INTERFACE m_axi port = sp_blk bundle = gmem5 offset = slave max_read_burst_length = 16
#pragma HLS INTERFACE m_axi port = out16 bundle = gmem6 offset = slave max_write_burst_length = 64
#pragma HLS INTERFACE m_axi port = status bundle = gmem5 offset = slave
#pragma HLS INTERFACE m_axi port = m_absmax bundle = gmem1 offset = slave max_read_burst_length = 16 max_write_burst_length = 16
#pragma HLS INTERFACE m_axi port = v_absmax bundle = gmem2 offset = slave max_read_burst_length = 16 max_write_burst_length = 16
#pragma HLS INTERFACE s_axilite port = theta bundle = control
#pragma HLS INTERFACE s_axilite port = m bundle = control
#pragma HLS INTERFACE s_axilite port = v bundle = control
#pragma HLS INTERFACE s_axilite port = grad bundle = control
#pragma HLS INTERFACE s_axilite port = sp_idx bundle = control
#pragma HLS INTERFACE s_axilite port = sp_blk bundle = control
#pragma HLS INTERFACE s_axilite port = out16 bundle = control
#pragma HLS INTERFACE s_axilite port = status bundle = control
#pragma HLS INTERFACE s_axilite port = m_absmax bundle = control
#pragma HLS INTERFACE s_axilite port = v_absmax bundle = control
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
#pragma HLS INTERFACE s_axilite port = seed_lo bundle = control
#pragma HLS INTERFACE s_axilite port = seed_hi bundle = control
#pragma HLS INTERFACE s_axilite port = step_lo bundle = control
#pragma HLS INTERFACE s_axilite port = step_hi bundle = control
#pragma HLS INTERFACE s_axilite port = index_lo bundle = control
#pragma HLS INTERFACE s_axilite port = index_hi bundle = control
#pragma HLS INTERFACE s_axilite port = return bundle = control

  hk::Mode md;
  uint32_t err = hk::DecodeMode(mode, &md) ? 0u : hk::kErrBadMode;
  uint32_t err_pos = 0;
  // The q8 formats work on whole blocks of the store's element space.
  if (err == 0u && hk::IsQ8(md.state) &&
      (n % hk::kQ8Block != 0u || index_lo % hk::kQ8Block != 0u)) {
    err = hk::kErrBlockLen;
  }
  if (err == 0u && md.sparse) err = hk::ValidateSparse(sp_blk, sp_idx, n, nnz, &err_pos);
  if (err == 0u && !md.sparse && nnz != 0u) err = hk::kErrCount;

  // The integrity lanes: registers at their initial value report 0 (crc.h), so state that is
  // never streamed (unused, or any error) reports 0 without a case of its own.
  Integrity ig;
  for (unsigned a = 0; a < 3; ++a) {
#pragma HLS UNROLL
    ig.crc_in[a] = hk::kCrc32Init;
    ig.crc_out[a] = hk::kCrc32Init;
  }
  for (unsigned a = 0; a < 2; ++a) {
#pragma HLS UNROLL
    ig.abs_in[a] = hk::kCrc32Init;
    ig.abs_out[a] = hk::kCrc32Init;
  }
  ig.nonfinite = 0;
  ig.nf_pos = hk::kStatusNoPosition;

  if (err == 0u) {
    const hk::Scalars sc = {unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2};
    const hk::RuleCtl ctl = hk::MakeRuleCtl(md, sc);
    const bool use_m = hk::UsesM(md);
    const bool use_v = hk::UsesV(md);
    const bool q8 = hk::IsQ8(md.state);
    Q8Ctl qc;
    qc.use_m = use_m;
    qc.use_v = use_v;
    qc.bf16 = md.state == hk::StateFmt::kQ8Bf16;
    qc.ftz = md.ftz;
    qc.seed = (static_cast<uint64_t>(seed_hi) << 32) | seed_lo;
    qc.step = (static_cast<uint64_t>(step_hi) << 32) | step_lo;
    qc.index0 = (static_cast<uint64_t>(index_hi) << 32) | index_lo;
    Word mabs, vabs;  // the absmax words of the current tile's blocks (q8)
    for (unsigned l = 0; l < hk::kLanes; ++l) {
      mabs[l] = 0u;
      vabs[l] = 0u;
    }
    uint32_t k = 0;  // next sparse entry

    uint32_t th[kTile], mm[kTile], vv[kTile], gb[kTile];
#pragma HLS ARRAY_PARTITION variable = th cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = mm cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = vv cyclic factor = 16
#pragma HLS ARRAY_PARTITION variable = gb cyclic factor = 32
#ifdef CSDKIT_HOST_MODEL
    // Host model, specialised datapath: a dense launch is one pass over the buffers; a sparse
    // one decodes each tile's gradient (below) and updates the tile in place. The q8 formats
    // likewise, on their own spans (whole blocks: a tile is four).
    uint32_t* const th32 = &theta[0][0];
    uint32_t* const m32 = use_m ? &m[0][0] : nullptr;
    uint32_t* const v32 = use_v ? &v[0][0] : nullptr;
    uint16_t* const o16 = md.out != hk::DType::kFp32 ? reinterpret_cast<uint16_t*>(&out16[0][0])
                                                     : nullptr;
    // The q8 span of elements [at, at + len) with the gradient `g` (dtype gt) of its elements.
    const auto q8_span = [&](uint32_t at, uint32_t len, const void* g, hk::DType gt) {
      hk::host::Q8Span s;
      s.theta = qc.bf16 ? static_cast<void*>(reinterpret_cast<uint16_t*>(th32) + at)
                        : static_cast<void*>(th32 + at);
      s.m = use_m ? reinterpret_cast<uint8_t*>(m32) + at : nullptr;
      s.v = use_v ? reinterpret_cast<uint8_t*>(v32) + at : nullptr;
      s.m_absmax = use_m ? &m_absmax[0][0] + at / hk::kQ8Block : nullptr;
      s.v_absmax = use_v ? &v_absmax[0][0] + at / hk::kQ8Block : nullptr;
      s.grad = g;
      s.grad_type = gt;
      s.out = o16 ? o16 + at : nullptr;
      s.len = len;
      s.stream_len = md.sparse ? 0u : n;  // (sparse tiles: as HostSpan's, no streamed copy)
      s.seed = qc.seed;
      s.step = qc.step;
      s.index = qc.index0 + at;
      return s;
    };
    if (kHostFast && !md.sparse && n > 0u) {
      if (q8) {
        HostSpanQ8(md, ctl, q8_span(0, n, &grad[0][0], md.grad), 0, &ig);
      } else {
        hk::host::Span s;
        s.theta = th32;
        s.m = m32;
        s.v = v32;
        s.grad = &grad[0][0];
        s.grad_type = md.grad;
        s.out = o16;
        s.len = n;
        HostSpan(md, ctl, s, 0, &ig);
      }
    }
#endif
    // State an optimizer does not have is never loaded; give its tile array a defined value.
  CLEAR_UNUSED:
    for (uint32_t i = 0; i < kTile; ++i) {
#pragma HLS UNROLL factor = 16
      if (!use_m) mm[i] = 0u;
      if (!use_v) vv[i] = 0u;
    }

  TILES:
    for (uint32_t base = 0; base < n && !(kHostFast && !md.sparse); base += kTile) {
      const uint32_t len = (n - base) < kTile ? (n - base) : kTile;
#ifdef CSDKIT_HOST_MODEL
      if (kHostFast) {  // sparse: decode the tile's gradient, update the tile in place
        // The tile's gradient as MergeDecode gives it (+0 where no entry, each entry's value at
        // its offset), built by scattering the tile's entries into zeros: the work follows the
        // entries, not the elements, and there is no serial merge.
        const uint32_t blk_end = hk::BlkAt(sp_blk, (base >> hk::kBlockBits) + 1u);
        const uint32_t off = base & (hk::kBlockElems - 1u);
        for (uint32_t i = 0; i < len; ++i) gb[i] = 0u;
        for (; k < blk_end && hk::IdxAt(sp_idx, k) < off + len; ++k) {
          gb[hk::IdxAt(sp_idx, k) - off] = hk::ValAt(grad, md.grad, k);
        }
        if (q8) {
          HostSpanQ8(md, ctl, q8_span(base, len, gb, hk::DType::kFp32), base, &ig);
          continue;
        }
        hk::host::Span s;
        s.theta = th32 + base;
        s.m = m32 ? m32 + base : nullptr;
        s.v = v32 ? v32 + base : nullptr;
        s.grad = gb;
        s.grad_type = hk::DType::kFp32;
        s.out = o16 ? o16 + base : nullptr;
        s.len = len;
        HostSpan(md, ctl, s, base, &ig);
        continue;
      }
#endif
      const uint32_t words = (len + hk::kLanes - 1) / hk::kLanes;
      const uint32_t hwords = (len + hk::kHalfLanes - 1) / hk::kHalfLanes;
      const uint32_t w0 = base / hk::kLanes;
      const uint32_t h0 = base / hk::kHalfLanes;

      // Load: each array streams over its own bundle, checksummed as it passes. Unused state
      // is never read (its tile array is don't-care input to selects that ignore it).
      // (m and v advance only when present: a buffer the launch lacks may be a null pointer.)
      // q8: the tile's blocks blk .. blk + len / 256 - 1 have lanes lane0 .. of absmax word
      // blk / 16, loaded by the first tile of the word.
      const uint32_t blk = base / hk::kQ8Block;
      const uint32_t lane0 = blk % hk::kLanes;
      const uint32_t cw0 = base / 64;  // the tile's first word of codes
      Word* const mw = use_m ? m + (q8 ? cw0 : w0) : m;
      Word* const vw = use_v ? v + (q8 ? cw0 : w0) : v;
      Word* const tw = theta + (qc.bf16 ? h0 : w0);
      if (q8) {
        if (lane0 == 0u) {
          if (use_m) mabs = m_absmax[blk / hk::kLanes];
          if (use_v) vabs = v_absmax[blk / hk::kLanes];
        }
        LoadStateQ8(tw, mw, vw, mabs, vabs, qc, len, lane0, th, mm, vv, ig.crc_in, ig.abs_in);
      } else {
        LoadState(tw, mw, vw, use_m, use_v, words, len, th, mm, vv, ig.crc_in);
      }
    PAD_TAIL:  // the copy's last word may reach past the last state word: define those lanes
      for (uint32_t i = words * hk::kLanes; i < hwords * hk::kHalfLanes; ++i) th[i] = 0u;

      if (md.sparse) {
        // Lanes past the block's end never match an entry (validated offsets < block size).
        const uint32_t blk_end = hk::BlkAt(sp_blk, (base >> hk::kBlockBits) + 1u);
        hk::MergeDecode(sp_idx, grad, md.grad, base & (hk::kBlockElems - 1u), len, blk_end, &k,
                        gb);
      } else if (md.grad == hk::DType::kFp32) {
        LoadWords(grad + w0, words, gb);
      } else if (md.grad == hk::DType::kFp16) {
        LoadHalves<true>(grad + h0, hwords, gb);
      } else {
        LoadHalves<false>(grad + h0, hwords, gb);
      }

      if (base + kTile < n && !q8) {
        const uint32_t next = (n - base - kTile) < kTile ? (n - base - kTile) : kTile;
        const uint32_t nw = (next + hk::kLanes - 1) / hk::kLanes;
        PrefetchWords(theta + w0 + kTileWords, nw);
        if (use_m) PrefetchWords(m + w0 + kTileWords, nw);
        if (use_v) PrefetchWords(v + w0 + kTileWords, nw);
        if (!md.sparse) {
          PrefetchWords(grad + (md.grad == hk::DType::kFp32 ? w0 + kTileWords : h0 + kTile / 32),
                        md.grad == hk::DType::kFp32 ? nw : (next + 31) / 32);
        }
      }
      ComputeTile(ctl, len, th, mm, vv, gb);

      // Store: state first (checksummed and its non-finite values counted as it passes), then
      // the low-precision copy.
      if (q8) {
        StoreStateQ8(th, mm, vv, qc, len, lane0, base, tw, mw, vw, mabs, vabs, &ig);
        const uint32_t lane_end = lane0 + len / hk::kQ8Block;
        if (lane_end == hk::kLanes || base + len == n) {
          if (use_m) m_absmax[blk / hk::kLanes] = mabs;
          if (use_v) v_absmax[blk / hk::kLanes] = vabs;
        }
      } else {
        StoreState(th, mm, vv, use_m, use_v, words, len, base, tw, mw, vw, &ig);
      }
      if (md.out == hk::DType::kFp16) StoreHalves<true>(th, len, hwords, out16 + h0);
      if (md.out == hk::DType::kBf16) StoreHalves<false>(th, len, hwords, out16 + h0);
    }
#ifdef CSDKIT_HOST_MODEL
    // The copy's lanes past n in its last word are zero, as StoreHalves writes them.
    if (kHostFast && o16 != nullptr) {
      const uint32_t padded = (n + hk::kHalfLanes - 1u) / hk::kHalfLanes * hk::kHalfLanes;
      for (uint32_t i = n; i < padded; ++i) o16[i] = 0u;
    }
#endif
  }

  Word st;
  for (unsigned l = 0; l < hk::kLanes; ++l) st[l] = 0u;
  st[hk::kStatusError] = err;
  st[hk::kStatusErrorPos] = err_pos;
  st[hk::kStatusElems] = err == 0u ? n : 0u;
  st[hk::kStatusNnz] = (err == 0u && md.sparse) ? nnz : 0u;
  // A q8 moment's lanes cover its codes followed by its absmax values (4 bytes per block): the
  // two registers, streamed side by side, are combined once (crc.h). With no absmax streamed
  // (fp32, an unused moment, an error) the absmax CRC is that of no bytes and changes nothing.
  const uint64_t abs_bytes = err == 0u && hk::IsQ8(md.state) ? 4ull * (n / hk::kQ8Block) : 0u;
  st[hk::kStatusCrcThetaIn] = hk::Crc32Final(ig.crc_in[0]);
  st[hk::kStatusCrcMIn] = hk::Crc32Combine(hk::Crc32Final(ig.crc_in[1]),
                                           hk::Crc32Final(ig.abs_in[0]), abs_bytes);
  st[hk::kStatusCrcVIn] = hk::Crc32Combine(hk::Crc32Final(ig.crc_in[2]),
                                           hk::Crc32Final(ig.abs_in[1]), abs_bytes);
  st[hk::kStatusCrcThetaOut] = hk::Crc32Final(ig.crc_out[0]);
  st[hk::kStatusCrcMOut] = hk::Crc32Combine(hk::Crc32Final(ig.crc_out[1]),
                                            hk::Crc32Final(ig.abs_out[0]), abs_bytes);
  st[hk::kStatusCrcVOut] = hk::Crc32Combine(hk::Crc32Final(ig.crc_out[2]),
                                            hk::Crc32Final(ig.abs_out[1]), abs_bytes);
  st[hk::kStatusNonFinite] =
      ig.nonfinite > 0xffffffffull ? 0xffffffffu : static_cast<uint32_t>(ig.nonfinite);
  st[hk::kStatusNonFinitePos] = ig.nf_pos;
  st[hk::kStatusAxiError] = 0u;  // no bus responses to observe outside the RTL
  st[hk::kStatusMagic] = hk::kStatusMagicValue;
  status[0] = st;
}

}  // namespace

extern "C" void csd_update(Word* theta, Word* m, Word* v, const Word* grad, const Word* sp_idx,
                           const Word* sp_blk, Word* out16, Word* status, Word* m_absmax,
                           Word* v_absmax, uint32_t n, uint32_t nnz, uint32_t mode,
                           uint32_t unscale, uint32_t lr, uint32_t beta1, uint32_t omb1,
                           uint32_t beta2, uint32_t omb2, uint32_t eps, uint32_t wd, uint32_t c1,
                           uint32_t c2, uint32_t seed_lo, uint32_t seed_hi, uint32_t step_lo,
                           uint32_t step_hi, uint32_t index_lo, uint32_t index_hi) {
#ifdef CSDKIT_HOST_MODEL
  // The specialised FTZ loops need the processor's DAZ (datapath.h, DazHonoured).
  if ((mode & hk::kModeFtz) != 0u && !hk::host::DazHonoured()) {
    UpdateTop<false>(theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax, n,
                     nnz, mode, unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo,
                     seed_hi, step_lo, step_hi, index_lo, index_hi);
    return;
  }
  UpdateTop<true>(theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax, n, nnz,
                  mode, unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo, seed_hi,
                  step_lo, step_hi, index_lo, index_hi);
#else
  UpdateTop<false>(theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax, n,
                   nnz, mode, unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo,
                   seed_hi, step_lo, step_hi, index_lo, index_hi);
#endif
}

#ifdef CSDKIT_HOST_MODEL
extern "C" void csd_update_general(Word* theta, Word* m, Word* v, const Word* grad,
                                   const Word* sp_idx, const Word* sp_blk, Word* out16,
                                   Word* status, Word* m_absmax, Word* v_absmax, uint32_t n,
                                   uint32_t nnz, uint32_t mode, uint32_t unscale, uint32_t lr,
                                   uint32_t beta1, uint32_t omb1, uint32_t beta2, uint32_t omb2,
                                   uint32_t eps, uint32_t wd, uint32_t c1, uint32_t c2,
                                   uint32_t seed_lo, uint32_t seed_hi, uint32_t step_lo,
                                   uint32_t step_hi, uint32_t index_lo, uint32_t index_hi) {
  UpdateTop<false>(theta, m, v, grad, sp_idx, sp_blk, out16, status, m_absmax, v_absmax, n,
                   nnz, mode, unscale, lr, beta1, omb1, beta2, omb2, eps, wd, c1, c2, seed_lo,
                   seed_hi, step_lo, step_hi, index_lo, index_hi);
}
#endif
