// csdkit: command-line entry point.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "csdkit/platform/problem.h"

int main(int argc, char** argv) {
  CLI::App app{"csdkit: near-storage optimizer offload kit (kernels, model, benchmarks)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "csdkit " CSDKIT_PROJECT_VERSION);
  csdkit::cli::AddRuntimeCommands(app);
  csdkit::cli::AddReshardCommand(app);
  csdkit::cli::AddPlanCommand(app);
  csdkit::cli::AddKernelCommand(app);
  csdkit::cli::AddDevicesCommand(app);
  csdkit::cli::AddP2pCommand(app);
  csdkit::cli::AddSelfTestCommand(app);
#ifdef CSDKIT_HAVE_XCLBIN
  csdkit::cli::AddXclbinCommand(app);
#endif
  csdkit::cli::AddRtlCommands(app);
  csdkit::cli::AddBenchCommand(app);
  try {
    csdkit::CheckFpEnvironment();
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own outcome (e.g. 1: the kernel reported an error)
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; every refused option or value is bad input: exit 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "csdkit: error: %s\n", e.what());
    return 2;
  }
  // Every output write is checked: output that could not be written (a full disk, /dev/full, a
  // closed pipe) is a failure, not a success with the result lost.
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    const int e = errno;
    const std::string& done = csdkit::cli::Done();
    std::fprintf(stderr, "csdkit: error: cannot write the output: %s%s\n", std::strerror(e),
                 done.empty() ? ""
                              : (" (the command's work was done nonetheless: " + done +
                                 "; do not repeat it)").c_str());
    return 2;
  }
  return 0;
}

namespace csdkit::cli {

namespace {
std::string& DoneText() {
  static std::string text;
  return text;
}
}  // namespace

void RecordDone(const std::string& what) { DoneText() = what; }
const std::string& Done() { return DoneText(); }

}  // namespace csdkit::cli
