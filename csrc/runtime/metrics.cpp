#include "runtime/metrics.h"

namespace torch_tpu::runtime {

void Metrics::count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++fallbacks_[op];
}

std::map<std::string, int64_t> Metrics::fallbacks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fallbacks_;
}

void Metrics::reset() {
  compiles = 0;
  compile_ns = 0;
  cache_hits = 0;
  cache_misses = 0;
  cache_evictions = 0;
  executions = 0;
  host_to_device_bytes = 0;
  device_to_host_bytes = 0;
  graphs = 0;
  graph_runs = 0;
  graph_fallbacks = 0;
  graph_splits = 0;
  graph_build_ns = 0;
  fused_ops = 0;
  fused_groups = 0;
  donated_bytes = 0;
  host_staged_collectives = 0;
  host_staged_bytes = 0;
  in_program_collectives = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  fallbacks_.clear();
}

Metrics& metrics() {
  static Metrics instance;
  return instance;
}

}  // namespace torch_tpu::runtime
