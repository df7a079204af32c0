// `csdkit bench io`: the libaio engine's read/write throughput against fio on the same file.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "io_bench.h"
#include "options.h"

namespace csdkit::cli {

namespace {

// Refuses a size written with a minus sign before CLI::AsSizeValue would wrap it to a huge
// unsigned value (CLI11 puts the option's name in front of the message). Added after AsSizeValue:
// CLI11 runs the transform added last first.
CLI::Validator NotNegative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const size_t first = value.find_first_not_of(" \t");
        if (first != std::string::npos && value[first] == '-') {
          return "must be a positive size (bytes, or with a unit as in 512K, 1G), found " + value;
        }
        return "";
      },
      "");
}

}  // namespace

void AddIoBench(CLI::App* bench) {
  auto o = std::make_shared<bench::IoBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* io = bench->add_subcommand(
      "io",
      "libaio engine (O_DIRECT) sequential read/write GB/s on one file, against fio "
      "(libaio, direct=1, same file, block size, queue depth and bytes) in the same run, with "
      "4 KiB-page buffers on both sides and with huge-page buffers on both sides");
  io->add_option("--dir", o->dir,
                 "directory for the test file, on a disk-backed filesystem (default: a new "
                 "directory under the current one, removed afterwards); the test file gets a new "
                 "unique name, so no existing file is touched");
  io->add_option("--size", o->size,
                 "file size = bytes per measurement, a multiple of the block size (e.g. 256M, 1G)")
      ->transform(CLI::AsSizeValue(false))
      ->transform(NotNegative())
      ->capture_default_str();
  io->add_option("--block-size", o->block_size, "bytes per request (e.g. 128K, 1M)")
      ->transform(CLI::AsSizeValue(false))
      ->transform(NotNegative())
      ->capture_default_str();
  io->add_option("--queue-depth", o->queue_depth, "requests in flight (fio: iodepth)")
      ->capture_default_str();
  io->add_option("--threads", o->intra_op_parallelism,
                 "engine workers (intra_op_parallelism); fio always runs one job")
      ->capture_default_str();
  io->add_option("--pages", o->pages,
                 "buffer configurations: 4k (engine MADV_NOHUGEPAGE vs fio iomem=malloc), thp "
                 "(engine transparent huge pages vs fio iomem=mmaphuge, which needs free hugetlb "
                 "pages) or both")
      ->capture_default_str();
  io->add_option("--reps", o->reps,
                 "measurements per configuration, direction and tool (median and best reported), "
                 "engine and fio alternating")
      ->capture_default_str();
  io->add_option("--fio", o->fio, "fio program")->capture_default_str();
  io->add_flag("--keep-file", o->keep_file, "leave the test file in place");
  io->add_flag("--json", *json, "print JSON only (default: JSON plus progress on a terminal)");
  io->callback([o, json]() {
    o->progress = !*json && isatty(STDERR_FILENO);
    std::cout << JsonText(bench::IoBench(*o)) << "\n";
  });
}

}  // namespace csdkit::cli
