// Shared harness of the rtl/q8 Verilator benches: a pipelined driver for units whose ports are
// not the fp units' (a_i, b_i -> result_o), built on rtl/fp/tb/tb_check.h (command line, seed,
// the Checker with GOT=/EXP= in hex).
//
// Every unit under test has clk_i, rst_ni, valid_i and valid_o; the bench supplies how to put
// an operation on the other inputs (drive), garbage for bubbles and reset (junk), and how to
// check the outputs when its result emerges (check).
#ifndef CSDKIT_RTL_Q8_TB_TB_Q8_H_
#define CSDKIT_RTL_Q8_TB_TB_Q8_H_

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tb_check.h"

namespace csd_tb {

/// Every operation of a unit produces a result, unless the bench says otherwise for its Op.
template <class Op>
bool ExpectsResult(const Op&) {
  return true;
}

/// Drives a Verilated unit with one operation per cycle (one cycle in 16 a bubble with garbage
/// on the inputs), checks that every result appears exactly `latency` cycles after its inputs
/// with valid_o set and that valid_o is never set otherwise, and hands each result to `check`.
///
/// Op: any copyable struct with a `uint64_t index` member. An operation produces a result
/// unless ExpectsResult(op) says otherwise (a bench overloads it for its Op, found by
/// argument-dependent lookup: csd_q8_absmax's beats give one result per block). Callbacks:
///   gen(i, &op)              fills operation i (inputs and expected outputs);
///   drive(model, op)         puts its inputs on the ports;
///   junk(model, bits)        puts garbage on the inputs (bubbles, reset);
///   check(model, op, chk)    compares the outputs with op's expectation (TB_CHECK_EQ_HEX).
template <class Model, class Op>
class Q8Pipe {
 public:
  Q8Pipe(std::string name, unsigned latency, uint64_t seed)
      : name_(std::move(name)), latency_(latency), seed_(seed) {
    ctx_ = std::make_unique<VerilatedContext>();
    ctx_->randReset(2);  // datapath registers start with random bits (--x-initial unique)
    ctx_->randSeed(static_cast<int>(seed & 0x7fffffff));
#if VM_TRACE_FST
    const char* fst = std::getenv("CSDKIT_RTL_FST");
    if (fst != nullptr && *fst != '\0') ctx_->traceEverOn(true);
#endif
    model_ = std::make_unique<Model>(ctx_.get(), "top");
#if VM_TRACE_FST
    if (fst != nullptr && *fst != '\0') {
      trace_ = std::make_unique<VerilatedFstC>();
      model_->trace(trace_.get(), 99);
      // One file per model: the name with anything but [A-Za-z0-9_] replaced by '_'.
      std::string tag = name_;
      for (char& c : tag) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
      }
      const std::string path = std::string(fst) + "." + tag + ".fst";
      trace_->open(path.c_str());
      std::printf("trace: %s\n", path.c_str());
    }
#endif
  }
  ~Q8Pipe() {
#if VM_TRACE_FST
    if (trace_) trace_->close();
#endif
    model_->final();
  }

  Model& model() { return *model_; }
  const std::string& name() const { return name_; }

  /// Holds reset for latency + 3 cycles with valid_i high and garbage inputs: nothing issued
  /// during reset may come out.
  template <class Junk>
  void Reset(Junk junk) {
    std::mt19937_64 rng(seed_ ^ 0x5eedull);
    model_->rst_ni = 0;
    for (unsigned i = 0; i < latency_ + 3; ++i) {
      junk(*model_, rng());
      model_->valid_i = 1;
      Tick();
    }
    model_->rst_ni = 1;
  }

  /// Runs ops [0, n); mismatches and protocol errors go to `chk`. Returns the cycles taken.
  template <class Gen, class Drive, class Junk, class Check>
  RunStats Run(uint64_t n, Gen gen, Drive drive, Junk junk, Check check, Checker& chk) {
    std::mt19937_64 bubbles(seed_ ^ 0xb0bb1e5ull);
    std::mt19937_64 garbage(seed_ ^ 0x6a7ba6eull);
    const size_t ring_size = 256;  // > latency + 1
    if (latency_ + 2 > ring_size) {
      chk.Protocol(tick_, "latency %u too long for the bench's ring", latency_);
      return RunStats();
    }
    std::vector<Op> ring(ring_size);
    std::vector<uint64_t> issued_at(ring_size);
    size_t head = 0, tail = 0;  // pop at head, push at tail
    uint64_t next = 0, rnd = 0, idle_after = 0;
    unsigned rnd_left = 0;
    const uint64_t start_tick = tick_;
    const auto t0 = std::chrono::steady_clock::now();
    while (next < n || idle_after <= latency_) {
      bool issue = next < n;
      if (issue) {
        if (rnd_left == 0) {
          rnd = bubbles();
          rnd_left = 16;
        }
        issue = (rnd & 15u) != 0u;
        rnd >>= 4;
        --rnd_left;
      }
      if (issue) {
        Op op;
        op.index = next;
        gen(next, &op);
        drive(*model_, op);
        if (ExpectsResult(op)) {
          if (tail - head >= ring_size) {
            chk.Protocol(tick_, "more results in flight than the bench's ring holds");
            return RunStats();
          }
          ring[tail % ring_size] = op;
          issued_at[tail % ring_size] = tick_;
          ++tail;
        }
        ++next;
        model_->valid_i = 1;
      } else {
        junk(*model_, garbage());
        model_->valid_i = 0;
        if (next >= n) ++idle_after;
      }
      Tick();
      if (model_->valid_o) {
        if (head == tail) {
          chk.Protocol(tick_, "valid_o set with no operation in flight");
        } else {
          const Op& op = ring[head % ring_size];
          const uint64_t lat = tick_ - issued_at[head % ring_size];
          if (lat != latency_) {
            chk.Protocol(tick_, "index=%" PRIu64 " result after %" PRIu64 " cycles, Latency=%u",
                         op.index, lat, latency_);
          }
          check(*model_, op, chk);
          ++head;
        }
      }
    }
    if (head != tail) chk.Protocol(tick_, "%zu results never came out", tail - head);
    RunStats s;
    s.ops = n;
    s.cycles = tick_ - start_tick;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }

  /// Prints the throughput line of a run.
  void PrintSpeed(const char* what, const RunStats& s) const {
    std::printf("SPEED %s %s: latency=%u ops=%" PRIu64 " cycles=%" PRIu64
                " seconds=%.2f cycles_per_s=%.3g\n",
                name_.c_str(), what, latency_, s.ops, s.cycles, s.seconds,
                s.seconds > 0 ? static_cast<double>(s.cycles) / s.seconds : 0.0);
  }

 private:
  // One clock cycle: the rising edge samples the inputs set before it; outputs are read after
  // it. Ticks count rising edges.
  void Tick() {
    model_->clk_i = 1;
    model_->eval();
    ++tick_;
#if VM_TRACE_FST
    if (trace_) trace_->dump(2 * tick_);
#endif
    model_->clk_i = 0;
    model_->eval();
#if VM_TRACE_FST
    if (trace_) trace_->dump(2 * tick_ + 1);
#endif
  }

  std::string name_;
  unsigned latency_;
  uint64_t seed_;
  uint64_t tick_ = 0;
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Model> model_;
#if VM_TRACE_FST
  std::unique_ptr<VerilatedFstC> trace_;
#endif
};

}  // namespace csd_tb

#endif  // CSDKIT_RTL_Q8_TB_TB_Q8_H_
