#include "csdkit/platform/device.h"

namespace csdkit {

const char* LinkName(Link l) {
  switch (l) {
    case Link::kSsdToFpga: return "ssd_to_fpga";
    case Link::kFpgaToSsd: return "fpga_to_ssd";
    case Link::kHostToDevice: return "host_to_device";
    case Link::kDeviceToHost: return "device_to_host";
    case Link::kNvmeToHost: return "nvme_to_host";
    case Link::kHostToNvme: return "host_to_nvme";
  }
  return "?";
}

bool IsSharedLink(Link l) { return l != Link::kSsdToFpga && l != Link::kFpgaToSsd; }

LinkBytes& LinkBytes::operator+=(const LinkBytes& o) {
  for (unsigned i = 0; i < kNumLinks; ++i) bytes[i] += o.bytes[i];
  return *this;
}

LinkBytes LinkBytes::operator-(const LinkBytes& o) const {
  LinkBytes r;
  for (unsigned i = 0; i < kNumLinks; ++i) r.bytes[i] = bytes[i] - o.bytes[i];
  return r;
}

uint64_t LinkBytes::Shared() const {
  uint64_t s = 0;
  for (unsigned i = 0; i < kNumLinks; ++i)
    if (IsSharedLink(static_cast<Link>(i))) s += bytes[i];
  return s;
}

nlohmann::json LinkBytes::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (unsigned i = 0; i < kNumLinks; ++i) j[LinkName(static_cast<Link>(i))] = bytes[i];
  j["shared_total"] = Shared();
  return j;
}

LinkBytes DeviceGroup::bytes() const {
  LinkBytes b;
  for (unsigned k = 0; k < size(); ++k) b += device(k).bytes();
  return b;
}

}  // namespace csdkit
