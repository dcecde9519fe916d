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
#define TORCH_TPU_METRIC_RESET(name, doc) name = 0;
  TORCH_TPU_METRICS(TORCH_TPU_METRIC_RESET)
#undef TORCH_TPU_METRIC_RESET
  std::lock_guard<std::mutex> lock(mutex_);
  fallbacks_.clear();
}

Metrics& metrics() {
  static Metrics instance;
  return instance;
}

}  // namespace torch_tpu::runtime
