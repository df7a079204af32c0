#include "csdkit/platform/problem.h"

#include <fcntl.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
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
#include "csdkit/hls/state_q8.h"
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

// The bit layout of a floating-point format, for the special patterns below.
struct FpFormat {
  uint32_t sign, exp_mask, quiet, man_mask, max_finite, one;
};
constexpr FpFormat kBinary32{0x80000000u, 0x7f800000u, 0x00400000u, 0x007fffffu, 0x7f7fffffu,
                             0x3f800000u};
constexpr FpFormat kHalf{0x8000u, 0x7c00u, 0x0200u, 0x03ffu, 0x7bffu, 0x3c00u};
constexpr FpFormat kBfloat{0x8000u, 0x7f80u, 0x0040u, 0x007fu, 0x7f7fu, 0x3f80u};

// One special bit pattern of format f, chosen by 64 random bits: bit 0 is the sign, the low
// word's other bits pick the kind, the high word the payload or offset. Binary32 has two kinds
// more than the 16-bit formats: the thresholds where a binary32 value overflows fp16 (65504 is
// the largest half, 65520 rounds to infinity) or bf16 (0x7f7f8000 rounds to infinity), and the
// binary32 range of the fp16 subnormals ([2^-26, 2^-14)), so that the low-precision copy's
// conversions see them too.
uint32_t SpecialBits(const FpFormat& f, uint64_t r) {
  const bool b32 = f.sign == kBinary32.sign;
  const uint32_t sign = (r & 1u) ? f.sign : 0u;
  const uint32_t x = static_cast<uint32_t>(r >> 32);
  const uint32_t min_normal = f.man_mask + 1u;
  const unsigned kinds = b32 ? 11u : 9u;
  switch ((static_cast<uint32_t>(r) >> 1) % kinds) {
    case 0:  // quiet NaN, any payload
      return sign | f.exp_mask | f.quiet | (x & (f.quiet - 1u));
    case 1:  // signalling NaN: quiet bit clear, payload not zero
      return sign | f.exp_mask | (1u + x % (f.quiet - 1u));
    case 2:  // infinity
      return sign | f.exp_mask;
    case 3:  // zero
      return sign;
    case 4:  // subnormal
      return sign | (1u + x % f.man_mask);
    case 5:  // the four largest subnormals and the four smallest normals
      return sign | (min_normal - 4u + x % 8u);
    case 6:  // the eight largest finite values
      return sign | (f.max_finite - x % 8u);
    case 7:  // eight ulps either side of 1
      return sign | (f.one - 8u + x % 16u);
    case 8:  // arbitrary bits (the sign already random)
      return sign | (x & (f.sign - 1u));
    case 9: {  // a low-precision overflow threshold, -4 to +3 ulps
      const uint32_t base[3] = {0x477fe000u, 0x477ff000u, 0x7f7f8000u};
      return sign | (base[x % 3u] - 4u + (x >> 8) % 8u);
    }
    default:  // the fp16 subnormal range as binary32: [2^-26, 2^-14), random mantissa
      return sign | ((101u + x % 12u) << 23) | ((x >> 4) & f.man_mask);
  }
}

// --data special: replaces about one element in three of `count` elements of format f (4- or
// 2-byte elements at `data`) by a special pattern, drawing two numbers per element.
void MixSpecial(void* data, uint64_t count, const FpFormat& f, SplitMix64& rng) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t pick = rng.Next(), r = rng.Next();
    if (pick % 3u != 0u) continue;
    const uint32_t bits = SpecialBits(f, r);
    if (f.sign == kBinary32.sign) static_cast<uint32_t*>(data)[i] = bits;
    else static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits);
  }
}

const FpFormat& FormatOf(DType t) {
  return t == DType::kFp32 ? kBinary32 : t == DType::kFp16 ? kHalf : kBfloat;
}

}  // namespace

const char* ProblemDataName(ProblemData d) {
  return d == ProblemData::kSpecial ? "special" : "random";
}

ProblemData ParseProblemData(const std::string& s) {
  if (s == "random") return ProblemData::kRandom;
  if (s == "special") return ProblemData::kSpecial;
  throw std::invalid_argument("data kind: expected random or special, found '" + s + "'");
}

Problem Problem::Generate(const ProblemSpec& spec) {
  Problem p;
  p.spec = spec;
  p.spec.grad.sparse = spec.topk != 0.0;
  if (p.spec.grad.sparse) (void)TopKCount(spec.n, spec.topk);  // validates the ratio
  p.launch = MakeLaunch(spec.hyper, p.spec.grad, spec.step);
  const uint32_t n = spec.n;
  const DType gt = spec.grad.grad;
  const unsigned eb = DTypeBytes(gt);

  const hls::StateFmt fmt = spec.grad.state;
  const bool q8 = hls::IsQ8(fmt);
  const uint64_t blocks = (static_cast<uint64_t>(n) + hls::kQ8Block - 1) / hls::kQ8Block;
  const uint64_t padded = blocks * hls::kQ8Block;  // q8: the values of whole blocks
  p.buf.theta = AlignedBuffer(hls::WordsFor(n, fmt == hls::StateFmt::kQ8Bf16 ? 2 : 4) *
                              hls::kWordBytes);
  p.buf.m = AlignedBuffer(q8 ? hls::WordsFor(n, 1) * hls::kWordBytes : StateBytes(n));
  p.buf.v = AlignedBuffer(q8 ? hls::WordsFor(n, 1) * hls::kWordBytes : StateBytes(n));
  p.buf.m_absmax = AlignedBuffer(q8 ? hls::WordsFor(blocks, 4) * hls::kWordBytes : hls::kWordBytes);
  p.buf.v_absmax = AlignedBuffer(q8 ? hls::WordsFor(blocks, 4) * hls::kWordBytes : hls::kWordBytes);
  p.buf.out16 = AlignedBuffer(hls::WordsFor(n, 2) * hls::kWordBytes);
  p.buf.status = AlignedBuffer(hls::kWordBytes);
  p.dense_grad = AlignedBuffer(hls::WordsFor(n, eb) * hls::kWordBytes);

  SplitMix64 rng{spec.seed};
  // The binary32 values (q8: of whole blocks, the padding zero), stored below in the format.
  AlignedBuffer th32(StateBytes(static_cast<uint32_t>(q8 ? padded : n)));
  AlignedBuffer m32(StateBytes(static_cast<uint32_t>(q8 ? padded : n)));
  AlignedBuffer v32(StateBytes(static_cast<uint32_t>(q8 ? padded : n)));
  float* th = th32.as<float>();
  float* m = m32.as<float>();
  float* v = v32.as<float>();
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

  // Special values come from a generator of their own, after the ordinary values are drawn, so
  // that the ordinary elements of a special problem equal those of the random one.
  const bool special = spec.data == ProblemData::kSpecial;
  SplitMix64 sp{SplitMixHash(spec.seed ^ 0x5be1a1c0ffee0001ull)};
  if (special && !q8) {
    MixSpecial(th, n, kBinary32, sp);
    MixSpecial(m, n, kBinary32, sp);
    MixSpecial(v, n, kBinary32, sp);
  }
  if (!q8) {
    std::memcpy(p.buf.theta.data(), th, size_t{n} * 4);
    std::memcpy(p.buf.m.data(), m, size_t{n} * 4);
    std::memcpy(p.buf.v.data(), v, size_t{n} * 4);
  } else {
    // theta: binary32, or bf16 by nearest even.
    if (fmt == hls::StateFmt::kQ8Bf16) {
      uint16_t* t16 = p.buf.theta.as<uint16_t>();
      for (uint32_t i = 0; i < n; ++i) t16[i] = hls::F32ToBf16(hls::F2U(th[i]));
      if (special) MixSpecial(t16, n, kBfloat, sp);
    } else {
      std::memcpy(p.buf.theta.data(), th, size_t{n} * 4);
      if (special) MixSpecial(p.buf.theta.data(), n, kBinary32, sp);
    }
    // The moments, block by block (a partial last block quantized with its zero padding).
    const hls::Fp32 ieee(false);
    for (unsigned a = 0; a < 2; ++a) {
      const float* x = a == 0 ? m : v;
      uint8_t* codes = (a == 0 ? p.buf.m : p.buf.v).as<uint8_t>();
      float* amax = (a == 0 ? p.buf.m_absmax : p.buf.v_absmax).as<float>();
      for (uint64_t b = 0; b < blocks; ++b) {
        uint8_t c[hls::kQ8Block];
        hls::QuantizeBlockQ8(x + b * hls::kQ8Block, hls::kQ8Block, a == 0, ieee, c, &amax[b]);
        const uint64_t len = std::min<uint64_t>(hls::kQ8Block, n - b * hls::kQ8Block);
        std::memcpy(codes + b * hls::kQ8Block, c, len);
      }
      if (special) {
        MixSpecial(amax, blocks, kBinary32, sp);
        for (uint32_t i = 0; i < n; ++i) {
          const uint64_t pick = sp.Next(), r = sp.Next();
          if (pick % 3u == 0u) codes[i] = static_cast<uint8_t>(r >> 24);
        }
      }
    }
  }
  if (special && !p.spec.grad.sparse) MixSpecial(p.dense_grad.data(), n, FormatOf(gt), sp);

  if (p.spec.grad.sparse) {
    SparseGrad s = CompressTopK(p.dense_grad.data(), gt, n, spec.topk);
    p.nnz = s.nnz;
    p.buf.grad = std::move(s.val);
    p.buf.sp_idx = std::move(s.idx);
    p.buf.sp_blk = std::move(s.blk);
    if (special) MixSpecial(p.buf.grad.data(), p.nnz, FormatOf(gt), sp);
  } else {
    p.buf.grad = p.dense_grad.Clone();
    p.buf.sp_idx = AlignedBuffer(hls::kWordBytes);
    p.buf.sp_blk = AlignedBuffer(hls::kWordBytes);
  }
  p.buf.SetScalars(n, p.nnz, p.launch);
  p.buf.SetRandomKey(spec.seed, static_cast<uint64_t>(spec.step), spec.index);
  return p;
}

uint32_t RunUpdate(UpdateBuffers& b, uint32_t n, uint32_t nnz, const KernelLaunch& k) {
  b.SetScalars(n, nnz, k);
  return InvokeUpdate(WordsOf(b));
}

uint32_t Problem::Run() { return RunUpdate(buf, spec.n, nnz, launch); }

// (RunUpdate sets the scalars of SetScalars only: the random key of a q8-bf16 launch stays as
// Generate set it.)

uint64_t ArrayView::bytes() const {
  const unsigned eb = (dtype == "fp32" || dtype == "u32") ? 4 : dtype == "u8" ? 1 : 2;
  return count * eb;
}

namespace {

// The state arrays of a launch in its format: theta (binary32 or bf16), then per moment the
// binary32 values or (q8) the codes and the absmax per block.
std::vector<ArrayView> StateArrays(const Problem& p, const hls::Mode& md, const UpdateBuffers& b) {
  const uint64_t n = p.spec.n;
  const bool q8 = hls::IsQ8(md.state);
  const uint64_t blocks = (n + hls::kQ8Block - 1) / hls::kQ8Block;
  std::vector<ArrayView> v{
      {"theta", md.state == hls::StateFmt::kQ8Bf16 ? "bf16" : "fp32", n, &b.theta}};
  if (hls::UsesM(md)) {
    v.push_back({"m", q8 ? "u8" : "fp32", n, &b.m});
    if (q8) v.push_back({"m_absmax", "fp32", blocks, &b.m_absmax});
  }
  if (hls::UsesV(md)) {
    v.push_back({"v", q8 ? "u8" : "fp32", n, &b.v});
    if (q8) v.push_back({"v_absmax", "fp32", blocks, &b.v_absmax});
  }
  return v;
}

}  // namespace

std::vector<ArrayView> InputArrays(const Problem& p, const UpdateBuffers& b) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  const std::string gt = DTypeName(p.spec.grad.grad);
  std::vector<ArrayView> v = StateArrays(p, md, b);
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
  std::vector<ArrayView> v = StateArrays(p, md, b);
  if (md.out != DType::kFp32) v.push_back({"out16", DTypeName(md.out), p.spec.n, &b.out16});
  v.push_back({"status", "u32", hls::kLanes, &b.status});
  return v;
}

uint32_t Crc32(const ArrayView& a) { return Crc32(a.buf->data(), a.bytes()); }

void DumpProblem(const std::string& dir, const Problem& p, const UpdateBuffers& inputs,
                 const UpdateBuffers& outputs, const nlohmann::json& source) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("dump: cannot create directory '" + dir + "': " + std::strerror(errno));
  }
  // Every file is created here, exclusively: a dump never writes over (or through a symbolic
  // link at) a file it did not make; the callers give it a new or empty directory.
  auto write_new = [&](const std::string& file, const void* data, size_t bytes) {
    const std::string path = dir + "/" + file;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw std::runtime_error("dump: expected to create '" + path + "', found " +
                               (errno == EEXIST ? std::string("a file of that name (nothing is "
                                                              "written over)")
                                                : std::string(std::strerror(errno))));
    }
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t w = ::write(fd, p, bytes);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int e = errno;
        ::close(fd);
        throw std::runtime_error("dump: cannot write '" + path + "': " + std::strerror(e));
      }
      p += w;
      bytes -= static_cast<size_t>(w);
    }
    if (::close(fd) != 0) {
      throw std::runtime_error("dump: cannot write '" + path + "': " + std::strerror(errno));
    }
  };
  using nlohmann::json;
  auto write = [&](const ArrayView& a, const std::string& suffix) {
    const std::string file = a.name + suffix;
    write_new(file, a.buf->data(), a.bytes());
    return json{{"name", a.name}, {"file", file},   {"dtype", a.dtype},
                {"count", a.count}, {"bytes", a.bytes()}, {"crc32", Hex32(Crc32(a))}};
  };
  json j;
  j["format"] = "csdkit-golden-1";
  j["kernel"] = hls::kUpdateKernelName;
  j["n"] = p.spec.n;
  j["nnz"] = p.nnz;
  if (source.is_null()) {
    j["seed"] = p.spec.seed;
    j["data"] = ProblemDataName(p.spec.data);
  } else {
    j["source"] = source;
  }
  j["step"] = p.spec.step;
  j["optimizer"] = OptimizerName(p.spec.hyper.opt);
  j["grad"] = DTypeName(p.spec.grad.grad);
  j["out"] = OutDTypeName(p.spec.grad.out);
  j["sparse"] = p.spec.grad.sparse;
  if (source.is_null()) j["topk"] = p.spec.topk;
  j["ftz"] = p.spec.grad.ftz;
  j["state"] = StateFmtName(p.spec.grad.state);
  j["hyper"] = HyperToJson(p.spec.hyper);
  j["hyper"]["loss_scale"] = p.spec.grad.loss_scale;
  j["hyper"]["clip_coef"] = p.spec.grad.clip_coef;
  // Every kernel argument in table order: scalars with value and bits, pointers by buffer.
  UpdateLaunch<bool> launch;
  launch.SetScalars(p.spec.n, p.nnz, p.launch);
  launch.seed_lo = inputs.seed_lo;  // the random key as the launch had it
  launch.seed_hi = inputs.seed_hi;
  launch.step_lo = inputs.step_lo;
  launch.step_hi = inputs.step_hi;
  launch.index_lo = inputs.index_lo;
  launch.index_hi = inputs.index_hi;
  json args = json::array();
  launch.ForEachArg([&](const hls::ArgInfo& a, auto field) {
    json e{{"name", a.name}, {"offset", Hex32(a.offset)}};
    if (a.kind == hls::ArgKind::kPtr) {
      e["kind"] = "buffer";
    } else {
      const uint32_t bits = static_cast<uint32_t>(field);
      e["kind"] = "scalar";
      e["hex"] = Hex32(bits);
      // The binary32 operands (unscale .. c2) as numbers; the integers as they are.
      if (a.index >= update_arg::unscale && a.index <= update_arg::c2) {
        e["value"] = hls::U2F(bits);
      } else {
        e["value"] = bits;
      }
    }
    args.push_back(e);
  });
  j["args"] = args;
  json in = json::array(), out = json::array();
  for (const ArrayView& a : InputArrays(p, inputs)) in.push_back(write(a, ".in.bin"));
  for (const ArrayView& a : OutputArrays(p, outputs)) out.push_back(write(a, ".out.bin"));
  j["inputs"] = in;
  j["outputs"] = out;
  const std::string text = j.dump(2) + "\n";
  write_new("problem.json", text.data(), text.size());
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
