// The optimizer-state store: one directory per device (its NVMe namespace), per-variable shard
// files in two slots, and a manifest that names the committed step.
//
//   D/manifest.json            format, model size, shards, subgroup size, optimizer and
//                              hyper-parameters, dtypes, committed step and slot, and a CRC-32
//                              per (device, variable, subgroup) of the committed slot
//   D/dev<k>/device.json       the device's identity: store id and index (refuses mixed-up dirs)
//   D/dev<k>/<array>.<slot>.bin  one file per state array (StateArray) and slot in {0, 1}:
//                              fp32 stores: theta, m, v (those the optimizer has), the shard's
//                              elements as little-endian binary32, padded to 4096; q8 stores
//                              (docs/state-formats.md): theta (binary32, or bf16 in q8-bf16),
//                              m and v as one code byte per element, and m.absmax, v.absmax
//                              with each subgroup's binary32 absmax values (one per block of
//                              256) in a 4096-aligned region of its own
//
// COMMIT PROTOCOL. A commit reads the committed slot s and writes slot 1 - s only; when every
// shard is written, the written files are fdatasync'ed, then manifest.json.tmp (the new step
// number, slot 1 - s, new checksums) is written and fsync'ed, renamed over manifest.json, and the
// directory fsync'ed. A crash at any instant leaves the manifest naming either the old state
// (whose slot was never touched) or the new one (whose slot is durable): never a mix, and no
// byte moved beyond the commit's own reads and writes. An optimizer step commits step t + 1; a
// state import (state_io.h) commits the step number it brings. Files are created 0600.
//
// ROLLBACK. Each commit also records in the manifest ("previous") the state it replaced: its
// step, slot, checksums and hyper-parameters, whose slot the commit did not touch. RollBack()
// reads that slot whole and checks it against those checksums (a step that started after the
// commit writes into that very slot: killed before its own commit, it leaves the earlier state
// partly overwritten, and the rollback is refused), then commits it again (a manifest rename; no
// shard byte written), so that a group of
// stores that a crash left at steps t and t + 1 can all return to t. One step back only: the
// rolled-back manifest has no "previous" (its other slot holds the abandoned newer state, which
// the next commit overwrites). Manifests written before this member existed have none.
//
// ONE WRITER. Opening a store for writing (Create, Open with StoreAccess::kWrite) takes an
// exclusive flock on the store directory D itself, opening it for reading a shared one, both
// without waiting: a second writer — in this process or another — or a writer beside a reader is
// refused with a StoreError naming the holders (from /proc/locks). No file inside D takes part,
// so nothing a user deletes there admits a second writer; a commit checks that D still names the
// locked directory. The lock is released when the Store object is destroyed (or its process
// dies). Store files are opened without following symbolic links (O_NOFOLLOW): a link in their
// place is refused, never written through.
#ifndef CSDKIT_RUNTIME_STORE_H_
#define CSDKIT_RUNTIME_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/file.h"
#include "csdkit/platform/optimizer.h"
#include "csdkit/runtime/layout.h"

namespace csdkit {

/// A store that cannot be used: missing, truncated, mismatched or corrupt. The message names
/// the file, what was expected and what was found.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What `csdkit init` fixes for the life of a store.
struct StoreConfig {
  uint64_t params = 0;
  unsigned devices = 1;
  OptimizerConfig hyper;
  DType grad = DType::kFp16;
  DType out = DType::kFp16;
  bool ftz = false;
  double loss_scale = 1.0;
  uint32_t subgroup_elems = 0;  // multiple of 65536 (sparse blocks, 4096-byte alignment)
  uint64_t seed = 1;
  /// How the state is kept (docs/state-formats.md), fixed at creation: fp32, q8 or q8-bf16.
  hls::StateFmt state = hls::StateFmt::kFp32;

  nlohmann::json ToJson() const;
  static StoreConfig FromJson(const nlohmann::json& j);
};

/// How a Store is opened: kWrite (steps, imports; one at a time) or kRead (describe, verify,
/// export; any number at a time, never beside a writer).
enum class StoreAccess { kWrite, kRead };

/// One device's contiguous range of the flattened parameters.
struct Shard {
  unsigned device = 0;
  uint64_t begin = 0, end = 0;  // global element range
  uint64_t size() const { return end - begin; }
};

/// Subgroup j of a shard: elements [begin, begin + n) of the shard (shard-relative).
struct Subgroup {
  unsigned device = 0;
  uint32_t index = 0;
  uint64_t begin = 0;  // shard-relative first element
  uint32_t n = 0;
  unsigned group = 0;  // the param group all its elements belong to
  uint64_t file_offset() const { return begin * 4; }
  /// Bytes transferred for one variable: 4n rounded up to 4096 (O_DIRECT).
  uint64_t io_bytes() const { return (static_cast<uint64_t>(n) * 4 + 4095) / 4096 * 4096; }
};

/// One array of the state as the store keeps it: a file per (device, slot) and a buffer per
/// launch. An fp32 store has one per variable (theta, m, v, binary32); a q8 store has theta
/// (binary32, or bf16 in q8-bf16) and per moment its codes (named as the variable, one byte per
/// element) and its absmax values ("m.absmax", "v.absmax": binary32, one per block of 256).
struct StateArray {
  std::string name;
  unsigned var = 0;         // the variable it belongs to (index in Store::vars())
  bool absmax = false;      // one value per block (else one per element)
  unsigned elem_bytes = 4;  // bytes per element (absmax: per block)
  unsigned arg = 0;         // the launch buffer it binds to (update_arg::theta .. v_absmax)
};

/// Where one subgroup's bytes of an array lie in its file: `bytes` of data at `offset`, read
/// and written as `io_bytes` (rounded up to 4096 for O_DIRECT).
struct ArrayExtent {
  uint64_t offset = 0, bytes = 0, io_bytes = 0;
};

class Store {
 public:
  /// Creates a store in `dir` (created; must be empty or absent) with a deterministic initial
  /// state (theta uniform in [-0.05, 0.05) from the seed, m = 0, v = 0 or Adagrad's initial
  /// accumulator value) committed as step 0. Throws StoreError / std::invalid_argument.
  static Store Create(const std::string& dir, const StoreConfig& cfg,
                      const aio::AioConfig& aio = aio::AioConfig());
  /// Creates a store for a trainer's model: cfg.params is set to the layout's flattened size,
  /// theta is the trainer's `weights` (`weight_dtype` elements in layout order, tensor after
  /// tensor with no padding; fp16/bf16 widened exactly), m = 0 and v = 0 (Adagrad: its group's
  /// initial accumulator value). `groups` gives each param group's hyper-parameters (their
  /// optimizer must be cfg.hyper.opt); shards are whole sparse blocks, and no subgroup spans two
  /// groups. Throws StoreError / std::invalid_argument; creates nothing on a bad argument.
  static Store CreateForModel(const std::string& dir, const StoreConfig& cfg,
                              const ParamLayout& layout,
                              const std::vector<OptimizerConfig>& groups, const void* weights,
                              DType weight_dtype, const aio::AioConfig& aio = aio::AioConfig());
  /// Opens an existing store: takes its lock (see ONE WRITER), parses and cross-checks the
  /// manifest, checks every device directory's identity and every file's presence and size.
  /// Throws StoreError.
  static Store Open(const std::string& dir, StoreAccess access = StoreAccess::kWrite);
  /// Opens a store of a model: refuses (StoreError naming both fingerprints) a store created for
  /// another layout, or one created without a layout.
  static Store Open(const std::string& dir, const ParamLayout& expected,
                    StoreAccess access = StoreAccess::kWrite);

  /// Checks a manifest's content — format, manifest_crc, configuration (CheckStoreConfig's
  /// ranges, integers that are integers), layout, per-group hyper-parameters, committed step
  /// and slot, shards, variables, one CRC per subgroup — and returns a store object holding it,
  /// with no directory, lock or file (Open adds them). Reads no file; never allocates more than
  /// the manifest's own size. Throws StoreError naming `where` and the field.
  static Store FromManifest(const nlohmann::json& manifest, const std::string& where);
  /// A planning store, for null devices (emu/.../null_device.h): the configuration, shards,
  /// subgroups and state variables Create would give, with no directory, lock, file or state.
  /// Its per-subgroup checksums are those of zeros (what a null device's memory reads as), its
  /// files are unopened placeholders that only a null device accepts, and Commit advances the
  /// step in memory. Nothing it holds grows with the parameter count beyond one CRC per
  /// (device, variable, subgroup). Throws std::invalid_argument for a bad configuration (as
  /// Create). `csdkit step --backend null` plans a real store's next steps on PlanCopy().
  static Store Plan(const StoreConfig& cfg);
  /// A planning store with this store's configuration, layout, shards, per-group
  /// hyper-parameters, committed step and slot (see Plan); this store is not touched.
  Store PlanCopy() const;
  /// True for a store from Plan or PlanCopy.
  bool planning() const { return planning_; }

  /// CRC-32 of a manifest's content without its "manifest_crc" member, as 8 hex digits.
  static std::string ManifestCrc(nlohmann::json manifest);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& dir() const { return dir_; }
  const StoreConfig& config() const { return cfg_; }
  int64_t step() const { return step_; }
  /// The slot (0 or 1) of the committed state; a commit writes the other one.
  unsigned slot() const { return slot_; }
  StoreAccess access() const { return access_; }
  const std::vector<Shard>& shards() const { return shards_; }
  /// The state variables the optimizer keeps: theta, then m and/or v.
  const std::vector<std::string>& vars() const { return vars_; }
  /// The arrays the variables are kept in, in file order (fp32 stores: one per variable, in
  /// the same order; q8 stores: a moment's codes, then its absmax values).
  const std::vector<StateArray>& arrays() const { return arrays_; }
  /// The store's state format (config().state).
  hls::StateFmt state() const { return cfg_.state; }
  /// Where subgroup g's bytes of array a are in the array's files.
  ArrayExtent Extent(unsigned a, const Subgroup& g) const;
  /// The bytes of elements [lo, hi) of a subgroup within its extent of array a, as (offset,
  /// length): lo * elem_bytes etc., and for absmax arrays the blocks (lo and hi must then be
  /// multiples of 256; std::logic_error otherwise).
  std::pair<uint64_t, uint64_t> ArrayRange(unsigned a, uint32_t lo, uint32_t hi) const;
  /// The buffer a launch needs for array a: the largest subgroup's io_bytes.
  uint64_t ArrayBufferBytes(unsigned a) const;
  /// The size of array a's file on device d.
  uint64_t ArrayFileBytes(unsigned d, unsigned a) const;
  /// A variable's checksum of subgroup g from the CRCs of its arrays (in arrays() order): the
  /// CRC-32 of their bytes one after the other (a q8 moment: its codes, then its absmax values),
  /// as the kernel's status lanes report it.
  uint32_t VarChecksum(unsigned var, const Subgroup& g, const uint32_t* array_crcs) const;
  /// The arrays of variable `var`, in order.
  std::vector<unsigned> ArraysOf(unsigned var) const;
  /// The model's layout (stores created by CreateForModel), else nullptr.
  const ParamLayout* layout() const { return has_layout_ ? &layout_ : nullptr; }
  /// Hyper-parameters per param group as the last committed step used them (at step 0: as
  /// created). A store without a layout has one group: config().hyper.
  const std::vector<OptimizerConfig>& group_hyper() const { return group_hyper_; }
  /// Per tensor of the layout, the steps it has taken: torch.optim's per-parameter `step`,
  /// counted in the commits where the tensor had a gradient (a step leaves a tensor without
  /// one, and its count, as they were). Bias correction (Adam, AdamW), Adagrad's lr decay and
  /// SGD's first step use the tensor's count. Equal to step() for every tensor that had a
  /// gradient in every step; empty for a store without a layout (its one count is step()).
  /// The manifest lists only the tensors whose count differs from the committed step.
  const std::vector<int64_t>& tensor_steps() const { return tensor_steps_; }
  std::vector<Subgroup> Subgroups(unsigned device) const;
  /// Subgroups(device).size(), without building the list.
  uint64_t SubgroupCount(unsigned device) const;
  /// Every subgroup of every device.
  std::vector<Subgroup> AllSubgroups() const;
  /// The open O_DIRECT file of an array's slot on a device (an unopened placeholder in a
  /// planning store). `array` indexes arrays() (in an fp32 store, the variable's index).
  const aio::File& file(unsigned device, unsigned array, unsigned slot) const;
  /// CRC-32 of a subgroup of a variable in the committed slot (VarChecksum's).
  uint32_t checksum(unsigned device, unsigned var, uint32_t subgroup) const;
  std::string FilePath(unsigned device, unsigned array, unsigned slot) const;

  /// Per (device, var, subgroup) checksums of a slot being written.
  using Checksums = std::vector<std::vector<std::vector<uint32_t>>>;
  Checksums EmptyChecksums() const;

  /// fdatasyncs every file of slot 1 - slot() (the first half of Commit).
  void SyncNextSlot();
  /// Makes slot 1 - slot() durable and commits it with `crcs` (see the protocol) as step
  /// `step` (default: step() + 1; >= 0), recording the hyper-parameters it used per group
  /// (`used`; nullptr = unchanged) and each tensor's step count (`tensor_steps`: one per tensor
  /// of the layout, each in [0, the new step]; nullptr = every tensor at the new step).
  /// std::invalid_argument for a bad count (nothing committed); std::logic_error on a store
  /// opened for reading.
  void Commit(const Checksums& crcs, const std::vector<OptimizerConfig>* used = nullptr,
              std::optional<int64_t> step = std::nullopt,
              const std::vector<int64_t>* tensor_steps = nullptr);
  /// Whether the manifest records the state the last commit replaced (see ROLLBACK), and its
  /// committed step (-1 when none).
  bool can_roll_back() const { return has_previous_; }
  int64_t previous_step() const { return has_previous_ ? prev_step_ : -1; }
  /// Commits the state the last commit replaced again (see ROLLBACK): step previous_step(), its
  /// slot, checksums and hyper-parameters. StoreError when there is none, when that slot no
  /// longer holds it (a later step's writes reached it: the first bad subgroup is named) or the
  /// manifest changed behind this writer; std::logic_error on a store opened for reading.
  void RollBack(const aio::AioConfig& aio = aio::AioConfig());
  /// After a Commit: empty, or why the commit — done, since the manifest was renamed — may not
  /// survive a power loss (the directory sync after the rename failed). The step is committed
  /// either way; callers report this as a warning, not as a failed step (a retry would step
  /// twice).
  const std::string& durability_warning() const { return durability_warning_; }

  /// Reads the committed slot completely and checks every subgroup's CRC. Throws StoreError
  /// naming the first corrupt (device, variable, subgroup) with expected and found CRC.
  void Verify(const aio::AioConfig& aio = aio::AioConfig()) const;

  nlohmann::json Describe() const;

  /// Test hook: called between the steps of Commit ("synced", "tmp_written", "renamed").
  static void (*commit_hook)(const char* stage);

 private:
  // Reads slot `s` whole and checks it against `crcs`; StoreError (prefix + what + suffix) on
  // the first mismatch.
  void VerifySlot(unsigned s, const Checksums& crcs, const aio::AioConfig& aio,
                  const std::string& prefix, const std::string& suffix) const;
  // A manifest's checksum table ("checksums", or previous's), checked against the layout.
  Checksums ChecksumsFromJson(const nlohmann::json& cj, const std::string& where) const;
  Store() = default;
  /// Creates the files and writes step 0; `init(global_begin, n, var, out)` fills one subgroup
  /// of one variable.
  template <typename Init>
  static Store CreateImpl(const std::string& dir, const StoreConfig& cfg, const ParamLayout* layout,
                          std::vector<OptimizerConfig> groups, const aio::AioConfig& aio,
                          Init&& init);
  template <typename Fn>
  void ForEachSubgroup(unsigned device, Fn&& fn) const;
  void OpenFiles();
  void WriteManifest(int64_t step, unsigned slot, const Checksums& crcs, bool initial,
                     bool with_previous = false);
  /// StoreError unless the manifest on disk is at step_ / slot_ of this store (see Commit).
  void CheckManifestUnchanged() const;
  void RequireWriter(const char* what) const;

  // A planning store's files (placeholders) and checksums (of zeros); see Plan.
  void MakePlanning();

  std::string dir_;
  std::string store_id_;
  bool planning_ = false;
  StoreConfig cfg_;
  int64_t step_ = 0;
  unsigned slot_ = 0;
  StoreAccess access_ = StoreAccess::kWrite;
  std::shared_ptr<const int> lock_;  // the flock'ed directory D (closed by its deleter)
  std::string durability_warning_;
  std::vector<Shard> shards_;
  std::vector<std::string> vars_;
  std::vector<StateArray> arrays_;
  bool has_layout_ = false;
  ParamLayout layout_;
  std::vector<OptimizerConfig> group_hyper_;
  std::vector<int64_t> tensor_steps_;  // per layout tensor (empty without a layout)
  Checksums crcs_;
  // The state the last commit replaced (ROLLBACK), when the manifest records it.
  bool has_previous_ = false;
  int64_t prev_step_ = 0;
  unsigned prev_slot_ = 0;
  Checksums prev_crcs_;
  std::vector<OptimizerConfig> prev_group_hyper_;
  std::vector<int64_t> prev_tensor_steps_;
  // files_[device][array][slot]
  std::vector<std::vector<std::vector<aio::File>>> files_;
};

/// The state variables an optimizer keeps, in store order: theta, then m and/or v.
std::vector<std::string> StateVariables(const OptimizerConfig& hyper);
/// The arrays that hold `vars` in format `f` (Store::arrays()).
std::vector<StateArray> StateArrays(const std::vector<std::string>& vars, hls::StateFmt f);

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_STORE_H_
