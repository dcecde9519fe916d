#include "ops/common.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace torch_tpu::ops {

hlo::DType math_dtype(hlo::DType dtype) {
  switch (dtype) {
    case hlo::DType::BF16:
    case hlo::DType::F16:
    case hlo::DType::F8E4M3FN:
    case hlo::DType::F8E5M2: return hlo::DType::F32;
    default: return dtype;
  }
}

hlo::Value cast_to(hlo::Builder& b, const hlo::Value& x, hlo::DType dtype,
                   const std::vector<int64_t>& shape) {
  return broadcast_to(b, b.convert(x, dtype), shape);
}

hlo::Value splat(hlo::Builder& b, double value, const hlo::TensorType& like) {
  return b.full(value, like);
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw std::invalid_argument("The size of tensor a (" + std::to_string(da) +
                                  ") must match the size of tensor b (" + std::to_string(db) +
                                  ") at non-singleton dimension " + std::to_string(i));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

hlo::Value broadcast_to(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& shape) {
  std::vector<int64_t> dims;
  int64_t lead = static_cast<int64_t>(shape.size()) - x.type.rank();
  for (int64_t i = 0; i < x.type.rank(); ++i) dims.push_back(lead + i);
  return b.broadcast_in_dim(x, shape, dims);
}

hlo::Value arg_as(Node& n, size_t i, hlo::DType dtype) {
  return cast_to(n.b, n.in(i), dtype, n.out().shape);
}

hlo::DType float_math(const Node& n) {
  hlo::DType d = n.compute;
  if (hlo::is_complex(d)) return d;
  if (!hlo::is_float(d)) d = hlo::is_float(n.out().dtype) ? n.out().dtype : hlo::DType::F32;
  return math_dtype(d);
}

hlo::Value arg_math(Node& n, size_t i) {
  hlo::Value x = n.in(i);
  if (hlo::is_float(n.compute) || hlo::is_complex(n.compute)) x = n.b.convert(x, n.compute);
  return cast_to(n.b, x, float_math(n), n.out().shape);
}

hlo::Value sign_bit(hlo::Builder& b, const hlo::Value& x) {
  hlo::DType bits;
  switch (x.type.dtype) {
    case hlo::DType::F64: bits = hlo::DType::S64; break;
    case hlo::DType::F32: bits = hlo::DType::S32; break;
    case hlo::DType::F16:
    case hlo::DType::BF16: bits = hlo::DType::S16; break;
    case hlo::DType::F8E4M3FN:
    case hlo::DType::F8E5M2: bits = hlo::DType::S8; break;
    default:
      if (hlo::is_signed_int(x.type.dtype))
        return b.compare(hlo::Compare::LT, x, b.full(0, x.type));
      return b.full(0, {hlo::DType::Pred, x.type.shape});
  }
  hlo::Value i = b.bitcast_convert(x, {bits, x.type.shape});
  return b.compare(hlo::Compare::LT, i, b.full(0, i.type));
}

namespace {

hlo::Value nan_or(hlo::Builder& b, Binary op, const hlo::Value& x, const hlo::Value& y) {
  if (x.type.dtype == hlo::DType::Pred)
    return b.binary(op == Binary::Maximum ? Binary::Or : Binary::And, x, y);
  hlo::Value r = b.binary(op, x, y);
  if (!hlo::is_float(x.type.dtype)) return r;
  // XLA:CPU's maximum returns the other operand for a NaN in some positions.
  Math m{b};
  // x + y is NaN exactly when one of them is.
  return m.sel(m.or_(m.is_nan(x), m.is_nan(y)), m.add(x, y), r);
}

}  // namespace

hlo::Value nan_max(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return nan_or(b, Binary::Maximum, x, y);
}

hlo::Value nan_min(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return nan_or(b, Binary::Minimum, x, y);
}

void not_implemented(const char* op, hlo::DType dtype) {
  throw std::invalid_argument(std::string("\"") + op + "\" not implemented for '" +
                              hlo::mlir_name(dtype) + "'");
}

}  // namespace torch_tpu::ops
