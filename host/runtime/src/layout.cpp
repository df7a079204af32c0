#include "csdkit/runtime/layout.h"

#include <cstdio>
#include <set>
#include <stdexcept>

#include "csdkit/hls/sparse.h"
#include "csdkit/platform/splitmix.h"

namespace csdkit {

ParamLayout::ParamLayout(std::vector<TensorSpec> tensors, uint64_t tensor_align)
    : tensors_(std::move(tensors)), tensor_align_(tensor_align) {
  if (tensor_align_ != 1 && tensor_align_ != 256) {
    throw std::invalid_argument("parameter layout: tensor alignment: expected 1 or 256, found " +
                                std::to_string(tensor_align_));
  }
  if (tensors_.empty()) {
    throw std::invalid_argument("parameter layout: expected at least one tensor, found none");
  }
  std::set<std::string> names;
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& t = tensors_[i];
    const std::string what = "parameter layout: tensor " + std::to_string(i) +
                             (t.name.empty() ? std::string() : " '" + t.name + "'");
    if (t.name.empty()) throw std::invalid_argument(what + ": expected a name, found none");
    if (!names.insert(t.name).second) {
      throw std::invalid_argument(what + ": expected unique names, found it twice");
    }
    if (t.numel == 0) throw std::invalid_argument(what + ": expected elements, found 0");
    const unsigned g = static_cast<unsigned>(group_begin_.size());
    if (t.group == g) {
      // A new group starts at the next block boundary.
      if (g > 0) group_end_.push_back(pos);
      pos = (pos + hls::kBlockElems - 1) / hls::kBlockElems * hls::kBlockElems;
      group_begin_.push_back(pos);
    } else if (g == 0 || t.group != g - 1) {
      throw std::invalid_argument(what + ": expected param group " +
                                  std::to_string(g == 0 ? 0 : g - 1) + " or " +
                                  std::to_string(g) + " (groups numbered in order, each group's "
                                  "tensors together), found group " + std::to_string(t.group));
    }
    pos = (pos + tensor_align_ - 1) / tensor_align_ * tensor_align_;
    offsets_.push_back(pos);
    if (t.numel > (uint64_t{1} << 48) - pos) {
      throw std::invalid_argument(what + ": expected at most 2^48 parameters in all, found more");
    }
    pos += t.numel;
  }
  group_end_.push_back(pos);
  total_ = (pos + tensor_align_ - 1) / tensor_align_ * tensor_align_;
}

unsigned ParamLayout::GroupOf(uint64_t i) const {
  unsigned g = 0;
  while (g + 1 < groups() && i >= group_begin_[g + 1]) ++g;
  return g;
}

std::string ParamLayout::Fingerprint() const {
  uint64_t h = 0x6373646b69746c61ull;  // "csdkitla"
  auto mix = [&h](uint64_t x) { h = SplitMixHash(h ^ x); };
  for (const TensorSpec& t : tensors_) {
    mix(t.name.size());
    for (unsigned char c : t.name) mix(c);
    mix(t.numel);
    mix(t.group);
  }
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

nlohmann::json ParamLayout::ToJson() const {
  nlohmann::json ts = nlohmann::json::array();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    ts.push_back({{"name", tensors_[i].name},
                  {"numel", tensors_[i].numel},
                  {"group", tensors_[i].group},
                  {"offset", offsets_[i]}});
  }
  nlohmann::json j{{"tensors", ts}, {"total", total_}, {"fingerprint", Fingerprint()}};
  if (tensor_align_ != 1) j["tensor_align"] = tensor_align_;
  return j;
}

ParamLayout ParamLayout::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("tensors") || !j["tensors"].is_array()) {
    throw std::invalid_argument("parameter layout: expected an object with a 'tensors' list");
  }
  std::vector<TensorSpec> ts;
  for (const auto& t : j["tensors"]) {
    const std::string what = "parameter layout: tensor " + std::to_string(ts.size());
    const auto count = [&](const char* key, uint64_t hi) {
      if (!t.is_object() || !t.contains(key) || !t[key].is_number_unsigned() ||
          t[key].get<uint64_t>() > hi) {
        throw std::invalid_argument(what + ": expected '" + key + "' an integer in [0, " +
                                    std::to_string(hi) + "], found " +
                                    (t.is_object() && t.contains(key) ? t[key].dump() : "none"));
      }
      return t[key].get<uint64_t>();
    };
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      throw std::invalid_argument(what + ": expected a 'name' string");
    }
    ts.push_back({t["name"].get<std::string>(), count("numel", uint64_t{1} << 48),
                  static_cast<unsigned>(count("group", UINT32_MAX))});
  }
  uint64_t align = 1;
  if (j.contains("tensor_align")) {
    if (!j["tensor_align"].is_number_unsigned()) {
      throw std::invalid_argument("parameter layout: expected 'tensor_align' 1 or 256, found " +
                                  j["tensor_align"].dump());
    }
    align = j["tensor_align"].get<uint64_t>();
  }
  ParamLayout l(std::move(ts), align);
  if (j.contains("fingerprint") && j["fingerprint"] != l.Fingerprint()) {
    throw std::invalid_argument("parameter layout: expected fingerprint " + l.Fingerprint() +
                                " for these tensors, found " + j["fingerprint"].dump());
  }
  return l;
}

}  // namespace csdkit
