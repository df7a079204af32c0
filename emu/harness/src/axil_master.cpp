#include "csdkit/emu/harness/axil_master.h"

#include <cstdio>
#include <string>

namespace csdkit {
namespace emu {

namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%02x", v);
  return buf;
}

}  // namespace

AxiLiteMaster::AxiLiteMaster(Sim* sim, const AxiLitePorts& ports, const AxiLiteOptions& options)
    : sim_(sim), ports_(ports), options_(options), rng_(options.seed) {
  if (sim_ == nullptr || !ports_.aw_valid.bound() || !ports_.ar_valid.bound()) {
    throw SimError("AxiLiteMaster: no Sim or unbound ports");
  }
  sim_->Attach(this);
}

AxiLiteMaster::~AxiLiteMaster() { sim_->Detach(this); }

bool AxiLiteMaster::Gap() {
  if (options_.gap <= 0.0) return false;
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < options_.gap;
}

uint8_t AxiLiteMaster::Write(uint32_t addr, uint32_t data, uint8_t strb) {
  if (sim_->in_reset()) throw SimError("AxiLiteMaster::Write during reset");
  addr_ = addr;
  data_ = data;
  strb_ = strb;
  aw_todo_ = w_todo_ = b_todo_ = true;
  aw_shown_ = w_shown_ = false;
  sim_->RunUntil([this] { return !b_todo_; }, options_.timeout_cycles,
                 "AXI4-Lite write of " + Hex32(addr));
  ++writes_;
  return resp_;
}

uint32_t AxiLiteMaster::Read(uint32_t addr, uint8_t* resp) {
  if (sim_->in_reset()) throw SimError("AxiLiteMaster::Read during reset");
  addr_ = addr;
  ar_todo_ = r_todo_ = true;
  ar_shown_ = false;
  sim_->RunUntil([this] { return !r_todo_; }, options_.timeout_cycles,
                 "AXI4-Lite read of " + Hex32(addr));
  ++reads_;
  if (resp != nullptr) *resp = resp_;
  return rdata_;
}

void AxiLiteMaster::Reset() {
  aw_todo_ = w_todo_ = b_todo_ = ar_todo_ = r_todo_ = false;
  aw_shown_ = w_shown_ = ar_shown_ = false;
  b_ready_ = r_ready_ = false;
  ports_.aw_valid.Set(0);
  ports_.w_valid.Set(0);
  ports_.b_ready.Set(0);
  ports_.ar_valid.Set(0);
  ports_.r_ready.Set(0);
}

void AxiLiteMaster::Drive(uint64_t /*cycle*/) {
  // A valid, once raised, stays up until its handshake; before that, a gap may delay it.
  if (aw_todo_ && !aw_shown_ && !Gap()) aw_shown_ = true;
  if (w_todo_ && !w_shown_ && !Gap()) w_shown_ = true;
  if (ar_todo_ && !ar_shown_ && !Gap()) ar_shown_ = true;
  b_ready_ = b_todo_ && !aw_todo_ && !w_todo_ && !Gap();
  r_ready_ = r_todo_ && !ar_todo_ && !Gap();
  ports_.aw_valid.Set(aw_todo_ && aw_shown_);
  ports_.aw_addr.Set(addr_);
  ports_.w_valid.Set(w_todo_ && w_shown_);
  ports_.w_data.Set(data_);
  ports_.w_strb.Set(strb_);
  ports_.b_ready.Set(b_ready_);
  ports_.ar_valid.Set(ar_todo_ && ar_shown_);
  ports_.ar_addr.Set(addr_);
  ports_.r_ready.Set(r_ready_);
}

void AxiLiteMaster::Sample(uint64_t cycle) {
  if (aw_todo_ && aw_shown_ && ports_.aw_ready.Get() != 0) aw_todo_ = false;
  if (w_todo_ && w_shown_ && ports_.w_ready.Get() != 0) w_todo_ = false;
  if (b_ready_ && ports_.b_valid.Get() != 0) {
    resp_ = static_cast<uint8_t>(ports_.b_resp.Get());
    b_todo_ = false;
  } else if (ports_.b_valid.Get() != 0 && !b_todo_) {
    throw SimError("AXI4-Lite at cycle " + std::to_string(cycle) +
                   ": BVALID with no write outstanding");
  }
  if (ar_todo_ && ar_shown_ && ports_.ar_ready.Get() != 0) ar_todo_ = false;
  if (r_ready_ && ports_.r_valid.Get() != 0) {
    resp_ = static_cast<uint8_t>(ports_.r_resp.Get());
    rdata_ = static_cast<uint32_t>(ports_.r_data.Get());
    r_todo_ = false;
  } else if (ports_.r_valid.Get() != 0 && !r_todo_) {
    throw SimError("AXI4-Lite at cycle " + std::to_string(cycle) +
                   ": RVALID with no read outstanding");
  }
}

}  // namespace emu
}  // namespace csdkit
