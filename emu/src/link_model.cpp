#include "csdkit/emu/link_model.h"

#include <algorithm>
#include <stdexcept>

namespace csdkit::emu {

nlohmann::json LinkProfile::ToJson() const {
  return {{"ssd_read_gbs", ssd_read / 1e9},
          {"ssd_write_gbs", ssd_write / 1e9},
          {"uplink_gbs", uplink / 1e9},
          {"kernel_ddr_gbs", kernel_ddr / 1e9}};
}

LinkModel::LinkModel(const LinkProfile& p, unsigned devices)
    : p_(p), ssd_read_(devices), ssd_write_(devices), kernel_(devices) {
  if (p.ssd_read <= 0 || p.ssd_write <= 0 || p.uplink <= 0 || p.kernel_ddr <= 0) {
    throw std::invalid_argument("link profile: expected positive bandwidths");
  }
}

double LinkModel::Book(std::initializer_list<Resource*> rs, double seconds, VirtualClock* vc) {
  std::lock_guard<std::mutex> lock(mu_);
  double start = vc != nullptr ? vc->now : 0.0;
  for (Resource* r : rs) start = std::max(start, r->free_at);
  const double end = start + seconds;
  for (Resource* r : rs) r->free_at = end;
  if (vc != nullptr) vc->now = end;
  horizon_ = std::max(horizon_, end);
  return end;
}

double LinkModel::BookTransfer(unsigned d, Link link, uint64_t bytes, VirtualClock* vc) {
  if (d >= kernel_.size()) throw std::out_of_range("link model: device index out of range");
  const double b = static_cast<double>(bytes);
  switch (link) {
    case Link::kSsdToFpga:
      return Book({&ssd_read_[d]}, b / p_.ssd_read, vc);
    case Link::kFpgaToSsd:
      return Book({&ssd_write_[d]}, b / p_.ssd_write, vc);
    case Link::kHostToDevice:
    case Link::kDeviceToHost:
      return Book({&uplink_}, b / p_.uplink, vc);
    case Link::kNvmeToHost:
      return Book({&ssd_read_[d], &uplink_}, b / std::min(p_.ssd_read, p_.uplink), vc);
    case Link::kHostToNvme:
      return Book({&ssd_write_[d], &uplink_}, b / std::min(p_.ssd_write, p_.uplink), vc);
  }
  return 0.0;
}

double LinkModel::BookKernel(unsigned d, uint64_t bytes, VirtualClock* vc) {
  if (d >= kernel_.size()) throw std::out_of_range("link model: device index out of range");
  return Book({&kernel_[d]}, static_cast<double>(bytes) / p_.kernel_ddr, vc);
}

double LinkModel::Horizon() const {
  std::lock_guard<std::mutex> lock(mu_);
  return horizon_;
}

void LinkModel::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto* v : {&ssd_read_, &ssd_write_, &kernel_})
    for (Resource& r : *v) r.free_at = 0.0;
  uplink_.free_at = 0.0;
  horizon_ = 0.0;
}

}  // namespace csdkit::emu
