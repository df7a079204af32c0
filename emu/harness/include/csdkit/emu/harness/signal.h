// Type-erased handles on the ports of a Verilated model, so the harness binds to any top's
// port names without being compiled against its header.
//
// Verilator stores a port of 1-8 bits as uint8_t (CData), 9-16 as uint16_t, 17-32 as uint32_t,
// 33-64 as uint64_t and wider ports as VlWide<N> (N 32-bit words, word 0 = bits 31:0). Sig wraps
// the first four, WideSig the last; both are built from the port member itself, e.g.
// Sig(top->m_axi_gmem0_ARVALID), WideSig(top->m_axi_gmem0_RDATA).
#ifndef CSDKIT_EMU_HARNESS_SIGNAL_H_
#define CSDKIT_EMU_HARNESS_SIGNAL_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace csdkit {
namespace emu {

/// A port of up to 64 bits.
class Sig {
 public:
  /// Unbound: bound() is false, Get() returns 0, Set() does nothing.
  Sig() = default;

  /// Binds a Verilated port stored as an unsigned integer (CData, SData, IData or QData).
  template <typename T, typename = std::enable_if_t<std::is_integral<T>::value>>
  explicit Sig(T& port) : p_(&port), bytes_(sizeof(T)) {
    static_assert(std::is_unsigned<T>::value && sizeof(T) <= 8,
                  "Sig binds a port of at most 64 bits; use WideSig for wider ports");
  }

  bool bound() const { return p_ != nullptr; }

  /// The port's value (0 when unbound).
  uint64_t Get() const {
    switch (bytes_) {
      case 1: return *static_cast<const uint8_t*>(p_);
      case 2: return *static_cast<const uint16_t*>(p_);
      case 4: return *static_cast<const uint32_t*>(p_);
      case 8: return *static_cast<const uint64_t*>(p_);
      default: return 0;
    }
  }

  /// Drives an input port; the value must fit the port's declared width.
  void Set(uint64_t v) const {
    switch (bytes_) {
      case 1: *static_cast<uint8_t*>(p_) = static_cast<uint8_t>(v); break;
      case 2: *static_cast<uint16_t*>(p_) = static_cast<uint16_t>(v); break;
      case 4: *static_cast<uint32_t*>(p_) = static_cast<uint32_t>(v); break;
      case 8: *static_cast<uint64_t*>(p_) = v; break;
      default: break;
    }
  }

 private:
  void* p_ = nullptr;
  unsigned bytes_ = 0;
};

/// A port wider than 64 bits (VlWide<N>): N little-endian 32-bit words.
class WideSig {
 public:
  WideSig() = default;

  /// Binds a Verilated wide port (anything with data() returning 32-bit words, like VlWide).
  template <typename W, typename = std::enable_if_t<!std::is_same<W, WideSig>::value>>
  explicit WideSig(W& port)
      : p_(reinterpret_cast<uint32_t*>(port.data())), words_(sizeof(W) / sizeof(uint32_t)) {
    static_assert(sizeof(*port.data()) == sizeof(uint32_t), "wide ports are 32-bit words");
  }

  bool bound() const { return p_ != nullptr; }
  unsigned words() const { return words_; }
  unsigned bytes() const { return words_ * 4u; }

  /// Copies the port's bytes (byte k = bits 8k+7:8k) to `out` (bytes() bytes).
  void Get(uint8_t* out) const { std::memcpy(out, p_, bytes()); }
  /// Drives the port from `in` (bytes() bytes).
  void Set(const uint8_t* in) const { std::memcpy(p_, in, bytes()); }
  /// Word access.
  uint32_t* data() const { return p_; }

 private:
  uint32_t* p_ = nullptr;
  unsigned words_ = 0;
};

}  // namespace emu
}  // namespace csdkit

#endif  // CSDKIT_EMU_HARNESS_SIGNAL_H_
