// Run-time choice of the instruction set for the specialised datapath (datapath.h).
#include <atomic>

#include "datapath.h"

namespace csdkit {
namespace hls {
namespace host {

void UpdateAvx2(const Mode& md, const RuleCtl& c, const Span& s);
void UpdateAvx512(const Mode& md, const RuleCtl& c, const Span& s);

namespace {

std::atomic<uint32_t>& Chosen() {
  static std::atomic<uint32_t> isa{static_cast<uint32_t>(HasAvx512() ? Isa::kAvx512 : Isa::kAvx2)};
  return isa;
}

}  // namespace

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

void Update(const Mode& md, const RuleCtl& c, const Span& s) {
  if (ActiveIsa() == Isa::kAvx512) {
    UpdateAvx512(md, c, s);
  } else {
    UpdateAvx2(md, c, s);
  }
}

}  // namespace host
}  // namespace hls
}  // namespace csdkit
