#include "csdkit/platform/device.h"

#include <stdexcept>
#include <string>

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

const char* BufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::kState: return "state";
    case BufferRole::kStream: return "stream";
  }
  return "?";
}

BufferRole UpdateBufferRole(const hls::ArgInfo& a) {
  // Every buffer of the table is listed: a buffer added to the table lands in the throw below
  // until someone decides whether P2P transfers reach it.
  if (a.kind == hls::ArgKind::kPtr) {
    switch (a.index) {
      case update_arg::theta:
      case update_arg::m:
      case update_arg::v:
      case update_arg::m_absmax:  // q8: the moments' absmax values live in the store too
      case update_arg::v_absmax:
        return BufferRole::kState;
      case update_arg::grad:
      case update_arg::sp_idx:
      case update_arg::sp_blk:
      case update_arg::out16:
      case update_arg::status:
        return BufferRole::kStream;
      default:
        break;
    }
  }
  throw std::invalid_argument(std::string("buffer role of csd_update argument ") + a.name +
                              ": expected one of the table's buffer arguments (theta, m, v, "
                              "grad, sp_idx, sp_blk, out16, status), found " +
                              (a.kind == hls::ArgKind::kPtr ? "a buffer with no role assigned "
                                                              "in UpdateBufferRole"
                                                            : "a scalar"));
}

void RequireP2PRole(BufferRole found, const std::string& device, const char* op) {
  if (found == BufferRole::kState) return;
  throw std::invalid_argument(std::string(op) + " on " + device + ": expected a " +
                              BufferRoleName(BufferRole::kState) + " buffer, found a " +
                              BufferRoleName(found) + " buffer (P2P transfers reach only device "
                              "memory allocated with BufferRole::kState; allocate the buffer "
                              "with that role, or move its bytes with HostToDevice/DeviceToHost)");
}

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
