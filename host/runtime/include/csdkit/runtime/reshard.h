// Re-splitting a set of partitioned stores to another world size (and device count) at the same
// committed step: what `csdkit reshard` and csdkit.torch.distributed.reshard() both run.
//
// THE SET. A data-parallel run of csdkit.torch.distributed over W ranks leaves, under one
// directory SRC:
//   SRC/rank-<r>/        rank r's model store (store.h); its layout entries are pieces named
//                        param_groups[g].params[i][a:b]: elements [a, b) of tensor i of torch
//                        param group g, in the flattened order of the whole model
//   SRC/rank-<r>.json    rank r's partition record, format "csdkit-zero-partition-1": members
//                        format, world_size, rank, total_elements (N), begin, end (the rank's
//                        element range), fingerprint and dtype (of the model, as the trainer
//                        computed them; carried over unchanged)
// The partition rule: chunk = ceil(N / W), rank r owns [r * chunk, min(N, (r + 1) * chunk)).
//
// WHAT RESHARD CHECKS, before anything is written (std::invalid_argument for a bad argument,
// StoreError for a bad set; each message names the file or option, what was expected and what
// was found): world >= 1 and devices in 1..256; DST absent or an empty directory; every record
// readable, of the format, naming its own rank, with one world size, N, fingerprint and dtype,
// ranks 0 .. W-1 all present and ranges following the rule; a new world for which every rank
// owns an element; every source store opens for reading (a writer at work on it is refused),
// has a layout of pieces that tile its record's range and, together, the whole model, keeps the
// same variables and optimizer, gradient and output dtypes and state format as rank 0's, and is
// at the same committed step as every other (else the refusal lists every rank's step: resume with the old
// world size first, which rolls a group back to its common step); every new store's
// configuration (device count against its slice, device memory) is valid.
//
// WHAT IT WRITES. For each new rank r, DST/rank-<r>/ cut as the trainer cuts it (pieces of the
// tensors its slice overlaps, local param groups numbered in order of appearance, each with the
// hyper-parameters the source recorded for that torch group), created with the source's
// optimizer, gradient and output dtypes, loss scale, FTZ policy and seed, and the source's state
// format or `state` (q8 blocks follow each new store's pieces, so moments whose blocks move are
// requantized), `devices` devices (or the source's), subgroups sized for `device_mem` as a trainer session sizes them; then its
// slice of theta, m and/or v imported and committed at the source's step (state_io.h), each
// piece with its tensor's step count (the pieces of a tensor must agree: else refused). When
// every store is written, the records DST/rank-<r>.json: rank 0's source record with the new
// world_size, rank, begin and end, each written to a temporary file, synced and renamed.
//
// SOURCE ONLY READ. The source stores are opened for reading (a shared lock), one at a time:
// once each to learn their layout and step, then again while the new slices are filled (a
// store found at another step than the first time is refused). No source byte changes.
//
// MEMORY. One new rank at a time: its slice of every state variable (4 bytes per element and
// variable, ceil(N / world) elements), plus, while a source store is read, the source pieces
// that cross the slice's edges (at most one source rank's range of one variable). Not the
// whole model: N may exceed host memory.
//
// FAILURE. A failure after DST was touched removes what this call created there: DST itself
// when the call created it, else the entries it made inside it (DST was empty). A killed
// process can leave stores without records; resume() refuses such a set, and a new reshard
// needs DST removed first.
#ifndef CSDKIT_RUNTIME_RESHARD_H_
#define CSDKIT_RUNTIME_RESHARD_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "csdkit/hls/mode.h"

namespace csdkit {

/// The format member of a partition record.
inline constexpr const char* kPartitionFormat = "csdkit-zero-partition-1";

/// One rank's element range [begin, end) of the flattened model.
struct RankSlice {
  uint64_t begin = 0, end = 0;
};

/// The partition rule: each rank's slice of `total` elements over `world` ranks. Throws
/// std::invalid_argument (naming `what`, the ranks that would own nothing and the largest
/// world that works) when a rank would own no element.
std::vector<RankSlice> PartitionSlices(uint64_t total, uint64_t world,
                                       const std::string& what = "world");

struct ReshardOptions {
  std::string src;  ///< the set to read (only read)
  std::string dst;  ///< where the new set goes: absent or an empty directory
  int64_t world = 0;  ///< the new world size, >= 1
  /// Devices per new rank store, 1..256; nullopt = as the source's rank 0 store.
  std::optional<int64_t> devices;
  /// Device memory per device the new stores are sized for: their subgroup size is the largest
  /// that fits it (SubgroupForMemory), at most 1 Mi elements — what a trainer session picks.
  uint64_t device_mem = uint64_t{4} << 30;
  /// The new stores' state format (docs/state-formats.md); nullopt = the source's. Converting
  /// dequantizes the source's moments (a q8 set) and quantizes them for a q8 set, theta rounded
  /// to bf16 by nearest even for q8-bf16, as a state import does (state_io.h).
  std::optional<hls::StateFmt> state;
};

/// One new rank of a reshard.
struct ReshardRank {
  uint64_t rank = 0;
  uint64_t begin = 0, end = 0;  ///< its element range
  std::string store;            ///< DST/rank-<r>
  std::string record;           ///< DST/rank-<r>.json
};

struct ReshardResult {
  std::string src, dst;         ///< absolute paths
  int64_t step = 0;             ///< the committed step of every new store (the source's)
  uint64_t total_elements = 0;  ///< N
  uint64_t source_world = 0;
  unsigned source_devices = 0;  ///< the source rank 0 store's device count
  unsigned devices = 0;         ///< each new store's device count
  std::string optimizer;
  std::vector<std::string> vars;  ///< the state variables carried over: theta, then m and/or v
  std::string source_state, state;  ///< the state formats of the source and of the new set
  std::vector<ReshardRank> ranks;

  nlohmann::json ToJson() const;
};

/// Re-splits the set under o.src into a new set under o.dst (see the top of this file).
ReshardResult Reshard(const ReshardOptions& o);

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_RESHARD_H_
