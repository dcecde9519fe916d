// Which XLA compile options a program gets. XLA:CPU spends most of a small program's
// compile time in LLVM's optimization passes (about 70% of ~90 ms for a one-op program),
// which buy nothing when every tensor is small enough for the run to be dispatch-bound:
// such programs compile at backend optimization level 0 (docs/performance.md has the
// compile and run times this rule was chosen from).
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu::runtime {

// The element count of the largest tensor type written in `mlir` (a dynamic dimension
// counts as unbounded: INT64_MAX).
int64_t largest_tensor(const std::string& mlir);

// TORCH_TPU_FAST_COMPILE_ELEMENTS: programs whose largest tensor has at most this many
// elements compile with the fast options (default 65536; 0 turns the rule off).
int64_t fast_compile_elements();

}  // namespace torch_tpu::runtime
