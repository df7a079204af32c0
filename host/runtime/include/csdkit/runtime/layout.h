// A trainer's parameter layout: the model's tensors in order (name, element count, param group),
// flattened in that order into the store's one range of parameters. Each param group starts at
// a sparse-block boundary (a multiple of 65536 elements), so that every kernel launch covers one
// group and runs with that group's hyper-parameters; the gap before a group is padding that no
// tensor owns (its state stays zero). A store created from a layout records its fingerprint and
// refuses to be opened for another layout.
#ifndef CSDKIT_RUNTIME_LAYOUT_H_
#define CSDKIT_RUNTIME_LAYOUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace csdkit {

struct TensorSpec {
  std::string name;
  uint64_t numel = 0;
  unsigned group = 0;
};

class ParamLayout {
 public:
  ParamLayout() = default;
  /// Places the tensors. Throws std::invalid_argument (naming the tensor, what was expected and
  /// what was found) for an empty list, an empty or duplicate name, a tensor of 0 elements, or
  /// groups that are not numbered 0, 1, ... in order with each group's tensors contiguous.
  /// `tensor_align` (1, or 256 for the compressed state formats' blocks) places every tensor at
  /// a multiple of it and makes the total one: the gap after a tensor is padding (its state
  /// stays zero), and a block never holds two tensors.
  explicit ParamLayout(std::vector<TensorSpec> tensors, uint64_t tensor_align = 1);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  /// First flattened element of tensor i.
  uint64_t offset(size_t i) const { return offsets_.at(i); }
  unsigned groups() const { return static_cast<unsigned>(group_begin_.size()); }
  /// Flattened range [begin, end) of group g (begin is a multiple of 65536).
  uint64_t group_begin(unsigned g) const { return group_begin_.at(g); }
  uint64_t group_end(unsigned g) const { return group_end_.at(g); }
  /// Flattened size, padding included: the store's parameter count.
  uint64_t total() const { return total_; }
  /// The group of flattened element i (the padding after a group belongs to it).
  unsigned GroupOf(uint64_t i) const;
  /// The alignment of each tensor's first element (1 or 256).
  uint64_t tensor_align() const { return tensor_align_; }
  /// A digest of the tensors (names, sizes, groups, in order), as 16 hex digits. The alignment
  /// is not part of it: it is the store's (its state format), not the model's.
  std::string Fingerprint() const;

  nlohmann::json ToJson() const;
  /// Throws std::invalid_argument for a malformed description.
  static ParamLayout FromJson(const nlohmann::json& j);

 private:
  std::vector<TensorSpec> tensors_;
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> group_begin_, group_end_;
  uint64_t total_ = 0;
  uint64_t tensor_align_ = 1;
};

}  // namespace csdkit

#endif  // CSDKIT_RUNTIME_LAYOUT_H_
