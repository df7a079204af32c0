// The host model's specialised datapath (host builds only; never part of the HLS, OpenCL or RTL
// kernels).
//
// The kernel (csd_update.cpp) has one datapath for every optimizer and policy, selected per
// launch by masks, as the hardware has it (rules.h). The host model runs the same graph
// specialised at compile time: one loop per (optimizer, L2, policy, gradient dtype, copy dtype,
// and for SGD its first-step and Nesterov selects) that evaluates only the operations the
// launch's rule selects, in the same order, each the same binary32 operation, and streams every
// element from its load to its store in registers (gradient widened and copy narrowed in the
// same pass). Unselected operations cannot influence a selected result (selects only route
// values), so the two datapaths give the same bits; tests/datapath_test.cpp
// (SpecialisedDatapath.*) proves it on every configuration and special value, on each
// instruction set below.
//
// Instruction sets: the loops are compiled twice, for x86-64-v3 (AVX2, 256-bit vectors) and for
// x86-64-v4 (AVX-512, 512-bit vectors); the widest one the processor has is used. IEEE binary32
// +, -, *, /, sqrt are correctly rounded on every x86 vector unit, the fp16 conversions are the
// F16C instructions that define them, and the contract's NaN and subnormal handling is exact
// (compares, selects, bit masks), so the bits do not depend on the choice (the tests run both).
//
// Integrity lanes (mode.h: the CRC-32 of theta, m, v as read and as written, the non-finite
// values written): a span given a SpanIntegrity advances it. Where the processor has VPCLMULQDQ
// the CRCs are folded inside the loops, on the vectors as they are loaded and stored (carry-less
// multiplication, crc_fast.h), and the non-finite values counted there, so they cost no pass of
// their own; elsewhere (or with another crc_fast implementation chosen) the span runs in chunks
// of kIntegrityChunk elements, each checksummed before and after its update while it is in
// cache. Either way the values are the CRCs of the bytes (tests: crc_test, kernel_test,
// datapath_test).
//
// Compressed state formats (q8, q8-bf16; UpdateQ8, datapath_q8_isa.cpp): the same loops run on
// chunks of a span whose moments are dequantized into binary32 scratch arrays first and
// quantized back after, in cache, with the integrity lanes over the bytes as stored
// (tests: state_q8_kernel_test, datapath_test).
#ifndef CSDKIT_HLS_HOST_DATAPATH_H_
#define CSDKIT_HLS_HOST_DATAPATH_H_

#include <cstdint>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/rules.h"

namespace csdkit {
namespace hls {
namespace host {

/// The integrity lanes of a launch as its spans advance them.
struct SpanIntegrity {
  uint32_t crc_in[3];   // raw CRC-32 registers (crc.h) of theta, m, v as read
  uint32_t crc_out[3];  // ... and as written
  uint64_t nonfinite;   // non-finite values written to theta, m, v (added to)
  uint32_t first;       // the launch's first element with one, or 0xffffffff (set once)
  uint32_t origin;      // the launch's element number of the span's element 0 (for `first`)
};

/// Elements [0, len) of one launch (or of one tile of it), as the kernel's buffers hold them.
struct Span {
  uint32_t* theta = nullptr;
  uint32_t* m = nullptr;         // when the optimizer keeps m
  uint32_t* v = nullptr;         // when the optimizer keeps v
  const void* grad = nullptr;    // binary32 words (grad_type kFp32) or fp16/bf16 halves
  DType grad_type = DType::kFp32;
  uint16_t* out = nullptr;       // the low-precision copy (md.out), else unused
  uint32_t len = 0;
  // The length of the pass this span belongs to (0: the span is the whole pass): the copy is
  // written with streaming stores when the pass is long, even if it is run in shorter spans.
  uint32_t stream_len = 0;
  // When set, Update advances it over the span: the CRCs of theta (and of m, v when present) as
  // read and as written, the non-finite values written, the first of them.
  SpanIntegrity* integrity = nullptr;
};

/// Passes (Span::stream_len, else len) of at least this many elements write the low-precision
/// copy with streaming stores (Update's loops, and UpdateQ8's for q8-bf16's copy of its rounded
/// theta): the copy is only written, so ordinary stores would first read
/// every line of it from memory (2 more bytes per element), and on passes this large it would
/// not stay cached for its reader anyway. (The state is read before it is written, so its lines
/// are already cached: streaming its stores measured far slower.)
constexpr uint32_t kStreamCopyMin = 1u << 20;

/// Elements per chunk when the integrity lanes are computed around the loops rather than in
/// them: each chunk's state (up to 3 x 32 KiB) is checksummed, updated and checksummed again
/// while it is in cache.
constexpr uint32_t kIntegrityChunk = 8192;

/// Advances s.integrity's input CRCs over elements [i, i + r) of the span (before they are
/// updated), and its output CRCs and non-finite count over them (after).
void IntegrityIn(const Span& s, uint32_t i, uint32_t r);
void IntegrityOut(const Span& s, uint32_t i, uint32_t r);

/// Whether Update folds the CRCs inside its loops (crc_fast's VPCLMULQDQ implementation is in
/// use), rather than around them in chunks.
bool FusedIntegrity();

/// Updates the span with the datapath specialised for `md` (a mode DecodeMode accepted; its
/// sparse bit is ignored: the span's gradient is dense) and the launch's controls `c`, which
/// MakeRuleCtl built from `md` (the loop is chosen by md and by c's select signals: for SGD,
/// mom_pass and nesterov; s.m is present exactly when UsesM(md)). An FTZ mode's loops set
/// MXCSR's DAZ bit for their duration and restore the caller's MXCSR; they give the contract's
/// bits only where DazHonoured().
void Update(const Mode& md, const RuleCtl& c, const Span& s);

/// The compressed state formats (q8, q8-bf16: docs/state-formats.md, state_q8.h) on the
/// specialised datapath: elements [0, len) of one launch (or of one tile of it) as the kernel's
/// buffers hold them, len a whole number of blocks of kQ8Block.
struct Q8Span {
  void* theta = nullptr;          // binary32 words (q8) or bf16 halves (q8-bf16)
  uint8_t* m = nullptr;           // m's codes, when the optimizer keeps m
  uint8_t* v = nullptr;           // v's codes, when it keeps v
  uint32_t* m_absmax = nullptr;   // one binary32 per block of m (the span's first block first)
  uint32_t* v_absmax = nullptr;   // ... of v
  const void* grad = nullptr;     // as Span::grad
  DType grad_type = DType::kFp32;
  uint16_t* out = nullptr;        // the low-precision copy (md.out), else unused
  uint32_t len = 0;
  uint32_t stream_len = 0;        // as Span::stream_len
  // q8-bf16's stochastic rounding: the store's key, the step being committed, and the store
  // index of the span's element 0.
  uint64_t seed = 0, step = 0, index = 0;
};

/// The integrity lanes of a q8 launch as its spans advance them: the CRC registers of theta's
/// bytes, of each moment's codes and (apart) of its absmax values, as read and as written, and
/// the non-finite values written as the general datapath counts them (theta's, and every element
/// of a moment block whose absmax is non-finite).
struct Q8Integrity {
  uint32_t crc_in[3];   // theta, m's codes, v's codes as read
  uint32_t crc_out[3];  // ... as written
  uint32_t abs_in[2];   // m's and v's absmax values as read
  uint32_t abs_out[2];  // ... as written
  uint64_t nonfinite;   // added to
  uint32_t first;       // the launch's first element with one, or 0xffffffff (set once)
  uint32_t origin;      // the launch's element number of the span's element 0
};

/// Elements per chunk of UpdateQ8: each chunk's moments are dequantized into binary32 scratch
/// arrays (and q8-bf16 theta widened), updated by Update's loop, and quantized back (theta
/// rounded) while they are in cache. A whole number of blocks; a divisor of the sparse block,
/// so a chunk never straddles one.
constexpr uint32_t kQ8Chunk = 2048;

/// Updates the span with the datapath specialised for `md` (a q8 or q8-bf16 mode DecodeMode
/// accepted; its sparse bit is ignored) and `c`, as Update does, and advances `ig` over it: the
/// same bytes and lanes as the general datapath's LoadStateQ8 / ComputeTile / StoreStateQ8.
void UpdateQ8(const Mode& md, const RuleCtl& c, const Q8Span& s, Q8Integrity* ig);

/// The instruction sets the specialised loops are built for.
enum class Isa : uint32_t { kAvx2 = 0, kAvx512 = 1 };

/// Whether this processor runs the AVX-512 build (AVX-512 F, BW, DQ, VL).
bool HasAvx512();
/// The instruction set Update uses: the widest available unless SetIsa chose one.
Isa ActiveIsa();
/// Chooses the instruction set (tests, benchmarks). Returns false, changing nothing, when the
/// processor lacks it.
bool SetIsa(Isa isa);
/// Whether this thread's processor honours MXCSR's DAZ bit (checked once: a subnormal operand
/// multiplied with DAZ set). The FTZ loops of Update and UpdateQ8 rely on it (datapath_isa.cpp:
/// they set it around themselves); the kernel runs FTZ launches on the general datapath where
/// it is not honoured, as under valgrind, which ignores the bit.
bool DazHonoured();
/// MXCSR's DAZ bit.
constexpr unsigned int kMxcsrDaz = 0x40;
/// Whether this processor has AVX-512 VBMI, whose byte shuffles the 512-bit build's q8
/// look-ups use where present: the map values of the dequantization and the index of the
/// quantization (VBMI is not part of x86-64-v4, so the choice is made at run time; without it
/// the signed map's values come from vpermt2ps, the unsigned map's and the index table's entries
/// from scalar loads).
bool HasVbmi();
/// Whether those look-ups use VBMI now: HasVbmi() unless SetVbmi(false) turned it off.
bool UseVbmi();
/// Turns its use off or back on (tests, benchmarks). Returns false, changing nothing, when
/// asked to turn it on where the processor lacks it.
bool SetVbmi(bool on);
const char* IsaName(Isa isa);

}  // namespace host
}  // namespace hls
}  // namespace csdkit

#endif  // CSDKIT_HLS_HOST_DATAPATH_H_
