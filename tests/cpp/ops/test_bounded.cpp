// ops/bounded.h: the bucket rule, which views of a padded storage read at the bound, and
// that a padded read followed by concatenation, a reduction and static_along gives the
// real-size results.
#include "ops/bounded.h"
#include "../test_support.h"

namespace torch_tpu {
namespace {

using hlo::Builder;
using hlo::DType;
using hlo::Value;

TEST(Buckets, DefaultRuleAndMultiples) {
  EXPECT_EQ(ops::bucket(1, -1), 8);
  EXPECT_EQ(ops::bucket(8, -1), 8);
  EXPECT_EQ(ops::bucket(9, -1), 16);
  EXPECT_EQ(ops::bucket(1024, -1), 1024);
  EXPECT_EQ(ops::bucket(1025, -1), 1152);
  EXPECT_EQ(ops::bucket(11, 10), 20);
  EXPECT_EQ(ops::bucket(11, 0), 11);
}

TEST(Buckets, SafeOpsAreListedAndOthersAreNot) {
  EXPECT_TRUE(ops::bucket_safe("cat"));
  EXPECT_TRUE(ops::bucket_safe("logsumexp"));
  EXPECT_FALSE(ops::bucket_safe("mean.dim"));  // divides by the bound
  EXPECT_FALSE(ops::bucket_safe("cumsum"));
  EXPECT_FALSE(ops::bucket_safe("bernoulli"));
}

// A [2, n, 3] tensor stored in a [2, 8, 3] box, n = 5; dimension 1 varies.
const std::vector<int64_t> kLogical = {2, 5, 3}, kPhysical = {2, 8, 3}, kDynamic = {1};

TEST(PaddedRead, WholePermutedMergedAndBroadcastViews) {
  auto whole = ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 5, 3}, {15, 3, 1}, 0);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->bound, (std::vector<int64_t>{2, 8, 3}));
  EXPECT_EQ(whole->probe, (std::vector<int64_t>{2, 9, 3}));
  EXPECT_EQ(whole->real, (std::vector<int64_t>{5}));
  // transpose(1, 2)
  auto t = ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 3, 5}, {15, 1, 3}, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bound, (std::vector<int64_t>{2, 3, 8}));
  EXPECT_EQ(t->permutation, (std::vector<int64_t>{0, 2, 1}));
  // [2, n * 3]: the dynamic dimension is the outer one of the merge
  auto merged = ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 15}, {15, 1}, 0);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->bound, (std::vector<int64_t>{2, 24}));
  EXPECT_EQ(merged->probe, (std::vector<int64_t>{2, 27}));
  // unsqueeze + expand
  auto wide = ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 4, 5, 3}, {15, 0, 3, 1}, 0);
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->bound, (std::vector<int64_t>{2, 4, 8, 3}));
}

TEST(PaddedRead, SlicesAndInnerMergesAreRefused) {
  // x[:, 1:]: a slice, not the whole tensor
  EXPECT_FALSE(ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 4, 3}, {15, 3, 1}, 3));
  // x[:, :, 0]: drops elements
  EXPECT_FALSE(ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 5}, {15, 3}, 0));
  // [2 * n, 3]: would merge the dynamic dimension inside another
  EXPECT_FALSE(ops::plan_padded_read(kLogical, kPhysical, kDynamic, {10, 3}, {3, 1}, 0));
  // a padded dimension that is not marked dynamic
  EXPECT_FALSE(ops::plan_padded_read(kLogical, kPhysical, {}, {2, 5, 3}, {15, 3, 1}, 0));
}

TEST(PhysicalView, SlicesMoveIntoThePaddedBuffer) {
  // x[1, 2:4, :] of the logical [2, 5, 3]: offset 15 + 6 = 21 there, 24 + 6 = 30 padded
  auto v = ops::physical_view(kLogical, kPhysical, {2, 3}, {3, 1}, 21);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->offset, 30);
  EXPECT_EQ(v->strides, (std::vector<int64_t>{3, 1}));
  // x.transpose(0, 1): strides 15 and 3 become 24 and 3
  auto t = ops::physical_view(kLogical, kPhysical, {5, 2, 3}, {3, 15, 1}, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->strides, (std::vector<int64_t>{3, 24, 1}));
  // x.view(2, 15): one step crosses rows, which the padding breaks up
  EXPECT_FALSE(ops::physical_view(kLogical, kPhysical, {2, 15}, {15, 1}, 0));
}

// cat([x, y], 1) with x read at the bound (n = 5 of 8) and y a static [2, 1, 3], then
// the sum over dimension 1 and the concatenation made static at 8: the real values.
TEST(PaddedRead, ConcatenationAndReductionAtTheBoundAreExact) {
  std::vector<float> storage(2 * 8 * 3, 1000.0f);  // padding: values that must not count
  std::vector<float> y_data = {-1, -2, -3, -4, -5, -6};
  for (int i = 0; i < 2; ++i)
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 3; ++c)
        storage[(i * 8 + r) * 3 + c] = static_cast<float>(i * 100 + r * 10 + c);
  auto plan = ops::plan_padded_read(kLogical, kPhysical, kDynamic, {2, 5, 3}, {15, 3, 1}, 0);
  ASSERT_TRUE(plan);
  Builder b;
  Value flat = b.parameter({DType::F32, {48}});
  Value n = b.parameter({DType::S32, {}});
  Value y = b.parameter({DType::F32, {2, 1, 3}});
  Value x = ops::lower_padded_read(b, flat, {n}, *plan);
  Value cat = b.concatenate({x, y}, 1);  // [2, 9, 3] at the bound, 6 rows real
  Value sum = b.reduce(cat, b.constant(0, DType::F32), {1}, hlo::Binary::Add);
  Value plain = ops::static_along(b, cat, 1, 8);
  auto out = test::run(b, {sum, plain},
                       {test::upload(storage, {48}).get(), test::upload<int32_t>({5}, {}).get(),
                        test::upload(y_data, {2, 1, 3}).get()});
  std::vector<float> sums = test::download<float>(*out.at(0));
  std::vector<float> rows = test::download<float>(*out.at(1));
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < 3; ++c) {
      float want = y_data[i * 3 + c];
      for (int r = 0; r < 5; ++r) want += static_cast<float>(i * 100 + r * 10 + c);
      EXPECT_EQ(sums[i * 3 + c], want) << i << "," << c;
      for (int r = 0; r < 5; ++r)
        EXPECT_EQ(rows[(i * 8 + r) * 3 + c], static_cast<float>(i * 100 + r * 10 + c));
      EXPECT_EQ(rows[(i * 8 + 5) * 3 + c], y_data[i * 3 + c]);  // y follows the real rows
    }
}

}  // namespace
}  // namespace torch_tpu
