// The device set: one library call that opens N devices of one backend from one spec, and owns
// them, the link model and its virtual clocks. The only place in the kit that constructs a
// device; every command, benchmark, test and the scheduler get their devices from it.
//
//   DeviceSpec spec;              // backend model, 4 GiB per device, link model on
//   spec.count = 4;
//   DeviceSet devices(spec);
//   Scheduler scheduler(store, devices);
#ifndef CSDKIT_SYSTEM_DEVICE_SET_H_
#define CSDKIT_SYSTEM_DEVICE_SET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "csdkit/aio/aio_config.h"
#include "csdkit/aio/io_context.h"
#include "csdkit/emu/link_model.h"
#include "csdkit/emu/rtl_kernel.h"
#include "csdkit/platform/device.h"

namespace csdkit {

namespace emu {
class EmulatedSmartSsd;
}
class OpenClDevice;

/// What runs the kernel.
enum class Backend {
  kModel,   // emulated SmartSSDs, the kernel's host model
  kRtl,     // emulated SmartSSDs, the Verilated RTL behind the AXI harness
  kOpenCl,  // OpenCL devices: a Xilinx card with its xclbin, or any OpenCL 1.2 device (PoCL)
  kNull,    // null devices: no data, no compute; bytes counted and time booked on the link
            // model (planning: emu/.../null_device.h; runs on a planning store, Store::Plan)
};
/// "model", "rtl", "opencl", "null"; Parse throws std::invalid_argument listing them.
Backend ParseBackend(const std::string& s);
const char* BackendName(Backend b);

struct DeviceSpec {
  Backend backend = Backend::kModel;
  unsigned count = 1;   // devices to open
  unsigned first = 0;   // the first device's number: emulated device number, or OpenCL device
                        // index within the platform (device k of the set is first + k)
  /// Device memory per device in bytes (opencl: 0 = what the device reports).
  uint64_t device_mem = uint64_t{4} << 30;
  /// opencl: substring of the platform name ("" = the first platform with devices).
  std::string platform;
  /// The xclbin to load and check: required on a Xilinx card; for emulated devices an
  /// emulated-SmartSSD xclbin ("" = the generated one if `emulation_xclbin`, else none).
  std::string xclbin;
  /// Emulated devices without `xclbin`: load and check the emulated SmartSSD's own xclbin, as
  /// cards load theirs. It is generated into a private temporary directory (under $TMPDIR or
  /// /tmp, mode 0700) and removed once the devices have checked it; nothing is written into a
  /// store.
  bool emulation_xclbin = false;
  /// Emulated and null devices: book every transfer and launch on a SmartSSD link model in
  /// virtual time.
  bool link_model = true;
  emu::LinkProfile links = emu::LinkProfile::SmartSsd();
  aio::AioConfig aio;   // every device's storage engine
  /// Emulated devices: the storage engine's kernel interface (null: libaio). Tests put a
  /// FaultInjectingKernelAio here to fail, shorten or cut chosen requests of a step.
  std::shared_ptr<aio::KernelAio> aio_kernel;
  emu::RtlOptions rtl;  // rtl: memory timing, seed, trace
};

class DeviceSet final : public DeviceGroup {
 public:
  /// Opens spec.count devices. Throws std::invalid_argument for a bad spec (naming the field,
  /// what was expected and what was found) and std::runtime_error when a backend cannot open a
  /// device (no OpenCL platform, a bad xclbin, a build without the RTL).
  explicit DeviceSet(const DeviceSpec& spec);
  ~DeviceSet() override;
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  unsigned size() const override { return static_cast<unsigned>(devices_.size()); }
  Device& device(unsigned k) const override { return *devices_.at(k); }
  Device& operator[](unsigned k) const { return device(k); }
  bool has_link_model() const override { return links_ != nullptr; }
  bool moves_data() const override { return spec_.backend != Backend::kNull; }
  double VirtualHorizon() const override;
  void ResetVirtualTime() override;
  void BookHostCompute(uint64_t bytes, VirtualClock* vc) override;

  const DeviceSpec& spec() const { return spec_; }
  /// Device k as an emulated SmartSSD (backends model and rtl), else nullptr.
  emu::EmulatedSmartSsd* emulated(unsigned k) const;
  /// The link model of the set (emulated and null devices with link_model), else nullptr.
  emu::LinkModel* link_model() const { return links_.get(); }
  /// Device k as an OpenCL device (backend opencl), else nullptr.
  OpenClDevice* opencl(unsigned k) const;
  /// One line per device.
  std::string Describe() const;

 private:
  DeviceSpec spec_;
  std::shared_ptr<emu::LinkModel> links_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace csdkit

#endif  // CSDKIT_SYSTEM_DEVICE_SET_H_
