// Ops without a lowering: a clear NotImplementedError by default, or, when the user
// opts in, a CPU run (copy in, run, copy out) that is counted and warned about once.
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <set>

#include "aten/registration.h"
#include "runtime/metrics.h"

namespace torch_tpu::aten {

namespace {

std::atomic<bool> fallback_enabled{false};

}  // namespace

void tpu_fallback_because(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          const char* missing) {
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(
      fallback_enabled.load(), "The operator '", name,
      "' is not currently implemented for the tpu device: torch_tpu has no lowering for ", missing,
      ". "
      "As a temporary fix, you can enable the CPU fallback with "
      "torch_tpu.set_cpu_fallback(True) or the environment variable TORCH_TPU_CPU_FALLBACK=1 "
      "to run this op on the CPU (copying its inputs and outputs), which is slow.");
  runtime::metrics().count_fallback(name);
  {
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(name).second) {
      TORCH_WARN("torch_tpu: the operator '", name,
                 "' has no tpu lowering and falls back to the CPU; this is slow.");
    }
  }
  at::native::cpu_fallback(op, stack);
}

namespace {

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  tpu_fallback_because(op, stack, "it");
}

}  // namespace

void set_cpu_fallback(bool enabled) { fallback_enabled = enabled; }
bool cpu_fallback_enabled() { return fallback_enabled.load(); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

}  // namespace torch_tpu::aten
