#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "runtime/compile_policy.h"

namespace torch_tpu {
namespace {

using runtime::largest_tensor;

TEST(CompilePolicy, LargestTensorOfAModule) {
  const std::string mlir =
      "func.func public @main(%v0: tensor<4x8xf32>, %v1: tensor<i64>) -> (tensor<2x3x5xbf16>) {\n"
      "  %v2 = \"stablehlo.reshape\"(%v0) : (tensor<4x8xf32>) -> tensor<32xf32>\n";
  EXPECT_EQ(largest_tensor(mlir), 32);
  EXPECT_EQ(largest_tensor("tensor<f32>"), 1);  // a scalar
  EXPECT_EQ(largest_tensor("no tensors"), 0);
  EXPECT_EQ(largest_tensor("tensor<0x7xf32>"), 0);
  // A bounded dynamic dimension counts as unbounded, and products never overflow.
  EXPECT_EQ(largest_tensor("tensor<?x8xf32, #stablehlo.bounds<16, ?>>"),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(largest_tensor("tensor<4294967296x4294967296x4xi8>"),
            std::numeric_limits<int64_t>::max());
  // Element types with digits (i64, f16, ui8) are not dims.
  EXPECT_EQ(largest_tensor("tensor<3xi64> tensor<5xui8> tensor<2x2xf16>"), 5);
}

// Fast compiles set the level; on XLA:CPU they also go without the fusion emitters.
TEST(CompilePolicy, FastCompileOverrides) {
  auto cpu = runtime::fast_compile_overrides(1, /*cpu_platform=*/true);
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_EQ(cpu[0].name, runtime::kOptimizationLevel);
  EXPECT_EQ(std::get<int64_t>(cpu[0].value), 1);
  EXPECT_EQ(cpu[1].name, runtime::kFusionEmitters);
  EXPECT_FALSE(std::get<bool>(cpu[1].value));
  EXPECT_EQ(cpu[2].name, runtime::kFastMinMax);
  EXPECT_FALSE(std::get<bool>(cpu[2].value));
  auto other = runtime::fast_compile_overrides(0, /*cpu_platform=*/false);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(other[0].value), 0);
}

}  // namespace
}  // namespace torch_tpu
