#include "runtime/compile_overrides.h"

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

namespace torch_tpu::runtime {

namespace {

std::mutex global_mutex;
std::map<std::string, pjrt::OptionOverride> global_options;
std::atomic<int64_t> global_version{0};

struct ThreadState {
  std::vector<std::vector<pjrt::OptionOverride>> blocks;
  CompileOverrides merged;
  int64_t merged_version = -1;  // global_version it was merged at; -1: stale
};
thread_local ThreadState state;

std::string value_text(const pjrt::OptionOverride& o) {
  std::ostringstream out;
  out << std::boolalpha;
  std::visit([&](const auto& v) { out << v; }, o.value);
  return out.str();
}

}  // namespace

const CompileOverrides& current_overrides() {
  const int64_t version = global_version.load(std::memory_order_acquire);
  if (state.merged_version == version) return state.merged;
  std::map<std::string, pjrt::OptionOverride> all;
  {
    std::lock_guard<std::mutex> lock(global_mutex);
    all = global_options;
  }
  for (const auto& block : state.blocks)
    for (const auto& o : block) all[o.name] = o;
  CompileOverrides merged;
  uint64_t h = 14695981039346656037ULL;
  for (auto& [name, o] : all) {
    merged.text += (merged.text.empty() ? "" : "; ") + name + "=" + value_text(o);
    merged.options.push_back(o);
  }
  for (char c : merged.text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  merged.id = merged.text.empty() ? 0 : static_cast<int64_t>(h | 1);
  state.merged = std::move(merged);
  state.merged_version = version;
  return state.merged;
}

void push_overrides(std::vector<pjrt::OptionOverride> options) {
  state.blocks.push_back(std::move(options));
  state.merged_version = -1;
}

void pop_overrides() {
  if (!state.blocks.empty()) state.blocks.pop_back();
  state.merged_version = -1;
}

void set_global_override(pjrt::OptionOverride option, bool set) {
  std::lock_guard<std::mutex> lock(global_mutex);
  if (set)
    global_options[option.name] = std::move(option);
  else
    global_options.erase(option.name);
  global_version.fetch_add(1, std::memory_order_release);
}

}  // namespace torch_tpu::runtime
