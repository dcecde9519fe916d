// Which XLA compile options a program gets. XLA:CPU spends much of a small program's
// compile time in LLVM's optimization passes. Measured in process CPU time per compile
// of one-op programs (benchmarks/compile_time.py; docs/performance.md): backend
// optimization level 1 cuts 18% of it at no measurable cost per run, level 0 cuts 38%
// but adds ~20-40 us to every run of the program (it doubles a small program's run time),
// which a training loop pays thousands of times. So programs whose every tensor is small
// compile at level 1; large ones keep XLA's default, whose kernels are what they are for.
//
// On XLA:CPU small programs also go without the MLIR fusion emitters: each compile that
// uses them builds and tears down a pool of MLIR contexts with every dialect loaded, a
// fifth of a small compile's CPU time (perf profile in docs/performance.md). Without them
// a small compile takes ~0.75x the CPU time and runs as fast; large programs would run
// up to 3x slower (concatenate, in-place add), so they keep them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pjrt/compile_options.h"

namespace torch_tpu::runtime {

// The XLA option the rule sets, and the level small programs compile at.
inline constexpr const char* kOptimizationLevel = "xla_backend_optimization_level";
inline constexpr int64_t kFastOptimizationLevel = 1;
inline constexpr const char* kFusionEmitters = "xla_cpu_use_fusion_emitters";
inline constexpr const char* kFastMinMax = "xla_cpu_enable_fast_min_max";

// The options a program compiled for speed of compiling gets at backend optimization
// `level` (the small-program rule's, or tiered compilation's first tier): the level, and
// on XLA:CPU (`cpu_platform`) no fusion emitters (and NaN-propagating min/max, as with them).
std::vector<pjrt::OptionOverride> fast_compile_overrides(int64_t level, bool cpu_platform);

// The element count of the largest tensor type written in `mlir` (a dynamic dimension
// counts as unbounded: INT64_MAX).
int64_t largest_tensor(const std::string& mlir);

// TORCH_TPU_FAST_COMPILE_ELEMENTS: programs whose largest tensor has at most this many
// elements compile with the fast options (default 65536; 0 turns the rule off).
int64_t fast_compile_elements();

}  // namespace torch_tpu::runtime
