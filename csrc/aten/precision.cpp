#include "aten/precision.h"

#include <ATen/Context.h>

#include <vector>

namespace torch_tpu::aten {

namespace {
thread_local std::vector<hlo::Precision> overrides;
}

hlo::Precision matmul_precision() {
  if (!overrides.empty()) return overrides.back();
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return hlo::Precision::Highest;
    case at::Float32MatmulPrecision::HIGH: return hlo::Precision::High;
    case at::Float32MatmulPrecision::MEDIUM: return hlo::Precision::Default;
  }
  return hlo::Precision::Highest;
}

void push_precision(hlo::Precision p) { overrides.push_back(p); }

void pop_precision() {
  if (!overrides.empty()) overrides.pop_back();
}

}  // namespace torch_tpu::aten
