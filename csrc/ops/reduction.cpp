// Reductions, scans and statistics. Results are reshaped to the meta kernel's output
// shape, which already says whether reduced dims are kept. Floats accumulate in f32 when
// they are bf16/f16 (as PyTorch's CPU kernels do), else in their own dtype.
#include "ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
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

Value reduce_as(Node& n, const Value& x, const std::vector<int64_t>& dims, Binary r,
                const Value& init, size_t out = 0) {
  return n.b.reshape(n.b.reduce(x, init, dims, r), n.out(out).shape);
}

// ---- sum, mean, prod ------------------------------------------------------------------

using DimsReduction = Value (*)(hlo::Builder&, const Value&, const std::vector<int64_t>&, bool,
                                DType);

// sum / mean over every dim (`full`) or over the dims in argument 1.
LowerFn reduce_with(DimsReduction fn, bool full) {
  return [fn, full](Node& n) {
    const Value& x = n.in(0);
    std::vector<int64_t> dims = full ? all_dims(x.type.rank()) : dims_arg(n, 1, x.type.rank());
    return V{n.b.reshape(fn(n.b, x, dims, false, n.out().dtype), n.out().shape)};
  };
}

LowerFn prod_over(bool full) {
  return [full](Node& n) {
    const Value& x = n.in(0);
    std::vector<int64_t> dims = full ? all_dims(x.type.rank()) : dims_arg(n, 1, x.type.rank());
    DType out = n.out().dtype;
    DType acc = math_dtype(out);
    Value in = n.b.convert(x, acc);
    if (acc == DType::Pred) return V{reduce_as(n, in, dims, Binary::And, n.b.constant(1, acc))};
    return V{reduce_as(n, in, dims, Binary::Multiply, n.b.constant(1, acc))};
  };
}

// ---- max, min, argmax, argmin ---------------------------------------------------------

Value extreme(Node& n, const Value& x, const std::vector<int64_t>& dims, bool max, size_t out = 0) {
  return n.b.reshape(reduce_extreme(n.b, x, dims, max), n.out(out).shape);
}

// (values, indices) of the max / min over one dim: the extreme value, then the lowest
// position holding it (a NaN position when the value is NaN), so ties give the first
// occurrence as in PyTorch. Two plain reductions run faster than one two-operand reduce.
std::pair<Value, Value> arg_extreme(hlo::Builder& b, const Value& x, int64_t dim, bool max) {
  Value value = reduce_extreme(b, x, {dim}, max);
  std::vector<int64_t> rows = other_dims(x.type.rank(), dim);
  Value vb = b.broadcast_in_dim(value, x.type.shape, rows);
  Value hit = b.compare(Compare::EQ, x, vb);
  if (hlo::is_float(x.type.dtype))
    hit = b.binary(Binary::Or, hit, b.binary(Binary::And, is_nan(b, x), is_nan(b, vb)));
  TensorType idx_type{DType::S64, x.type.shape};
  Value none = b.full(static_cast<double>(x.type.shape[dim]), idx_type);
  Value index = b.reduce(b.select(hit, b.iota(idx_type, dim), none), highest(b, DType::S64), {dim},
                         Binary::Minimum);
  return {value, index};
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
    if (!d || x.type.rank() == 0)
      x = n.b.reshape(x, {x.type.numel()});
    else
      dim = wrap_dim(*d, x.type.rank());
    return V{n.b.reshape(arg_extreme(n.b, x, dim, max).second, n.out().shape)};
  };
}

LowerFn extreme_all(bool max) {
  return [max](Node& n) {
    const Value& x = n.in(0);
    // PyTorch's check, which its meta kernel lacks: an empty max has no identity. A
    // failed lowering is not cached, so every such call raises.
    if (x.type.numel() == 0)
      throw std::invalid_argument(std::string(max ? "max" : "min") +
                                  "(): Expected reduction dim to be specified for input.numel() "
                                  "== 0. Specify the reduction dim with the 'dim' argument.");
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
    return V{reduce_as(n, x, dims, any ? Binary::Or : Binary::And,
                       b.constant(any ? 0 : 1, DType::Pred))};
  };
}

// ---- var, std -------------------------------------------------------------------------

// var(self, dim?, *, correction?, keepdim) and its relatives: sum((x - mean)^2) /
// max(0, N - correction), in two passes for accuracy. Returns {var or std, mean}.
V variance(Node& n, bool take_sqrt, bool with_mean) {
  hlo::Builder& b = n.b;
  const Value& self = n.in(0);
  std::vector<int64_t> dims = dims_arg(n, 1, self.type.rank());
  DType acc = math_dtype(n.out(0).dtype);
  Value x = b.convert(self, acc);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.type.shape[d];
  std::vector<int64_t> kept = x.type.shape;
  for (int64_t d : dims) kept[d] = 1;
  Value total = b.reshape(b.reduce(x, b.constant(0, acc), dims, Binary::Add), kept);
  Value mean = b.binary(Binary::Divide, total, b.full(static_cast<double>(count), total.type));
  Value centered = b.binary(Binary::Subtract, x,
                            b.broadcast_in_dim(mean, x.type.shape, all_dims(x.type.rank())));
  Value sq = b.reduce(b.binary(Binary::Multiply, centered, centered), b.constant(0, acc), dims,
                      Binary::Add);
  Value correction = n.has(2) ? b.convert(n.in(2), acc) : b.constant(1, acc);
  Value dof = b.binary(Binary::Subtract, b.constant(static_cast<double>(count), acc), correction);
  dof = b.binary(Binary::Maximum, dof, b.constant(0, acc));
  Value var = b.binary(Binary::Divide, sq, b.broadcast_in_dim(dof, sq.type.shape, {}));
  if (take_sqrt) var = b.unary(Unary::Sqrt, var);
  V out{b.reshape(var, n.out(0).shape)};
  if (with_mean) out.push_back(b.reshape(mean, n.out(1).shape));
  return out;
}

// ---- logsumexp ------------------------------------------------------------------------

// max + log(sum(exp(x - max))), with infinite maxima replaced by 0 so that all -inf
// rows give -inf and +inf rows give +inf, as PyTorch's kernel does.
V lower_logsumexp(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  Value x = b.convert(n.in(0), acc);
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  std::vector<int64_t> kept = x.type.shape;
  for (int64_t d : dims) kept[d] = 1;
  Value m = b.reshape(b.reduce(x, lowest(b, acc), dims, Binary::Maximum), kept);
  Value inf = b.compare(Compare::EQ, b.unary(Unary::Abs, m), b.full(INFINITY, m.type));
  m = b.select(inf, b.full(0, m.type), m);
  Value mb = b.broadcast_in_dim(m, x.type.shape, all_dims(x.type.rank()));
  Value s = b.reduce(b.unary(Unary::Exponential, b.binary(Binary::Subtract, x, mb)),
                     b.constant(0, acc), dims, Binary::Add);
  Value r = b.binary(Binary::Add, b.unary(Unary::Log, s), b.reshape(m, s.type.shape));
  return V{b.reshape(r, n.out().shape)};
}

// ---- vector norms ---------------------------------------------------------------------

// The p-norm over `dims`, p a runtime scalar: a stablehlo.case picks the branch for p
// (2, 1, 0, inf, -inf, or the general power sum), so one program serves every p and
// only the chosen branch runs. The branches read `a` from the enclosing scope, which
// case regions (unlike reduce bodies) may do.
Value vector_norm(Node& n, const Value& self, const Value* p_in, const std::vector<int64_t>& dims) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  // The modulus of complex values is taken before they become real.
  Value a = hlo::is_complex(self.type.dtype) ? b.convert(b.unary(Unary::Abs, self), acc)
                                             : b.unary(Unary::Abs, b.convert(self, acc));
  Value p = p_in ? b.convert(*p_in, acc) : b.constant(2, acc);
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < a.type.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) shape.push_back(a.type.shape[d]);
  TensorType rt{acc, shape};
  auto branch = [&](std::function<Value(hlo::Builder&)> body) {
    return b.region({}, [&](hlo::Builder& r, const V&) { return V{body(r)}; });
  };
  auto sum = [&](hlo::Builder& r, const Value& v) {
    return r.reduce(v, r.constant(0, acc), dims, Binary::Add);
  };
  std::vector<std::string> branches{
      branch([&](hlo::Builder& r) {
        return r.unary(Unary::Sqrt, sum(r, r.binary(Binary::Multiply, a, a)));
      }),
      branch([&](hlo::Builder& r) { return sum(r, a); }),
      branch([&](hlo::Builder& r) {
        return sum(r, r.convert(r.compare(Compare::NE, a, r.full(0, a.type)), acc));
      }),
      branch([&](hlo::Builder& r) { return reduce_extreme(r, a, dims, true); }),
      branch([&](hlo::Builder& r) { return reduce_extreme(r, a, dims, false); }),
      branch([&](hlo::Builder& r) {
        Value powered = sum(r, r.binary(Binary::Power, a, r.broadcast_in_dim(p, a.type.shape, {})));
        Value inv = r.binary(Binary::Divide, r.constant(1, acc), p);
        return r.binary(Binary::Power, powered, r.broadcast_in_dim(inv, rt.shape, {}));
      }),
  };
  const double special[] = {2, 1, 0, INFINITY, -INFINITY};
  Value index = b.constant_int(5, DType::S32);
  for (int k = 4; k >= 0; --k)
    index = b.select(b.compare(Compare::EQ, p, b.constant(special[k], acc)),
                     b.constant_int(k, DType::S32), index);
  Value r = b.emit("stablehlo.case", {index}, "", rt, branches);
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
// `combine` is a region of two scalars of x's dtype.
Value scan(hlo::Builder& b, const Value& x, int64_t dim, const std::string& combine,
           const Value& init) {
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
  return b.emit("stablehlo.reduce_window", {x, init}, attrs, x.type, {combine});
}

Value scan(hlo::Builder& b, const Value& x, int64_t dim, const std::string& combine, double init) {
  return scan(b, x, dim, combine, b.constant(init, x.type.dtype));
}

// log(exp(a) + exp(b)), written as PyTorch's helper is: equal infinities return
// themselves instead of inf - inf, and NaN propagates.
std::string log_add_exp_region(hlo::Builder& b, DType t) {
  TensorType s{t, {}};
  return b.region({s, s}, [](hlo::Builder& r, const V& a) {
    Value hi = r.binary(Binary::Maximum, a[0], a[1]), lo = r.binary(Binary::Minimum, a[0], a[1]);
    Value sum = r.binary(Binary::Add, hi,
                         r.unary(Unary::LogPlusOne,
                                 r.unary(Unary::Exponential, r.binary(Binary::Subtract, lo, hi))));
    Value finite = r.emit("stablehlo.is_finite", {lo}, "", TensorType{DType::Pred, {}});
    Value use_sum = r.binary(Binary::Or, r.compare(Compare::NE, lo, hi), finite);
    // maximum / minimum may drop a NaN; a + b keeps it.
    Value nan = r.binary(Binary::Or, is_nan(r, a[0]), is_nan(r, a[1]));
    return V{r.select(nan, r.binary(Binary::Add, a[0], a[1]), r.select(use_sum, sum, a[0]))};
  });
}

// cumsum / cumprod / logcumsumexp(self, dim, ...): `region` builds the combiner for
// the accumulation dtype.
LowerFn cumulative(std::function<std::string(hlo::Builder&, DType)> region, double init) {
  return [region, init](Node& n) {
    hlo::Builder& b = n.b;
    DType acc = math_dtype(n.out().dtype);
    Value x = b.convert(n.in(0), acc);
    if (x.type.rank() == 0 || x.type.numel() == 0) return V{x};
    return V{scan(b, x, wrap_dim(n.i64(1), x.type.rank()), region(b, acc), init)};
  };
}

LowerFn cumulative(Binary op, double init) {
  return cumulative([op](hlo::Builder& b, DType t) { return b.binary_region(op, t); }, init);
}

// _cummax_helper / _cummin_helper(self, values, indices, dim), and cummax / cummin(self,
// dim) in graphs (eager mode reaches them through the helpers): the running extreme is a
// scan with a NaN-propagating max (min); its index is the last position so far where x
// reached the running extreme (ties take the later index, as PyTorch's kernel does), i.e.
// a running max over "position where x equals its own running extreme, else -1".
LowerFn cumulative_extreme(bool max, size_t dim_arg) {
  return [max, dim_arg](Node& n) {
    hlo::Builder& b = n.b;
    Value x = n.in(0);
    const DType out = x.type.dtype;
    if (out == DType::Pred) x = b.convert(x, DType::S8);
    const TensorType index_type{DType::S64, x.type.shape};
    if (x.type.rank() == 0 || x.type.numel() == 0)
      return V{b.convert(x, out), b.full(0, index_type)};
    const int64_t dim = wrap_dim(n.i64(dim_arg), x.type.rank());
    const TensorType s{x.type.dtype, {}};
    std::string extreme = b.region({s, s}, [max](hlo::Builder& r, const V& a) {
      Value pick = r.binary(max ? Binary::Maximum : Binary::Minimum, a[0], a[1]);
      return V{r.select(is_nan(r, a[0]), a[0], r.select(is_nan(r, a[1]), a[1], pick))};
    });
    Value running =
        scan(b, x, dim, extreme, max ? lowest(b, x.type.dtype) : highest(b, x.type.dtype));
    Value reached = b.binary(Binary::Or, b.compare(Compare::EQ, x, running), is_nan(b, x));
    Value position = b.select(reached, b.iota(index_type, dim), b.full(-1, index_type));
    Value index = scan(b, position, dim, b.binary_region(Binary::Maximum, DType::S64), -1);
    return V{b.convert(running, out), index};
  };
}

// ---- nansum, count_nonzero ------------------------------------------------------------

V lower_nansum(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  Value zeroed = b.select(is_nan(b, x), b.full(0, x.type), x);
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  return V{b.reshape(lower_sum(b, zeroed, dims, false, n.out().dtype), n.out().shape)};
}

V lower_count_nonzero(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  Value nonzero = b.convert(b.convert(x, DType::Pred), DType::S64);
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  return V{reduce_as(n, nonzero, dims, Binary::Add, b.constant_int(0, DType::S64))};
}

// hash_tensor(self, dim, keepdim, mode=0): the xor of the elements' 64-bit patterns over
// dims, as PyTorch defines it: floats widened to f64, integers and bools to int64.
V lower_hash_tensor(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  if (n.i64(3) != 0) throw std::invalid_argument("hash_tensor: only mode 0 (xor_sum) is supported");
  Value wide = hlo::is_float(x.type.dtype) ? b.convert(x, DType::F64) : b.convert(x, DType::S64);
  Value bits = b.bitcast_convert(wide, {DType::U64, x.type.shape});
  std::vector<int64_t> dims = dims_arg(n, 1, x.type.rank());
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) shape.push_back(x.type.shape[d]);
  Value r = b.emit("stablehlo.reduce", {bits, b.constant_int(0, DType::U64)},
                   "dimensions = " + hlo::i64_array(dims), TensorType{DType::U64, shape},
                   {b.binary_region(Binary::Xor, DType::U64)});
  return {b.reshape(r, n.out().shape)};
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
  return b.constant_int(
      bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)), dtype);
}

Value highest(hlo::Builder& b, DType dtype) {
  if (hlo::is_float(dtype)) return b.constant(INFINITY, dtype);
  if (dtype == DType::Pred) return b.constant_int(1, dtype);
  if (hlo::is_unsigned_int(dtype)) return b.constant_int(-1, dtype);  // wraps to the maximum
  int bits = 8 * hlo::byte_width(dtype);
  return b.constant_int(
      bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1, dtype);
}

Value is_nan(hlo::Builder& b, const Value& x) { return b.compare(Compare::NE, x, x); }

Value reduce_extreme(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool max) {
  const DType t = x.type.dtype;
  if (t == DType::Pred)
    return b.reduce(x, b.constant(max ? 0 : 1, t), dims, max ? Binary::Or : Binary::And);
  Value init = max ? lowest(b, t) : highest(b, t);
  Value r = b.reduce(x, init, dims, max ? Binary::Maximum : Binary::Minimum);
  if (!hlo::is_float(t)) return r;
  // stablehlo.maximum / minimum need not propagate NaN (XLA:CPU's do not), PyTorch's do.
  // A second plain reduction finds the NaNs: both stay on XLA's fast reduction path,
  // which a combiner with selects would leave.
  Value any_nan = b.reduce(is_nan(b, x), b.constant(0, DType::Pred), dims, Binary::Or);
  return b.select(any_nan, b.full(NAN, r.type), r);
}

Value lower_sum(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool keepdim,
                DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  DType acc = math_dtype(dtype);
  Value in = b.convert(x, acc);
  Value sum =
      b.reduce(in, b.constant(0, acc), rdims, acc == DType::Pred ? Binary::Or : Binary::Add);
  return keep_dims(b, b.convert(sum, dtype), x, rdims, keepdim);
}

Value lower_mean(hlo::Builder& b, const Value& x, const std::vector<int64_t>& dims, bool keepdim,
                 DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  DType acc = math_dtype(dtype);
  int64_t count = 1;
  for (int64_t d : rdims) count *= x.type.shape[d];
  Value sum = b.reduce(b.convert(x, acc), b.constant(0, acc), rdims, Binary::Add);
  // 0/0 gives NaN for an empty reduction, as in PyTorch.
  Value mean = b.binary(Binary::Divide, sum, b.full(static_cast<double>(count), sum.type));
  return keep_dims(b, b.convert(mean, dtype), x, rdims, keepdim);
}

TORCH_TPU_LOWERING(sum, {"sum", "sum.out"}, reduce_with(lower_sum, true));
TORCH_TPU_LOWERING(sum_dim, {"sum.dim_IntList", "sum.IntList_out"}, reduce_with(lower_sum, false));
TORCH_TPU_LOWERING(mean, {"mean", "mean.dtype_out"}, reduce_with(lower_mean, true));
TORCH_TPU_LOWERING(mean_dim, {"mean.dim", "mean.out"}, reduce_with(lower_mean, false));
TORCH_TPU_LOWERING(prod, {"prod", "prod.out"}, prod_over(true));
TORCH_TPU_LOWERING(prod_dim, {"prod.dim_int", "prod.int_out"}, prod_over(false));

TORCH_TPU_LOWERING(max, {"max", "max.unary_out"}, extreme_all(true));
TORCH_TPU_LOWERING(min, {"min", "min.unary_out"}, extreme_all(false));
TORCH_TPU_LOWERING(max_dim, {"max.dim", "max.dim_max"}, extreme_dim(true));
TORCH_TPU_LOWERING(min_dim, {"min.dim", "min.dim_min"}, extreme_dim(false));
TORCH_TPU_LOWERING(amax, {"amax", "amax.out"}, extreme_dims(true));
TORCH_TPU_LOWERING(amin, {"amin", "amin.out"}, extreme_dims(false));
TORCH_TPU_LOWERING(aminmax, {"aminmax", "aminmax.out"}, lower_aminmax);
// The deprecated _aminmax(self) (all elements) and _aminmax.dim(self, dim, keepdim).
TORCH_TPU_LOWERING(aminmax_deprecated, {"_aminmax", "_aminmax.dim"}, [](Node& n) {
  const Value& x = n.in(0);
  std::vector<int64_t> dims;
  if (n.args.size() == 1) {
    for (int64_t d = 0; d < x.type.rank(); ++d) dims.push_back(d);
  } else {
    dims = {wrap_dim(n.i64(1), std::max<int64_t>(x.type.rank(), 1))};
  }
  return V{extreme(n, x, dims, false, 0), extreme(n, x, dims, true, 1)};
});
TORCH_TPU_LOWERING(argmax, {"argmax", "argmax.out"}, arg_only(true));
TORCH_TPU_LOWERING(argmin, {"argmin", "argmin.out"}, arg_only(false));

TORCH_TPU_LOWERING(any, {"any", "any.all_out"}, any_all(true, true));
TORCH_TPU_LOWERING(any_dim, {"any.dim", "any.out", "any.dims", "any.dims_out"},
                   any_all(true, false));
TORCH_TPU_LOWERING(all, {"all", "all.all_out"}, any_all(false, true));
TORCH_TPU_LOWERING(all_dim, {"all.dim", "all.out", "all.dims", "all.dims_out"},
                   any_all(false, false));

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
TORCH_TPU_LOWERING(norm,
                   {"norm.Scalar", "norm.Scalar_out", "norm.ScalarOpt_dtype",
                    "norm.ScalarOpt_dtype_out"},
                   lower_norm_all);

TORCH_TPU_LOWERING(cumsum, {"cumsum", "cumsum_", "cumsum.out"}, cumulative(Binary::Add, 0));
TORCH_TPU_LOWERING(cumprod, {"cumprod", "cumprod_", "cumprod.out"},
                   cumulative(Binary::Multiply, 1));
TORCH_TPU_LOWERING(logcumsumexp,
                   {"logcumsumexp", "logcumsumexp.out", "_logcumsumexp", "_logcumsumexp.out"},
                   cumulative(log_add_exp_region, -INFINITY));
TORCH_TPU_LOWERING(cummax_helper, {"_cummax_helper"}, cumulative_extreme(true, 3));
TORCH_TPU_LOWERING(cummin_helper, {"_cummin_helper"}, cumulative_extreme(false, 3));
TORCH_TPU_GRAPH_LOWERING(cummax, {"cummax"}, cumulative_extreme(true, 1));
TORCH_TPU_GRAPH_LOWERING(cummin, {"cummin"}, cumulative_extreme(false, 1));
TORCH_TPU_LOWERING(nansum, {"nansum", "nansum.out"}, lower_nansum);
TORCH_TPU_LOWERING(hash_tensor, {"hash_tensor", "hash_tensor.out"}, lower_hash_tensor);
TORCH_TPU_LOWERING(count_nonzero, {"count_nonzero.dim_IntList"}, lower_count_nonzero);

}  // namespace torch_tpu::ops
