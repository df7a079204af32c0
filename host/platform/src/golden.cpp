#include "csdkit/platform/golden.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "csdkit/hls/mode.h"
#include "csdkit/hls/sparse.h"
#include "csdkit/hls/update_args.h"
#include "csdkit/hls/word.h"
#include "csdkit/platform/checksum.h"
#include "csdkit/platform/json_file.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

namespace {

using nlohmann::json;

constexpr const char* kGoldenFormat = "csdkit-golden-1";
// A dumped problem.json is about 5 KB; a larger file is not one, and is not read.
constexpr uint64_t kMaxJsonBytes = uint64_t{1} << 20;

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

std::string Hex(uint32_t x, int digits) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%0*x", digits, x);
  return b;
}

std::string Quote(const std::string& path) { return "'" + path + "'"; }

// A JSON value as a message shows what was found: its text (shortened) and its type.
std::string Found(const json& v) {
  std::string t = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (t.size() > 40) t = t.substr(0, 37) + "...";
  const char* type = v.is_number_unsigned()  ? "a whole number"
                     : v.is_number_integer() ? "a negative number"
                     : v.is_number_float()   ? "a fractional number"
                                             : v.type_name();
  return t + " (" + type + ")";
}

const json& Field(const json& obj, const std::string& key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) Fail(where, "expected a field \"" + key + "\", found none");
  return *it;
}

uint64_t Uint(const json& obj, const std::string& key, const std::string& where, uint64_t lo,
              uint64_t hi) {
  const json& v = Field(obj, key, where);
  if (!v.is_number_unsigned() || v.get<uint64_t>() < lo || v.get<uint64_t>() > hi) {
    Fail(where, "\"" + key + "\": expected a whole number in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], found " + Found(v));
  }
  return v.get<uint64_t>();
}

std::string Str(const json& obj, const std::string& key, const std::string& where) {
  const json& v = Field(obj, key, where);
  if (!v.is_string()) Fail(where, "\"" + key + "\": expected a string, found " + Found(v));
  return v.get<std::string>();
}

// "0x" followed by 1 to 8 hexadecimal digits: a 32-bit pattern.
uint32_t Hex32(const json& obj, const std::string& key, const std::string& where) {
  const std::string s = Str(obj, key, where);
  const bool ok = s.size() > 2 && s.size() <= 10 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
                  s.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
  if (!ok) {
    Fail(where, "\"" + key +
                    "\": expected a 32-bit pattern as \"0x\" and 1 to 8 hex digits, "
                    "found \"" +
                    s + "\"");
  }
  return static_cast<uint32_t>(std::stoul(s.substr(2), nullptr, 16));
}

// An optional field that restates what the mode word says: when present it must agree.
void Agrees(const json& j, const std::string& key, const json& want, const std::string& where,
            uint32_t mode) {
  const auto it = j.find(key);
  if (it == j.end() || *it == want) return;
  Fail(where, "\"" + key + "\": expected " + want.dump() + " (what the mode word " + Hex(mode, 8) +
                  " says; the mode word is what runs), found " + Found(*it));
}

// The launch in words, for messages.
std::string Shape(const Problem& p) {
  hls::Mode md{};
  hls::DecodeMode(p.launch.mode, &md);
  std::string s = std::string("optimizer ") + OptimizerName(md.opt) + ", grad " +
                  DTypeName(md.grad) + ", out " + OutDTypeName(md.out) +
                  ", n = " + std::to_string(p.spec.n);
  s += md.sparse ? ", sparse, nnz = " + std::to_string(p.nnz) : std::string(", dense");
  return s;
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Checks one file's presence, kind and size against what the launch implies.
void CheckFileSize(const GoldenFile& f, const char* role) {
  const std::string where = Quote(f.path) + " (" + role + " '" + f.name + "')";
  const std::string want = "a file of " + std::to_string(f.bytes) + " bytes (" +
                           std::to_string(f.count) + " " + f.dtype + " elements)";
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0) {
    Fail(where, "expected " + want + ", found none (" + std::strerror(errno) + ")");
  }
  if (!S_ISREG(st.st_mode)) Fail(where, "expected " + want + ", found no regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != f.bytes) {
    Fail(where, "expected " + want + ", found " + std::to_string(size) + " bytes (" +
                    (size < f.bytes ? "short" : "too long") + ")");
  }
}

// The entries of problem.json's "inputs" or "outputs": exactly the arrays `want` (what the
// launch reads or writes), each once, with their dtype and count, naming a file in `dir` of the
// right size.
std::vector<GoldenFile> CheckList(const json& j, const char* key,
                                  const std::vector<ArrayView>& want, const std::string& dir,
                                  const std::string& where, const Problem& p) {
  const json& list = Field(j, key, where);
  if (!list.is_array()) {
    Fail(where, std::string("\"") + key + "\": expected an array, found " + Found(list));
  }
  const bool inputs = std::string(key) == "inputs";
  const char* role = inputs ? "input" : "output";
  const char* verb = inputs ? "reads" : "writes";
  std::string names;
  for (const ArrayView& a : want) names += (names.empty() ? "" : ", ") + a.name;
  std::vector<GoldenFile> out(want.size());
  std::vector<bool> seen(want.size(), false);
  for (size_t k = 0; k < list.size(); ++k) {
    const json& e = list[k];
    const std::string ew = where + " " + key + "[" + std::to_string(k) + "]";
    if (!e.is_object()) {
      Fail(ew, "expected an object {name, file, dtype, count}, found " + Found(e));
    }
    const std::string name = Str(e, "name", ew);
    size_t w = 0;
    while (w < want.size() && want[w].name != name) ++w;
    if (w == want.size()) {
      Fail(ew, std::string("expected one of the buffers this launch ") + verb + " (" + names +
                   "; " + Shape(p) + "), found '" + name + "'");
    }
    if (seen[w]) Fail(ew, "expected each buffer once, found '" + name + "' again");
    seen[w] = true;
    const ArrayView& a = want[w];
    const std::string dtype = Str(e, "dtype", ew);
    if (dtype != a.dtype) {
      Fail(ew, "\"dtype\" of '" + name + "': expected \"" + a.dtype + "\" (" + Shape(p) +
                   "), found \"" + dtype + "\"");
    }
    const uint64_t count = Uint(e, "count", ew, 0, UINT64_MAX);
    if (count != a.count) {
      Fail(ew, "\"count\" of '" + name + "': expected " + std::to_string(a.count) + " (" +
                   Shape(p) + "), found " + std::to_string(count));
    }
    if (e.contains("bytes")) {
      const uint64_t bytes = Uint(e, "bytes", ew, 0, UINT64_MAX);
      if (bytes != a.bytes()) {
        Fail(ew, "\"bytes\" of '" + name + "': expected " + std::to_string(a.bytes()) + " (" +
                     std::to_string(count) + " " + dtype + " elements), found " +
                     std::to_string(bytes));
      }
    }
    const std::string file = Str(e, "file", ew);
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      Fail(ew, "\"file\" of '" + name + "': expected the name of a file in " + Quote(dir) +
                   " (no directory part), found \"" + file + "\"");
    }
    GoldenFile& g = out[w];
    g.name = name;
    g.dtype = dtype;
    g.count = count;
    g.bytes = a.bytes();
    g.path = dir + "/" + file;
    if (e.contains("crc32")) {
      g.has_crc = true;
      g.crc = Hex32(e, "crc32", ew);
    }
  }
  for (size_t w = 0; w < want.size(); ++w) {
    if (!seen[w]) {
      Fail(where, std::string("\"") + key + "\": expected an entry for '" + want[w].name +
                      "' (the launch " + verb + " " + names + "; " + Shape(p) + "), found none");
    }
  }
  for (const GoldenFile& g : out) CheckFileSize(g, role);
  return out;
}

AlignedBuffer& BufferNamed(UpdateBuffers& u, const std::string& name) {
  AlignedBuffer* r = nullptr;
  u.ForEachBuffer([&](const hls::ArgInfo& a, AlignedBuffer& b) {
    if (name == a.name) r = &b;
  });
  if (r == nullptr) throw std::logic_error("golden: no kernel buffer named '" + name + "'");
  return *r;
}

const AlignedBuffer& BufferNamed(const UpdateBuffers& u, const std::string& name) {
  return BufferNamed(const_cast<UpdateBuffers&>(u), name);
}

// Reads a file whose size was checked into the start of b, checking the size again (the file
// may have changed since).
void ReadInto(const GoldenFile& f, AlignedBuffer& b) {
  if (b.size() < f.bytes) throw std::logic_error("golden: buffer smaller than its file");
  const std::string where = Quote(f.path);
  Fd fd{::open(f.path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) {
    Fail(where, std::string("expected a readable file, found ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != f.bytes) {
    Fail(where, "expected " + std::to_string(f.bytes) + " bytes, found " +
                    std::to_string(static_cast<uint64_t>(st.st_size)) +
                    " (the file changed after it was checked)");
  }
  uint64_t done = 0;
  while (done < f.bytes) {
    const ssize_t r = ::read(fd.fd, b.data() + done, std::min<uint64_t>(f.bytes - done, 1u << 30));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      Fail(where, "expected " + std::to_string(f.bytes) + " bytes, could read only " +
                      std::to_string(done) +
                      (r < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
    }
    done += static_cast<uint64_t>(r);
  }
}

}  // namespace

uint64_t GoldenIndex::HostBytes() const {
  uint64_t total = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const GoldenFile& f : *list) {
      total += std::max<uint64_t>((f.bytes + hls::kWordBytes - 1) / hls::kWordBytes, 1) *
               hls::kWordBytes;
    }
  }
  return total;
}

GoldenIndex ReadGoldenIndex(const std::string& dir_arg) {
  std::string dir = dir_arg;  // "golden/" names its files "golden/theta.in.bin"
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (!exists || !S_ISDIR(st.st_mode)) {
    Fail(Quote(dir),
         std::string("expected a directory written by `csdkit kernel --dump` "
                     "(problem.json and its .bin files), found ") +
             (exists ? "no directory" : "nothing (" + std::string(std::strerror(errno)) + ")"));
  }
  const std::string jp = dir + "/problem.json";
  const std::string where = Quote(jp);
  if (::lstat(jp.c_str(), &st) != 0) {
    Fail(where, std::string("expected the problem description, found none (") +
                    std::strerror(errno) + ")");
  }
  json j;
  try {
    // A regular file of at most kMaxJsonBytes, nested at most kMaxJsonDepth deep.
    j = ReadJsonFile(jp, kMaxJsonBytes);
  } catch (const JsonFileError& e) {
    throw std::invalid_argument(std::string("golden vectors: ") + e.what());
  }
  if (!j.is_object()) Fail(where, "expected a JSON object, found " + Found(j));
  const std::string fmt = Str(j, "format", where);
  if (fmt != kGoldenFormat) {
    Fail(where,
         std::string("\"format\": expected \"") + kGoldenFormat + "\", found \"" + fmt + "\"");
  }
  if (j.contains("kernel")) {
    const std::string kernel = Str(j, "kernel", where);
    if (kernel != hls::kUpdateKernelName) {
      Fail(where, std::string("\"kernel\": expected \"") + hls::kUpdateKernelName + "\", found \"" +
                      kernel + "\"");
    }
  }
  const uint32_t n = static_cast<uint32_t>(Uint(j, "n", where, 1, UINT32_MAX));
  const uint32_t nnz = static_cast<uint32_t>(Uint(j, "nnz", where, 0, UINT32_MAX));

  // The scalars, by name, from "args": each scalar of the table once with its bit pattern.
  const json& args = Field(j, "args", where);
  if (!args.is_array()) Fail(where, "\"args\": expected an array, found " + Found(args));
  uint32_t bits[hls::kNumUpdateArgs] = {};
  bool seen[hls::kNumUpdateArgs] = {};
  for (size_t k = 0; k < args.size(); ++k) {
    const json& e = args[k];
    const std::string ew = where + " args[" + std::to_string(k) + "]";
    if (!e.is_object()) Fail(ew, "expected an object {name, hex}, found " + Found(e));
    const std::string name = Str(e, "name", ew);
    unsigned i = 0;
    while (i < hls::kNumUpdateArgs && name != hls::kUpdateArgs[i].name) ++i;
    if (i == hls::kNumUpdateArgs) {
      Fail(ew, "expected the name of a csd_update argument (`csdkit kernel --args`), found '" +
                   name + "'");
    }
    if (seen[i]) Fail(ew, "expected each argument once, found '" + name + "' again");
    seen[i] = true;
    const hls::ArgInfo& a = hls::kUpdateArgs[i];
    const bool scalar = a.kind == hls::ArgKind::kScalar;
    const std::string kind = scalar ? "scalar" : "buffer";
    if (e.contains("kind") && Str(e, "kind", ew) != kind) {
      Fail(ew, "\"kind\" of '" + name + "': expected \"" + kind + "\", found \"" +
                   Str(e, "kind", ew) + "\"");
    }
    if (e.contains("offset") && Hex32(e, "offset", ew) != a.offset) {
      Fail(ew, "\"offset\" of '" + name + "': expected " + Hex(a.offset, 8) +
                   " (this build's register map), found " + Str(e, "offset", ew));
    }
    if (scalar) bits[i] = Hex32(e, "hex", ew);
  }
  UpdateLaunch<bool> l;
  // The stochastic rounding's key (seed, step, element index) only matters to q8-bf16
  // launches: dumps made before it existed, and hand-written fp32 ones, may leave it out (0).
  auto key_arg = [](unsigned i) { return i >= update_arg::seed_lo && i <= update_arg::index_hi; };
  l.ForEachScalar([&](const hls::ArgInfo& a, uint32_t& f) {
    if (!seen[a.index] && !key_arg(a.index)) {
      Fail(where, std::string("\"args\": expected an entry for the scalar '") + a.name +
                      "' with its bits in \"hex\", found none");
    }
    f = seen[a.index] ? bits[a.index] : 0u;
  });
  hls::Mode key_md{};
  if (hls::DecodeMode(l.mode, &key_md) && key_md.state == hls::StateFmt::kQ8Bf16) {
    for (unsigned i = update_arg::seed_lo; i <= update_arg::index_hi; ++i) {
      if (!seen[i]) {
        Fail(where, std::string("\"args\": expected an entry for the scalar '") +
                        hls::kUpdateArgs[i].name +
                        "' (a q8-bf16 launch's random bits depend on it), found none");
      }
    }
  }
  if (l.n != n || l.nnz != nnz) {
    const bool bad_n = l.n != n;
    Fail(where, std::string("\"args\" '") + (bad_n ? "n" : "nnz") + "': expected the top-level " +
                    (bad_n ? "n" : "nnz") + " (" + std::to_string(bad_n ? n : nnz) + "), found " +
                    std::to_string(bad_n ? l.n : l.nnz));
  }
  hls::Mode md{};
  if (!hls::DecodeMode(l.mode, &md)) {
    Fail(where,
         "\"args\" 'mode': expected a mode word the kernel accepts (docs/kernel-interface.md: "
         "a known optimizer and dtypes, only the flags the optimizer has), found " +
             Hex(l.mode, 8));
  }
  if (!md.sparse && nnz != 0) {
    Fail(where, "\"nnz\": expected 0 for a dense gradient (mode " + Hex(l.mode, 8) +
                    " has no sparse bit), found " + std::to_string(nnz));
  }
  Agrees(j, "optimizer", OptimizerName(md.opt), where, l.mode);
  Agrees(j, "grad", DTypeName(md.grad), where, l.mode);
  Agrees(j, "out", OutDTypeName(md.out), where, l.mode);
  Agrees(j, "sparse", md.sparse, where, l.mode);
  Agrees(j, "ftz", md.ftz, where, l.mode);

  GoldenIndex ix;
  ix.dir = dir;
  Problem& p = ix.problem;
  p.spec.hyper = OptimizerConfig::Defaults(md.opt);
  p.spec.grad.grad = md.grad;
  p.spec.grad.out = md.out;
  p.spec.grad.sparse = md.sparse;
  p.spec.grad.ftz = md.ftz;
  p.spec.n = n;
  p.nnz = nnz;
  p.launch.mode = l.mode;
  p.launch.scalars = {l.unscale, l.lr, l.beta1, l.omb1, l.beta2, l.omb2, l.eps, l.wd, l.c1, l.c2};
  // The lists the dump writes for this launch (names, dtypes and counts only).
  const UpdateBuffers none;
  ix.inputs = CheckList(j, "inputs", InputArrays(p, none), dir, where, p);
  ix.outputs = CheckList(j, "outputs", OutputArrays(p, none), dir, where, p);
  return ix;
}

GoldenProblem LoadGolden(GoldenIndex ix) {
  GoldenProblem g;
  g.problem = std::move(ix.problem);
  g.inputs = std::move(ix.inputs);
  g.outputs = std::move(ix.outputs);
  Problem& p = g.problem;
  const UpdateFootprint fp = LaunchFootprint(p.launch.mode, p.spec.n, p.nnz);
  p.buf.ForEachBuffer([&](const hls::ArgInfo& a, AlignedBuffer& b) {
    b = AlignedBuffer(std::max<uint64_t>(fp[a.index], hls::kWordBytes));
  });
  p.buf.SetScalars(p.spec.n, p.nnz, p.launch);
  auto note_crc = [&](const GoldenFile& f, const AlignedBuffer& b) {
    if (!f.has_crc) return;
    const uint32_t crc = Crc32(b.data(), f.bytes);
    if (crc != f.crc) {
      g.notes.push_back(Quote(f.path) + ": CRC-32 " + Hex(crc, 8) + ", problem.json says " +
                        Hex(f.crc, 8) + " (the file was changed after the dump)");
    }
  };
  for (const GoldenFile& f : g.inputs) {
    AlignedBuffer& b = BufferNamed(p.buf, f.name);
    ReadInto(f, b);
    note_crc(f, b);
  }
  for (const GoldenFile& f : g.outputs) {
    AlignedBuffer& b = BufferNamed(g.expected, f.name);
    b = AlignedBuffer(std::max<uint64_t>(f.bytes, hls::kWordBytes));
    ReadInto(f, b);
    note_crc(f, b);
  }
  return g;
}

std::vector<BufferCompare> CompareOutputs(const GoldenProblem& g, const UpdateBuffers& got) {
  std::vector<BufferCompare> r;
  for (const GoldenFile& f : g.outputs) {
    const AlignedBuffer& e = BufferNamed(g.expected, f.name);
    const AlignedBuffer& a = BufferNamed(got, f.name);
    if (a.size() < f.bytes) throw std::logic_error("golden: output buffer smaller than its file");
    BufferCompare c;
    c.file = &f;
    if (std::memcmp(e.data(), a.data(), f.bytes) != 0) {
      const unsigned eb = static_cast<unsigned>(f.bytes / std::max<uint64_t>(f.count, 1));
      for (uint64_t i = 0; i < f.count; ++i) {
        uint32_t x = 0, y = 0;
        std::memcpy(&x, e.data() + i * eb, eb);
        std::memcpy(&y, a.data() + i * eb, eb);
        if (x == y) continue;
        if (c.differing++ == 0) {
          c.first = i;
          c.expected = x;
          c.actual = y;
        }
      }
    }
    r.push_back(c);
  }
  return r;
}

std::vector<std::pair<std::string, std::string>> ElementInputs(const Problem& p, uint64_t i) {
  std::vector<std::pair<std::string, std::string>> r;
  hls::Mode md{};
  if (i >= p.spec.n || !hls::DecodeMode(p.launch.mode, &md)) return r;
  auto b32 = [&](const AlignedBuffer& b) { return Hex(b.as<uint32_t>()[i], 8); };
  r.push_back({"theta", b32(p.buf.theta)});
  if (hls::UsesM(md)) r.push_back({"m", b32(p.buf.m)});
  if (hls::UsesV(md)) r.push_back({"v", b32(p.buf.v)});
  auto value = [&](uint64_t k) {
    return md.grad == DType::kFp32 ? Hex(p.buf.grad.as<uint32_t>()[k], 8)
                                   : Hex(p.buf.grad.as<uint16_t>()[k], 4);
  };
  if (!md.sparse) {
    r.push_back({"grad", value(i)});
    return r;
  }
  // The entry of element i: its block's range of entries, searched for its offset. A block
  // table that the kernel would reject cannot say which entry it is.
  const uint32_t* blk = p.buf.sp_blk.as<uint32_t>();
  const uint16_t* idx = p.buf.sp_idx.as<uint16_t>();
  const uint64_t b = i >> hls::kBlockBits;
  const uint32_t lo = blk[b], hi = blk[b + 1];
  std::string g = "none (no sparse entry: +0)";
  if (lo > hi || hi > p.nnz) {
    g = "? (block table entry " + std::to_string(b) + " invalid)";
  } else {
    for (uint32_t k = lo; k < hi; ++k) {
      if (idx[k] == (i & (hls::kBlockElems - 1u))) {
        g = value(k) + " (sparse entry " + std::to_string(k) + ")";
        break;
      }
    }
  }
  r.push_back({"grad", g});
  return r;
}

}  // namespace csdkit
