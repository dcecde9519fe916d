#include "ops/matmul.h"

#include "ops/elementwise.h"

namespace torch_tpu::ops {

namespace {

hlo::Value dot(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y, int64_t batch) {
  hlo::DType dtype = x.type.dtype;
  bool low = dtype == hlo::DType::F16 || dtype == hlo::DType::BF16;
  std::vector<int64_t> batch_dims;
  for (int64_t i = 0; i < batch; ++i) batch_dims.push_back(i);
  hlo::Value r = b.dot_general(x, y, batch_dims, batch_dims, {batch + 1}, {batch},
                               low ? hlo::DType::F32 : dtype);
  return b.convert(r, dtype);
}

}  // namespace

hlo::Value lower_mm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return dot(b, x, y, 0);
}

hlo::Value lower_bmm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return dot(b, x, y, 1);
}

hlo::Value lower_addmm(hlo::Builder& b, const hlo::Value& bias, const hlo::Value& x,
                       const hlo::Value& y, const hlo::Value& beta, const hlo::Value& alpha) {
  hlo::Value product = dot(b, x, y, 0);
  hlo::DType dtype = product.type.dtype;
  hlo::Value scaled = b.binary("multiply", product,
                               broadcast_to(b, b.convert(alpha, dtype), product.type.shape));
  hlo::Value base = broadcast_to(b, b.convert(bias, dtype), product.type.shape);
  base = b.binary("multiply", base, broadcast_to(b, b.convert(beta, dtype), product.type.shape));
  return b.binary("add", base, scaled);
}

}  // namespace torch_tpu::ops
