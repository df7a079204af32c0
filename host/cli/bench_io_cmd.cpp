// `csdkit bench io`: the libaio engine's read/write throughput against fio on the same file.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "io_bench.h"
#include "options.h"

namespace csdkit::cli {

void AddIoBench(CLI::App* bench) {
  auto o = std::make_shared<bench::IoBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* io = bench->add_subcommand(
      "io",
      "libaio engine (O_DIRECT) sequential read/write GB/s on one file, against fio "
      "(libaio, direct=1, same file, block size and queue depth) in the same run");
  io->add_option("--dir", o->dir,
                 "directory for the test file, on a disk-backed filesystem (default: a new "
                 "directory under the current one, removed afterwards)");
  io->add_option("--size", o->size, "file size, a multiple of the block size (e.g. 256M, 1G)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  io->add_option("--block-size", o->block_size, "bytes per request (e.g. 128K, 1M)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  io->add_option("--queue-depth", o->queue_depth, "requests in flight (fio: iodepth)")
      ->capture_default_str();
  io->add_option("--threads", o->intra_op_parallelism,
                 "engine workers (intra_op_parallelism); fio always runs one job")
      ->capture_default_str();
  io->add_option("--reps", o->reps, "repetitions (best of), engine and fio interleaved")
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
