#include "csdkit/platform/problem.h"

#include <xmmintrin.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

#include "csdkit/hls/bits.h"
#include "csdkit/hls/fp16.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/splitmix.h"

namespace csdkit {

namespace {

std::size_t StateBytes(uint32_t n) { return hls::WordsFor(n, 4) * hls::kWordBytes; }

std::string Hex32(uint32_t x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", x);
  return b;
}

}  // namespace

Problem Problem::Generate(const ProblemSpec& spec) {
  Problem p;
  p.spec = spec;
  p.spec.grad.sparse = spec.topk != 0.0;
  if (p.spec.grad.sparse) (void)TopKCount(spec.n, spec.topk);  // validates the ratio
  p.launch = MakeLaunch(spec.hyper, p.spec.grad, spec.step);
  const uint32_t n = spec.n;
  const DType gt = spec.grad.grad;
  const unsigned eb = DTypeBytes(gt);

  p.buf.theta = AlignedBuffer(StateBytes(n));
  p.buf.m = AlignedBuffer(StateBytes(n));
  p.buf.v = AlignedBuffer(StateBytes(n));
  p.buf.out16 = AlignedBuffer(hls::WordsFor(n, 2) * hls::kWordBytes);
  p.buf.status = AlignedBuffer(hls::kWordBytes);
  p.dense_grad = AlignedBuffer(hls::WordsFor(n, eb) * hls::kWordBytes);

  SplitMix64 rng{spec.seed};
  float* th = p.buf.theta.as<float>();
  float* m = p.buf.m.as<float>();
  float* v = p.buf.v.as<float>();
  const double acc0 =
      spec.hyper.opt == Optimizer::kAdagrad ? spec.hyper.initial_accumulator_value : 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    th[i] = rng.Uniform(-0.1, 0.1);
    m[i] = rng.Uniform(-1e-3, 1e-3);
    v[i] = static_cast<float>(static_cast<double>(rng.Uniform(0.0, 1e-4)) + acc0);
    const float g = static_cast<float>(rng.Uniform(-1.0, 1.0) * spec.grad.loss_scale);
    const uint32_t gb = hls::F2U(g);
    if (gt == DType::kFp32) p.dense_grad.as<uint32_t>()[i] = gb;
    else if (gt == DType::kFp16) p.dense_grad.as<uint16_t>()[i] = hls::F32ToF16(gb);
    else p.dense_grad.as<uint16_t>()[i] = hls::F32ToBf16(gb);
  }

  if (p.spec.grad.sparse) {
    SparseGrad s = CompressTopK(p.dense_grad.data(), gt, n, spec.topk);
    p.nnz = s.nnz;
    p.buf.grad = std::move(s.val);
    p.buf.sp_idx = std::move(s.idx);
    p.buf.sp_blk = std::move(s.blk);
  } else {
    p.buf.grad = p.dense_grad.Clone();
    p.buf.sp_idx = AlignedBuffer(hls::kWordBytes);
    p.buf.sp_blk = AlignedBuffer(hls::kWordBytes);
  }
  p.buf.SetScalars(n, p.nnz, p.launch);
  return p;
}

uint32_t RunUpdate(UpdateBuffers& b, uint32_t n, uint32_t nnz, const KernelLaunch& k) {
  b.SetScalars(n, nnz, k);
  return InvokeUpdate(WordsOf(b));
}

uint32_t Problem::Run() { return RunUpdate(buf, spec.n, nnz, launch); }

uint64_t ArrayView::bytes() const {
  const unsigned eb = (dtype == "fp32" || dtype == "u32") ? 4 : 2;
  return count * eb;
}

std::vector<ArrayView> InputArrays(const Problem& p, const UpdateBuffers& b) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const std::string gt = DTypeName(p.spec.grad.grad);
  std::vector<ArrayView> v{{"theta", "fp32", p.spec.n, &b.theta}};
  if (hls::UsesM(md)) v.push_back({"m", "fp32", p.spec.n, &b.m});
  if (hls::UsesV(md)) v.push_back({"v", "fp32", p.spec.n, &b.v});
  if (md.sparse) {
    v.push_back({"grad", gt, p.nnz, &b.grad});
    v.push_back({"sp_idx", "u16", p.nnz, &b.sp_idx});
    v.push_back({"sp_blk", "u32", hls::NumBlocks(p.spec.n) + 1ull, &b.sp_blk});
  } else {
    v.push_back({"grad", gt, p.spec.n, &b.grad});
  }
  return v;
}

std::vector<ArrayView> OutputArrays(const Problem& p, const UpdateBuffers& b) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  std::vector<ArrayView> v{{"theta", "fp32", p.spec.n, &b.theta}};
  if (hls::UsesM(md)) v.push_back({"m", "fp32", p.spec.n, &b.m});
  if (hls::UsesV(md)) v.push_back({"v", "fp32", p.spec.n, &b.v});
  if (md.out != DType::kFp32) v.push_back({"out16", DTypeName(md.out), p.spec.n, &b.out16});
  v.push_back({"status", "u32", hls::kLanes, &b.status});
  return v;
}

uint32_t Crc32(const ArrayView& a) { return Crc32(a.buf->data(), a.bytes()); }

void DumpProblem(const std::string& dir, const Problem& p, const UpdateBuffers& inputs,
                 const UpdateBuffers& outputs) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("dump: cannot create directory '" + dir + "': " + std::strerror(errno));
  }
  using nlohmann::json;
  auto write = [&](const ArrayView& a, const std::string& suffix) {
    const std::string file = a.name + suffix;
    std::ofstream f(dir + "/" + file, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(a.buf->data()), static_cast<std::streamsize>(a.bytes()));
    if (!f) throw std::runtime_error("dump: cannot write '" + dir + "/" + file + "'");
    return json{{"name", a.name}, {"file", file},   {"dtype", a.dtype},
                {"count", a.count}, {"bytes", a.bytes()}, {"crc32", Hex32(Crc32(a))}};
  };
  json j;
  j["format"] = "csdkit-golden-1";
  j["kernel"] = hls::kUpdateKernelName;
  j["n"] = p.spec.n;
  j["nnz"] = p.nnz;
  j["seed"] = p.spec.seed;
  j["step"] = p.spec.step;
  j["optimizer"] = OptimizerName(p.spec.hyper.opt);
  j["grad"] = DTypeName(p.spec.grad.grad);
  j["out"] = OutDTypeName(p.spec.grad.out);
  j["sparse"] = p.spec.grad.sparse;
  j["topk"] = p.spec.topk;
  j["ftz"] = p.spec.grad.ftz;
  j["hyper"] = HyperToJson(p.spec.hyper);
  j["hyper"]["loss_scale"] = p.spec.grad.loss_scale;
  j["hyper"]["clip_coef"] = p.spec.grad.clip_coef;
  // Every kernel argument in table order: scalars with value and bits, pointers by buffer.
  UpdateLaunch<bool> launch;
  launch.SetScalars(p.spec.n, p.nnz, p.launch);
  json args = json::array();
  launch.ForEachArg([&](const hls::ArgInfo& a, auto field) {
    json e{{"name", a.name}, {"offset", Hex32(a.offset)}};
    if (a.kind == hls::ArgKind::kPtr) {
      e["kind"] = "buffer";
    } else {
      const uint32_t bits = static_cast<uint32_t>(field);
      e["kind"] = "scalar";
      e["hex"] = Hex32(bits);
      if (a.index >= 11) e["value"] = hls::U2F(bits);  // the binary32 operands
      else e["value"] = bits;
    }
    args.push_back(e);
  });
  j["args"] = args;
  json in = json::array(), out = json::array();
  for (const ArrayView& a : InputArrays(p, inputs)) in.push_back(write(a, ".in.bin"));
  for (const ArrayView& a : OutputArrays(p, outputs)) out.push_back(write(a, ".out.bin"));
  j["inputs"] = in;
  j["outputs"] = out;
  std::ofstream f(dir + "/problem.json", std::ios::trunc);
  f << j.dump(2) << "\n";
  if (!f) throw std::runtime_error("dump: cannot write '" + dir + "/problem.json'");
}

void CheckFpEnvironment() {
  const unsigned csr = _mm_getcsr();
  const unsigned rc = (csr >> 13) & 3u;
  if (rc != 0 || (csr & (1u << 15)) || (csr & (1u << 6))) {
    std::ostringstream os;
    os << "floating-point environment: expected MXCSR round-to-nearest with FTZ and DAZ off "
          "(the model's bit-exactness depends on it), found MXCSR = 0x"
       << std::hex << csr << " (rounding " << rc << ", FTZ " << ((csr >> 15) & 1) << ", DAZ "
       << ((csr >> 6) & 1) << "); was the process linked with -ffast-math?";
    throw std::runtime_error(os.str());
  }
}

}  // namespace csdkit
