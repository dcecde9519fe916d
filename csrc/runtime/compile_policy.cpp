#include "runtime/compile_policy.h"

#include <cctype>
#include <cstdlib>
#include <limits>

#include "runtime/settings.h"

namespace torch_tpu::runtime {

int64_t largest_tensor(const std::string& mlir) {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  static const std::string kTensor = "tensor<";
  int64_t largest = 0;
  for (size_t at = mlir.find(kTensor); at != std::string::npos; at = mlir.find(kTensor, at)) {
    at += kTensor.size();
    // "tensor<4x?x8xf32>": dims are digits or '?' followed by 'x'; the element type ends it.
    int64_t count = 1;
    while (at < mlir.size()) {
      size_t end = at;
      while (end < mlir.size() && std::isdigit(static_cast<unsigned char>(mlir[end]))) ++end;
      const bool dynamic = end == at && mlir[at] == '?';
      if (dynamic) end = at + 1;
      if (end == at || end >= mlir.size() || mlir[end] != 'x') break;  // the element type
      if (dynamic) {
        count = kUnbounded;
      } else if (count != kUnbounded) {
        const int64_t dim = std::strtoll(mlir.c_str() + at, nullptr, 10);
        count = dim != 0 && count > kUnbounded / dim ? kUnbounded : count * dim;
      }
      at = end + 1;
    }
    if (count > largest) largest = count;
  }
  return largest;
}

std::vector<pjrt::OptionOverride> fast_compile_overrides(int64_t level, bool cpu_platform) {
  std::vector<pjrt::OptionOverride> options{{kOptimizationLevel, level}};
  if (cpu_platform) {
    options.push_back({kFusionEmitters, false});
    // The older emitters honour this flag, whose default lets max/min drop a NaN
    // (hardsigmoid(NaN) was 0); the fusion emitters always propagate it, as PyTorch does.
    options.push_back({kFastMinMax, false});
  }
  return options;
}

int64_t fast_compile_elements() {
  static const int64_t limit = *settings::integer("TORCH_TPU_FAST_COMPILE_ELEMENTS");
  return limit;
}

}  // namespace torch_tpu::runtime
