#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <stdexcept>

#include "../test_support.h"

namespace torch_tpu {
namespace {

using hlo::Builder;
using hlo::DType;
using hlo::Precision;
using hlo::TensorType;
using hlo::Value;
using test::run1;
using test::upload;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Types, NamesWidthsAndText) {
  EXPECT_STREQ(hlo::mlir_name(DType::Pred), "i1");
  EXPECT_STREQ(hlo::mlir_name(DType::U8), "ui8");
  EXPECT_STREQ(hlo::mlir_name(DType::BF16), "bf16");
  EXPECT_EQ(hlo::byte_width(DType::Pred), 1);
  EXPECT_EQ(hlo::byte_width(DType::F16), 2);
  EXPECT_EQ(hlo::byte_width(DType::S64), 8);
  EXPECT_TRUE(hlo::is_float(DType::BF16));
  EXPECT_TRUE(hlo::is_signed_int(DType::S8));
  EXPECT_TRUE(hlo::is_unsigned_int(DType::U32));
  EXPECT_FALSE(hlo::is_signed_int(DType::Pred));
  EXPECT_EQ((TensorType{DType::F32, {2, 3}}.str()), "tensor<2x3xf32>");
  EXPECT_EQ((TensorType{DType::S64, {}}.str()), "tensor<i64>");
  EXPECT_EQ((TensorType{DType::F32, {2, 0, 3}}.numel()), 0);
  EXPECT_EQ((TensorType{DType::F32, {}}.numel()), 1);
  EXPECT_EQ((TensorType{DType::C64, {2}}.str()), "tensor<2xcomplex<f32>>");
  EXPECT_EQ(hlo::byte_width(DType::C128), 16);
  EXPECT_TRUE(hlo::is_complex(DType::C64));
  EXPECT_FALSE(hlo::is_float(DType::C64));
  EXPECT_EQ(hlo::component(DType::C128), DType::F64);
  EXPECT_EQ(hlo::complex_of(DType::BF16), DType::C64);
}

// To complex, a real value is the real part; from complex, the real part is kept.
TEST(Builder, ComplexConversionsGoThroughTheParts) {
  Builder b;
  Value x = b.parameter({DType::F32, {2}});
  Value z = b.convert(x, DType::C128);
  EXPECT_EQ(z.type.dtype, DType::C128);
  Value w = b.binary(hlo::Binary::Multiply, z, z);  // (x + 0i)^2
  Value re = b.convert(w, DType::S32);
  Value mod = b.unary(hlo::Unary::Abs, b.complex(x, x));
  EXPECT_EQ(mod.type.dtype, DType::F32);
  auto bx = upload<float>({3.0f, -2.0f}, {2});
  auto out = test::run(b, {re, b.imag(w), mod}, {bx.get()});
  EXPECT_EQ(test::download<int32_t>(*out[0]), (std::vector<int32_t>{9, 4}));
  EXPECT_EQ(test::download<double>(*out[1]), (std::vector<double>{0.0, 0.0}));
  auto m = test::download<float>(*out[2]);
  EXPECT_NEAR(m[0], 3.0f * std::sqrt(2.0f), 1e-5);
  EXPECT_NEAR(m[1], 2.0f * std::sqrt(2.0f), 1e-5);
}

TEST(Builder, ModuleTextNamesItsOps) {
  Builder b;
  Value x = b.parameter({DType::F32, {2, 3}});
  Value y = b.parameter({DType::F32, {2, 3}});
  Value s =
      b.reduce(b.binary(hlo::Binary::Add, x, y), b.constant(0, DType::F32), {1}, hlo::Binary::Add);
  std::string text = b.module({s});
  EXPECT_TRUE(contains(text, "func.func public @main(%v0: tensor<2x3xf32>, %v1: tensor<2x3xf32>)"))
      << text;
  EXPECT_TRUE(contains(text, "-> (tensor<2xf32>)")) << text;
  EXPECT_TRUE(contains(text, "\"stablehlo.add\"")) << text;
  EXPECT_TRUE(contains(text, "\"stablehlo.constant\"")) << text;
  EXPECT_TRUE(contains(text, "\"stablehlo.reduce\"")) << text;
  EXPECT_TRUE(contains(text, "dimensions = array<i64: 1>")) << text;
  EXPECT_TRUE(contains(text, "\"func.return\"")) << text;
}

// Opcodes carry their dialect: StableHLO ops and CHLO ops (which XLA expands) alike.
TEST(Builder, OpcodesNameTheirDialect) {
  EXPECT_STREQ(hlo::op_name(hlo::Binary::ShiftRightLogical), "stablehlo.shift_right_logical");
  EXPECT_STREQ(hlo::op_name(hlo::Unary::ExponentialMinusOne), "stablehlo.exponential_minus_one");
  EXPECT_STREQ(hlo::op_name(hlo::Unary::ErfInv), "chlo.erf_inv");
  Builder b;
  Value x = b.parameter({DType::F32, {2}});
  std::string text = b.module({b.unary(hlo::Unary::Erf, b.unary(hlo::Unary::Negate, x)),
                               b.reduce(x, b.constant(1, DType::F32), {0}, hlo::Binary::Multiply)});
  EXPECT_TRUE(contains(text, "\"chlo.erf\"(")) << text;
  EXPECT_TRUE(contains(text, "\"stablehlo.negate\"(")) << text;
  EXPECT_TRUE(contains(text, "\"stablehlo.multiply\"(")) << text;
  Value y = b.parameter({DType::F32, {3}});
  try {
    b.binary(hlo::Binary::Subtract, x, y);
    FAIL() << "mismatched operands";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "subtract operands differ")) << e.what();
  }
  // A CHLO binary op: its name in messages drops the "chlo." dialect too.
  EXPECT_TRUE(contains(b.module({b.binary(hlo::Binary::NextAfter, x, x)}),
                       "\"chlo.next_after\"("));
  try {
    b.binary(hlo::Binary::NextAfter, x, y);
    FAIL() << "mismatched operands";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "next_after operands differ")) << e.what();
  }
}

TEST(Builder, IdentityShapeOpsEmitNothing) {
  Builder b;
  Value x = b.parameter({DType::F32, {2, 3}});
  EXPECT_EQ(b.reshape(x, {2, 3}).id, x.id);
  EXPECT_EQ(b.transpose(x, {0, 1}).id, x.id);
  EXPECT_EQ(b.slice(x, {0, 0}, {2, 3}, {1, 1}).id, x.id);
  EXPECT_EQ(b.broadcast_in_dim(x, {2, 3}, {0, 1}).id, x.id);
  EXPECT_EQ(b.convert(x, DType::F32).id, x.id);
}

TEST(Builder, MismatchedOperandsThrow) {
  Builder b;
  Value x = b.parameter({DType::F32, {2}});
  Value y = b.parameter({DType::F32, {3}});
  Value z = b.parameter({DType::S32, {2}});
  EXPECT_THROW(b.binary(hlo::Binary::Add, x, y), std::invalid_argument);
  EXPECT_THROW(b.binary(hlo::Binary::Add, x, z), std::invalid_argument);
  EXPECT_THROW(b.compare(hlo::Compare::EQ, x, z), std::invalid_argument);
  EXPECT_THROW(b.reshape(x, {4}), std::invalid_argument);
  EXPECT_THROW(b.gather_flat(b.parameter({DType::F32, {2, 2}}), z), std::invalid_argument);
}

TEST(Fingerprint, StableAndDistinct) {
  // Empty text: both hashes keep their start values, 1469598103934665603 and
  // 0x9E3779B97F4A7C15. A change here changes every cache key.
  EXPECT_EQ(hlo::fingerprint(""), "cbf29ce4842223259e3779b97f4a7c15");
  std::string a = hlo::fingerprint("module @a {}");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, hlo::fingerprint("module @a {}"));
  EXPECT_NE(a, hlo::fingerprint("module @b {}"));
  EXPECT_NE(a, hlo::fingerprint("module @a {} "));
}

TEST(Builder, DotGeneral) {
  Builder b;
  Value x = b.parameter({DType::F32, {2, 3}});
  Value y = b.parameter({DType::F32, {3, 2}});
  Value z = b.dot_general(x, y, {}, {}, {1}, {0}, DType::F32);
  EXPECT_EQ(z.type.shape, (std::vector<int64_t>{2, 2}));
  auto bx = upload<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto by = upload<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  // [[1+3, 2+3], [4+6, 5+6]]
  EXPECT_EQ(run1<float>(b, z, {bx.get(), by.get()}), (std::vector<float>{4, 5, 10, 11}));
}

TEST(Builder, MatmulPrecisionOnF32ProductsOnly) {
  for (auto [p, name] : {std::pair{Precision::Highest, "HIGHEST"},
                         {Precision::High, "HIGH"},
                         {Precision::Default, "DEFAULT"}}) {
    Builder b;
    b.set_matmul_precision(p);
    Value x = b.parameter({DType::F32, {2, 3}});
    Value y = b.parameter({DType::F32, {3, 2}});
    Value h = b.parameter({DType::BF16, {2, 3}});
    Value k = b.parameter({DType::BF16, {3, 2}});
    Value z = b.dot_general(x, y, {}, {}, {1}, {0}, DType::F32);
    Value w = b.dot_general(h, k, {}, {}, {1}, {0}, DType::F32);
    std::string text = b.module({z, w});
    std::string attr = std::string("#stablehlo<precision ") + name + ">";
    // One attribute per operand, both on the f32 product; none on the bf16 one.
    size_t first = text.find(attr);
    ASSERT_NE(first, std::string::npos) << text;
    size_t second = text.find(attr, first + 1);
    ASSERT_NE(second, std::string::npos);
    EXPECT_EQ(text.find("precision_config", text.find("precision_config") + 1), std::string::npos);
    auto bx = upload<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    auto by = upload<float>({1, 0, 0, 1, 1, 1}, {3, 2});
    Builder one;
    one.set_matmul_precision(p);
    Value a = one.parameter({DType::F32, {2, 3}});
    Value c = one.parameter({DType::F32, {3, 2}});
    EXPECT_EQ(
        run1<float>(one, one.dot_general(a, c, {}, {}, {1}, {0}, DType::F32), {bx.get(), by.get()}),
        (std::vector<float>{4, 5, 10, 11}));
  }
}

TEST(Builder, RegionsKeepTheMatmulPrecision) {
  // A loop body's products (control flow in compiled graphs) get the precision of the
  // builder the region belongs to.
  Builder b;
  b.set_matmul_precision(Precision::Default);
  TensorType m{DType::F32, {2, 2}};
  std::string body = b.region({m}, [](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.dot_general(a[0], a[0], {}, {}, {1}, {0}, DType::F32)};
  });
  EXPECT_TRUE(contains(body, "#stablehlo<precision DEFAULT>")) << body;
  EXPECT_FALSE(contains(body, "HIGHEST")) << body;
}

// Functions written elsewhere (jax_op: a JAX export's, in generic form) join the module
// once, after main, and main calls them; a region's go to the enclosing module.
TEST(Builder, CallsAddedFunctions) {
  const std::string twice =
      "\"func.func\"() <{function_type = (tensor<3xf32>) -> tensor<3xf32>, sym_name = "
      "\"ext_twice\", sym_visibility = \"private\"}> ({\n"
      "^bb0(%arg0: tensor<3xf32>):\n"
      "  %0 = \"stablehlo.add\"(%arg0, %arg0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
      "  \"func.return\"(%0) : (tensor<3xf32>) -> ()\n"
      "}) : () -> ()";
  TensorType t{DType::F32, {3}};
  Builder b;
  Value x = b.parameter(t);
  b.add_functions(twice);
  Value y = b.emit_multi("func.call", {x}, "callee = @ext_twice", {t})[0];
  std::string body = b.region({t}, [&](Builder& r, const std::vector<Value>& a) {
    r.add_functions(twice);
    return r.emit_multi("func.call", a, "callee = @ext_twice", {t});
  });
  (void)body;  // only its functions matter here
  Value z = b.emit_multi("func.call", {y}, "callee = @ext_twice", {t})[0];
  std::string text = b.module({z});
  EXPECT_EQ(text.find("ext_twice\", sym_visibility"), text.rfind("ext_twice\", sym_visibility"))
      << "added once: " << text;
  EXPECT_LT(text.find("@main"), text.find("sym_name = \"ext_twice\"")) << text;
  auto bx = upload<float>({1, -2, 3.5f}, {3});
  EXPECT_EQ(run1<float>(b, z, {bx.get()}), (std::vector<float>{4, -8, 14}));
}

TEST(Builder, DotGeneralBatched) {
  Builder b;
  Value x = b.parameter({DType::S32, {2, 1, 2}});
  Value y = b.parameter({DType::S32, {2, 2, 1}});
  Value z = b.dot_general(x, y, {0}, {0}, {2}, {1}, DType::S32);
  EXPECT_EQ(z.type.shape, (std::vector<int64_t>{2, 1, 1}));
  auto bx = upload<int32_t>({1, 2, 3, 4}, {2, 1, 2});
  auto by = upload<int32_t>({5, 6, 7, 8}, {2, 2, 1});
  EXPECT_EQ(run1<int32_t>(b, z, {bx.get(), by.get()}), (std::vector<int32_t>{17, 53}));
}

TEST(Builder, ReduceAddAndMax) {
  Builder b;
  Value x = b.parameter({DType::F32, {2, 3}});
  Value sum = b.reduce(x, b.constant(0, DType::F32), {1}, hlo::Binary::Add);
  Value max = b.reduce(x, b.constant(-INFINITY, DType::F32), {0}, hlo::Binary::Maximum);
  Value all = b.reduce(x, b.constant(1, DType::F32), {0, 1}, hlo::Binary::Multiply);
  auto bx = upload<float>({1, -5, 3, -4, 2, 6}, {2, 3});
  auto out = test::run(b, {sum, max, all}, {bx.get()});
  EXPECT_EQ(test::download<float>(*out[0]), (std::vector<float>{-1, 4}));
  EXPECT_EQ(test::download<float>(*out[1]), (std::vector<float>{1, 2, 6}));
  EXPECT_EQ(test::download<float>(*out[2]), (std::vector<float>{720}));
}

TEST(Builder, CompareAndSelect) {
  Builder b;
  Value x = b.parameter({DType::S32, {4}});
  Value y = b.parameter({DType::S32, {4}});
  Value gt = b.compare(hlo::Compare::GT, x, y);
  Value pick = b.select(gt, x, y);  // elementwise max
  Value le = b.compare(hlo::Compare::LE, x, y);
  auto bx = upload<int32_t>({1, -7, 3, 0}, {4});
  auto by = upload<int32_t>({2, -8, 3, -1}, {4});
  auto out = test::run(b, {pick, le}, {bx.get(), by.get()});
  EXPECT_EQ(test::download<int32_t>(*out[0]), (std::vector<int32_t>{2, -7, 3, 0}));
  EXPECT_EQ(test::download<uint8_t>(*out[1]), (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(Builder, CompareUnsignedIsUnsigned) {
  Builder b;
  Value x = b.parameter({DType::U8, {2}});
  Value lt = b.compare(hlo::Compare::LT, x, b.full(128, x.type));
  auto bx = upload<uint8_t>({200, 5}, {2});
  EXPECT_EQ(run1<uint8_t>(b, lt, {bx.get()}), (std::vector<uint8_t>{0, 1}));
}

TEST(Builder, ConvertTruncatesAndBoolIsNonZero) {
  Builder b;
  Value x = b.parameter({DType::F32, {5}});
  Value i = b.convert(x, DType::S32);
  Value p = b.convert(x, DType::Pred);
  EXPECT_TRUE(contains(b.module({p}), "comparison_direction NE"));
  Value back = b.convert(p, DType::F32);
  auto bx = upload<float>({2.7f, -2.7f, 0.5f, -0.0f, NAN}, {5});
  auto out = test::run(b, {i, p, back}, {bx.get()});
  auto ints = test::download<int32_t>(*out[0]);
  EXPECT_EQ(ints[0], 2);
  EXPECT_EQ(ints[1], -2);
  EXPECT_EQ(ints[2], 0);
  EXPECT_EQ(ints[3], 0);
  EXPECT_EQ(test::download<uint8_t>(*out[1]), (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(test::download<float>(*out[2]), (std::vector<float>{1, 1, 1, 0, 1}));
}

TEST(Builder, Iota) {
  Builder b;
  Value rows = b.iota({DType::S64, {2, 3}}, 0);
  Value cols = b.iota({DType::S64, {2, 3}}, 1);
  auto out = test::run(b, {rows, cols}, {});
  EXPECT_EQ(test::download<int64_t>(*out[0]), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(test::download<int64_t>(*out[1]), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
}

TEST(Builder, GatherFlat) {
  Builder b;
  Value flat = b.parameter({DType::F32, {5}});
  Value idx = b.parameter({DType::S64, {2, 2}});
  Value g = b.gather_flat(flat, idx);
  EXPECT_EQ(g.type.shape, (std::vector<int64_t>{2, 2}));
  auto bf = upload<float>({10, 11, 12, 13, 14}, {5});
  auto bi = upload<int64_t>({4, 0, 2, 2}, {2, 2});
  EXPECT_EQ(run1<float>(b, g, {bf.get(), bi.get()}), (std::vector<float>{14, 10, 12, 12}));
}

TEST(Builder, ScatterFlat) {
  Builder b;
  Value flat = b.parameter({DType::F32, {5}});
  Value idx = b.parameter({DType::S64, {3}});
  Value upd = b.parameter({DType::F32, {3}});
  Value s = b.scatter_flat(flat, idx, upd);
  auto bf = upload<float>({0, 1, 2, 3, 4}, {5});
  auto bi = upload<int64_t>({3, 0, 4}, {3});
  auto bu = upload<float>({-3, -0.5f, -4}, {3});
  EXPECT_EQ(run1<float>(b, s, {bf.get(), bi.get(), bu.get()}),
            (std::vector<float>{-0.5f, 1, 2, -3, -4}));
}

TEST(Builder, PadWithInterior) {
  Builder b;
  Value x = b.parameter({DType::S32, {2, 2}});
  Value p = b.pad(x, b.constant_int(-1, DType::S32), {1, 0}, {0, 1}, {0, 1});
  EXPECT_EQ(p.type.shape, (std::vector<int64_t>{3, 4}));
  auto bx = upload<int32_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(run1<int32_t>(b, p, {bx.get()}), (std::vector<int32_t>{-1, -1, -1, -1,  //
                                                                   1, -1, 2, -1,    //
                                                                   3, -1, 4, -1}));
}

TEST(Builder, SliceWithStride) {
  Builder b;
  Value x = b.parameter({DType::S32, {3, 4}});
  Value s = b.slice(x, {0, 1}, {3, 4}, {2, 2});
  EXPECT_EQ(s.type.shape, (std::vector<int64_t>{2, 2}));
  auto bx = upload<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  EXPECT_EQ(run1<int32_t>(b, s, {bx.get()}), (std::vector<int32_t>{1, 3, 9, 11}));
}

TEST(Builder, DynamicSliceAndUpdateWithRuntimeStarts) {
  Builder b;
  Value x = b.parameter({DType::S32, {3, 4}});
  Value r = b.parameter({DType::S64, {}});
  Value c = b.parameter({DType::S64, {}});
  Value piece = b.dynamic_slice(x, {r, c}, {2, 2});
  Value patched = b.dynamic_update_slice(x, b.full(-1, {DType::S32, {1, 2}}), {r, c});
  auto bx = upload<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  auto br = upload<int64_t>({1}, {});
  auto bc = upload<int64_t>({2}, {});
  auto out = test::run(b, {piece, patched}, {bx.get(), br.get(), bc.get()});
  EXPECT_EQ(test::download<int32_t>(*out[0]), (std::vector<int32_t>{6, 7, 10, 11}));
  EXPECT_EQ(test::download<int32_t>(*out[1]),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, -1, -1, 8, 9, 10, 11}));
}

TEST(Builder, ConcatenateTransposeBroadcast) {
  Builder b;
  Value x = b.parameter({DType::S32, {2, 1}});
  Value y = b.parameter({DType::S32, {2, 2}});
  Value cat = b.concatenate({x, y}, 1);
  EXPECT_EQ(cat.type.shape, (std::vector<int64_t>{2, 3}));
  Value t = b.transpose(cat, {1, 0});
  EXPECT_EQ(t.type.shape, (std::vector<int64_t>{3, 2}));
  Value v = b.parameter({DType::S32, {3}});
  Value bc = b.broadcast_in_dim(v, {3, 2}, {0});  // column vector repeated along dim 1
  auto bx = upload<int32_t>({1, 2}, {2, 1});
  auto by = upload<int32_t>({3, 4, 5, 6}, {2, 2});
  auto bv = upload<int32_t>({7, 8, 9}, {3});
  auto out = test::run(b, {cat, t, bc}, {bx.get(), by.get(), bv.get()});
  EXPECT_EQ(test::download<int32_t>(*out[0]), (std::vector<int32_t>{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(test::download<int32_t>(*out[1]), (std::vector<int32_t>{1, 2, 3, 5, 4, 6}));
  EXPECT_EQ(test::download<int32_t>(*out[2]), (std::vector<int32_t>{7, 7, 8, 8, 9, 9}));
}

TEST(Builder, NonFiniteConstants) {
  Builder b;
  std::vector<Value> outs = {b.constant(INFINITY, DType::F32), b.constant(-INFINITY, DType::F32),
                             b.constant(NAN, DType::F32), b.constant(-INFINITY, DType::F64),
                             b.constant(NAN, DType::F64)};
  auto out = test::run(b, outs, {});
  EXPECT_EQ(test::download<float>(*out[0])[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(test::download<float>(*out[1])[0], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(test::download<float>(*out[2])[0]));
  EXPECT_EQ(test::download<double>(*out[3])[0], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(test::download<double>(*out[4])[0]));
}

TEST(Builder, FiniteAndIntegerConstants) {
  Builder b;
  std::vector<Value> outs = {b.constant(0.1, DType::F64),    b.constant(-2.9, DType::S32),
                             b.constant_int(255, DType::U8), b.constant(0.25, DType::Pred),
                             b.constant_int(3, DType::F32),  b.constant(70000, DType::F16)};
  auto out = test::run(b, outs, {});
  EXPECT_EQ(test::download<double>(*out[0])[0], 0.1);
  EXPECT_EQ(test::download<int32_t>(*out[1])[0], -2);
  EXPECT_EQ(test::download<uint8_t>(*out[2])[0], 255);
  EXPECT_EQ(test::download<uint8_t>(*out[3])[0], 1);
  EXPECT_EQ(test::download<float>(*out[4])[0], 3.0f);
  EXPECT_EQ(test::download<uint16_t>(*out[5])[0], 0x7C00);  // f16 +inf: 70000 overflows
}

TEST(Builder, NegativeUnsignedConstantWraps) {
  Builder b;
  std::vector<Value> outs = {b.constant_int(-1, DType::U8), b.constant(-2, DType::U8)};
  auto out = test::run(b, outs, {});
  EXPECT_EQ(test::download<uint8_t>(*out[0])[0], 255);
  EXPECT_EQ(test::download<uint8_t>(*out[1])[0], 254);
}

TEST(Builder, InfiniteIntegerConstantsSaturate) {
  Builder b;
  std::vector<Value> outs = {b.constant(-INFINITY, DType::S32), b.constant(INFINITY, DType::S32),
                             b.constant(-INFINITY, DType::S64), b.constant(INFINITY, DType::U8),
                             b.constant(-INFINITY, DType::U16), b.constant(1e30, DType::S16)};
  auto out = test::run(b, outs, {});
  EXPECT_EQ(test::download<int32_t>(*out[0])[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(test::download<int32_t>(*out[1])[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(test::download<int64_t>(*out[2])[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(test::download<uint8_t>(*out[3])[0], 255);
  EXPECT_EQ(test::download<uint16_t>(*out[4])[0], 0);
  EXPECT_EQ(test::download<int16_t>(*out[5])[0], std::numeric_limits<int16_t>::max());
}

TEST(Builder, UnaryAndBitcast) {
  Builder b;
  Value x = b.parameter({DType::F32, {2}});
  Value neg = b.unary(hlo::Unary::Negate, x);
  Value bits = b.bitcast_convert(x, {DType::U32, {2}});
  auto bx = upload<float>({1.0f, -2.0f}, {2});
  auto out = test::run(b, {neg, bits}, {bx.get()});
  EXPECT_EQ(test::download<float>(*out[0]), (std::vector<float>{-1, 2}));
  EXPECT_EQ(test::download<uint32_t>(*out[1]), (std::vector<uint32_t>{0x3F800000u, 0xC0000000u}));
}

}  // namespace
}  // namespace torch_tpu
