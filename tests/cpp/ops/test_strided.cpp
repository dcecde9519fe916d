#include <cstring>

#include "ops/strided.h"
#include "../test_support.h"

namespace torch_tpu {
namespace {

using hlo::Builder;
using hlo::DType;
using hlo::Value;
using ops::StridedLayout;
using Kind = StridedLayout::Kind;
using test::download;
using test::upload;

// The storage of a 4x5 row-major tensor x with x.flatten()[i] == i.
std::vector<float> base() {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i) v[i] = static_cast<float>(i);
  return v;
}

struct View {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

// Reads `view` of base() with the offset passed as a runtime operand; `layout` defaults
// to classify()'s answer for the view.
std::vector<float> read(const View& view, int64_t run_offset) {
  StridedLayout layout = ops::classify(view.sizes, view.strides, view.offset, 20);
  Builder b;
  Value flat = b.parameter({DType::F32, {20}});
  Value offset = b.parameter({DType::S64, {}});
  Value out = ops::lower_strided_read(b, flat, offset, view.sizes, view.strides, layout);
  EXPECT_EQ(out.type.shape, view.sizes);
  auto data = upload(base(), {20});
  auto off = upload<int64_t>({run_offset}, {});
  return test::run1<float>(b, out, {data.get(), off.get()});
}
std::vector<float> read(const View& view) { return read(view, view.offset); }

// The whole new storage after writing 100, 101, ... (row-major over the view) into `view`.
std::vector<float> write(const View& view) {
  StridedLayout layout = ops::classify(view.sizes, view.strides, view.offset, 20);
  int64_t n = 1;
  for (int64_t s : view.sizes) n *= s;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = 100.0f + static_cast<float>(i);
  Builder b;
  Value flat = b.parameter({DType::F32, {20}});
  Value offset = b.parameter({DType::S64, {}});
  Value v = b.parameter({DType::F32, view.sizes});
  Value out = ops::lower_strided_write(b, flat, offset, view.sizes, view.strides, layout, v);
  EXPECT_EQ(out.type.shape, (std::vector<int64_t>{20}));
  auto data = upload(base(), {20});
  auto off = upload<int64_t>({view.offset}, {});
  auto vals = upload(values, view.sizes);
  return test::run1<float>(b, out, {data.get(), off.get(), vals.get()});
}

// base() with positions[k] replaced by 100 + k.
std::vector<float> base_with(const std::vector<int>& positions) {
  std::vector<float> v = base();
  for (size_t k = 0; k < positions.size(); ++k) v[positions[k]] = 100.0f + static_cast<float>(k);
  return v;
}

const View kTranspose{{5, 4}, {1, 5}, 0};     // x.t()
const View kSlice{{2, 3}, {5, 1}, 7};         // x[1:3, 2:5]
const View kSliceAtEnd{{2, 3}, {5, 1}, 12};   // x[2:4, 2:5]: the window runs past the end
const View kStep{{4, 3}, {5, 2}, 0};          // x[:, ::2]
const View kRowExpand{{3, 5}, {0, 1}, 5};     // x[1:2].expand(3, 5)
const View kColumnExpand{{4, 3}, {5, 0}, 2};  // x[:, 2:3].expand(4, 3)

TEST(Classify, Kinds) {
  EXPECT_EQ(ops::classify({4, 5}, {5, 1}, 0, 20).kind, Kind::Dense);
  EXPECT_EQ(ops::classify({4, 1, 5}, {5, 7, 1}, 0, 20).kind, Kind::Dense);  // size-1 stride ignored
  EXPECT_EQ(ops::classify({4, 5}, {5, 1}, 0, 40).kind, Kind::Strided);      // part of the storage
  EXPECT_EQ(ops::classify(kTranspose.sizes, kTranspose.strides, 0, 20).kind, Kind::Strided);
  EXPECT_EQ(ops::classify(kSlice.sizes, kSlice.strides, 7, 20).kind, Kind::Strided);
  EXPECT_EQ(ops::classify(kRowExpand.sizes, kRowExpand.strides, 5, 20).kind, Kind::Strided);
  EXPECT_EQ(ops::classify({4, 3}, {6, 2}, 0, 24).kind, Kind::Strided);  // x[:, ::2] of 4x6
  EXPECT_EQ(ops::classify(kStep.sizes, kStep.strides, 0, 20).kind, Kind::Gather);  // 5 % 2 != 0
  EXPECT_EQ(ops::classify({3, 3}, {1, 1}, 0, 9).kind, Kind::Gather);
  EXPECT_EQ(ops::classify({0, 5}, {5, 1}, 0, 20).kind, Kind::Empty);
  EXPECT_EQ(ops::classify({3, 0}, {1, 1}, 4, 0).kind, Kind::Empty);
}

TEST(Classify, PadOnlyWhenTheWindowRunsPastTheEnd) {
  EXPECT_EQ(ops::classify(kTranspose.sizes, kTranspose.strides, 0, 20).pad, 0);
  EXPECT_EQ(ops::classify(kSlice.sizes, kSlice.strides, 7, 20).pad, 0);  // window 7..16
  // Window of 2 rows of 5 from 12 is 12..21; the view ends at 19: pad 10 - 8 = 2.
  EXPECT_EQ(ops::classify(kSliceAtEnd.sizes, kSliceAtEnd.strides, 12, 20).pad, 2);
  // Window of 4 rows of 5 from 2 is 2..21; the view ends at 17: pad 20 - 16 = 4.
  EXPECT_EQ(ops::classify(kColumnExpand.sizes, kColumnExpand.strides, 2, 20).pad, 4);
}

TEST(StridedRead, Dense) { EXPECT_EQ(read({{4, 5}, {5, 1}, 0}), base()); }

TEST(StridedRead, Transpose) {
  EXPECT_EQ(read(kTranspose), (std::vector<float>{0,  5,  10, 15, 1,  6,  11, 16, 2,  7,
                                                  12, 17, 3,  8,  13, 18, 4,  9,  14, 19}));
}

TEST(StridedRead, SliceWithRuntimeOffset) {
  EXPECT_EQ(read(kSlice), (std::vector<float>{7, 8, 9, 12, 13, 14}));
  // The same program serves x[0:2, 1:4]: only the offset operand changes.
  EXPECT_EQ(read(kSlice, 1), (std::vector<float>{1, 2, 3, 6, 7, 8}));
}

TEST(StridedRead, SliceThatNeedsPadding) {
  EXPECT_EQ(read(kSliceAtEnd), (std::vector<float>{12, 13, 14, 17, 18, 19}));
}

TEST(StridedRead, SteppedSlice) {
  EXPECT_EQ(read(kStep), (std::vector<float>{0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19}));
}

TEST(StridedRead, Expand) {
  EXPECT_EQ(read(kRowExpand), (std::vector<float>{5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7, 8, 9}));
  EXPECT_EQ(read(kColumnExpand), (std::vector<float>{2, 2, 2, 7, 7, 7, 12, 12, 12, 17, 17, 17}));
}

TEST(StridedRead, OverlappingGather) {
  EXPECT_EQ(read({{3, 3}, {1, 1}, 0}), (std::vector<float>{0, 1, 2, 1, 2, 3, 2, 3, 4}));
}

TEST(StridedRead, SizeOneDimsAnyStride) {
  // x.t()[:, 1:2] and x[1][None, :, None] with arbitrary strides on the size-1 dims.
  EXPECT_EQ(read({{5, 1}, {1, 5}, 5}), (std::vector<float>{5, 6, 7, 8, 9}));
  EXPECT_EQ(read({{1, 5, 1}, {99, 1, 7}, 5}), (std::vector<float>{5, 6, 7, 8, 9}));
}

TEST(StridedRead, ScalarElement) { EXPECT_EQ(read({{}, {}, 13}), (std::vector<float>{13})); }

TEST(StridedRead, EmptyHasTheViewShape) {
  Builder b;
  Value flat = b.parameter({DType::F32, {20}});
  Value offset = b.parameter({DType::S64, {}});
  StridedLayout layout = ops::classify({0, 5}, {5, 1}, 0, 20);
  Value out = ops::lower_strided_read(b, flat, offset, {0, 5}, {5, 1}, layout);
  auto data = upload(base(), {20});
  auto off = upload<int64_t>({0}, {});
  auto result = test::run(b, {out}, {data.get(), off.get()});
  EXPECT_EQ(result[0]->dims(), (std::vector<int64_t>{0, 5}));
}

TEST(StridedWrite, Dense) {
  std::vector<float> expected(20);
  for (int i = 0; i < 20; ++i) expected[i] = 100.0f + static_cast<float>(i);
  EXPECT_EQ(write({{4, 5}, {5, 1}, 0}), expected);
}

TEST(StridedWrite, Transpose) {
  // View element (i, j) lives at 5j + i and receives 100 + 4i + j.
  EXPECT_EQ(write(kTranspose),
            (std::vector<float>{100, 104, 108, 112, 116, 101, 105, 109, 113, 117,
                                102, 106, 110, 114, 118, 103, 107, 111, 115, 119}));
}

TEST(StridedWrite, Slice) { EXPECT_EQ(write(kSlice), base_with({7, 8, 9, 12, 13, 14})); }

TEST(StridedWrite, SliceThatNeedsPadding) {
  EXPECT_EQ(write(kSliceAtEnd), base_with({12, 13, 14, 17, 18, 19}));
}

TEST(StridedWrite, SteppedSlice) {
  EXPECT_EQ(write(kStep), base_with({0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19}));
}

TEST(StridedWrite, ExpandKeepsTheFirstValueOfBroadcastDims) {
  EXPECT_EQ(write(kRowExpand), base_with({5, 6, 7, 8, 9}));
  // values[i][0] = 100 + 3i goes to x[i][2] = 5i + 2.
  std::vector<float> expected = base();
  for (int i = 0; i < 4; ++i) expected[5 * i + 2] = 100.0f + 3.0f * static_cast<float>(i);
  EXPECT_EQ(write(kColumnExpand), expected);
}

TEST(StridedWrite, ScalarElement) {
  EXPECT_EQ(write({{}, {}, 13}), [] {
    std::vector<float> v = base();
    v[13] = 100;
    return v;
  }());
}

TEST(Reinterpret, F32ToBytesAndBack) {
  const std::vector<float> values = {1.0f, -2.5f, 0.0f};
  std::vector<uint8_t> bytes(12);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  Builder b;
  Value flat = b.parameter({DType::F32, {3}});
  Value u8 = ops::reinterpret_flat(b, flat, DType::U8);
  EXPECT_EQ(u8.type.shape, (std::vector<int64_t>{12}));
  Value f32 = ops::reinterpret_flat(b, u8, DType::F32);
  EXPECT_EQ(f32.type.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(ops::reinterpret_flat(b, flat, DType::F32).id, flat.id);
  auto data = upload(values, {3});
  auto out = test::run(b, {u8, f32}, {data.get()});
  EXPECT_EQ(download<uint8_t>(*out[0]), bytes);
  EXPECT_EQ(download<float>(*out[1]), values);
}

// A complex storage read as floats is its (real, imaginary) pairs, and back: complex
// values cannot be bitcast, so both directions go through the parts.
TEST(Reinterpret, ComplexIsPairsOfItsParts) {
  const std::vector<float> pairs = {1.0f, 2.0f, -3.5f, 0.25f};
  Builder b;
  Value flat = b.parameter({DType::F32, {4}});
  Value z = ops::reinterpret_flat(b, flat, DType::C64);
  EXPECT_EQ(z.type.dtype, DType::C64);
  EXPECT_EQ(z.type.shape, (std::vector<int64_t>{2}));
  Value re = b.real(z), im = b.imag(z);
  Value back = ops::reinterpret_flat(b, z, DType::F32);
  Value as_c128 = ops::reinterpret_flat(b, b.convert(flat, DType::F64), DType::C128);
  EXPECT_EQ(as_c128.type.shape, (std::vector<int64_t>{2}));
  auto data = upload(pairs, {4});
  auto out = test::run(b, {re, im, back, b.imag(as_c128)}, {data.get()});
  EXPECT_EQ(download<float>(*out[0]), (std::vector<float>{1.0f, -3.5f}));
  EXPECT_EQ(download<float>(*out[1]), (std::vector<float>{2.0f, 0.25f}));
  EXPECT_EQ(download<float>(*out[2]), pairs);
  EXPECT_EQ(download<double>(*out[3]), (std::vector<double>{2.0, 0.25}));
}

TEST(Reinterpret, PredGoesThroughBytes) {
  Builder b;
  Value flat = b.parameter({DType::U8, {4}});
  Value pred = ops::reinterpret_flat(b, flat, DType::Pred);
  Value back = ops::reinterpret_flat(b, pred, DType::U8);
  auto data = upload<uint8_t>({0, 1, 2, 0}, {4});
  auto out = test::run(b, {pred, back}, {data.get()});
  EXPECT_EQ(download<uint8_t>(*out[0]), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(download<uint8_t>(*out[1]), (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(Reinterpret, SizeMustDivide) {
  Builder b;
  Value flat = b.parameter({DType::U8, {6}});
  EXPECT_THROW(ops::reinterpret_flat(b, flat, DType::F32), std::invalid_argument);
}

}  // namespace
}  // namespace torch_tpu
