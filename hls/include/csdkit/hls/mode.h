// The updater kernel's configuration: optimizer, data types, policy flags, scalar operands and
// the status word it reports. Shared by the kernel, the host runtime, the RTL (through the
// generated package) and every test.
#ifndef CSDKIT_HLS_MODE_H_
#define CSDKIT_HLS_MODE_H_

#include <cstdint>

namespace csdkit {
namespace hls {

/// Optimizer rule selected by mode bits [2:0]. The per-element order of operations of each is
/// normative and written once, in rules.h.
enum class Optimizer : uint32_t { kAdamW = 0, kAdam = 1, kSgd = 2, kAdagrad = 3, kLion = 4 };
constexpr uint32_t kNumOptimizers = 5;

/// Element type of the gradient (mode bits [4:3]) and of the low-precision weight copy
/// (mode bits [6:5], where kFp32 means "no copy is written").
enum class DType : uint32_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

/// How the store holds the state (mode bits [14:13]; docs/state-formats.md): kFp32 theta, m, v
/// in binary32; kQ8 theta binary32, each moment as 8-bit codes with one binary32 absmax per
/// block of 256 elements; kQ8Bf16 the q8 moments and theta as bf16 rounded stochastically.
enum class StateFmt : uint32_t { kFp32 = 0, kQ8 = 1, kQ8Bf16 = 2 };

// Mode word layout.
constexpr uint32_t kModeOptShift = 0;       // [2:0] Optimizer
constexpr uint32_t kModeGradShift = 3;      // [4:3] gradient DType
constexpr uint32_t kModeOutShift = 5;       // [6:5] low-precision output: 0 none, 1 fp16, 2 bf16
constexpr uint32_t kModeSparse = 1u << 7;   // gradient is a block-sparse stream (sparse.h)
constexpr uint32_t kModeFtz = 1u << 8;      // FTZ/DAZ policy instead of IEEE
constexpr uint32_t kModeL2 = 1u << 9;       // add wd * theta to the gradient (Adam, SGD, Adagrad)
constexpr uint32_t kModeMomentum = 1u << 10;  // SGD: momentum buffer in `m` is used
constexpr uint32_t kModeNesterov = 1u << 11;  // SGD: Nesterov momentum
constexpr uint32_t kModeFirst = 1u << 12;     // SGD: first step, buffer := gradient
constexpr uint32_t kModeStateShift = 13;      // [14:13] StateFmt
constexpr uint32_t kModeKnownBits = (1u << 15) - 1u;

/// A decoded mode word.
struct Mode {
  Optimizer opt;
  DType grad;
  DType out;  // kFp32 = no low-precision copy
  bool sparse, ftz, l2, momentum, nesterov, first;
  StateFmt state;
};

/// True for the formats with 8-bit moments (and launches whose n must be whole blocks).
inline bool IsQ8(StateFmt s) { return s != StateFmt::kFp32; }

/// Decodes a mode word. Returns false (leaving `m` unspecified) when the word names an unknown
/// optimizer, dtype or state format, sets unknown bits, sets flags that the optimizer does not
/// have, or asks a q8-bf16 store for an fp16 copy (its weights are bf16: the copy is theta
/// itself, so it is bf16 or none).
inline bool DecodeMode(uint32_t w, Mode* m) {
  const uint32_t opt = (w >> kModeOptShift) & 7u;
  const uint32_t grad = (w >> kModeGradShift) & 3u;
  const uint32_t out = (w >> kModeOutShift) & 3u;
  m->opt = static_cast<Optimizer>(opt);
  m->grad = static_cast<DType>(grad);
  m->out = static_cast<DType>(out);
  m->sparse = (w & kModeSparse) != 0u;
  m->ftz = (w & kModeFtz) != 0u;
  m->l2 = (w & kModeL2) != 0u;
  m->momentum = (w & kModeMomentum) != 0u;
  m->nesterov = (w & kModeNesterov) != 0u;
  m->first = (w & kModeFirst) != 0u;
  const uint32_t state = (w >> kModeStateShift) & 3u;
  m->state = static_cast<StateFmt>(state);
  const bool is_sgd = opt == static_cast<uint32_t>(Optimizer::kSgd);
  const bool l2_ok = !m->l2 || opt == static_cast<uint32_t>(Optimizer::kAdam) || is_sgd ||
                     opt == static_cast<uint32_t>(Optimizer::kAdagrad);
  const bool sgd_flags_ok = is_sgd || !(m->momentum || m->nesterov || m->first);
  const bool nesterov_ok = !m->nesterov || m->momentum;
  const bool state_ok =
      state <= 2u && (state != static_cast<uint32_t>(StateFmt::kQ8Bf16) ||
                      out != static_cast<uint32_t>(DType::kFp16));
  return (w & ~kModeKnownBits) == 0u && opt < kNumOptimizers && grad <= 2u && out <= 2u &&
         l2_ok && sgd_flags_ok && nesterov_ok && state_ok;
}

/// Encodes a mode word (the inverse of DecodeMode for valid modes).
inline uint32_t EncodeMode(const Mode& m) {
  return (static_cast<uint32_t>(m.opt) << kModeOptShift) |
         (static_cast<uint32_t>(m.grad) << kModeGradShift) |
         (static_cast<uint32_t>(m.out) << kModeOutShift) | (m.sparse ? kModeSparse : 0u) |
         (m.ftz ? kModeFtz : 0u) | (m.l2 ? kModeL2 : 0u) | (m.momentum ? kModeMomentum : 0u) |
         (m.nesterov ? kModeNesterov : 0u) | (m.first ? kModeFirst : 0u) |
         (static_cast<uint32_t>(m.state) << kModeStateShift);
}

/// Which state arrays an optimizer reads and writes.
inline bool UsesM(const Mode& m) {
  return m.opt == Optimizer::kAdamW || m.opt == Optimizer::kAdam || m.opt == Optimizer::kLion ||
         (m.opt == Optimizer::kSgd && m.momentum);
}
inline bool UsesV(const Mode& m) {
  return m.opt == Optimizer::kAdamW || m.opt == Optimizer::kAdam || m.opt == Optimizer::kAdagrad;
}

/// The scalar operands, as binary32 bit patterns computed by the host (in double, then rounded
/// once to binary32). Their meaning per optimizer is listed in rules.h and in
/// docs/optimizers.md; an operand an optimizer does not use is ignored.
struct Scalars {
  uint32_t unscale;  // gradient multiplier: clip coefficient / loss scale
  uint32_t lr;       // step size (Adam: lr / bias_correction1; Adagrad: lr / (1 + (t-1) lr_decay))
  uint32_t beta1;    // Adam beta1, SGD momentum, Lion beta1
  uint32_t omb1;     // 1 - beta1 (SGD: 1 - dampening)
  uint32_t beta2;    // Adam beta2, Lion beta2, Adagrad 1
  uint32_t omb2;     // 1 - beta2 (Adagrad 1)
  uint32_t eps;      // Adam, Adagrad epsilon
  uint32_t wd;       // L2 weight decay coefficient (Adam, SGD, Adagrad, with kModeL2)
  uint32_t c1;       // weight multiplier: AdamW/Lion 1 - lr * wd, others 1
  uint32_t c2;       // Adam 1 / sqrt(bias_correction2), others 1
};

// Status word (lane indices of the 512-bit status buffer, which the kernel always writes, last).
// Every build of the kernel (host model, HLS, RTL, OpenCL) computes every lane the same way;
// docs/kernel-interface.md has the table.
constexpr unsigned kStatusError = 0;     // error bits below, 0 = success
constexpr unsigned kStatusErrorPos = 1;  // first offending entry (or block) index
constexpr unsigned kStatusElems = 2;     // elements updated (n on success, 0 on error)
constexpr unsigned kStatusNnz = 3;       // sparse entries consumed (nnz on success)

// Integrity lanes. CRCs are zlib's crc32() (crc.h) of exactly the n * 4 bytes of elements
// 0..n-1 of a state array (little-endian binary32 words; never the padding lanes of its last
// 512-bit word): "in" as the kernel read them, "out" as it wrote them. State the optimizer does
// not use (UsesM / UsesV false) reports 0 in both of its lanes; so does every CRC lane of a
// launch with an error (nothing is written), and of n = 0 (the CRC of no bytes is 0). In the
// compressed state formats a lane covers the array as stored: theta's n * 4 (q8) or n * 2
// (q8-bf16, bf16) bytes, and a moment's n code bytes followed by its n / 256 * 4 absmax bytes.
constexpr unsigned kStatusCrcThetaIn = 4;   // CRC-32 of theta as read
constexpr unsigned kStatusCrcMIn = 5;       // CRC-32 of m as read (0 without m)
constexpr unsigned kStatusCrcVIn = 6;       // CRC-32 of v as read (0 without v)
constexpr unsigned kStatusCrcThetaOut = 7;  // CRC-32 of theta as written
constexpr unsigned kStatusCrcMOut = 8;      // CRC-32 of m as written (0 without m)
constexpr unsigned kStatusCrcVOut = 9;      // CRC-32 of v as written (0 without v)
// The number of non-finite binary32 values (exponent field all ones: an infinity or a NaN) the
// kernel wrote to theta, m and v, over elements 0..n-1, each array counted separately and the
// counts summed (an element non-finite in all three counts 3). It saturates at 0xffffffff (3n
// can exceed 32 bits). 0 on error. In the compressed formats a moment element counts when its
// block's absmax as written is non-finite (the block reads back as NaN), a bf16 theta when the
// stored bf16 value is.
constexpr unsigned kStatusNonFinite = 10;
// The smallest element index i < n at which theta, m or v as written is non-finite;
// kStatusNoPosition when kStatusNonFinite is 0 (no such element, an error, or n = 0).
constexpr unsigned kStatusNonFinitePos = 11;
constexpr uint32_t kStatusNoPosition = 0xffffffffu;
// AXI error responses (RTL only): bit 0 set when a master of the kernel saw an error response
// (SLVERR / DECERR) on any bundle; bits [15:8] the first failing bundle's number (gmem<k>: k).
// The host model, the HLS top and the OpenCL build have no bus responses to observe and write 0.
constexpr unsigned kStatusAxiError = 12;
constexpr uint32_t kStatusAxiErrorSeen = 1u << 0;
constexpr unsigned kStatusAxiErrorBundleShift = 8;
// Lanes 13 and 14 are reserved and written as 0.
constexpr unsigned kStatusMagic = 15;    // kStatusMagicValue once the kernel has run
constexpr uint32_t kStatusMagicValue = 0xc5d0001bu;

// Error bits. Any error means nothing but the status word was written.
constexpr uint32_t kErrBadMode = 1u << 0;      // mode word invalid (DecodeMode failed)
constexpr uint32_t kErrBlkTable = 1u << 1;     // block table does not start at 0 or decreases
constexpr uint32_t kErrUnsorted = 1u << 2;     // an index is below its predecessor in its block
constexpr uint32_t kErrDuplicate = 1u << 3;    // an index equals its predecessor
constexpr uint32_t kErrOutOfRange = 1u << 4;   // an index addresses past the element count
constexpr uint32_t kErrCount = 1u << 5;        // block table total != nnz, or nnz > n
constexpr uint32_t kErrBlockLen = 1u << 6;     // q8 formats: n is not a multiple of 256

}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_MODE_H_
