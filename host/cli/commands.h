// Subcommand registration for the csdkit CLI; each command lives in its own source file.
#ifndef CSDKIT_CLI_COMMANDS_H_
#define CSDKIT_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace csdkit::cli {

/// `csdkit kernel ...`: run the updater kernel's host model on a generated problem.
void AddKernelCommand(CLI::App& app);
/// `csdkit init | step | info | run`: the runtime on emulated SmartSSDs.
void AddRuntimeCommands(CLI::App& app);
/// `csdkit reshard`: a set of rank stores re-split for another world size or device count.
void AddReshardCommand(CLI::App& app);
/// `csdkit plan`: training iterations on N devices in virtual time (host/planner).
void AddPlanCommand(CLI::App& app);
/// `csdkit devices`: OpenCL inventory and SmartSSD pairing by PCIe topology.
void AddDevicesCommand(CLI::App& app);
/// `csdkit p2p-bench`: SSD <-> device bandwidth sweep.
void AddP2pCommand(CLI::App& app);
/// `csdkit selftest`: every kernel configuration on a device against the model.
void AddSelfTestCommand(CLI::App& app);
/// `csdkit xclbin inspect | check | emu`.
void AddXclbinCommand(CLI::App& app);
/// `csdkit verify`: host model vs RTL per output buffer.
void AddRtlCommands(CLI::App& app);
/// `csdkit bench rtl`: registered on the `bench` subcommand.
void AddRtlBench(CLI::App* bench);
/// `csdkit bench ...`: benchmarks printing JSON.
void AddBenchCommand(CLI::App& app);
/// `csdkit bench io`: registered on the `bench` subcommand.
void AddIoBench(CLI::App* bench);

/// What a command has durably done so far ("committed step 5 of store 's'"), recorded as it
/// happens; main() adds it to a failure that comes after (output that could not be written),
/// so that a script retrying the command knows the work was done.
void RecordDone(const std::string& what);
const std::string& Done();

}  // namespace csdkit::cli

#endif  // CSDKIT_CLI_COMMANDS_H_
