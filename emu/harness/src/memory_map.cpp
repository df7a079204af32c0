#include "csdkit/emu/harness/memory_map.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "csdkit/emu/harness/sim.h"

namespace csdkit {
namespace emu {

namespace {

std::string Range(uint64_t base, uint64_t size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64 "-0x%" PRIx64, base, base + size - 1);
  return buf;
}

}  // namespace

void MemoryMap::Map(uint64_t base, uint64_t size, void* host, const std::string& name) {
  if (size == 0 || host == nullptr) {
    throw SimError("MemoryMap::Map(" + name + "): empty region or no host memory");
  }
  if (base + size - 1 < base) {
    throw SimError("MemoryMap::Map(" + name + "): region wraps past the 64-bit address space");
  }
  for (const Region& r : regions_) {
    if (base <= r.base + r.size - 1 && r.base <= base + size - 1) {
      throw SimError("MemoryMap::Map: " + Range(base, size) + " (" + name + ") overlaps " +
                     Range(r.base, r.size) + " (" + r.name + ")");
    }
  }
  regions_.push_back(Region{base, size, static_cast<uint8_t*>(host), name});
  std::sort(regions_.begin(), regions_.end(),
            [](const Region& a, const Region& b) { return a.base < b.base; });
}

void MemoryMap::Unmap(uint64_t base) {
  for (auto it = regions_.begin(); it != regions_.end(); ++it) {
    if (it->base == base) {
      regions_.erase(it);
      return;
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, base);
  throw SimError(std::string("MemoryMap::Unmap: no region starts at ") + buf);
}

const MemoryMap::Region* MemoryMap::Find(uint64_t addr, uint64_t len) const {
  if (len == 0) len = 1;
  const uint64_t last = addr + len - 1;
  if (last < addr) return nullptr;
  // Last region starting at or below addr.
  auto it = std::upper_bound(regions_.begin(), regions_.end(), addr,
                             [](uint64_t a, const Region& r) { return a < r.base; });
  if (it == regions_.begin()) return nullptr;
  --it;
  if (last <= it->base + it->size - 1) return &*it;
  return nullptr;
}

uint8_t* MemoryMap::Translate(uint64_t addr, uint64_t len) const {
  const Region* r = Find(addr, len);
  return r == nullptr ? nullptr : r->host + (addr - r->base);
}

std::string MemoryMap::Describe() const {
  if (regions_.empty()) return "(nothing mapped)";
  std::string s;
  for (const Region& r : regions_) {
    if (!s.empty()) s += ", ";
    s += Range(r.base, r.size);
    if (!r.name.empty()) s += " " + r.name;
  }
  return s;
}

}  // namespace emu
}  // namespace csdkit
