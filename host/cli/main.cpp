// csdkit: command-line entry point.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "csdkit/platform/problem.h"

int main(int argc, char** argv) {
  CLI::App app{"csdkit: near-storage optimizer offload kit (kernels, model, benchmarks)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "csdkit 0.1.0");
  csdkit::cli::AddRuntimeCommands(app);
  csdkit::cli::AddKernelCommand(app);
  csdkit::cli::AddDevicesCommand(app);
  csdkit::cli::AddP2pCommand(app);
  csdkit::cli::AddSelfTestCommand(app);
  csdkit::cli::AddXclbinCommand(app);
  csdkit::cli::AddRtlCommands(app);
  csdkit::cli::AddBenchCommand(app);
  try {
    csdkit::CheckFpEnvironment();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; every refused option or value is bad input: exit 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "csdkit: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
