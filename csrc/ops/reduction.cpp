// Reductions, scans and statistics. Results are reshaped to the meta kernel's output
// shape, which already says whether reduced dims are kept. Floats accumulate in f32 when
// they are bf16/f16 (as PyTorch's CPU kernels do), else in their own dtype.
#include "ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::Reducer;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> all;
  for (int64_t d = 0; d < rank; ++d) all.push_back(d);
  return all;
}

std::vector<int64_t> all_dims_if_empty(const Value& x, const std::vector<int64_t>& dims) {
  return dims.empty() ? all_dims(x.type.rank()) : dims;
}

DType accumulator(DType dtype) { return math_dtype(dtype); }

Value keep_dims(hlo::Builder& b, const Value& reduced, const Value& x,
                const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim) return reduced;
  std::vector<int64_t> shape = x.type.shape;
  for (int64_t d : dims) shape[d] = 1;
  return b.reshape(reduced, shape);
}

// The dims named by argument `i` (an int, an int list, or None), wrapped and sorted.
// None reduces over every dim; so does an empty list unless `empty_is_none` is false
// (any.dims / all.dims, where [] reduces nothing).
std::vector<int64_t> dims_arg(const Node& n, size_t i, int64_t rank, bool empty_is_all = true) {
  std::vector<int64_t> raw;
  bool none = true;
  if (i < n.args.size()) {
    const Attr& a = n.args[i].attr;
    if (const int64_t* d = std::get_if<int64_t>(&a)) raw = {*d}, none = false;
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a)) raw = *v, none = false;
  }
  if (rank == 0) return {};
  if (none || (raw.empty() && empty_is_all)) return all_dims(rank);
  for (int64_t& d : raw) d = wrap_dim(d, rank);
  std::sort(raw.begin(), raw.end());
  raw.erase(std::unique(raw.begin(), raw.end()), raw.end());
  return raw;
}

Value reduce_as(Node& n, const Value& x, const std::vector<int64_t>& dims, Reducer r,
                const Value& init, size_t out = 0) {
  return n.b.reshape(n.b.reduce(x, init, dims, r), n.out(out).shape);
}

// ---- sum, mean, prod ------------------------------------------------------------------

LowerFn sum_over(bool full) {
  return [full](Node& n) {
    const Value& x = n.in(0);
    std::vector<int64_t> dims = full ? all_dims(x.type.rank()) : dims_arg(n, 1, x.type.rank());
    if (dims.empty()) return V{n.b.convert(x, n.out().dtype)};
    return V{n.b.reshape(lower_sum(n.b, x, dims, false, n.out().dtype), n.out().shape)};
  };
}

LowerFn mean_over(bool full) {
  return [full](Node& n) {
    const Value& x = n.in(0);
    std::vector<int64_t> dims = full ? all_dims(x.type.rank()) : dims_arg(n, 1, x.type.rank());
    if (dims.empty()) return V{n.b.convert(x, n.out().dtype)};
    return V{n.b.reshape(lower_mean(n.b, x, dims, false, n.out().dtype), n.out().shape)};
  };
}

LowerFn prod_over(bool full) {
  return [full](Node& n) {
    const Value& x = n.in(0);
    std::vector<int64_t> dims = full ? all_dims(x.type.rank()) : dims_arg(n, 1, x.type.rank());
    DType out = n.out().dtype;
    DType acc = accumulator(out);
    Value in = n.b.convert(x, acc);
    if (acc == DType::Pred) return V{reduce_as(n, in, dims, Reducer::And, n.b.constant(1, acc))};
    return V{reduce_as(n, in, dims, Reducer::Mul, n.b.constant(1, acc))};
  };
}

// ---- max, min, argmax, argmin ---------------------------------------------------------

Value extreme(Node& n, const Value& x, const std::vector<int64_t>& dims, bool max,
              size_t out = 0) {
  return n.b.reshape(reduce_extreme(n.b, x, dims, max), n.out(out).shape);
}

// (values, indices) of the max / min over one dim: a two-operand reduce whose combiner
// orders candidates by value (NaN beating everything) and then by the lower index, so
// ties give the first occurrence whatever order XLA combines in.
std::pair<Value, Value> arg_extreme(hlo::Builder& b, const Value& x, int64_t dim, bool max) {
  const DType t = x.type.dtype;
  const bool floating = hlo::is_float(t);
  TensorType idx_type{DType::S64, x.type.shape};
  Value idx = b.iota(idx_type, dim);
  TensorType sv{t, {}}, si{DType::S64, {}};
  std::string combine = b.region({sv, si, sv, si}, [&](hlo::Builder& r, const V& a) {
    const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
    Value better = r.compare(max ? Compare::GT : Compare::LT, av, bv);
    Value same = r.compare(Compare::EQ, av, bv);
    if (floating) {
      Value an = is_nan(r, av), bn = is_nan(r, bv);
      Value not_bn = r.emit("stablehlo.not", {bn}, "", bn.type);
      better = r.binary("or", better, r.binary("and", an, not_bn));
      same = r.binary("or", same, r.binary("and", an, bn));
    }
    Value first = r.binary("and", same, r.compare(Compare::LT, ai, bi));
    Value pick = r.binary("or", better, first);
    return V{r.select(pick, av, bv), r.select(pick, ai, bi)};
  });
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) shape.push_back(x.type.shape[d]);
  Value init_v = max ? lowest(b, t) : highest(b, t);
  Value init_i = b.constant_int(std::numeric_limits<int64_t>::max(), DType::S64);
  V out = b.emit_multi("stablehlo.reduce", {x, idx, init_v, init_i},
                       "dimensions = " + hlo::i64_array({dim}),
                       {TensorType{t, shape}, TensorType{DType::S64, shape}}, {combine});
  return {out[0], out[1]};
}

// max.dim / min.dim: (values, indices). A 0-d input is its own max at index 0.
LowerFn extreme_dim(bool max) {
  return [max](Node& n) {
    Value x = n.in(0);
    int64_t dim = wrap_dim(n.i64(1), x.type.rank());
    if (x.type.rank() == 0) x = n.b.reshape(x, {1});
    auto [v, i] = arg_extreme(n.b, x, dim, max);
    return V{n.b.reshape(v, n.out(0).shape), n.b.reshape(i, n.out(1).shape)};
  };
}

// argmax / argmin: over one dim, or over the flattened tensor when dim is None.
LowerFn arg_only(bool max) {
  return [max](Node& n) {
    Value x = n.in(0);
    std::optional<int64_t> d = n.opt_i64(1);
    int64_t dim = 0;
    if (!d || x.type.rank() == 0) x = n.b.reshape(x, {x.type.numel()});
    else dim = wrap_dim(*d, x.type.rank());
    return V{n.b.reshape(arg_extreme(n.b, x, dim, max).second, n.out().shape)};
  };
}

LowerFn extreme_all(bool max) {
  return [max](Node& n) {
    const Value& x = n.in(0);
    return V{extreme(n, x, all_dims(x.type.rank()), max)};
  };
}

LowerFn extreme_dims(bool max) {  // amax / amin
  return [max](Node& n) {
    const Value& x = n.in(0);
    return V{extreme(n, x, dims_arg(n, 1, x.type.rank()), max)};
  };
}

// aminmax(self, *, dim?, keepdim): (min, max).
V lower_aminmax(Node& n) {
  const Value& x = n.in(0);
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  return V{extreme(n, x, dims, false, 0), extreme(n, x, dims, true, 1)};
}

// ---- any, all -------------------------------------------------------------------------

LowerFn any_all(bool any, bool full) {
  return [any, full](Node& n) {
    hlo::Builder& b = n.b;
    Value x = b.convert(n.in(0), DType::Pred);
    int64_t rank = x.type.rank();
    std::vector<int64_t> dims = full ? all_dims(rank) : dims_arg(n, 1, rank, false);
    return V{reduce_as(n, x, dims, any ? Reducer::Or : Reducer::And, b.constant(any ? 0 : 1, DType::Pred))};
  };
}

// ---- var, std -------------------------------------------------------------------------

// var(self, dim?, *, correction?, keepdim) and its relatives: sum((x - mean)^2) /
// max(0, N - correction), in two passes for accuracy. Returns {var or std, mean}.
V variance(Node& n, bool take_sqrt, bool with_mean) {
  hlo::Builder& b = n.b;
  const Value& self = n.in(0);
  std::vector<int64_t> dims = dims_arg(n, 1, self.type.rank());
  DType acc = accumulator(n.out(0).dtype);
  Value x = b.convert(self, acc);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.type.shape[d];
  std::vector<int64_t> kept = x.type.shape;
  for (int64_t d : dims) kept[d] = 1;
  Value total = b.reshape(b.reduce(x, b.constant(0, acc), dims, Reducer::Add), kept);
  Value mean = b.binary("divide", total, b.full(static_cast<double>(count), total.type));
  Value centered = b.binary("subtract", x, b.broadcast_in_dim(mean, x.type.shape, all_dims(x.type.rank())));
  Value sq = b.reduce(b.binary("multiply", centered, centered), b.constant(0, acc), dims, Reducer::Add);
  Value correction = n.has(2) ? b.convert(n.in(2), acc) : b.constant(1, acc);
  Value dof = b.binary("subtract", b.constant(static_cast<double>(count), acc), correction);
  dof = b.binary("maximum", dof, b.constant(0, acc));
  Value var = b.binary("divide", sq, b.broadcast_in_dim(dof, sq.type.shape, {}));
  if (take_sqrt) var = b.unary("sqrt", var);
  V out{b.reshape(var, n.out(0).shape)};
  if (with_mean) out.push_back(b.reshape(mean, n.out(1).shape));
  return out;
}

// ---- logsumexp ------------------------------------------------------------------------

// max + log(sum(exp(x - max))), with infinite maxima replaced by 0 so that all -inf
// rows give -inf and +inf rows give +inf, as PyTorch's kernel does.
V lower_logsumexp(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = accumulator(n.out().dtype);
  Value x = b.convert(n.in(0), acc);
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  std::vector<int64_t> kept = x.type.shape;
  for (int64_t d : dims) kept[d] = 1;
  Value m = b.reshape(b.reduce(x, lowest(b, acc), dims, Reducer::Max), kept);
  Value inf = b.compare(Compare::EQ, b.unary("abs", m), b.full(INFINITY, m.type));
  m = b.select(inf, b.full(0, m.type), m);
  Value mb = b.broadcast_in_dim(m, x.type.shape, all_dims(x.type.rank()));
  Value s = b.reduce(b.unary("exponential", b.binary("subtract", x, mb)), b.constant(0, acc), dims,
                     Reducer::Add);
  Value r = b.binary("add", b.unary("log", s), b.reshape(m, s.type.shape));
  return V{b.reshape(r, n.out().shape)};
}

// ---- vector norms ---------------------------------------------------------------------

// The p-norm over `dims`, p a runtime scalar: every special case (0, 1, 2, inf, -inf)
// is computed and the one matching p selected, so one program serves every p.
Value vector_norm(Node& n, const Value& self, const Value* p_in, const std::vector<int64_t>& dims) {
  hlo::Builder& b = n.b;
  DType acc = accumulator(n.out().dtype);
  Value a = b.unary("abs", b.convert(self, acc));
  Value zero = b.constant(0, acc);
  auto sum = [&](const Value& v) { return b.reduce(v, zero, dims, Reducer::Add); };
  Value p = p_in ? b.convert(*p_in, acc) : b.constant(2, acc);
  Value s1 = sum(a);
  Value s2 = b.unary("sqrt", sum(b.binary("multiply", a, a)));
  TensorType rt = s1.type;
  Value s0 = sum(b.convert(b.compare(Compare::NE, a, b.full(0, a.type)), acc));
  Value smax = reduce_extreme(b, a, dims, true);
  Value smin = reduce_extreme(b, a, dims, false);
  Value pa = b.broadcast_in_dim(p, a.type.shape, {});
  Value sp = sum(b.binary("power", a, pa));
  Value general = b.binary("power", sp, b.broadcast_in_dim(b.binary("divide", b.constant(1, acc), p), rt.shape, {}));
  auto when = [&](double value, const Value& yes, const Value& no) {
    Value is = b.compare(Compare::EQ, p, b.constant(value, acc));
    return b.select(b.broadcast_in_dim(is, rt.shape, {}), yes, no);
  };
  Value r = when(2, s2, when(1, s1, when(0, s0, when(INFINITY, smax, when(-INFINITY, smin, general)))));
  return b.reshape(r, n.out().shape);
}

// linalg_vector_norm(self, ord, dim?, keepdim, *, dtype?) and norm.ScalarOpt_dim(_dtype):
// argument 1 is p (None means 2), argument 2 the dims.
V lower_norm_dims(Node& n) {
  const Value& x = n.in(0);
  return V{vector_norm(n, x, n.has(1) ? &n.in(1) : nullptr, dims_arg(n, 2, x.type.rank()))};
}

// norm.Scalar(self, p) and norm.ScalarOpt_dtype(self, p?, *, dtype): every dim.
V lower_norm_all(Node& n) {
  const Value& x = n.in(0);
  return V{vector_norm(n, x, n.has(1) ? &n.in(1) : nullptr, all_dims(x.type.rank()))};
}

// ---- cumulative sums and products -----------------------------------------------------

// An inclusive scan along `dim` as a reduce_window whose window covers every earlier
// element: exact for integers, and what XLA recognises and optimises as a scan.
Value scan(hlo::Builder& b, const Value& x, int64_t dim, const char* op, double init) {
  const int64_t rank = x.type.rank();
  const int64_t len = x.type.shape[dim];
  std::vector<int64_t> window(rank, 1), strides(rank, 1);
  window[dim] = len;
  std::string padding = "dense<[";
  for (int64_t d = 0; d < rank; ++d)
    padding += std::string(d ? ", " : "") + "[" + std::to_string(d == dim ? len - 1 : 0) + ", 0]";
  padding += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  std::string attrs = "window_dimensions = " + hlo::i64_array(window) +
                      ", window_strides = " + hlo::i64_array(strides) + ", padding = " + padding;
  return b.emit("stablehlo.reduce_window", {x, b.constant(init, x.type.dtype)}, attrs, x.type,
                {b.binary_region(op, x.type.dtype)});
}

LowerFn cumulative(const char* op, double init) {
  return [op, init](Node& n) {
    hlo::Builder& b = n.b;
    DType out = n.out().dtype;
    DType acc = accumulator(out);
    Value x = b.convert(n.in(0), acc);
    if (x.type.rank() == 0 || x.type.numel() == 0) return V{x};
    return V{scan(b, x, wrap_dim(n.i64(1), x.type.rank()), op, init)};
  };
}

}  // namespace

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> other_dims(int64_t rank, int64_t dim) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) dims.push_back(d);
  return dims;
}

Value lowest(hlo::Builder& b, DType dtype) {
  if (hlo::is_float(dtype)) return b.constant(-INFINITY, dtype);
  if (dtype == DType::Pred || hlo::is_unsigned_int(dtype)) return b.constant_int(0, dtype);
  int bits = 8 * hlo::byte_width(dtype);
  return b.constant_int(bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)), dtype);
}

Value highest(hlo::Builder& b, DType dtype) {
  if (hlo::is_float(dtype)) return b.constant(INFINITY, dtype);
  if (dtype == DType::Pred) return b.constant_int(1, dtype);
  if (hlo::is_unsigned_int(dtype)) return b.constant_int(-1, dtype);  // wraps to the maximum
  int bits = 8 * hlo::byte_width(dtype);
  return b.constant_int(bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1, dtype);
}

Value is_nan(hlo::Builder& b, const Value& x) { return b.compare(Compare::NE, x, x); }

Value reduce_extreme(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool max) {
  const DType t = x.type.dtype;
  if (t == DType::Pred)
    return b.reduce(x, b.constant(max ? 0 : 1, t), dims, max ? Reducer::Or : Reducer::And);
  Value init = max ? lowest(b, t) : highest(b, t);
  if (!hlo::is_float(t)) return b.reduce(x, init, dims, max ? Reducer::Max : Reducer::Min);
  // stablehlo.maximum / minimum need not propagate NaN (XLA:CPU's do not), PyTorch's do.
  TensorType s{t, {}};
  std::string combine = b.region({s, s}, [max](hlo::Builder& r, const V& a) {
    Value wins = r.binary("or", is_nan(r, a[0]), r.compare(max ? Compare::GT : Compare::LT, a[0], a[1]));
    return V{r.select(wins, a[0], a[1])};
  });
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) shape.push_back(x.type.shape[d]);
  return b.emit("stablehlo.reduce", {x, init}, "dimensions = " + hlo::i64_array(dims),
                TensorType{t, shape}, {combine});
}

Value lower_sum(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool keepdim,
                DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  DType acc = accumulator(dtype);
  Value in = b.convert(x, acc);
  Value sum = b.reduce(in, b.constant(0, acc), rdims, acc == DType::Pred ? Reducer::Or : Reducer::Add);
  return keep_dims(b, b.convert(sum, dtype), x, rdims, keepdim);
}

Value lower_mean(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool keepdim,
                 DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  DType acc = accumulator(dtype);
  int64_t count = 1;
  for (int64_t d : rdims) count *= x.type.shape[d];
  Value sum = b.reduce(b.convert(x, acc), b.constant(0, acc), rdims, Reducer::Add);
  // 0/0 gives NaN for an empty reduction, as in PyTorch.
  Value mean = b.binary("divide", sum, b.full(static_cast<double>(count), sum.type));
  return keep_dims(b, b.convert(mean, dtype), x, rdims, keepdim);
}

TORCH_TPU_LOWERING(sum, {"sum", "sum.out"}, sum_over(true));
TORCH_TPU_LOWERING(sum_dim, {"sum.dim_IntList", "sum.IntList_out"}, sum_over(false));
TORCH_TPU_LOWERING(mean, {"mean", "mean.dtype_out"}, mean_over(true));
TORCH_TPU_LOWERING(mean_dim, {"mean.dim", "mean.out"}, mean_over(false));
TORCH_TPU_LOWERING(prod, {"prod", "prod.out"}, prod_over(true));
TORCH_TPU_LOWERING(prod_dim, {"prod.dim_int", "prod.int_out"}, prod_over(false));

TORCH_TPU_LOWERING(max, {"max", "max.unary_out"}, extreme_all(true));
TORCH_TPU_LOWERING(min, {"min", "min.unary_out"}, extreme_all(false));
TORCH_TPU_LOWERING(max_dim, {"max.dim", "max.dim_max"}, extreme_dim(true));
TORCH_TPU_LOWERING(min_dim, {"min.dim", "min.dim_min"}, extreme_dim(false));
TORCH_TPU_LOWERING(amax, {"amax", "amax.out"}, extreme_dims(true));
TORCH_TPU_LOWERING(amin, {"amin", "amin.out"}, extreme_dims(false));
TORCH_TPU_LOWERING(aminmax, {"aminmax", "aminmax.out"}, lower_aminmax);
TORCH_TPU_LOWERING(argmax, {"argmax", "argmax.out"}, arg_only(true));
TORCH_TPU_LOWERING(argmin, {"argmin", "argmin.out"}, arg_only(false));

TORCH_TPU_LOWERING(any, {"any", "any.all_out"}, any_all(true, true));
TORCH_TPU_LOWERING(any_dim, {"any.dim", "any.out", "any.dims", "any.dims_out"}, any_all(true, false));
TORCH_TPU_LOWERING(all, {"all", "all.all_out"}, any_all(false, true));
TORCH_TPU_LOWERING(all_dim, {"all.dim", "all.out", "all.dims", "all.dims_out"}, any_all(false, false));

TORCH_TPU_LOWERING(var, {"var.correction", "var.correction_out"},
                   [](Node& n) { return variance(n, false, false); });
TORCH_TPU_LOWERING(std, {"std.correction", "std.correction_out"},
                   [](Node& n) { return variance(n, true, false); });
TORCH_TPU_LOWERING(var_mean, {"var_mean.correction", "var_mean.correction_out"},
                   [](Node& n) { return variance(n, false, true); });
TORCH_TPU_LOWERING(std_mean, {"std_mean.correction", "std_mean.correction_out"},
                   [](Node& n) { return variance(n, true, true); });

TORCH_TPU_LOWERING(logsumexp, {"logsumexp", "logsumexp.out"}, lower_logsumexp);
TORCH_TPU_LOWERING(vector_norm,
                   {"linalg_vector_norm", "linalg_vector_norm.out", "norm.ScalarOpt_dim",
                    "norm.ScalarOpt_dim_dtype", "norm.out", "norm.dtype_out"},
                   lower_norm_dims);
TORCH_TPU_LOWERING(norm, {"norm.Scalar", "norm.Scalar_out", "norm.ScalarOpt_dtype",
                          "norm.ScalarOpt_dtype_out"},
                   lower_norm_all);

TORCH_TPU_LOWERING(cumsum, {"cumsum", "cumsum_", "cumsum.out"}, cumulative("stablehlo.add", 0));
TORCH_TPU_LOWERING(cumprod, {"cumprod", "cumprod_", "cumprod.out"},
                   cumulative("stablehlo.multiply", 1));

}  // namespace torch_tpu::ops
