#include "csdkit/runtime/sizing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "csdkit/hls/sparse.h"
#include "csdkit/platform/update_launch.h"

namespace csdkit {

uint32_t SubgroupForMemory(uint64_t device_mem, const OptimizerConfig& hyper, DType grad,
                           DType out, uint64_t shard_elems) {
  // Per element on the device, per worker: what the scheduler allocates (the footprint of a
  // sparse launch that keeps every element: state, the gradient values, the 2-byte index
  // stream, the low-precision copy), measured on one block; the block table and the status
  // word are per launch, in the reserve.
  GradSpec gs;
  gs.grad = grad;
  gs.out = out;
  gs.sparse = true;
  const KernelLaunch k = MakeLaunch(hyper, gs, 1);
  const UpdateFootprint f = LaunchFootprint(k.mode, hls::kBlockElems, hls::kBlockElems);
  const uint64_t per = (f.total() - f[update_arg::sp_blk] - f[update_arg::status]) /
                       hls::kBlockElems;
  const uint64_t reserve = 1u << 20;  // status words, block tables, alignment
  if (device_mem <= 2 * reserve) {
    throw std::invalid_argument("device memory: expected more than 2 MiB, found " +
                                std::to_string(device_mem) + " bytes");
  }
  uint64_t s = (device_mem - 2 * reserve) / (2 * per);
  s = s / hls::kBlockElems * hls::kBlockElems;
  if (s == 0) {
    throw std::invalid_argument(
        "device memory: expected room for two subgroups of at least 65536 elements (" +
        std::to_string(2 * per * hls::kBlockElems + 2 * reserve) + " bytes), found " +
        std::to_string(device_mem));
  }
  const uint64_t shard_up = (shard_elems + hls::kBlockElems - 1) / hls::kBlockElems * hls::kBlockElems;
  s = std::min<uint64_t>({s, shard_up, 0x80000000ull});
  return static_cast<uint32_t>(std::max<uint64_t>(s, hls::kBlockElems));
}

uint32_t DefaultSubgroup(uint64_t device_mem, const OptimizerConfig& hyper, DType grad,
                         DType out, uint64_t shard_elems) {
  return std::min<uint32_t>(SubgroupForMemory(device_mem, hyper, grad, out, shard_elems),
                            4u << 20);
}

uint32_t SubgroupForState(uint32_t subgroup, hls::StateFmt state) {
  constexpr uint32_t kWholeRegions = 262144;  // 1024 blocks: 4096 bytes of absmax values
  if (hls::IsQ8(state) && subgroup >= kWholeRegions) return subgroup / kWholeRegions * kWholeRegions;
  return subgroup;
}

}  // namespace csdkit
