// Shared harness of the rtl/fp Verilator benches: command line, seed, the mismatch reporter with
// its check macro (GOT=/EXP= in hex), and the pipelined driver that feeds one operation per
// cycle into a unit and checks each result as it emerges, Latency cycles later.
//
// Every unit under test has the same port names: clk_i, rst_ni, valid_i, valid_o, result_o,
// and its operands (a_i, b_i, sub_i); the per-unit bench supplies how to drive the operands.
#ifndef CSDKIT_RTL_FP_TB_TB_CHECK_H_
#define CSDKIT_RTL_FP_TB_TB_CHECK_H_

#include <verilated.h>

#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if VM_TRACE_FST
#include <verilated_fst_c.h>
#endif

namespace csd_tb {

/// Default seed of every bench; CSDKIT_TEST_SEED or --seed replaces it.
constexpr uint64_t kDefaultSeed = 0xc5d0f9a7e5eedull;
/// Mismatches printed in full per check; the total is always printed.
constexpr uint64_t kMaxReports = 20;

// ---- Command line ------------------------------------------------------------------------------

/// Options shared by all benches.
struct Options {
  uint64_t seed = kDefaultSeed;
  uint64_t n = 0;            // random operations per model (0: the bench's default)
  bool exhaustive = false;   // sweep all 2^32 inputs of a unary unit, sharded
  uint32_t shard = 0;        // this shard ...
  uint32_t shards = 16;      // ... of this many
};

inline void Usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--seed S] [--n N] [--exhaustive --shard K [--shards M]]\n"
               "  --seed S      random seed (default 0x%" PRIx64 ", or $CSDKIT_TEST_SEED)\n"
               "  --n N         random operations per model\n"
               "  --exhaustive  sweep inputs [K*2^32/M, (K+1)*2^32/M) instead (unary units)\n"
               "Set CSDKIT_RTL_FST=<file.fst> for a waveform (build with CSDKIT_RTL_TRACE=ON).\n",
               prog, kDefaultSeed);
}

/// Parses the shared options; exits with status 2 and the usage on a bad argument.
inline Options ParseOptions(int argc, char** argv) {
  Options o;
  if (const char* s = std::getenv("CSDKIT_TEST_SEED"); s != nullptr && *s != '\0') {
    o.seed = std::strtoull(s, nullptr, 0);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], arg.c_str());
        Usage(argv[0]);
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 0);
    };
    if (arg == "--seed") {
      o.seed = value();
    } else if (arg == "--n") {
      o.n = value();
    } else if (arg == "--exhaustive") {
      o.exhaustive = true;
    } else if (arg == "--shard") {
      o.shard = static_cast<uint32_t>(value());
    } else if (arg == "--shards") {
      o.shards = static_cast<uint32_t>(value());
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], arg.c_str());
      Usage(argv[0]);
      std::exit(2);
    }
  }
  if (o.shards == 0 || (o.shards & (o.shards - 1)) != 0 || o.shards > 65536 ||
      o.shard >= o.shards) {
    std::fprintf(stderr, "%s: need a power-of-two --shards <= 65536 and --shard < --shards\n",
                 argv[0]);
    std::exit(2);
  }
  return o;
}

// ---- Mismatch reporting ------------------------------------------------------------------------

/// Counts mismatches of one check; prints the first kMaxReports with the seed, the index, the
/// inputs and GOT=/EXP= in hex, then the total at Finish().
class Checker {
 public:
  /// `what` names the check (unit, model, stimulus), `digits` the hex width of the values.
  Checker(std::string what, uint64_t seed, int digits)
      : what_(std::move(what)), seed_(seed), digits_(digits) {}

  /// Reports one mismatch: `inputs` describes the operands (already formatted, in hex).
  void Fail(const char* file, int line, uint64_t index, const char* inputs, uint64_t got,
            uint64_t exp) {
    if (failures_++ < kMaxReports) {
      std::printf("MISMATCH %s seed=0x%" PRIx64 " index=%" PRIu64 " %s GOT=0x%0*" PRIx64
                  " EXP=0x%0*" PRIx64 " (%s:%d)\n",
                  what_.c_str(), seed_, index, inputs, digits_, got, digits_, exp, file, line);
    }
  }
  /// Reports a protocol error (valid/latency), which has no GOT/EXP pair of values.
  void Protocol(uint64_t tick, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    if (failures_++ < kMaxReports) {
      char buf[256];
      va_list ap;
      va_start(ap, fmt);
      std::vsnprintf(buf, sizeof buf, fmt, ap);
      va_end(ap);
      std::printf("PROTOCOL %s seed=0x%" PRIx64 " cycle=%" PRIu64 " %s\n", what_.c_str(), seed_,
                  tick, buf);
    }
  }
  void Count() { ++checked_; }
  /// Prints the summary line; returns true when there was no mismatch.
  bool Finish() const {
    if (failures_ != 0) {
      std::printf("FAIL %s: %" PRIu64 " failures (mismatches and protocol errors) in %" PRIu64
                  " checks (seed=0x%" PRIx64 ")\n",
                  what_.c_str(), failures_, checked_, seed_);
    }
    return failures_ == 0;
  }
  uint64_t failures() const { return failures_; }

 private:
  std::string what_;
  uint64_t seed_;
  int digits_;
  uint64_t failures_ = 0;
  uint64_t checked_ = 0;
};

/// Formats operands for a report.
inline std::string Hex(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string Hex(const char* fmt, ...) {
  char buf[160];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

/// Checks got == exp; on a mismatch reports the index, the inputs (a printf format and its
/// arguments, formatted only on failure) and GOT=/EXP= in hex.
#define TB_CHECK_EQ_HEX(checker, index, got, exp, ...)                                      \
  do {                                                                                      \
    const uint64_t tb_got_ = static_cast<uint64_t>(got);                                    \
    const uint64_t tb_exp_ = static_cast<uint64_t>(exp);                                    \
    (checker).Count();                                                                      \
    if (tb_got_ != tb_exp_) {                                                               \
      (checker).Fail(__FILE__, __LINE__, (index), ::csd_tb::Hex(__VA_ARGS__).c_str(),       \
                     tb_got_, tb_exp_);                                                     \
    }                                                                                       \
  } while (0)

// ---- Pipelined driver --------------------------------------------------------------------------

/// One operation: operands, the expected result, its index in the stimulus stream.
struct Op {
  uint64_t index = 0;
  uint32_t a = 0, b = 0;
  uint32_t sub = 0;
  uint32_t exp = 0;
};

/// Throughput of one run.
struct RunStats {
  uint64_t ops = 0;
  uint64_t cycles = 0;
  double seconds = 0.0;
};

/// Drives a Verilated unit with one operation per cycle (with occasional bubbles), checks that
/// every result appears exactly `latency` cycles after its operands with valid_o set and that
/// valid_o is never set otherwise, and compares each result with the expected value.
///
/// `gen(i, &op)` fills operation i (operands and expected result), `drive(model, op)` puts the
/// operands on the ports, `fmt(op)` formats them for a report. Results are result_o.
template <class Model>
class PipeDriver {
 public:
  PipeDriver(std::string name, unsigned latency, uint64_t seed)
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
      // One file per model: the model name with anything but [A-Za-z0-9_] replaced by '_'.
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
  ~PipeDriver() {
#if VM_TRACE_FST
    if (trace_) trace_->close();
#endif
    model_->final();
  }

  Model& model() { return *model_; }

  /// Holds reset for a few cycles while valid_i is driven high with garbage operands: nothing
  /// issued during reset may come out.
  template <class Drive>
  void Reset(Drive drive) {
    std::mt19937_64 rng(seed_ ^ 0x5eedull);
    model_->rst_ni = 0;
    for (unsigned i = 0; i < latency_ + 3; ++i) {
      Op junk;
      junk.a = static_cast<uint32_t>(rng());
      junk.b = static_cast<uint32_t>(rng());
      junk.sub = static_cast<uint32_t>(rng() & 1u);
      drive(*model_, junk);
      model_->valid_i = 1;
      Tick();
    }
    model_->rst_ni = 1;
  }

  /// Runs ops [0, n) through the unit; mismatches and protocol errors go to `chk`.
  template <class Gen, class Drive, class Fmt>
  RunStats Run(uint64_t n, Gen gen, Drive drive, Fmt fmt, Checker& chk) {
    std::mt19937_64 bubbles(seed_ ^ 0xb0bb1e5ull);
    const size_t ring_size = 256;  // > latency + 1
    std::vector<Op> ring(ring_size);
    std::vector<uint64_t> issued_at(ring_size);
    size_t head = 0, tail = 0;  // pop at head, push at tail
    uint64_t next = 0;
    uint64_t rnd = 0;
    unsigned rnd_left = 0;
    const uint64_t start_tick = tick_;
    const auto t0 = std::chrono::steady_clock::now();
    // Issue all operations, then drain for latency cycles.
    uint64_t idle_after = 0;
    while (next < n || idle_after <= latency_) {
      bool issue = next < n;
      if (issue) {
        // One cycle in 16 is a bubble (valid_i low, garbage on the operands).
        if (rnd_left == 0) {
          rnd = bubbles();
          rnd_left = 16;
        }
        issue = (rnd & 15u) != 0u;
        rnd >>= 4;
        --rnd_left;
      }
      if (issue) {
        Op& op = ring[tail % ring_size];
        op = Op();
        op.index = next;
        gen(next, &op);
        drive(*model_, op);
        issued_at[tail % ring_size] = tick_;
        ++tail;
        ++next;
        model_->valid_i = 1;
      } else {
        Op junk;
        junk.a = static_cast<uint32_t>(rnd * 0x9e3779b97f4a7c15ull >> 32);
        junk.b = ~junk.a;
        junk.sub = junk.a & 1u;
        drive(*model_, junk);
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
            chk.Protocol(tick_, "index=%" PRIu64 " result after %" PRIu64
                         " cycles, Latency=%u", op.index, lat, latency_);
          }
          TB_CHECK_EQ_HEX(chk, op.index, model_->result_o, op.exp, "%s", fmt(op).c_str());
          ++head;
        }
      }
    }
    if (head != tail) {
      chk.Protocol(tick_, "%zu results never came out", tail - head);
    }
    const auto t1 = std::chrono::steady_clock::now();
    RunStats s;
    s.ops = n;
    s.cycles = tick_ - start_tick;
    s.seconds = std::chrono::duration<double>(t1 - t0).count();
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

#endif  // CSDKIT_RTL_FP_TB_TB_CHECK_H_
