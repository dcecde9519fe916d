#include "distributed/collective_program.h"

#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>

#include "hlo/builder.h"
#include "ops/registry.h"

namespace torch_tpu::distributed {

namespace {

std::string replica_groups(int n) {
  std::string ids;
  for (int i = 0; i < n; ++i) ids += (i ? ", " : "") + std::to_string(i);
  return "replica_groups = dense<[[" + ids + "]]> : tensor<1x" + std::to_string(n) + "xi64>";
}

bool is_bitwise(Reduce op) {
  return op == Reduce::BitAnd || op == Reduce::BitOr || op == Reduce::BitXor;
}

// The scalar combiner of a reduction on `dtype` (bool runs as u8, see reduce_value), or
// none where there is none.
std::optional<hlo::Binary> combiner(Reduce op, hlo::DType dtype) {
  using hlo::Binary;
  const bool pred = dtype == hlo::DType::Pred;
  switch (op) {
    case Reduce::Sum:
    case Reduce::Avg:
    case Reduce::PremulSum: return pred ? Binary::Maximum : Binary::Add;
    case Reduce::Product: return pred ? Binary::Minimum : Binary::Multiply;
    case Reduce::Min: return Binary::Minimum;
    case Reduce::Max: return Binary::Maximum;
    case Reduce::BitAnd: return pred ? Binary::Minimum : Binary::And;
    case Reduce::BitOr: return pred ? Binary::Maximum : Binary::Or;
    case Reduce::BitXor: return Binary::Xor;
  }
  return std::nullopt;
}

bool bitwise_combiner(hlo::Binary op) {
  return op == hlo::Binary::And || op == hlo::Binary::Or || op == hlo::Binary::Xor;
}

// The all-reduction of 1-d `x` over the n replicas with the combiner `op`.
hlo::Value reduce_value(hlo::Builder& b, hlo::Value x, hlo::Binary op, const std::string& groups,
                        int n) {
  using hlo::TensorType;
  const hlo::DType dtype = x.type.dtype;
  if (dtype == hlo::DType::Pred) {
    hlo::Value y = reduce_value(b, b.convert(x, hlo::DType::U8), op, groups, n);
    return b.convert(y, hlo::DType::Pred);
  }
  if (!bitwise_combiner(op))
    return b.emit("stablehlo.all_reduce", {x}, groups, x.type, {b.binary_region(op, dtype)});
  const int64_t m = x.type.shape[0];
  hlo::Value g = b.emit("stablehlo.all_gather", {x}, "all_gather_dim = 0 : i64, " + groups,
                        TensorType{dtype, {m * n}});
  g = b.reshape(g, {n, m});
  hlo::Value init = b.constant_int(op == hlo::Binary::And ? -1 : 0, dtype);
  return b.emit("stablehlo.reduce", {g, init}, "dimensions = " + hlo::i64_array({0}),
                TensorType{dtype, {m}}, {b.binary_region(op, dtype)});
}

// The unsigned integer of the same width, to move any dtype's bits unchanged.
hlo::DType bits_type(hlo::DType dtype) {
  switch (hlo::byte_width(dtype)) {
    case 1: return hlo::DType::U8;
    case 2: return hlo::DType::U16;
    case 4: return hlo::DType::U32;
    default: return hlo::DType::U64;
  }
}

// PremulSum's factor, before the reduction.
hlo::Value premultiplied(hlo::Builder& b, hlo::Value x, Reduce op, double premul) {
  if (op == Reduce::PremulSum) x = b.binary(hlo::Binary::Multiply, x, b.full(premul, x.type));
  return x;
}

// Avg's division, after the reduction.
hlo::Value averaged(hlo::Builder& b, hlo::Value y, Reduce op, int n) {
  if (op == Reduce::Avg) y = b.binary(hlo::Binary::Divide, y, b.full(n, y.type));
  return y;
}

// The collectives of one flat 1-d value over the n replicas.
hlo::Value all_reduce_flat(hlo::Builder& b, const hlo::Value& x, Reduce op, double premul,
                           const std::string& groups, int n) {
  hlo::Value y =
      reduce_value(b, premultiplied(b, x, op, premul), *combiner(op, x.type.dtype), groups, n);
  return averaged(b, y, op, n);
}

hlo::Value all_gather_flat(hlo::Builder& b, const hlo::Value& x, const std::string& groups, int n) {
  return b.emit("stablehlo.all_gather", {x}, "all_gather_dim = 0 : i64, " + groups,
                hlo::TensorType{x.type.dtype, {x.type.shape[0] * n}});
}

hlo::Value reduce_scatter_flat(hlo::Builder& b, hlo::Value x, Reduce op, double premul,
                               const std::string& groups, int n) {
  const hlo::DType dtype = x.type.dtype;
  x = premultiplied(b, x, op, premul);
  const int64_t m = x.type.shape[0] / n;
  const bool pred = dtype == hlo::DType::Pred;
  if (pred) x = b.convert(x, hlo::DType::U8);
  hlo::Value y = b.emit("stablehlo.reduce_scatter", {x}, "scatter_dimension = 0 : i64, " + groups,
                        hlo::TensorType{x.type.dtype, {m}},
                        {b.binary_region(*combiner(op, dtype), x.type.dtype)});
  if (pred) y = b.convert(y, hlo::DType::Pred);
  return averaged(b, y, op, n);
}

hlo::Value all_to_all_flat(hlo::Builder& b, const hlo::Value& x, const std::string& groups, int n) {
  return b.emit("stablehlo.all_to_all", {x},
                "split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = " +
                    std::to_string(n) + " : i64, " + groups,
                x.type);
}

}  // namespace

bool can_reduce(Reduce op, hlo::DType dtype) {
  if (op == Reduce::PremulSum) return hlo::is_float(dtype);
  if (is_bitwise(op)) return !hlo::is_float(dtype);
  return combiner(op, dtype).has_value();
}

bool reduces_bitwise(Reduce op, hlo::DType dtype) {
  const std::optional<hlo::Binary> c = combiner(op, dtype);
  return c && bitwise_combiner(*c);
}

std::string signature(const CollectiveSpec& s) {
  std::string out = std::string(s.name) + "(";
  if (s.kind == Collective::AllReduce || s.kind == Collective::ReduceScatter) {
    out += "op=" + std::to_string(static_cast<int>(s.reduce));
    if (s.reduce == Reduce::PremulSum) out += "*" + std::to_string(s.premul);
    out += ", ";
  }
  if (s.kind == Collective::Broadcast) out += "root=" + std::to_string(s.root) + ", ";
  out += std::string("dtype=") + hlo::mlir_name(s.dtype) + ", in=[";
  for (size_t i = 0; i < s.inputs.size(); ++i) out += (i ? "," : "") + std::to_string(s.inputs[i]);
  out += "], out=[";
  for (size_t i = 0; i < s.outputs.size(); ++i)
    out += (i ? "," : "") + std::to_string(s.outputs[i]);
  return out + "])";
}

runtime::ProgramKey program_key(const CollectiveSpec& s, const std::vector<int64_t>& device_ids) {
  runtime::ProgramKey key;
  key.add("tpu_dist.in_program");
  key.add(static_cast<int64_t>(s.kind));
  key.add(static_cast<int64_t>(s.reduce));
  int64_t bits = 0;
  std::memcpy(&bits, &s.premul, sizeof(bits));
  key.add(bits);
  key.add(static_cast<int64_t>(s.dtype));
  key.add(s.inputs);
  key.add(s.outputs);
  key.add(static_cast<int64_t>(s.split));
  key.add(s.group);
  key.add(device_ids);
  return key;
}

runtime::Program build_collective_program(const CollectiveSpec& s, int n) {
  using hlo::TensorType;
  using hlo::Value;
  hlo::Builder b;
  const std::string groups = replica_groups(n);
  std::vector<Value> outs;
  std::vector<Value> params;
  Value mask;
  if (s.kind == Collective::Broadcast) mask = b.parameter(TensorType{hlo::DType::Pred, {}});
  for (int64_t numel : s.inputs) params.push_back(b.parameter(TensorType{s.dtype, {numel}}));
  // Joins `group` consecutive arguments starting at `i` (the list forms).
  auto joined = [&](size_t i) {
    if (s.group == 1) return params[i];
    std::vector<Value> parts(params.begin() + i, params.begin() + i + s.group);
    return b.concatenate(parts, 0);
  };
  // The n equal parts of a gathered or exchanged value, or the value itself.
  auto deliver = [&](const Value& y) {
    if (!s.split) {
      outs.push_back(y);
      return;
    }
    const int64_t m = y.type.shape[0] / n;
    for (int r = 0; r < n; ++r) outs.push_back(b.slice(y, {r * m}, {(r + 1) * m}, {1}));
  };
  switch (s.kind) {
    case Collective::AllReduce:
      for (const Value& x : params)
        outs.push_back(all_reduce_flat(b, x, s.reduce, s.premul, groups, n));
      break;
    case Collective::Broadcast:
      // No collective_broadcast on XLA:CPU: the value's bits as an unsigned integer,
      // zero on every rank but the root, summed: the root's bits, exactly, for any dtype
      // (negative zero and NaN payloads included).
      for (const Value& x : params) {
        const bool pred = s.dtype == hlo::DType::Pred;
        const TensorType bits{bits_type(s.dtype), x.type.shape};
        Value v = pred ? b.convert(x, hlo::DType::U8) : b.bitcast_convert(x, bits);
        Value m = b.broadcast_in_dim(mask, v.type.shape, {});
        v = b.select(m, v, b.full(0, v.type));
        Value y = b.emit("stablehlo.all_reduce", {v}, groups, v.type,
                         {b.binary_region(hlo::Binary::Add, v.type.dtype)});
        outs.push_back(pred ? b.convert(y, hlo::DType::Pred) : b.bitcast_convert(y, x.type));
      }
      break;
    case Collective::AllGather:
      for (const Value& x : params) deliver(all_gather_flat(b, x, groups, n));
      break;
    case Collective::ReduceScatter:
      for (size_t i = 0; i < params.size(); i += s.group)
        outs.push_back(reduce_scatter_flat(b, joined(i), s.reduce, s.premul, groups, n));
      break;
    case Collective::AllToAll:
      for (size_t i = 0; i < params.size(); i += s.group)
        deliver(all_to_all_flat(b, joined(i), groups, n));
      break;
    case Collective::Barrier: break;
  }
  runtime::Program program;
  for (const Value& v : outs) program.outputs.push_back(v.type);
  program.mlir = b.module(outs);
  program.label = std::string("tpu_dist ") + s.name;
  return program;
}

hlo::Value lower_graph_collective(hlo::Builder& b, const std::string& kind,
                                  const std::string& reduce, int n, const hlo::Value& x,
                                  const hlo::TensorType& out) {
  static const std::map<std::string, Reduce> reduces{
      {"sum", Reduce::Sum},   {"avg", Reduce::Avg},    {"product", Reduce::Product},
      {"min", Reduce::Min},   {"max", Reduce::Max},    {"band", Reduce::BitAnd},
      {"bor", Reduce::BitOr}, {"bxor", Reduce::BitXor}};
  const hlo::DType dtype = x.type.dtype;
  auto reduce_op = [&] {
    auto it = reduces.find(reduce);
    if (it == reduces.end() || !can_reduce(it->second, dtype))
      throw ops::Unsupported(kind + " with reduce op '" + reduce + "' on " + hlo::mlir_name(dtype));
    return it->second;
  };
  const std::string groups = replica_groups(n);
  const hlo::Value flat = b.reshape(x, {x.type.numel()});
  hlo::Value y;
  if (kind == "all_reduce") {
    y = all_reduce_flat(b, flat, reduce_op(), 1.0, groups, n);
  } else if (kind == "all_gather_into_tensor") {
    y = all_gather_flat(b, flat, groups, n);
  } else if (kind == "reduce_scatter_tensor") {
    const Reduce op = reduce_op();
    if (reduces_bitwise(op, dtype))
      throw ops::Unsupported("reduce_scatter_tensor with a bitwise reduce op");
    y = reduce_scatter_flat(b, flat, op, 1.0, groups, n);
  } else if (kind == "all_to_all_single") {
    y = all_to_all_flat(b, flat, groups, n);
  } else {
    throw ops::Unsupported("the collective " + kind);
  }
  if (y.type.numel() != out.numel())
    throw std::invalid_argument("torch_tpu: " + kind + " of " + x.type.str() + " over " +
                                std::to_string(n) + " ranks gives " +
                                std::to_string(y.type.numel()) + " elements, the graph expects " +
                                out.str());
  return b.reshape(y, out.shape);
}

}  // namespace torch_tpu::distributed
