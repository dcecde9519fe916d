// Which XLA compile options a program gets. XLA:CPU spends much of a small program's
// compile time in LLVM's optimization passes. Measured in process CPU time per compile
// of one-op programs (benchmarks/compile_time.py; docs/performance.md): backend
// optimization level 1 cuts 18% of it at no measurable cost per run, level 0 cuts 38%
// but adds ~20-40 us to every run of the program (it doubles a small program's run time),
// which a training loop pays thousands of times. So programs whose every tensor is small
// compile at level 1; large ones keep XLA's default, whose kernels are what they are for.
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu::runtime {

// The XLA option the rule sets, and the level small programs compile at.
inline constexpr const char* kOptimizationLevel = "xla_backend_optimization_level";
inline constexpr int64_t kFastOptimizationLevel = 1;

// The element count of the largest tensor type written in `mlir` (a dynamic dimension
// counts as unbounded: INT64_MAX).
int64_t largest_tensor(const std::string& mlir);

// TORCH_TPU_FAST_COMPILE_ELEMENTS: programs whose largest tensor has at most this many
// elements compile with the fast options (default 65536; 0 turns the rule off).
int64_t fast_compile_elements();

}  // namespace torch_tpu::runtime
