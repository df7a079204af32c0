// The argument table (update_args.h) against the HLS top's INTERFACE pragmas, read from the
// kernel source: every argument has its m_axi bundle (pointers) and its s_axilite register, in
// table order, and nothing else is declared. (The signature itself is checked at compile time
// in csd_update.cpp.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "csdkit/hls/update_args.h"

namespace {

std::string ReadKernelSource() {
  std::ifstream f(CSDKIT_KERNEL_SOURCE);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ArgsTable, HlsPragmasMatchTable) {
  const std::string src = ReadKernelSource();
  ASSERT_FALSE(src.empty()) << "cannot read " << CSDKIT_KERNEL_SOURCE;
  const std::regex maxi(R"(#pragma HLS INTERFACE m_axi port = (\w+) bundle = (\w+))");
  const std::regex lite(R"(#pragma HLS INTERFACE s_axilite port = (\w+) bundle = control)");
  std::vector<std::pair<std::string, std::string>> maxi_found;
  std::vector<std::string> lite_found;
  for (std::sregex_iterator it(src.begin(), src.end(), maxi), end; it != end; ++it)
    maxi_found.emplace_back((*it)[1], (*it)[2]);
  for (std::sregex_iterator it(src.begin(), src.end(), lite), end; it != end; ++it)
    lite_found.push_back((*it)[1]);

  std::vector<std::pair<std::string, std::string>> maxi_exp;
  std::vector<std::string> lite_exp;
  for (const auto& a : csdkit::hls::kUpdateArgs) {
    if (a.kind == csdkit::hls::ArgKind::kPtr) maxi_exp.emplace_back(a.name, a.bundle);
    lite_exp.push_back(a.name);
  }
  lite_exp.push_back("return");
  EXPECT_EQ(maxi_found, maxi_exp) << "m_axi pragmas (port, bundle) disagree with the table";
  EXPECT_EQ(lite_found, lite_exp) << "s_axilite pragmas disagree with the table";
}

TEST(ArgsTable, RegisterFileLayout) {
  // Offsets follow the Vitis rule (also a static_assert); the register file ends at 0x120.
  EXPECT_TRUE(csdkit::hls::UpdateArgsFollowVitisLayout());
  EXPECT_EQ(csdkit::hls::kUpdateRegsEnd, 0x120u);
  EXPECT_EQ(csdkit::hls::kNumUpdateArgs, 29u);
}

}  // namespace
