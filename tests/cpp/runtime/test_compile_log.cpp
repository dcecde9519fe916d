#include <gtest/gtest.h>

#include <string>

#include "hlo/builder.h"
#include "runtime/compile_log.h"

namespace torch_tpu {
namespace {

using runtime::CompileLog;
using runtime::DiskOutcome;

TEST(CompileLogTest, SignatureOfAModule) {
  hlo::Builder b;
  hlo::Value x = b.parameter({hlo::DType::F32, {3, 4}});
  hlo::Value k = b.parameter({hlo::DType::S64, {}});
  hlo::Value c = b.parameter({hlo::DType::C64, {2}});
  b.alias_output(x, 0);
  std::string mlir = b.module({x, k, c});
  EXPECT_EQ(CompileLog::signature(mlir), "f32[3,4], i64[], complex<f32>[2]");
  EXPECT_EQ(CompileLog::signature({{hlo::DType::BF16, {2, 1, 5}}, {hlo::DType::Pred, {}}}),
            "bf16[2,1,5], i1[]");
}

TEST(CompileLogTest, LongSignaturesKeepTheirHead) {
  std::vector<hlo::TensorType> types(20, {hlo::DType::F32, {2}});
  EXPECT_EQ(CompileLog::signature(types),
            "f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], f32[2], ... (20 arguments)");
}

TEST(CompileLogTest, ReasonsFollowWhatWasBuilt) {
  CompileLog& log = CompileLog::get();
  const std::string op = "compile_log_test_op";
  EXPECT_EQ(log.reason(op, "f32[3]", false), "new program");
  log.add({op, "f32[3]", "new program", DiskOutcome::miss, 0.01});
  EXPECT_EQ(log.reason(op, "f32[3]", false), "new attributes");
  EXPECT_EQ(log.reason(op, "f32[4]", false), "new shape");
  EXPECT_EQ(log.reason(op, "i32[3]", false), "new dtype");
  EXPECT_EQ(log.reason(op, "f32[3]", true), "evicted");
  auto records = log.records();
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().what, op);
  EXPECT_EQ(records.back().from_disk(), false);
}

TEST(CompileLogTest, ForbiddenCompilesThrowNamingWhatAndWhy) {
  CompileLog& log = CompileLog::get();
  log.check_allowed("mul", "f32[2]", "new shape", DiskOutcome::miss);  // allowed
  log.forbid();
  log.forbid();
  log.allow();
  try {
    log.check_allowed("mul", "f32[2]", "new shape", DiskOutcome::miss);
    ADD_FAILURE() << "no exception";
  } catch (const runtime::CompileForbidden& e) {
    EXPECT_NE(
        std::string(e.what()).find("mul (f32[2]) needs an XLA compile (new shape, disk miss)"),
        std::string::npos)
        << e.what();
  }
  log.allow();
  log.check_allowed("mul", "f32[2]", "new shape", DiskOutcome::miss);
}

}  // namespace
}  // namespace torch_tpu
