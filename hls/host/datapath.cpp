// Run-time choice of the instruction set for the specialised datapath (datapath.h), and the
// integrity lanes computed around the loops where they are not folded inside them.
#include <immintrin.h>

#include <atomic>

#include "crc_fast.h"
#include "csdkit/hls/bits.h"
#include "datapath.h"
#include "datapath_q8.h"

namespace csdkit {
namespace hls {
namespace host {

void UpdateAvx2(const Mode& md, const RuleCtl& c, const Span& s);
void UpdateAvx512(const Mode& md, const RuleCtl& c, const Span& s);
void UpdateQ8Avx2(const Mode& md, const RuleCtl& c, const Q8Span& s, Q8Integrity* ig);
void UpdateQ8Avx512(const Mode& md, const RuleCtl& c, const Q8Span& s, Q8Integrity* ig);
void DequantQ8BlocksAvx2(const uint8_t* codes, const uint32_t* absmax, uint32_t blocks,
                         bool is_signed, bool ftz, uint32_t* out);
void DequantQ8BlocksAvx512(const uint8_t* codes, const uint32_t* absmax, uint32_t blocks,
                           bool is_signed, bool ftz, uint32_t* out);
uint32_t QuantizeQ8BlocksAvx2(const uint32_t* x, uint32_t blocks, bool is_signed, bool ftz,
                              uint8_t* codes, uint32_t* absmax);
uint32_t QuantizeQ8BlocksAvx512(const uint32_t* x, uint32_t blocks, bool is_signed, bool ftz,
                                uint8_t* codes, uint32_t* absmax);
uint64_t RoundBf16SpanAvx2(const uint32_t* theta, uint32_t len, uint64_t seed, uint64_t step,
                           uint64_t index, uint16_t* dst);
uint64_t RoundBf16SpanAvx512(const uint32_t* theta, uint32_t len, uint64_t seed, uint64_t step,
                             uint64_t index, uint16_t* dst);

namespace {

std::atomic<uint32_t>& Chosen() {
  static std::atomic<uint32_t> isa{static_cast<uint32_t>(HasAvx512() ? Isa::kAvx512 : Isa::kAvx2)};
  return isa;
}

std::atomic<bool>& VbmiOn() {
  static std::atomic<bool> on{HasVbmi()};
  return on;
}

}  // namespace

bool HasVbmi() {
  static const bool has = HasAvx512() && __builtin_cpu_supports("avx512vbmi");
  return has;
}

bool UseVbmi() { return VbmiOn().load(std::memory_order_relaxed); }

bool SetVbmi(bool on) {
  if (on && !HasVbmi()) return false;
  VbmiOn().store(on, std::memory_order_relaxed);
  return true;
}

bool DazHonoured() {
  static const bool honoured = [] {
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | kMxcsrDaz);
    volatile float tiny = 0x1p-140f, one = 1.0f;
    volatile float product = tiny * one;  // (stored before MXCSR is restored)
    _mm_setcsr(csr);
    return product == 0.0f;
  }();
  return honoured;
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
}

Isa ActiveIsa() { return static_cast<Isa>(Chosen().load(std::memory_order_relaxed)); }

bool SetIsa(Isa isa) {
  if (isa == Isa::kAvx512 && !HasAvx512()) return false;
  Chosen().store(static_cast<uint32_t>(isa), std::memory_order_relaxed);
  return true;
}

const char* IsaName(Isa isa) { return isa == Isa::kAvx512 ? "avx512" : "avx2"; }

namespace {

void UpdateIsa(const Mode& md, const RuleCtl& c, const Span& s) {
  if (ActiveIsa() == Isa::kAvx512) {
    UpdateAvx512(md, c, s);
  } else {
    UpdateAvx2(md, c, s);
  }
}

}  // namespace

bool FusedIntegrity() {
  return ActiveCrcImpl() == CrcImpl::kVpclmul || ActiveCrcImpl() == CrcImpl::kVpclmul512;
}

void IntegrityIn(const Span& s, uint32_t i, uint32_t r) {
  SpanIntegrity* ig = s.integrity;
  ig->crc_in[0] = Crc32Words(ig->crc_in[0], s.theta + i, r);
  if (s.m != nullptr) ig->crc_in[1] = Crc32Words(ig->crc_in[1], s.m + i, r);
  if (s.v != nullptr) ig->crc_in[2] = Crc32Words(ig->crc_in[2], s.v + i, r);
}

void IntegrityOut(const Span& s, uint32_t i, uint32_t r) {
  SpanIntegrity* ig = s.integrity;
  uint64_t nf = 0;
  ig->crc_out[0] = Crc32WordsNonFinite(ig->crc_out[0], s.theta + i, r, &nf);
  if (s.m != nullptr) ig->crc_out[1] = Crc32WordsNonFinite(ig->crc_out[1], s.m + i, r, &nf);
  if (s.v != nullptr) ig->crc_out[2] = Crc32WordsNonFinite(ig->crc_out[2], s.v + i, r, &nf);
  if (nf == 0u) return;
  ig->nonfinite += nf;
  if (ig->first != 0xffffffffu) return;  // an earlier element has the first one
  for (uint32_t k = i; k < i + r; ++k) {
    if (IsNonFinite(s.theta[k]) || (s.m != nullptr && IsNonFinite(s.m[k])) ||
        (s.v != nullptr && IsNonFinite(s.v[k]))) {
      ig->first = ig->origin + k;
      return;
    }
  }
}

void Update(const Mode& md, const RuleCtl& c, const Span& s) {
  if (s.integrity == nullptr || FusedIntegrity()) {
    UpdateIsa(md, c, s);
    return;
  }
  // The integrity lanes around the loops: chunk by chunk, in cache.
  const size_t gbytes = s.grad_type == DType::kFp32 ? 4 : 2;
  for (uint32_t base = 0; base < s.len; base += kIntegrityChunk) {
    Span cs = s;
    cs.theta = s.theta + base;
    cs.m = s.m != nullptr ? s.m + base : nullptr;
    cs.v = s.v != nullptr ? s.v + base : nullptr;
    cs.grad = static_cast<const char*>(s.grad) + base * gbytes;
    cs.out = s.out != nullptr ? s.out + base : nullptr;
    cs.len = s.len - base < kIntegrityChunk ? s.len - base : kIntegrityChunk;
    cs.stream_len = s.stream_len != 0u ? s.stream_len : s.len;
    cs.integrity = nullptr;
    IntegrityIn(s, base, cs.len);
    UpdateIsa(md, c, cs);
    IntegrityOut(s, base, cs.len);
  }
}

void UpdateQ8(const Mode& md, const RuleCtl& c, const Q8Span& s, Q8Integrity* ig) {
  if (ActiveIsa() == Isa::kAvx512) {
    UpdateQ8Avx512(md, c, s, ig);
  } else {
    UpdateQ8Avx2(md, c, s, ig);
  }
}

void DequantQ8Blocks(const uint8_t* codes, const uint32_t* absmax, uint32_t blocks,
                     bool is_signed, bool ftz, uint32_t* out) {
  if (ActiveIsa() == Isa::kAvx512) {
    DequantQ8BlocksAvx512(codes, absmax, blocks, is_signed, ftz, out);
  } else {
    DequantQ8BlocksAvx2(codes, absmax, blocks, is_signed, ftz, out);
  }
}

uint32_t QuantizeQ8Blocks(const uint32_t* x, uint32_t blocks, bool is_signed, bool ftz,
                          uint8_t* codes, uint32_t* absmax) {
  return ActiveIsa() == Isa::kAvx512
             ? QuantizeQ8BlocksAvx512(x, blocks, is_signed, ftz, codes, absmax)
             : QuantizeQ8BlocksAvx2(x, blocks, is_signed, ftz, codes, absmax);
}

uint64_t RoundBf16Span(const uint32_t* theta, uint32_t len, uint64_t seed, uint64_t step,
                       uint64_t index, uint16_t* dst) {
  return ActiveIsa() == Isa::kAvx512 ? RoundBf16SpanAvx512(theta, len, seed, step, index, dst)
                                     : RoundBf16SpanAvx2(theta, len, seed, step, index, dst);
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
