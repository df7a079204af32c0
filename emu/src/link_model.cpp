#include "csdkit/emu/link_model.h"

#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>

namespace csdkit::emu {

nlohmann::json LinkProfile::ToJson() const {
  return {{"ssd_read_gbs", ssd_read / 1e9},
          {"ssd_write_gbs", ssd_write / 1e9},
          {"uplink_gbs", uplink / 1e9},
          {"kernel_ddr_gbs", kernel_ddr / 1e9},
          {"host_update_gbs", host_update / 1e9},
          {"ssd_shared_channel", ssd_shared_channel}};
}

LinkModel::LinkModel(const LinkProfile& p, unsigned devices) : p_(p), devices_(devices) {
  if (!(p.ssd_read > 0) || !(p.ssd_write > 0) || !(p.uplink > 0) || !(p.kernel_ddr > 0) ||
      !(p.host_update > 0)) {
    throw std::invalid_argument("link profile: expected positive bandwidths, found ssd_read " +
                                std::to_string(p.ssd_read) + ", ssd_write " +
                                std::to_string(p.ssd_write) + ", uplink " +
                                std::to_string(p.uplink) + ", kernel_ddr " +
                                std::to_string(p.kernel_ddr) + ", host_update " +
                                std::to_string(p.host_update));
  }
}

void LinkModel::Record(VirtualClock* vc, std::initializer_list<Hold> holds, double seconds) {
  if (vc == nullptr) return;  // outside every worker's schedule (see the header)
  Op op{};
  op.nres = 0;
  for (const Hold& h : holds) {
    op.res[op.nres] = h.res;
    op.hold[op.nres] = h.seconds;
    ++op.nres;
    seconds = std::max(seconds, h.seconds);
  }
  op.seconds = seconds;
  op.delay = vc->now;  // the worker's own time since its last operation
  vc->now = 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  ops_[vc->worker].push_back(op);
  ++count_;
}

void LinkModel::BookTransfer(unsigned d, Link link, uint64_t bytes, VirtualClock* vc) {
  if (d >= devices_) {
    throw std::out_of_range("link model: expected a device below " + std::to_string(devices_) +
                            ", found " + std::to_string(d));
  }
  // Transfers are booked in chunks of kChunkBytes (the last one shorter), as an I/O engine
  // issues them: between the chunks of one worker's transfer, other workers' chunks take their
  // turn on a shared resource, so concurrent transfers share it instead of one holding it.
  for (uint64_t done = 0; done < bytes || (bytes == 0 && done == 0);) {
    const uint64_t part = std::min<uint64_t>(kChunkBytes, bytes - done);
    const double b = static_cast<double>(part);
    switch (link) {
      case Link::kSsdToFpga:
        Record(vc, {{SsdRead(d), b / p_.ssd_read}});
        break;
      case Link::kFpgaToSsd:
        Record(vc, {{SsdWrite(d), b / p_.ssd_write}});
        break;
      case Link::kHostToDevice:
        Record(vc, {{UplinkDown(), b / p_.uplink}});
        break;
      case Link::kDeviceToHost:
        Record(vc, {{UplinkUp(), b / p_.uplink}});
        break;
      case Link::kNvmeToHost:
        Record(vc, {{SsdRead(d), b / p_.ssd_read}, {UplinkUp(), b / p_.uplink}});
        break;
      case Link::kHostToNvme:
        Record(vc, {{SsdWrite(d), b / p_.ssd_write}, {UplinkDown(), b / p_.uplink}});
        break;
    }
    if (bytes == 0) break;
    done += part;
  }
}

void LinkModel::BookKernel(unsigned d, uint64_t bytes, VirtualClock* vc) {
  if (d >= devices_) {
    throw std::out_of_range("link model: expected a device below " + std::to_string(devices_) +
                            ", found " + std::to_string(d));
  }
  Record(vc, {{Kernel(d), static_cast<double>(bytes) / p_.kernel_ddr}});
}

void LinkModel::BookHost(uint64_t bytes, VirtualClock* vc) {
  Record(vc, {}, static_cast<double>(bytes) / p_.host_update);
}

double LinkModel::Horizon() const {
  std::lock_guard<std::mutex> lock(mu_);
  // The discrete-event schedule of RECORD, THEN SCHEDULE: a min-heap of (clock, worker).
  std::vector<double> free_at(3 * devices_ + 2, 0.0);
  struct Cursor {
    const std::vector<Op>* ops;
    size_t next;
  };
  std::map<unsigned, Cursor> cur;
  using Entry = std::tuple<double, unsigned>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (const auto& [w, ops] : ops_) {
    if (ops.empty()) continue;
    cur[w] = Cursor{&ops, 0};
    ready.push({ops[0].delay, w});
  }
  double horizon = 0.0;
  while (!ready.empty()) {
    const auto [clock, w] = ready.top();
    ready.pop();
    Cursor& c = cur[w];
    const Op& op = (*c.ops)[c.next];
    double start = clock;
    for (uint8_t i = 0; i < op.nres; ++i) start = std::max(start, free_at[op.res[i]]);
    const double end = start + op.seconds;
    for (uint8_t i = 0; i < op.nres; ++i) free_at[op.res[i]] = start + op.hold[i];
    horizon = std::max(horizon, end);
    if (++c.next < c.ops->size()) ready.push({end + (*c.ops)[c.next].delay, w});
  }
  // Own time a worker added to its clock after its last operation is not in the window (the
  // scheduler books all of its work, host computation included, as operations).
  return horizon;
}

uint64_t LinkModel::Operations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void LinkModel::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  ops_.clear();
  count_ = 0;
}

}  // namespace csdkit::emu
