#include "hlo/builder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>

namespace torch_tpu::hlo {

namespace {

std::string name(const Value& v) { return value_name(v); }

std::string i64_list(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(values[i]);
  return s + "]";
}

const char* direction_name(Compare c) {
  switch (c) {
    case Compare::EQ: return "EQ";
    case Compare::NE: return "NE";
    case Compare::LT: return "LT";
    case Compare::LE: return "LE";
    case Compare::GT: return "GT";
    case Compare::GE: return "GE";
  }
  return "EQ";
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("hlo::Builder: " + what);
}

}  // namespace

std::string value_name(const Value& v) {
  std::string s = "%v" + std::to_string(v.id);
  if (v.result >= 0) s += "#" + std::to_string(v.result);
  return s;
}

std::string i64_array(const std::vector<int64_t>& values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i == 0 ? ": " : ", ") + std::to_string(values[i]);
  return s + ">";
}

Value Builder::parameter(const TensorType& type) {
  Value v{next_id_++, type};
  params_.push_back(v);
  aliases_.push_back(-1);
  return v;
}

std::vector<std::pair<int, int64_t>> Builder::donations() const {
  std::vector<std::pair<int, int64_t>> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (aliases_[i] >= 0)
      out.emplace_back(static_cast<int>(i),
                       params_[i].type.numel() * byte_width(params_[i].type.dtype));
  return out;
}

void Builder::alias_output(const Value& param, int output) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].id == param.id) aliases_[i] = output;
}

std::string Builder::line(const std::string& lhs, const std::string& op,
                          const std::vector<Value>& operands, const std::string& attributes,
                          const std::string& result_types,
                          const std::vector<std::string>& regions) {
  std::string text = "    " + lhs + " = \"" + op + "\"(";
  std::string types = "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    text += (i ? ", " : "") + name(operands[i]);
    types += (i ? ", " : "") + operands[i].type.str();
  }
  text += ")";
  if (!regions.empty()) {
    text += " (";
    for (size_t i = 0; i < regions.size(); ++i) text += (i ? ", " : "") + regions[i];
    text += ")";
  }
  if (!attributes.empty()) text += " {" + attributes + "}";
  return text + " : " + types + ") -> " + result_types + "\n";
}

Value Builder::emit(const std::string& op, const std::vector<Value>& operands,
                    const std::string& attributes, const TensorType& result,
                    const std::vector<std::string>& regions) {
  Value out{next_id_++, result};
  body_ += line(name(out), op, operands, attributes, result.str(), regions);
  return out;
}

std::vector<Value> Builder::emit_multi(const std::string& op, const std::vector<Value>& operands,
                                       const std::string& attributes,
                                       const std::vector<TensorType>& results,
                                       const std::vector<std::string>& regions) {
  require(!results.empty(), op + " with no results");
  int id = next_id_++;
  std::string types = "(";
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    types += (i ? ", " : "") + results[i].str();
    out.push_back(Value{id, results[i], static_cast<int>(i)});
  }
  body_ += line("%v" + std::to_string(id) + ":" + std::to_string(results.size()), op, operands,
                attributes, types + ")", regions);
  return out;
}

std::string Builder::region(const std::vector<TensorType>& arg_types, const RegionBody& body) {
  Builder inner;
  inner.next_id_ = next_id_;
  inner.precision_ = precision_;
  std::vector<Value> args;
  std::string header = "{\n    ^bb0(";
  for (size_t i = 0; i < arg_types.size(); ++i) {
    args.push_back(Value{inner.next_id_++, arg_types[i]});
    header += (i ? ", " : "") + name(args.back()) + ": " + arg_types[i].str();
  }
  std::vector<Value> results = body(inner, args);
  next_id_ = inner.next_id_;
  add_functions(inner.functions_);
  std::string names, types;
  for (size_t i = 0; i < results.size(); ++i) {
    names += (i ? ", " : "") + name(results[i]);
    types += (i ? ", " : "") + results[i].type.str();
  }
  return header + "):\n" + inner.body_ + "    \"stablehlo.return\"(" + names + ") : (" + types +
         ") -> ()\n    }";
}

std::string Builder::binary_region(Binary op, DType dtype) {
  TensorType s{dtype, {}};
  return region({s, s}, [op](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.binary(op, a[0], a[1])};
  });
}

Value Builder::constant(double value, DType dtype) {
  // A real value of a complex type: its real part, converted (the imaginary part is 0).
  if (is_complex(dtype)) return convert(constant(value, component(dtype)), dtype);
  std::string literal;
  DType emit_type = dtype;
  if (dtype == DType::Pred) {
    literal = value != 0 ? "true" : "false";
  } else if (!is_float(dtype)) {
    // Finite values go through int64 and wrap to the width, as PyTorch's conversions do;
    // infinities and values beyond int64 saturate to the type's range (so -inf is the
    // lowest integer, as a max-reduction's initial value needs).
    if (std::isnan(value)) return constant_int(0, dtype);
    if (std::fabs(value) < 9.2e18) return constant_int(static_cast<int64_t>(value), dtype);
    const int bits = 8 * byte_width(dtype);
    const bool is_unsigned = is_unsigned_int(dtype);
    if (value < 0) {
      if (is_unsigned) return constant_int(0, dtype);
      return constant_int(bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)), dtype);
    }
    if (bits == 64) return constant_int(is_unsigned ? -1 : INT64_MAX, dtype);
    return constant_int((int64_t{1} << (is_unsigned ? bits : bits - 1)) - 1, dtype);
  } else if (std::isfinite(value)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17e", value);
    literal = buf;
  } else {
    // Non-finite values need a hex bit pattern; write them as f32 and convert.
    emit_type = DType::F32;
    literal = std::isnan(value) ? "0x7FC00000" : (value > 0 ? "0x7F800000" : "0xFF800000");
  }
  TensorType type{emit_type, {}};
  Value c = emit("stablehlo.constant", {}, "value = dense<" + literal + "> : " + type.str(), type);
  return emit_type == dtype ? c : convert(c, dtype);
}

Value Builder::constant_int(int64_t value, DType dtype) {
  if (is_float(dtype) || is_complex(dtype) || dtype == DType::Pred)
    return constant(static_cast<double>(value), dtype);
  TensorType type{dtype, {}};
  // Wrap to the type's width, as a C++ cast to that type would.
  const int bits = 8 * byte_width(dtype);
  std::string literal;
  if (is_unsigned_int(dtype)) {
    uint64_t u = static_cast<uint64_t>(value);
    if (bits < 64) u &= (1ULL << bits) - 1;
    literal = std::to_string(u);
  } else {
    int64_t v = value;
    if (bits < 64) {
      uint64_t u = static_cast<uint64_t>(value) & ((1ULL << bits) - 1);
      v = (u >> (bits - 1)) ? static_cast<int64_t>(u) - (int64_t{1} << bits)
                            : static_cast<int64_t>(u);
    }
    literal = std::to_string(v);
  }
  return emit("stablehlo.constant", {}, "value = dense<" + literal + "> : " + type.str(), type);
}

Value Builder::full(double value, const TensorType& type) {
  return broadcast_in_dim(constant(value, type.dtype), type.shape, {});
}

Value Builder::unary(Unary op, const Value& x) {
  // The modulus of a complex value is real.
  if (is_complex(x.type.dtype) && op == Unary::Abs)
    return emit(op_name(op), {x}, "", TensorType{component(x.type.dtype), x.type.shape});
  return emit(op_name(op), {x}, "", x.type);
}

Value Builder::binary(Binary op, const Value& a, const Value& b) {
  // The message names the op without its dialect: "add operands differ: ...".
  std::string_view name = op_name(op);
  name.remove_prefix(name.find('.') + 1);
  require(a.type == b.type,
          std::string(name) + " operands differ: " + a.type.str() + " vs " + b.type.str());
  return emit(op_name(op), {a, b}, "", a.type);
}

Value Builder::compare(Compare direction, const Value& a, const Value& b) {
  require(a.type == b.type, "compare operands differ");
  std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                      direction_name(direction) + ">";
  if (is_float(a.type.dtype) || is_complex(a.type.dtype)) {
    attrs += ", compare_type = #stablehlo<comparison_type FLOAT>";
  } else if (is_unsigned_int(a.type.dtype) || a.type.dtype == DType::Pred) {
    attrs += ", compare_type = #stablehlo<comparison_type UNSIGNED>";
  } else {
    attrs += ", compare_type = #stablehlo<comparison_type SIGNED>";
  }
  return emit("stablehlo.compare", {a, b}, attrs, TensorType{DType::Pred, a.type.shape});
}

Value Builder::select(const Value& pred, const Value& on_true, const Value& on_false) {
  require(on_true.type == on_false.type, "select branches differ");
  return emit("stablehlo.select", {pred, on_true, on_false}, "", on_true.type);
}

namespace {
bool is_f8(DType dtype) { return dtype == DType::F8E4M3FN || dtype == DType::F8E5M2; }
}  // namespace

// To float8 as PyTorch converts: rounded once, to nearest even (XLA:CPU's convert goes
// through f16 and rounds twice, so 68.016 became 64, not 72), and float8_e4m3fn, which
// has no infinity, saturated at +-448 (NaN stays NaN). The value is rounded to the
// float8 grid in f32 (whose mantissa has room), where the final convert is exact.
Value Builder::to_float8(const Value& x, DType dtype) {
  const bool e4m3 = dtype == DType::F8E4M3FN;
  const int mantissa = e4m3 ? 3 : 2;
  const double min_normal = e4m3 ? 0x1p-6 : 0x1p-14, subnormal_step = e4m3 ? 0x1p-9 : 0x1p-16;
  Value v = convert(x, DType::F32);
  const TensorType f32 = v.type, u32{DType::U32, v.type.shape};
  if (e4m3) v = emit("stablehlo.clamp", {full(-448.0, f32), v, full(448.0, f32)}, "", f32);
  // Normal values: round the f32 mantissa to `mantissa` bits, to nearest even.
  const int drop = 23 - mantissa;
  Value bits = bitcast_convert(v, u32);
  Value lsb = binary(Binary::And, binary(Binary::ShiftRightLogical, bits, full(drop, u32)),
                     full(1, u32));
  Value bias = binary(Binary::Add, full((1 << (drop - 1)) - 1, u32), lsb);
  Value rounded = binary(Binary::And, binary(Binary::Add, bits, bias),
                         full(static_cast<double>(~((1u << drop) - 1)), u32));
  Value normal = bitcast_convert(rounded, f32);
  // Subnormal values: multiples of the smallest step, to nearest even.
  Value scaled = binary(Binary::Multiply, v, full(1.0 / subnormal_step, f32));
  Value subnormal =
      binary(Binary::Multiply, unary(Unary::RoundNearestEven, scaled), full(subnormal_step, f32));
  Value tiny = compare(Compare::LT, unary(Unary::Abs, v), full(min_normal, f32));
  Value on_grid = select(tiny, subnormal, normal);
  // A NaN whose payload fills the mantissa would carry out of the sign bit: kept as it is.
  on_grid = select(compare(Compare::NE, v, v), v, on_grid);
  return emit("stablehlo.convert", {on_grid}, "", TensorType{dtype, x.type.shape});
}

Value Builder::convert(const Value& x, DType dtype) {
  if (x.type.dtype == dtype) return x;
  if (x.type.dtype != DType::Pred && dtype == DType::Pred) {
    // PyTorch's bool conversion is "!= 0", XLA's convert to i1 is not guaranteed to be.
    return compare(Compare::NE, x, full(0, x.type));
  }
  // Complex conversions go through the parts: to complex, the value becomes the real part
  // (imaginary 0); from complex, PyTorch keeps the real part.
  if (is_complex(dtype)) {
    const DType part = component(dtype);
    if (is_complex(x.type.dtype)) return complex(convert(real(x), part), convert(imag(x), part));
    Value re = convert(x, part);
    return complex(re, full(0, re.type));
  }
  if (is_complex(x.type.dtype)) return convert(real(x), dtype);
  if ((dtype == DType::F8E4M3FN || dtype == DType::F8E5M2) && !is_f8(x.type.dtype))
    return to_float8(x, dtype);
  return emit("stablehlo.convert", {x}, "", TensorType{dtype, x.type.shape});
}

Value Builder::real(const Value& x) {
  if (!is_complex(x.type.dtype)) return x;
  return emit("stablehlo.real", {x}, "", TensorType{component(x.type.dtype), x.type.shape});
}

Value Builder::imag(const Value& x) {
  if (!is_complex(x.type.dtype)) return full(0, x.type);
  return emit("stablehlo.imag", {x}, "", TensorType{component(x.type.dtype), x.type.shape});
}

Value Builder::complex(const Value& re, const Value& im) {
  require(re.type == im.type && is_float(re.type.dtype), "complex parts differ or are not float");
  DType part = re.type.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value r = convert(re, part), i = convert(im, part);
  return emit("stablehlo.complex", {r, i}, "", TensorType{complex_of(part), re.type.shape});
}

Value Builder::bitcast_convert(const Value& x, const TensorType& type) {
  return emit("stablehlo.bitcast_convert", {x}, "", type);
}

Value Builder::broadcast_in_dim(const Value& x, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& dims) {
  require(static_cast<int64_t>(dims.size()) == x.type.rank(), "broadcast_in_dim rank mismatch");
  if (x.type.shape == shape) {
    bool identity = true;
    for (size_t i = 0; i < dims.size(); ++i) identity &= dims[i] == static_cast<int64_t>(i);
    if (identity) return x;
  }
  return emit("stablehlo.broadcast_in_dim", {x}, "broadcast_dimensions = " + i64_array(dims),
              TensorType{x.type.dtype, shape});
}

Value Builder::reshape(const Value& x, const std::vector<int64_t>& shape) {
  if (x.type.shape == shape) return x;
  TensorType t{x.type.dtype, shape};
  require(t.numel() == x.type.numel(), "reshape changes the element count");
  return emit("stablehlo.reshape", {x}, "", t);
}

Value Builder::transpose(const Value& x, const std::vector<int64_t>& permutation) {
  bool identity = true;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity &= permutation[i] == static_cast<int64_t>(i);
    shape.push_back(x.type.shape.at(permutation[i]));
  }
  if (identity) return x;
  return emit("stablehlo.transpose", {x}, "permutation = " + i64_array(permutation),
              TensorType{x.type.dtype, shape});
}

Value Builder::slice(const Value& x, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& limit, const std::vector<int64_t>& strides) {
  std::vector<int64_t> shape;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    shape.push_back(n);
    identity &= start[i] == 0 && limit[i] == x.type.shape[i] && strides[i] == 1;
  }
  if (identity) return x;
  std::string attrs = "start_indices = " + i64_array(start) +
                      ", limit_indices = " + i64_array(limit) + ", strides = " + i64_array(strides);
  return emit("stablehlo.slice", {x}, attrs, TensorType{x.type.dtype, shape});
}

Value Builder::dynamic_slice(const Value& x, const std::vector<Value>& starts,
                             const std::vector<int64_t>& sizes) {
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return emit("stablehlo.dynamic_slice", operands, "slice_sizes = " + i64_array(sizes),
              TensorType{x.type.dtype, sizes});
}

Value Builder::dynamic_update_slice(const Value& x, const Value& update,
                                    const std::vector<Value>& starts) {
  std::vector<Value> operands{x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return emit("stablehlo.dynamic_update_slice", operands, "", x.type);
}

Value Builder::pad(const Value& x, const Value& padding, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < low.size(); ++i) {
    int64_t n = x.type.shape[i];
    shape.push_back(low[i] + high[i] + n + (n > 0 ? (n - 1) * interior[i] : 0));
  }
  std::string attrs = "edge_padding_low = " + i64_array(low) +
                      ", edge_padding_high = " + i64_array(high) +
                      ", interior_padding = " + i64_array(interior);
  return emit("stablehlo.pad", {x, padding}, attrs, TensorType{x.type.dtype, shape});
}

Value Builder::concatenate(const std::vector<Value>& values, int64_t dim) {
  require(!values.empty(), "concatenate of nothing");
  TensorType t = values[0].type;
  t.shape[dim] = 0;
  for (const Value& v : values) t.shape[dim] += v.type.shape[dim];
  return emit("stablehlo.concatenate", values, "dimension = " + std::to_string(dim) + " : i64", t);
}

Value Builder::iota(const TensorType& type, int64_t dim) {
  return emit("stablehlo.iota", {}, "iota_dimension = " + std::to_string(dim) + " : i64", type);
}

Value Builder::dot_general(const Value& lhs, const Value& rhs,
                           const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch,
                           const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract, DType result) {
  auto contains = [](const std::vector<int64_t>& v, int64_t d) {
    for (int64_t x : v)
      if (x == d) return true;
    return false;
  };
  std::vector<int64_t> shape;
  for (int64_t d : lhs_batch) shape.push_back(lhs.type.shape[d]);
  for (int64_t d = 0; d < lhs.type.rank(); ++d)
    if (!contains(lhs_batch, d) && !contains(lhs_contract, d)) shape.push_back(lhs.type.shape[d]);
  for (int64_t d = 0; d < rhs.type.rank(); ++d)
    if (!contains(rhs_batch, d) && !contains(rhs_contract, d)) shape.push_back(rhs.type.shape[d]);
  std::string attrs =
      "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + i64_list(lhs_batch) +
      ", rhs_batching_dimensions = " + i64_list(rhs_batch) +
      ", lhs_contracting_dimensions = " + i64_list(lhs_contract) +
      ", rhs_contracting_dimensions = " + i64_list(rhs_contract) + ">";
  return emit("stablehlo.dot_general", {lhs, rhs}, attrs + precision_config(lhs, rhs),
              TensorType{result, shape});
}

std::string Builder::precision_config(const Value& lhs, const Value& rhs) const {
  if (lhs.type.dtype != DType::F32 && rhs.type.dtype != DType::F32) return "";
  const char* name = precision_ == Precision::Highest ? "HIGHEST"
                     : precision_ == Precision::High  ? "HIGH"
                                                      : "DEFAULT";
  const std::string one = std::string("#stablehlo<precision ") + name + ">";
  return ", precision_config = [" + one + ", " + one + "]";
}

Value Builder::reduce(const Value& x, const Value& init, const std::vector<int64_t>& dims,
                      Binary op) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.type.rank(); ++d) {
    bool reduced = false;
    for (int64_t r : dims) reduced |= r == d;
    if (!reduced) shape.push_back(x.type.shape[d]);
  }
  return emit("stablehlo.reduce", {x, init}, "dimensions = " + i64_array(dims),
              TensorType{x.type.dtype, shape}, {binary_region(op, x.type.dtype)});
}

Value Builder::gather_flat(const Value& flat, const Value& indices) {
  require(flat.type.rank() == 1, "gather_flat needs a 1-d operand");
  std::vector<int64_t> idx_shape = indices.type.shape;
  idx_shape.push_back(1);
  Value idx = reshape(indices, idx_shape);
  std::string attrs =
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = " +
      std::to_string(indices.type.rank()) + ">, slice_sizes = " + i64_array({1}) +
      ", indices_are_sorted = false";
  return emit("stablehlo.gather", {flat, idx}, attrs,
              TensorType{flat.type.dtype, indices.type.shape});
}

Value Builder::scatter_flat(const Value& flat, const Value& indices, const Value& updates) {
  require(flat.type.rank() == 1, "scatter_flat needs a 1-d operand");
  std::vector<int64_t> idx_shape = indices.type.shape;
  idx_shape.push_back(1);
  Value idx = reshape(indices, idx_shape);
  // The update computation returns the new value: plain overwrite.
  std::string overwrite =
      region({TensorType{flat.type.dtype, {}}, TensorType{flat.type.dtype, {}}},
             [](Builder&, const std::vector<Value>& a) { return std::vector<Value>{a[1]}; });
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = " +
      std::to_string(indices.type.rank()) + ">, indices_are_sorted = false, unique_indices = false";
  return emit("stablehlo.scatter", {flat, idx, updates}, attrs, flat.type, {overwrite});
}

void Builder::add_functions(const std::string& text) {
  if (!text.empty() && functions_.find(text) == std::string::npos) functions_ += text + "\n";
}

std::string Builder::module(const std::vector<Value>& outputs) const {
  std::string text = "module @torch_tpu {\n  func.func public @main(";
  std::string results;
  std::string return_names;
  for (size_t i = 0; i < outputs.size(); ++i) {
    results += (i ? ", " : "") + outputs[i].type.str();
    return_names += (i ? ", " : "") + name(outputs[i]);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    text += (i ? ", " : "") + name(params_[i]) + ": " + params_[i].type.str();
    if (aliases_[i] >= 0)
      text += " {tf.aliasing_output = " + std::to_string(aliases_[i]) + " : i32}";
  }
  text += ") -> (" + results + ") {\n" + body_;
  text += "    \"func.return\"(" + return_names + ") : (" + results + ") -> ()\n  }\n";
  text += functions_ + "}\n";
  return text;
}

std::string fingerprint(const std::string& text) {
  // Two independent FNV-1a style 64-bit hashes; collisions across both are negligible
  // for a cache key, and the function is stable across runs and builds.
  uint64_t h1 = 14695981039346656037ULL;
  uint64_t h2 = 0x9E3779B97F4A7C15ULL;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 1099511628211ULL;
    h2 = (h2 ^ c) * 0x100000001B3ULL + 0x7F4A7C15ULL;
    h2 ^= h2 >> 29;
  }
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));
  return buf;
}

}  // namespace torch_tpu::hlo
