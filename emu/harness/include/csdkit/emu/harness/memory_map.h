// MemoryMap: the device's 64-bit byte address space as a list of regions, each backed by host
// memory the bench owns. The AXI memory slaves of all bundles usually share one map (on the
// card every bundle reaches the same DDR), so a buffer written through one bundle can be read
// through another.
#ifndef CSDKIT_EMU_HARNESS_MEMORY_MAP_H_
#define CSDKIT_EMU_HARNESS_MEMORY_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

namespace csdkit {
namespace emu {

class MemoryMap {
 public:
  /// One mapped range [base, base + size) of device addresses and the host bytes behind it.
  struct Region {
    uint64_t base;
    uint64_t size;
    uint8_t* host;
    std::string name;
  };

  /// Maps [base, base + size) onto `host` (size bytes, owned by the caller, must outlive the
  /// map's users). Throws SimError for an empty or wrapping range or one that overlaps a
  /// mapped region.
  void Map(uint64_t base, uint64_t size, void* host, const std::string& name = "");
  /// Removes the region that starts at `base`; throws SimError if there is none.
  void Unmap(uint64_t base);
  void Clear() { regions_.clear(); }

  /// The region holding all of [addr, addr + len), or nullptr (len 0 is treated as 1).
  const Region* Find(uint64_t addr, uint64_t len) const;
  /// Host pointer of device address `addr` when [addr, addr + len) lies in one region, else
  /// nullptr.
  uint8_t* Translate(uint64_t addr, uint64_t len) const;
  /// The regions, for error messages ("0x1000-0x1fff theta, ...").
  std::string Describe() const;
  const std::vector<Region>& regions() const { return regions_; }

 private:
  std::vector<Region> regions_;  // sorted by base
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_MEMORY_MAP_H_
