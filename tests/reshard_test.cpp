// Reshard (csdkit/runtime/reshard.h) and `csdkit reshard`: sets of rank stores made here as
// csdkit.torch.distributed makes them (pieces of a model's tensors, partition records), with a
// known state, re-split 4 -> 2, 2 -> 3 and 4 -> 1 on 2 devices, through the C++ call and the
// command. The new set holds the source's state bit for bit (every store exported and placed by
// its pieces' names, independently of the reshard's own bookkeeping), at the source's step,
// with each torch param group's hyper-parameters and the source's store configuration; the
// source's bytes do not change. Refusals (a non-empty destination, a missing record, records
// of different models, ranges off the rule, stores at different steps, a world or a device
// count too large, a writer at work on a source store, a corrupt source shard found mid-way)
// leave nothing behind, and the command exits with status 2 naming what it refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/fp32.h"
#include "csdkit/hls/state_q8.h"
#include "csdkit/platform/splitmix.h"
#include "csdkit/runtime/reshard.h"
#include "csdkit/runtime/state_io.h"
#include "csdkit/runtime/store.h"
#include "cli_process.h"
#include "test_dir.h"

namespace csdkit {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

// The model: tensors of torch param groups 0 and 2 (group 1 empty, as a trainer may have it),
// flattened in this order without padding: N = 95341 elements, cut inside tensors by every
// world size used here.
struct ModelTensor {
  unsigned group, index;
  uint64_t numel;
};
const std::vector<ModelTensor> kModel = {
    {0, 0, 70001}, {0, 1, 333}, {0, 2, 5000}, {2, 0, 20000}, {2, 1, 7}};
constexpr int64_t kStep = 5;

uint64_t Total() {
  uint64_t n = 0;
  for (const ModelTensor& t : kModel) n += t.numel;
  return n;
}

std::string Name(const ModelTensor& t) {
  return "param_groups[" + std::to_string(t.group) + "].params[" + std::to_string(t.index) + "]";
}

OptimizerConfig Hyper(unsigned torch_group) {
  OptimizerConfig h = OptimizerConfig::Defaults(Optimizer::kAdamW);
  h.lr = torch_group == 0 ? 1e-2 : 3e-3;
  h.weight_decay = torch_group == 0 ? 1e-2 : 0.0;
  h.beta2 = torch_group == 0 ? 0.999 : 0.99;
  return h;
}

// The whole model's state: theta, m, v (v >= 0), element i distinct for each variable.
struct State {
  std::vector<float> var[3];
};
const char* const kVars[3] = {"theta", "m", "v"};

State ModelState() {
  State s;
  SplitMix64 r{2024};
  for (int v = 0; v < 3; ++v) {
    s.var[v].resize(Total());
    for (float& x : s.var[v]) x = v == 2 ? r.Uniform(0.0f, 1.0f) : r.Uniform(-1.0f, 1.0f);
  }
  return s;
}

std::pair<uint64_t, uint64_t> Slice(uint64_t world, uint64_t r) {
  const uint64_t n = Total(), chunk = (n + world - 1) / world;
  return {std::min(n, r * chunk), std::min(n, (r + 1) * chunk)};
}

void WriteJson(const std::string& path, const nlohmann::ordered_json& j) {
  std::ofstream f(path);
  f << j.dump(1);
}

// A set of `world` rank stores under `dir` holding ModelState() at kStep (rank `late` at
// kStep + 1), cut as csdkit.torch.distributed cuts the model, with the records it writes.
void MakeSet(const std::string& dir, uint64_t world, int late = -1) {
  const State s = ModelState();
  fs::create_directories(dir);
  for (uint64_t r = 0; r < world; ++r) {
    const auto [lo, hi] = Slice(world, r);
    std::vector<TensorSpec> specs;
    std::vector<unsigned> groups;
    std::vector<OptimizerConfig> hyper;
    uint64_t off = 0;
    for (const ModelTensor& t : kModel) {
      const uint64_t a = std::max(lo, off), b = std::min(hi, off + t.numel);
      if (a < b) {
        if (groups.empty() || groups.back() != t.group) {
          groups.push_back(t.group);
          hyper.push_back(Hyper(t.group));
        }
        specs.push_back({Name(t) + "[" + std::to_string(a - off) + ":" + std::to_string(b - off) +
                             "]",
                         b - a, static_cast<unsigned>(groups.size() - 1)});
      }
      off += t.numel;
    }
    StoreConfig c;
    c.devices = 1;
    c.hyper = hyper[0];
    c.grad = DType::kBf16;
    c.out = DType::kBf16;
    c.loss_scale = 8.0;
    c.seed = 77;
    c.subgroup_elems = 65536;
    const ParamLayout layout(specs);
    const std::string sdir = dir + "/rank-" + std::to_string(r);
    Store st = Store::CreateForModel(sdir, c, layout, hyper, s.var[0].data() + lo, DType::kFp32);
    StateImport in;
    in.step = static_cast<int>(r) == late ? kStep + 1 : kStep;
    uint64_t at = lo;
    for (const TensorSpec& t : layout.tensors()) {
      in.theta.push_back(s.var[0].data() + at);
      in.m.push_back(s.var[1].data() + at);
      in.v.push_back(s.var[2].data() + at);
      at += t.numel;
    }
    ImportState(st, in);
    nlohmann::ordered_json rec;
    rec["format"] = "csdkit-zero-partition-1";
    rec["world_size"] = world;
    rec["rank"] = r;
    rec["total_elements"] = Total();
    rec["begin"] = lo;
    rec["end"] = hi;
    rec["fingerprint"] = "00c0ffee123456";
    rec["dtype"] = "torch.float32";
    WriteJson(sdir + ".json", rec);
  }
}

// Every file under `dir` (but the lock files) with its bytes.
std::map<std::string, std::string> Tree(const std::string& dir) {
  std::map<std::string, std::string> t;
  if (!fs::exists(dir)) return t;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == "lock") continue;
    std::ifstream f(e.path(), std::ios::binary);
    t[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  return t;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// What a store in `state` holds of a piece whose values are x[0..n): x in fp32; theta rounded to
// bf16 (nearest even) in q8-bf16; a moment quantized in blocks of 256 from the piece's first
// element (the padding after its last element 0, AdamW's initial value) and dequantized.
std::vector<float> AsStored(const float* x, uint64_t n, int var, hls::StateFmt state) {
  std::vector<float> out(x, x + n);
  if (var == 0 && state == hls::StateFmt::kQ8Bf16) {
    for (float& y : out) y = hls::U2F(hls::Bf16ToF32(hls::F32ToBf16(hls::F2U(y))));
  } else if (var != 0 && hls::IsQ8(state)) {
    const hls::Fp32 ieee(false);
    for (uint64_t b = 0; b < n; b += hls::kQ8Block) {
      float blk[hls::kQ8Block] = {};
      const uint64_t len = std::min<uint64_t>(hls::kQ8Block, n - b);
      std::copy(x + b, x + b + len, blk);
      uint8_t codes[hls::kQ8Block];
      float amax;
      hls::QuantizeBlockQ8(blk, hls::kQ8Block, var == 1, ieee, codes, &amax);
      for (uint64_t i = 0; i < len; ++i) out[b + i] = hls::DequantQ8(codes[i], amax, var == 1, ieee);
    }
  }
  return out;
}

// Checks a written set against the model: world size, records, each store's configuration,
// step, hyper-parameters and state (as a store in `state` keeps it: AsStored). Each store's
// pieces are placed by their names (tensor offset in the model + a) and must tile the record's
// range in order.
void ExpectSet(const std::string& dir, uint64_t world, unsigned devices,
               hls::StateFmt state = hls::StateFmt::kFp32) {
  const State want = ModelState();
  std::map<std::string, uint64_t> offset;
  std::map<std::string, unsigned> group;
  uint64_t off = 0;
  for (const ModelTensor& t : kModel) {
    offset[Name(t)] = off;
    group[Name(t)] = t.group;
    off += t.numel;
  }
  EXPECT_FALSE(fs::exists(dir + "/rank-" + std::to_string(world) + ".json"));
  EXPECT_FALSE(fs::exists(dir + "/rank-" + std::to_string(world)));
  static const std::regex piece("(.*)\\[([0-9]+):([0-9]+)\\]");
  for (uint64_t r = 0; r < world; ++r) {
    const std::string rdir = dir + "/rank-" + std::to_string(r);
    SCOPED_TRACE(rdir);
    const nlohmann::json rec = ReadJson(rdir + ".json");
    const auto [lo, hi] = Slice(world, r);
    EXPECT_EQ(rec.at("format"), "csdkit-zero-partition-1");
    EXPECT_EQ(rec.at("world_size"), world);
    EXPECT_EQ(rec.at("rank"), r);
    EXPECT_EQ(rec.at("total_elements"), Total());
    EXPECT_EQ(rec.at("begin"), lo);
    EXPECT_EQ(rec.at("end"), hi);
    EXPECT_EQ(rec.at("fingerprint"), "00c0ffee123456");
    EXPECT_EQ(rec.at("dtype"), "torch.float32");
    EXPECT_FALSE(fs::exists(rdir + ".json.tmp"));
    const Store st = Store::Open(rdir, StoreAccess::kRead);
    EXPECT_EQ(st.step(), kStep);
    EXPECT_EQ(st.config().devices, devices);
    EXPECT_EQ(st.config().grad, DType::kBf16);
    EXPECT_EQ(st.config().out, DType::kBf16);
    EXPECT_EQ(st.config().loss_scale, 8.0);
    EXPECT_EQ(st.config().seed, 77u);
    EXPECT_EQ(st.config().hyper.opt, Optimizer::kAdamW);
    EXPECT_EQ(st.state(), state);
    ASSERT_NE(st.layout(), nullptr);
    st.Verify();
    const auto& tensors = st.layout()->tensors();
    std::vector<std::vector<float>> got[3];
    for (int v = 0; v < 3; ++v) {
      std::vector<float*> p;
      for (const TensorSpec& t : tensors) got[v].emplace_back(t.numel, -7.0f);
      for (auto& x : got[v]) p.push_back(x.data());
      ExportState(st, kVars[v], p);
    }
    uint64_t at = lo;
    for (size_t t = 0; t < tensors.size(); ++t) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(tensors[t].name, m, piece)) << tensors[t].name;
      ASSERT_TRUE(offset.count(m[1].str())) << tensors[t].name;
      const uint64_t a = std::stoull(m[2].str()), b = std::stoull(m[3].str());
      ASSERT_EQ(offset[m[1].str()] + a, at) << tensors[t].name << " is out of place";
      ASSERT_EQ(b - a, tensors[t].numel) << tensors[t].name;
      const OptimizerConfig h = st.group_hyper().at(tensors[t].group);
      const OptimizerConfig e = Hyper(group[m[1].str()]);
      EXPECT_EQ(h.lr, e.lr) << tensors[t].name;
      EXPECT_EQ(h.weight_decay, e.weight_decay) << tensors[t].name;
      EXPECT_EQ(h.beta2, e.beta2) << tensors[t].name;
      for (int v = 0; v < 3; ++v) {
        const std::vector<float> exp = AsStored(want.var[v].data() + at, tensors[t].numel, v, state);
        for (uint64_t i = 0; i < tensors[t].numel; ++i) {
          const uint32_t g = hls::F2U(got[v][t][i]), w = hls::F2U(exp[i]);
          ASSERT_EQ(g, w) << kVars[v] << " of " << tensors[t].name << " element " << i
                          << " (flattened " << at + i << "): expected 0x" << std::hex << w
                          << ", found 0x" << g;
        }
      }
      at += tensors[t].numel;
    }
    EXPECT_EQ(at, hi);
  }
}

struct Cli {
  int status = -1;
  std::string out;
};

// Runs `csdkit <args>`, stdout and stderr together.
Cli RunCli(const std::string& args) {
  Cli c;
  FILE* f = ::popen((std::string("'") + CSDKIT_CLI + "' " + args + " 2>&1").c_str(), "r");
  if (f == nullptr) return c;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) c.out.append(buf, n);
  const int st = ::pclose(f);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return c;
}

std::string Q(const std::string& s) { return "'" + s + "'"; }

ReshardResult ReshardSet(const std::string& src, const std::string& dst, int64_t world,
                         std::optional<int64_t> devices = std::nullopt,
                         std::optional<hls::StateFmt> state = std::nullopt) {
  ReshardOptions o;
  o.src = src;
  o.dst = dst;
  o.world = world;
  o.devices = devices;
  o.state = state;
  return Reshard(o);
}

TEST(Reshard, PartitionRule) {
  const auto s = PartitionSlices(5, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].begin, 0u);
  EXPECT_EQ(s[0].end, 2u);
  EXPECT_EQ(s[2].begin, 4u);
  EXPECT_EQ(s[2].end, 5u);
  // 5 over 4: chunk 2, rank 3 would own nothing.
  try {
    PartitionSlices(5, 4);
    FAIL() << "5 elements over 4 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ranks [3] would own no element; use at most 3 ranks"),
              std::string::npos)
        << e.what();
  }
  try {
    PartitionSlices(10, 1000);
    FAIL() << "10 elements over 1000 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ranks [10, 11, 12, 13, 14, 15, ..., 999] (990 in all)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Reshard, FourToTwoHoldsTheSourceStateBitForBit) {
  const std::string d = TestDir("four_to_two");
  MakeSet(d + "/src", 4);
  const auto before = Tree(d + "/src");
  const ReshardResult r = ReshardSet(d + "/src", d + "/dst", 2);
  EXPECT_EQ(r.step, kStep);
  EXPECT_EQ(r.source_world, 4u);
  EXPECT_EQ(r.total_elements, Total());
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].begin, 47671u);
  EXPECT_EQ(r.ranks[1].end, Total());
  ExpectSet(d + "/dst", 2, 1);
  EXPECT_EQ(Tree(d + "/src"), before) << "the source changed";
  // Back to 4 ranks: the same bytes of state as the original set.
  ReshardSet(d + "/dst", d + "/back", 4);
  ExpectSet(d + "/back", 4, 1);
}

TEST(Reshard, TwoToThreeIntoAnEmptyDirectory) {
  const std::string d = TestDir("two_to_three");
  MakeSet(d + "/src", 2);
  fs::create_directories(d + "/dst");
  ReshardSet(d + "/src", d + "/dst", 3);
  ExpectSet(d + "/dst", 3, 1);
}

TEST(Reshard, DeviceCountChanges) {
  const std::string d = TestDir("devices");
  MakeSet(d + "/src", 4);
  const ReshardResult r = ReshardSet(d + "/src", d + "/dst", 1, 2);
  EXPECT_EQ(r.devices, 2u);
  EXPECT_EQ(r.source_devices, 1u);
  ExpectSet(d + "/dst", 1, 2);
  // And back to one device per store, 2 ranks.
  ReshardSet(d + "/dst", d + "/dst2", 2, 1);
  ExpectSet(d + "/dst2", 2, 1);
}

// Converting the state format: fp32 -> q8 (3 ranks) holds each piece's moments quantized in
// blocks from the piece's start and theta bit for bit; q8 -> q8 at the same world size moves
// nothing (the same pieces, the same codes: every checksum equal); q8 -> fp32 (2 ranks) holds
// the q8 set's dequantized moments; fp32 -> q8-bf16 rounds theta to bf16. The text and JSON
// of the command name both formats.
TEST(Reshard, StateFormatConversion) {
  using hls::StateFmt;
  const std::string d = TestDir("state_formats");
  MakeSet(d + "/src", 2);
  const ReshardResult r = ReshardSet(d + "/src", d + "/q8", 3, std::nullopt, StateFmt::kQ8);
  EXPECT_EQ(r.source_state, "fp32");
  EXPECT_EQ(r.state, "q8");
  ExpectSet(d + "/q8", 3, 1, StateFmt::kQ8);
  EXPECT_EQ(ReshardSet(d + "/q8", d + "/q8again", 3).state, "q8");
  for (int k = 0; k < 3; ++k) {
    const std::string a = d + "/q8/rank-" + std::to_string(k), b = d + "/q8again/rank-" +
                                                                       std::to_string(k);
    const Store sa = Store::Open(a, StoreAccess::kRead), sb = Store::Open(b, StoreAccess::kRead);
    ASSERT_EQ(sa.vars().size(), 3u);
    for (unsigned v = 0; v < 3; ++v) {
      for (uint32_t g = 0; g < sa.SubgroupCount(0); ++g) {
        EXPECT_EQ(sa.checksum(0, v, g), sb.checksum(0, v, g)) << a << " var " << v << " subgroup "
                                                              << g;
      }
    }
  }
  // Back to fp32 on 2 ranks: the q8 set's values exactly (its blocks were per piece of 3
  // ranks, which AsStored cannot know: compare with the q8 set's own export).
  ReshardSet(d + "/q8", d + "/back", 2, std::nullopt, StateFmt::kFp32);
  {
    std::vector<float> q8vals[3], backvals[3];
    for (int pass = 0; pass < 2; ++pass) {
      const std::string set = d + (pass == 0 ? "/q8" : "/back");
      const int world = pass == 0 ? 3 : 2;
      for (int k = 0; k < world; ++k) {
        const Store st = Store::Open(set + "/rank-" + std::to_string(k), StoreAccess::kRead);
        EXPECT_EQ(st.state(), pass == 0 ? StateFmt::kQ8 : StateFmt::kFp32);
        for (int v = 0; v < 3; ++v) {
          std::vector<std::vector<float>> buf;
          std::vector<float*> p;
          for (const TensorSpec& t : st.layout()->tensors()) buf.emplace_back(t.numel);
          for (auto& x : buf) p.push_back(x.data());
          ExportState(st, kVars[v], p);
          for (auto& x : buf) (pass == 0 ? q8vals : backvals)[v].insert(
              (pass == 0 ? q8vals : backvals)[v].end(), x.begin(), x.end());
        }
      }
    }
    for (int v = 0; v < 3; ++v) {
      ASSERT_EQ(q8vals[v].size(), Total());
      ASSERT_TRUE(std::memcmp(q8vals[v].data(), backvals[v].data(), 4 * Total()) == 0)
          << kVars[v];
    }
  }
  ReshardSet(d + "/src", d + "/bf16", 2, std::nullopt, StateFmt::kQ8Bf16);
  ExpectSet(d + "/bf16", 2, 1, StateFmt::kQ8Bf16);
  const Cli c = RunCli("reshard --from " + Q(d + "/src") + " --to " + Q(d + "/cli") +
                       " --world 1 --state q8 --json");
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j.at("state"), "q8");
  EXPECT_EQ(j.at("source_state"), "fp32");
  ExpectSet(d + "/cli", 1, 1, StateFmt::kQ8);
  const Cli t = RunCli("reshard --from " + Q(d + "/q8") + " --to " + Q(d + "/cli2") +
                       " --world 2 --state fp32");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("format fp32 (from q8)"), std::string::npos) << t.out;
  const Cli bad = RunCli("reshard --from " + Q(d + "/src") + " --to " + Q(d + "/bad") +
                         " --world 2 --state q4");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--state"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(d + "/bad"));
}

// Runs `f`, expects it to throw E with `text` in the message.
template <typename E, typename F>
void ExpectRefused(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "not refused; expected: " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Reshard, RefusalsWriteNothing) {
  const std::string d = TestDir("refusals");
  const std::string src = d + "/src";
  MakeSet(src, 2);
  const auto before = Tree(src);
  fs::create_directories(d + "/full");
  std::ofstream(d + "/full/mine") << "x";
  ExpectRefused<StoreError>([&] { ReshardSet(src, d + "/full", 3); },
                            "exists and is not an empty directory (found 'mine' in it");
  EXPECT_EQ(Tree(d + "/full").size(), 1u);
  ExpectRefused<std::invalid_argument>([&] { ReshardSet(src, d + "/d0", 0); },
                                       "world: expected a world size >= 1, found 0");
  ExpectRefused<std::invalid_argument>([&] { ReshardSet(src, d + "/d0", 95342); },
                                       "ranks [95341] would own no element; use at most 95341");
  ExpectRefused<std::invalid_argument>([&] { ReshardSet(src, d + "/d0", 2, 0); },
                                       "devices: expected 1..256 devices per rank store, found 0");
  // 2 ranks of 47671 elements: one 65536-element block each, one device at most.
  ExpectRefused<std::invalid_argument>([&] { ReshardSet(src, d + "/d0", 2, 2); },
                                       "use at most 1 devices");
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/none", d + "/d0", 2); }, "is not a directory");
  EXPECT_FALSE(fs::exists(d + "/d0"));
  // A writer at work on a source store.
  {
    const Store w = Store::Open(src + "/rank-1");
    ExpectRefused<StoreError>([&] { ReshardSet(src, d + "/d0", 3); },
                              "found it in use by a writer (pid");
  }
  EXPECT_FALSE(fs::exists(d + "/d0"));
  EXPECT_EQ(Tree(src), before);

  auto copy = [&](const std::string& name) {
    fs::remove_all(d + "/" + name);
    fs::copy(src, d + "/" + name, fs::copy_options::recursive);
    return d + "/" + name;
  };
  // Records of another model, a record missing, a range off the rule.
  std::string bad = copy("bad");
  nlohmann::ordered_json rec = nlohmann::ordered_json::parse(std::ifstream(bad + "/rank-1.json"));
  rec["fingerprint"] = "00000000000000";
  WriteJson(bad + "/rank-1.json", rec);
  ExpectRefused<StoreError>([&] { ReshardSet(bad, d + "/d1", 3); },
                            "rank-1.json' differ in fingerprint: [\"00c0ffee123456\"] vs "
                            "[\"00000000000000\"]");
  fs::remove(bad + "/rank-1.json");
  ExpectRefused<StoreError>([&] { ReshardSet(bad, d + "/d1", 3); },
                            "expected the records of ranks 0 .. 1 (world size 2 in '" +
                                fs::absolute(bad).string() + "/rank-0.json'), found ranks [0]; "
                                "missing [1]");
  bad = copy("bad");
  rec = nlohmann::ordered_json::parse(std::ifstream(bad + "/rank-0.json"));
  rec["end"] = 47670;
  WriteJson(bad + "/rank-0.json", rec);
  ExpectRefused<StoreError>([&] { ReshardSet(bad, d + "/d1", 3); },
                            "rank-0.json': expected elements [0, 47671) of 95341 (the partition "
                            "over 2 ranks), found [0, 47670)");
  EXPECT_FALSE(fs::exists(d + "/d1"));
  // Stores at different committed steps.
  MakeSet(d + "/late", 3, 1);
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/late", d + "/d2", 2); },
                            "are at different committed steps (rank 0: 5, rank 1: 6, rank 2: 5)");
  EXPECT_FALSE(fs::exists(d + "/d2"));
}

// A corrupt source shard is found while the new stores are written (the CRC check of the
// export): what was written is removed again, and a destination that existed stays, empty.
TEST(Reshard, FailureAfterWritingRemovesWhatWasWritten) {
  const std::string d = TestDir("undo");
  MakeSet(d + "/src", 4);
  const nlohmann::json man = ReadJson(d + "/src/rank-3/manifest.json");
  const std::string shard =
      d + "/src/rank-3/dev0/m." + std::to_string(man.at("slot").get<unsigned>()) + ".bin";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/src", d + "/dst", 2); }, "is corrupt");
  EXPECT_FALSE(fs::exists(d + "/dst"));
  fs::create_directories(d + "/empty");
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/src", d + "/empty", 2); }, "is corrupt");
  EXPECT_TRUE(fs::is_directory(d + "/empty"));
  EXPECT_TRUE(fs::is_empty(d + "/empty"));
}

// ---------------------------------------------------------------------------------------------
// The command.

TEST(ReshardCli, JsonFourToTwo) {
  const std::string d = TestDir("cli_json");
  MakeSet(d + "/src", 4);
  const auto before = Tree(d + "/src");
  const Cli c = RunCli("reshard --from " + Q(d + "/src") + " --to " + Q(d + "/dst") +
                       " --world 2 --json");
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j.at("step"), kStep);
  EXPECT_EQ(j.at("world_size"), 2);
  EXPECT_EQ(j.at("source_world_size"), 4);
  EXPECT_EQ(j.at("total_elements"), Total());
  EXPECT_EQ(j.at("devices"), 1);
  EXPECT_EQ(j.at("optimizer"), "adamw");
  EXPECT_EQ(j.at("vars"), nlohmann::json({"theta", "m", "v"}));
  ASSERT_EQ(j.at("ranks").size(), 2u);
  EXPECT_EQ(j.at("ranks")[0].at("begin"), 0);
  EXPECT_EQ(j.at("ranks")[0].at("end"), 47671);
  EXPECT_EQ(j.at("ranks")[1].at("begin"), 47671);
  EXPECT_EQ(j.at("ranks")[1].at("end"), Total());
  EXPECT_EQ(j.at("ranks")[1].at("store"), fs::absolute(d + "/dst/rank-1").string());
  ExpectSet(d + "/dst", 2, 1);
  EXPECT_EQ(Tree(d + "/src"), before);
}

TEST(ReshardCli, TextTwoToThreeAndDevices) {
  const std::string d = TestDir("cli_text");
  MakeSet(d + "/src", 2);
  Cli c = RunCli("reshard --from " + Q(d + "/src") + " --to " + Q(d + "/dst") + " --world 3");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("(2 ranks, 1 device(s) each) into"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("(3 ranks, 1 device(s) each) at committed step 5"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("rank 2: elements [63562, 95341) (31779) in"), std::string::npos) << c.out;
  ExpectSet(d + "/dst", 3, 1);
  c = RunCli("reshard --from " + Q(d + "/dst") + " --to " + Q(d + "/one") +
             " --world 1 --devices 2");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("(1 ranks, 2 device(s) each)"), std::string::npos) << c.out;
  ExpectSet(d + "/one", 1, 2);
}

TEST(ReshardCli, RefusalsExitTwoAndWriteNothing) {
  const std::string d = TestDir("cli_refusals");
  const std::string src = d + "/src";
  MakeSet(src, 2);
  MakeSet(d + "/late", 2, 0);
  fs::create_directories(d + "/full");
  std::ofstream(d + "/full/mine") << "x";
  fs::copy(src, d + "/missing", fs::copy_options::recursive);
  fs::remove(d + "/missing/rank-0.json");
  const auto before = Tree(src);
  const struct {
    std::string args, expect;
  } cases[] = {
      {"--from " + Q(src) + " --to " + Q(d + "/full") + " --world 3",
       "csdkit: error: reshard: destination '.*/full' exists and is not an empty directory "
       "\\(found 'mine' in it; refusing to write over it\\)"},
      {"--from " + Q(d + "/missing") + " --to " + Q(d + "/out") + " --world 3",
       "csdkit: error: '.*/missing': expected the records of ranks 0 \\.\\. 1 \\(world size 2 "
       "in '.*/missing/rank-1\\.json'\\), found ranks \\[1\\]; missing \\[0\\]"},
      {"--from " + Q(d + "/late") + " --to " + Q(d + "/out") + " --world 3",
       "csdkit: error: the stores under '.*/late' are at different committed steps \\(rank 0: 6, "
       "rank 1: 5\\): a rank stopped between the others' commits"},
      {"--from " + Q(src) + " --to " + Q(d + "/out") + " --world 95342",
       "csdkit: error: world: partition of 95341 elements over 95342 ranks \\(chunk 1\\): ranks "
       "\\[95341\\] would own no element; use at most 95341 ranks for this model"},
      {"--from " + Q(src) + " --to " + Q(d + "/out") + " --world 2 --devices 2",
       "csdkit: error: new rank 0 \\('.*/out/rank-0', elements \\[0, 47671\\)\\), 2 device\\(s\\) "
       "of 4294967296 bytes: devices: expected every device to hold part of the model"},
      {"--from " + Q(src) + " --to " + Q(d + "/out") + " --world 0",
       "--world: expected a whole number in \\[1, [0-9]+\\], found 0"},
  };
  for (const auto& k : cases) {
    const Cli c = RunCli("reshard " + k.args);
    EXPECT_EQ(c.status, 2) << k.args << "\n" << c.out;
    EXPECT_TRUE(std::regex_search(c.out, std::regex(k.expect))) << "expected /" << k.expect
                                                                 << "/, found: " << c.out;
    EXPECT_FALSE(fs::exists(d + "/out")) << k.args;
  }
  EXPECT_EQ(Tree(d + "/full").size(), 1u);
  EXPECT_EQ(Tree(src), before);
}

// ---------------------------------------------------------------------------------------------
// Concurrent use and hostile sources (issue 25): a destination belongs to one command from its
// creation; a command removes only what it made; a record that is not a regular file is refused
// before it is opened. The concurrent cases stop one command at a named point
// (CSDKIT_TEST_PAUSE) while the other runs to its end: no race is won by luck.

// A reshard stopped once it has claimed the destination: a second reshard into it is refused
// (the destination is locked) and writes nothing; the first, let go on, completes.
TEST(ReshardConcurrent, ASecondCommandIntoAClaimedDestinationIsRefused) {
  const std::string d = TestDir("race_claimed");
  MakeSet(d + "/src", 2);
  const std::vector<std::string> args = {"reshard", "--from", d + "/src", "--to", d + "/dst",
                                         "--world", "3"};
  testing::CliProcess first(args, d + "/first.log", "reshard-claimed");
  ASSERT_TRUE(first.WaitStopped()) << "the first reshard did not stop at 'reshard-claimed': "
                                   << first.Output();
  const testing::CliResult second = testing::RunCsdkit(args, d + "/second.log");
  EXPECT_EQ(second.status, 2) << second.out;
  EXPECT_NE(second.out.find("to belong to this command, found it in use by another command"),
            std::string::npos)
      << second.out;
  EXPECT_TRUE(fs::is_empty(d + "/dst"));
  first.Continue();
  ASSERT_EQ(first.Wait(), 0) << first.Output();
  ExpectSet(d + "/dst", 3, 1);
}

// A reshard stopped before it claims the destination, while a second one writes the whole set
// there: let go on, the first is refused (not an empty directory) and deletes nothing — the
// winner's set stays whole (today's main removed it: the loser's failure path remove_all'ed a
// destination it believed it had made).
TEST(ReshardConcurrent, TheLoserLeavesTheWinnersSetAlone) {
  const std::string d = TestDir("race_loser");
  MakeSet(d + "/src", 2);
  const std::vector<std::string> args = {"reshard", "--from", d + "/src", "--to", d + "/dst",
                                         "--world", "3"};
  testing::CliProcess first(args, d + "/first.log", "reshard-start");
  ASSERT_TRUE(first.WaitStopped()) << "the first reshard did not stop at 'reshard-start': "
                                   << first.Output();
  const testing::CliResult second = testing::RunCsdkit(args, d + "/second.log");
  ASSERT_EQ(second.status, 0) << second.out;
  const auto written = Tree(d + "/dst");
  first.Continue();
  EXPECT_EQ(first.Wait(), 2) << first.Output();
  EXPECT_NE(first.Output().find("exists and is not an empty directory"), std::string::npos)
      << first.Output();
  EXPECT_EQ(Tree(d + "/dst"), written);
  ExpectSet(d + "/dst", 3, 1);
}

// A failure after the destination's parents were made removes them again (rmdir, while empty):
// nothing of `a/b/c` is left; a parent that existed stays.
TEST(ReshardConcurrent, AFailureRemovesTheParentsItMade) {
  const std::string d = TestDir("parents");
  MakeSet(d + "/src", 4);
  const nlohmann::json man = ReadJson(d + "/src/rank-3/manifest.json");
  const std::string shard =
      d + "/src/rank-3/dev0/m." + std::to_string(man.at("slot").get<unsigned>()) + ".bin";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/src", d + "/a/b/c", 2); }, "is corrupt");
  EXPECT_FALSE(fs::exists(d + "/a"));
  fs::create_directories(d + "/kept");
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/src", d + "/kept/b/c", 2); }, "is corrupt");
  EXPECT_TRUE(fs::is_directory(d + "/kept"));
  EXPECT_FALSE(fs::exists(d + "/kept/b"));
}

// A FIFO named rank-<r>.json is refused before it is opened (opening it would wait for a writer
// forever), naming the file; so is a directory of that name. Nothing is left in the destination.
TEST(ReshardConcurrent, ARecordThatIsNotARegularFileIsRefused) {
  const std::string d = TestDir("fifo");
  MakeSet(d + "/src", 2);
  fs::remove(d + "/src/rank-1.json");
  ASSERT_EQ(::mkfifo((d + "/src/rank-1.json").c_str(), 0600), 0);
  testing::CliResult r = testing::RunCsdkit(
      {"reshard", "--from", d + "/src", "--to", d + "/dst", "--world", "3"}, d + "/fifo.log",
      std::chrono::seconds(60));
  EXPECT_EQ(r.status, 2) << "(-2: killed after 60 s, it waited on the FIFO) " << r.out;
  EXPECT_NE(r.out.find("/src/rank-1.json': expected a regular JSON file, found a FIFO"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(d + "/dst"));
  fs::remove(d + "/src/rank-1.json");
  fs::create_directory(d + "/src/rank-1.json");
  r = testing::RunCsdkit({"reshard", "--from", d + "/src", "--to", d + "/dst", "--world", "3"},
                         d + "/dir.log", std::chrono::seconds(60));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("/src/rank-1.json': expected a regular JSON file, found a directory"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(d + "/dst"));
}

// A record nested 80,000 arrays deep (160 KB) is refused while it is parsed, naming the file —
// not a stack overflow.
TEST(ReshardConcurrent, ADeeplyNestedRecordIsRefused) {
  const std::string d = TestDir("deep");
  MakeSet(d + "/src", 2);
  {
    std::ofstream f(d + "/src/rank-1.json");
    f << std::string(80000, '[') << std::string(80000, ']');
  }
  ExpectRefused<StoreError>([&] { ReshardSet(d + "/src", d + "/dst", 3); },
                            "/src/rank-1.json': expected JSON nested at most 64 levels deep");
  EXPECT_FALSE(fs::exists(d + "/dst"));
}

}  // namespace
}  // namespace csdkit
