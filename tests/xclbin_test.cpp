// xclbin handling (csdkit/platform/xclbin.h): the emulated xclbin written, read back through XRT
// and checked against the argument table; mismatched arguments, offsets, ports, kernel names,
// platforms, control protocols and connectivity refused with what was expected and found;
// truncated files, random bytes and corrupted containers refused without crashing; the flow
// inputs (kernel.xml, connectivity; flows/tools/flow_files.h) generated from the table and read
// back.
#include "csdkit/platform/xclbin.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "csdkit/hls/update_args.h"
#include "flow_files.h"

namespace {

using csdkit::CheckXclbin;
using csdkit::EmulationXclbinOptions;
using csdkit::InspectXclbin;
using csdkit::KernelSignature;
using csdkit::WriteEmulationXclbin;
using csdkit::XclbinError;
using csdkit::XclbinExpectation;
using Kind = csdkit::XclbinError::Kind;

std::string TestPath(const std::string& name) {
  const std::string dir = CSDKIT_XCLBIN_TEST_DIR;
  ::mkdir(dir.c_str(), 0755);
  return dir + "/" + name + "." + std::to_string(::getpid()) + ".xclbin";
}

std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

/// Runs CheckXclbin and returns the refusal (fails the test if there is none).
XclbinError Refusal(const std::string& path, const XclbinExpectation& exp = {}) {
  try {
    CheckXclbin(path, exp);
  } catch (const XclbinError& e) {
    return e;
  }
  ADD_FAILURE() << "CheckXclbin accepted " << path;
  return XclbinError(Kind::kIo, "accepted");
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

class XclbinFile : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::string Path(const std::string& name) {
    paths_.push_back(TestPath(name));
    return paths_.back();
  }
  std::string WriteEmu(const std::string& name, const EmulationXclbinOptions& o = {}) {
    const std::string p = Path(name);
    WriteEmulationXclbin(p, o);
    return p;
  }

 private:
  std::vector<std::string> paths_;
};

// ---- the table as a kernel signature --------------------------------------------------------

TEST(KernelSignature, FollowsTheArgumentTable) {
  const KernelSignature s = KernelSignature::UpdateKernel();
  EXPECT_EQ(s.name, csdkit::hls::kUpdateKernelName);
  EXPECT_EQ(s.control_protocol, "ap_ctrl_hs");
  ASSERT_EQ(s.args.size(), csdkit::hls::kNumUpdateArgs);
  for (unsigned i = 0; i < csdkit::hls::kNumUpdateArgs; ++i) {
    const auto& t = csdkit::hls::kUpdateArgs[i];
    const auto& a = s.args[i];
    SCOPED_TRACE("arg " + std::to_string(i) + " " + t.name);
    EXPECT_EQ(a.index, i);
    EXPECT_EQ(a.name, t.name);
    EXPECT_EQ(a.global, t.kind == csdkit::hls::ArgKind::kPtr);
    EXPECT_EQ(Hex(a.offset), Hex(t.offset));
    EXPECT_EQ(a.size, t.bytes);
    EXPECT_EQ(a.port, a.global ? std::string("m_axi_") + t.bundle : "s_axi_control");
  }
  // status shares gmem5 with sp_blk: seven distinct master ports.
  const std::vector<std::string> ports = s.MasterPorts();
  ASSERT_EQ(ports.size(), 7u);
  EXPECT_EQ(ports.front(), "m_axi_gmem0");
  EXPECT_EQ(ports.back(), "m_axi_gmem6");
}

// ---- round trip -----------------------------------------------------------------------------

TEST_F(XclbinFile, EmulationRoundTripThroughXrt) {
  const std::string p = WriteEmu("roundtrip");
  const nlohmann::json j = InspectXclbin(p);
  EXPECT_EQ(j["platform"], csdkit::kEmulatedSmartSsdPlatform);
  EXPECT_EQ(j["target"], "sw_emu");
  EXPECT_EQ(j["bytes"].get<uint64_t>(), ReadBytes(p).size());
  ASSERT_EQ(j["memories"].size(), 1u);
  EXPECT_EQ(j["memories"][0]["tag"], "bank0");
  EXPECT_EQ(j["memories"][0]["type"], "ddr4");
  EXPECT_EQ(j["memories"][0]["size_kb"].get<uint64_t>(), 4ull << 20);
  ASSERT_EQ(j["kernels"].size(), 1u);
  const nlohmann::json& k = j["kernels"][0];
  EXPECT_EQ(k["name"], "csd_update");
  ASSERT_EQ(k["compute_units"].size(), 1u);
  EXPECT_EQ(k["compute_units"][0]["name"], "csd_update:csd_update_1");
  EXPECT_EQ(k["compute_units"][0]["control"], "ap_ctrl_hs");
  ASSERT_EQ(k["args"].size(), csdkit::hls::kNumUpdateArgs);
  unsigned buffers = 0;
  for (unsigned i = 0; i < csdkit::hls::kNumUpdateArgs; ++i) {
    const auto& t = csdkit::hls::kUpdateArgs[i];
    const nlohmann::json& a = k["args"][i];
    SCOPED_TRACE(std::string("arg ") + t.name);
    EXPECT_EQ(a["index"].get<unsigned>(), i);
    EXPECT_EQ(a["name"], t.name);
    EXPECT_EQ(a["offset"], Hex(t.offset));
    EXPECT_EQ(a["size"].get<unsigned>(), t.bytes);
    const bool ptr = t.kind == csdkit::hls::ArgKind::kPtr;
    EXPECT_EQ(a["address_qualifier"], ptr ? "global" : "scalar");
    // Interfaces named as v++ names those of an HLS kernel: M_AXI_GMEM<k>, S_AXI_CONTROL.
    EXPECT_EQ(a["port"], ptr ? "M_AXI_GMEM" + std::string(t.bundle).substr(4) : "S_AXI_CONTROL");
    if (ptr) {
      ASSERT_EQ(a["memories"].size(), 1u);
      EXPECT_EQ(a["memories"][0], "bank0");
      ++buffers;
    } else {
      EXPECT_TRUE(a["memories"].empty());
    }
  }
  EXPECT_EQ(j["connectivity"].size(), buffers);
  ASSERT_TRUE(j.contains("build_metadata"));
  EXPECT_EQ(j["build_metadata"]["build_metadata"]["dsa"]["name"],
            csdkit::kEmulatedSmartSsdPlatform);
  ASSERT_TRUE(j.contains("clocks"));
  EXPECT_EQ(j["clocks"][0]["mhz"].get<unsigned>(), 300u);

  XclbinExpectation exp;
  exp.platform = csdkit::kEmulatedSmartSsdPlatform;
  EXPECT_NO_THROW(CheckXclbin(p, exp));
  EXPECT_NO_THROW(CheckXclbin(p));  // any platform
}

TEST_F(XclbinFile, UuidIsDerivedFromTheDescription) {
  const std::string a = WriteEmu("uuid_a"), b = WriteEmu("uuid_b");
  EXPECT_EQ(InspectXclbin(a)["uuid"], InspectXclbin(b)["uuid"]);
  EmulationXclbinOptions o;
  o.memory_bytes = 2ull << 30;
  const std::string c = WriteEmu("uuid_c", o);
  EXPECT_NE(InspectXclbin(a)["uuid"], InspectXclbin(c)["uuid"]);
}

TEST_F(XclbinFile, TargetsAndCardPlatform) {
  EmulationXclbinOptions o;
  o.target = "hw_emu";
  o.platform = csdkit::kSmartSsdPlatform;
  const std::string p = WriteEmu("hw_emu", o);
  EXPECT_EQ(InspectXclbin(p)["target"], "hw_emu");
  XclbinExpectation exp;
  exp.platform = csdkit::kSmartSsdPlatform;
  EXPECT_NO_THROW(CheckXclbin(p, exp));
  // The colon/dot VBNV spelling of the same platform is the same platform.
  exp.platform = "xilinx:u2:gen3x4_xdma_gc_2:202110.1";
  EXPECT_NO_THROW(CheckXclbin(p, exp));
  o.target = "opencl";
  EXPECT_THROW(WriteEmulationXclbin(Path("bad_target"), o), XclbinError);
}

// ---- mismatches -----------------------------------------------------------------------------

TEST_F(XclbinFile, RefusesAnotherPlatform) {
  const std::string p = WriteEmu("platform");
  XclbinExpectation exp;
  exp.platform = csdkit::kSmartSsdPlatform;
  const XclbinError e = Refusal(p, exp);
  EXPECT_EQ(e.kind(), Kind::kMismatch);
  EXPECT_TRUE(Contains(e.what(), std::string("platform: expected ") + csdkit::kSmartSsdPlatform))
      << e.what();
  EXPECT_TRUE(Contains(e.what(), csdkit::kEmulatedSmartSsdPlatform)) << e.what();
}

TEST_F(XclbinFile, RefusesAMovedOffset) {
  EmulationXclbinOptions o;
  o.kernel.args[3].offset += 4;  // grad at 0x38 instead of 0x34
  const XclbinError e = Refusal(WriteEmu("offset", o));
  EXPECT_EQ(e.kind(), Kind::kMismatch);
  EXPECT_TRUE(
      Contains(e.what(), "arg 3: expected grad (buffer, port m_axi_gmem3, offset 0x34, size 8)"))
      << e.what();
  EXPECT_TRUE(Contains(e.what(), "found grad (buffer, port M_AXI_GMEM3, offset 0x38, size 8)"))
      << e.what();
}

TEST_F(XclbinFile, RefusesARenamedArgument) {
  EmulationXclbinOptions o;
  o.kernel.args[14].name = "learning_rate";
  const XclbinError e = Refusal(WriteEmu("rename", o));
  EXPECT_TRUE(Contains(e.what(), "arg 14: expected lr (scalar")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "found learning_rate (scalar")) << e.what();
}

TEST_F(XclbinFile, RefusesSwappedArguments) {
  EmulationXclbinOptions o;
  std::swap(o.kernel.args[1].name, o.kernel.args[2].name);  // m and v swapped, offsets kept
  const XclbinError e = Refusal(WriteEmu("swap", o));
  EXPECT_TRUE(Contains(e.what(), "arg 1: expected m ")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "arg 2: expected v ")) << e.what();
}

TEST_F(XclbinFile, RefusesAMissingArgument) {
  EmulationXclbinOptions o;
  o.kernel.args.pop_back();
  const XclbinError e = Refusal(WriteEmu("missing", o));
  EXPECT_TRUE(Contains(e.what(), "argument count: expected 29, found 28")) << e.what();
  EXPECT_TRUE(Contains(e.what(),
                       "arg 28: expected index_hi (scalar, port s_axi_control, offset 0x118, "
                       "size 4), missing"))
      << e.what();
}

TEST_F(XclbinFile, RefusesAnotherBundle) {
  EmulationXclbinOptions o;
  o.kernel.args[7].port = "m_axi_gmem6";  // status on out16's port instead of sp_blk's
  const std::string p = WriteEmu("bundle", o);
  const XclbinError e = Refusal(p);
  EXPECT_TRUE(Contains(e.what(), "arg 7: expected status (buffer, port m_axi_gmem5")) << e.what();
  // Without the port check the same file passes.
  XclbinExpectation loose;
  loose.check_ports = false;
  EXPECT_NO_THROW(CheckXclbin(p, loose));
}

TEST_F(XclbinFile, RefusesAScalarWhereABufferIsExpected) {
  EmulationXclbinOptions o;
  o.kernel.args[4].global = false;
  const XclbinError e = Refusal(WriteEmu("qualifier", o));
  EXPECT_TRUE(Contains(e.what(), "arg 4: expected sp_idx (buffer")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "found sp_idx (scalar")) << e.what();
}

TEST_F(XclbinFile, RefusesAnotherKernelName) {
  EmulationXclbinOptions o;
  o.kernel.name = "vadd";
  const XclbinError e = Refusal(WriteEmu("kernel", o));
  EXPECT_EQ(e.kind(), Kind::kMismatch);
  EXPECT_TRUE(Contains(e.what(), "kernel: expected csd_update, found vadd")) << e.what();
}

TEST_F(XclbinFile, RefusesAnotherControlProtocol) {
  EmulationXclbinOptions o;
  o.kernel.control_protocol = "ap_ctrl_chain";
  const XclbinError e = Refusal(WriteEmu("chain", o));
  EXPECT_TRUE(Contains(e.what(), "control protocol expected ap_ctrl_hs, found ap_ctrl_chain"))
      << e.what();
}

TEST_F(XclbinFile, RefusesUnconnectedBuffers) {
  const std::string p = WriteEmu("unconnected");
  // Empty the CONNECTIVITY section (entry count 0): still well-formed, nothing wired.
  const nlohmann::json j = InspectXclbin(p);
  uint64_t off = 0;
  for (const auto& s : j["sections"]) {
    if (s["kind"] == "CONNECTIVITY") off = s["offset"].get<uint64_t>();
  }
  ASSERT_NE(off, 0u);
  std::vector<char> b = ReadBytes(p);
  const int32_t zero = 0;
  std::memcpy(b.data() + off, &zero, sizeof zero);
  WriteBytes(p, b);
  const XclbinError e = Refusal(p);
  EXPECT_EQ(e.kind(), Kind::kMismatch);
  EXPECT_TRUE(Contains(e.what(), "buffer argument theta is connected to no memory")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "sp=csd_update_1.theta:bank0")) << e.what();
}

// ---- damaged files --------------------------------------------------------------------------

TEST_F(XclbinFile, RefusesTruncatedFiles) {
  const std::string good = WriteEmu("whole");
  const std::vector<char> b = ReadBytes(good);
  ASSERT_GT(b.size(), 1024u);
  const std::string p = Path("truncated");
  for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{100}, size_t{495}, size_t{496},
                   size_t{600}, b.size() / 2, b.size() - 1}) {
    SCOPED_TRACE("first " + std::to_string(n) + " of " + std::to_string(b.size()) + " bytes");
    WriteBytes(p, std::vector<char>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)));
    const XclbinError e = Refusal(p);
    EXPECT_EQ(e.kind(), Kind::kFormat) << e.what();
    if (n >= 8) {
      EXPECT_TRUE(Contains(e.what(), "truncated")) << e.what();
    }
    EXPECT_THROW(InspectXclbin(p), XclbinError);
  }
}

TEST_F(XclbinFile, RefusesTrailingData) {
  std::vector<char> b = ReadBytes(WriteEmu("trailing_src"));
  b.insert(b.end(), 64, 'x');
  const std::string p = Path("trailing");
  WriteBytes(p, b);
  const XclbinError e = Refusal(p);
  EXPECT_EQ(e.kind(), Kind::kFormat);
  EXPECT_TRUE(Contains(e.what(), "trailing data")) << e.what();
}

TEST_F(XclbinFile, RefusesRandomBytes) {
  const uint32_t seed = 20240613;
  std::mt19937 rng(seed);
  const std::string p = Path("random");
  for (int round = 0; round < 20; ++round) {
    std::vector<char> b(1 + rng() % 8192);
    for (char& c : b) c = static_cast<char>(rng());
    WriteBytes(p, b);
    const XclbinError e = Refusal(p);
    EXPECT_EQ(e.kind(), Kind::kFormat) << "seed " << seed << " round " << round << ": " << e.what();
    EXPECT_TRUE(Contains(e.what(), "is not an xclbin: expected the magic"))
        << "seed " << seed << " round " << round << ": " << e.what();
  }
  // Random bytes behind a valid magic: still refused, as a malformed container.
  for (int round = 0; round < 20; ++round) {
    std::vector<char> b(8 + rng() % 8192);
    for (char& c : b) c = static_cast<char>(rng());
    std::memcpy(b.data(), "xclbin2", 8);
    WriteBytes(p, b);
    const XclbinError e = Refusal(p);
    EXPECT_EQ(e.kind(), Kind::kFormat) << "seed " << seed << " round " << round << ": " << e.what();
  }
}

TEST_F(XclbinFile, RefusesMissingFile) {
  const XclbinError e = Refusal(TestPath("does_not_exist"));
  EXPECT_EQ(e.kind(), Kind::kIo);
  EXPECT_TRUE(Contains(e.what(), "cannot open xclbin")) << e.what();
}

// What is not a regular file is refused before it is read (/dev/zero would never end), naming
// it; so is a regular file without the magic, before it is read whole.
TEST_F(XclbinFile, RefusesDirectoriesAndSpecialFilesBeforeReading) {
  XclbinError e = Refusal("/dev/zero");
  EXPECT_EQ(e.kind(), Kind::kIo);
  EXPECT_TRUE(Contains(e.what(), "xclbin '/dev/zero': expected a regular file, found a special "
                                 "file")) << e.what();
  e = Refusal(CSDKIT_XCLBIN_TEST_DIR);
  EXPECT_TRUE(Contains(e.what(), "expected a regular file, found a directory")) << e.what();
  const std::string text = TestPath("notes.txt");
  std::ofstream(text) << "not an xclbin at all";
  e = Refusal(text);
  EXPECT_EQ(e.kind(), Kind::kFormat);
  EXPECT_TRUE(Contains(e.what(), "is not an xclbin: expected the magic")) << e.what();
}

// Random corruption anywhere in a valid file: each result is either a readable xclbin or an
// XclbinError; never a crash, a hang or another exception. Bytes are flipped in the header and
// section table more often, where the container's own structure lives.
TEST_F(XclbinFile, CorruptedFilesNeverCrash) {
  const std::vector<char> good = ReadBytes(WriteEmu("fuzz_src"));
  const std::string p = Path("fuzz");
  const uint32_t seed = 7;
  std::mt19937 rng(seed);
  int refused = 0, accepted = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<char> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t span = (rng() % 2 == 0) ? std::min<size_t>(b.size(), 496 + 6 * 40) : b.size();
      const size_t at = rng() % span;
      b[at] = static_cast<char>(b[at] ^ (1u << (rng() % 8)));
    }
    WriteBytes(p, b);
    try {
      InspectXclbin(p);
      ++accepted;
    } catch (const XclbinError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << seed << " round " << round
                    << ": not an XclbinError: " << e.what();
    }
  }
  EXPECT_GT(refused, 0);
  RecordProperty("accepted", accepted);
  RecordProperty("refused", refused);
}

// ---- flow inputs ----------------------------------------------------------------------------

TEST(FlowFiles, KernelXmlRoundTrip) {
  const KernelSignature s = KernelSignature::UpdateKernel();
  const std::string xml = csdkit::RtlKernelXml(s);
  const KernelSignature back = csdkit::ParseKernelXml(xml, s.name);
  EXPECT_EQ(back.control_protocol, "ap_ctrl_hs");
  const std::vector<std::string> diff = csdkit::CompareSignatures(s, back, true);
  EXPECT_TRUE(diff.empty()) << diff.front();
  EXPECT_TRUE(Contains(xml,
                       "<arg name=\"theta\" addressQualifier=\"1\" id=\"0\" port=\"m_axi_gmem0\" "
                       "size=\"0x8\" offset=\"0x010\""))
      << xml;
  EXPECT_TRUE(Contains(xml,
                       "<arg name=\"c2\" addressQualifier=\"0\" id=\"22\" port=\"s_axi_control\" "
                       "size=\"0x4\" offset=\"0x0e8\""))
      << xml;
  EXPECT_TRUE(Contains(xml, std::string("vlnv=\"") + csdkit::kRtlKernelVendor + ":" +
                                csdkit::kRtlKernelLibrary +
                                ":csd_update:" + csdkit::kRtlKernelVersion + "\""));
  EXPECT_THROW(csdkit::ParseKernelXml(xml, "vadd"), XclbinError);
}

TEST(FlowFiles, ConnectivityHasOneLinePerBuffer) {
  const KernelSignature s = KernelSignature::UpdateKernel();
  const std::string cfg = csdkit::ConnectivityConfig(s, "bank0");
  EXPECT_TRUE(Contains(cfg, "[connectivity]\nnk=csd_update:1:csd_update_1\n")) << cfg;
  size_t sp = 0;
  for (size_t at = cfg.find("\nsp="); at != std::string::npos; at = cfg.find("\nsp=", at + 1)) ++sp;
  EXPECT_EQ(sp, 10u) << cfg;
  for (const char* a : {"theta", "m", "v", "grad", "sp_idx", "sp_blk", "out16", "status",
                        "m_absmax", "v_absmax"}) {
    EXPECT_TRUE(Contains(cfg, std::string("sp=csd_update_1.") + a + ":bank0\n")) << a;
  }
  EXPECT_FALSE(Contains(cfg, ".lr:")) << cfg;
  const std::string tcl = csdkit::PackagingPortsTcl(s);
  EXPECT_TRUE(Contains(tcl,
                       "set csd_master_ports [list m_axi_gmem0 m_axi_gmem1 m_axi_gmem2 "
                       "m_axi_gmem3 m_axi_gmem4 m_axi_gmem5 m_axi_gmem6]\n"))
      << tcl;
}

TEST(FlowFiles, ParseKernelXmlRefusesIncompleteArgs) {
  const std::string xml =
      "<root><kernel name=\"csd_update\"><args><arg name=\"theta\" id=\"0\" offset=\"0x10\"/>"
      "</args></kernel></root>";
  try {
    csdkit::ParseKernelXml(xml, "csd_update");
    ADD_FAILURE() << "accepted an <arg> without size";
  } catch (const XclbinError& e) {
    EXPECT_EQ(e.kind(), Kind::kFormat);
    EXPECT_TRUE(Contains(e.what(), "theta")) << e.what();
  }
}

}  // namespace
