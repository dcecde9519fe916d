// The pieces of nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast
// path that are ops of their own (aten/composite_kernels.cpp composes the rest; the
// masked softmax is in ops/softmax.cpp).
#include <cmath>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// _transform_bias_rescale_qkv(qkv [B, T, 3D], qkv_bias [3D], num_heads): q, k, v as
// [B, num_heads, T, D / num_heads] each, the bias added and q scaled by 1/sqrt(head dim).
V transform_bias_rescale_qkv(Node& n) {
  hlo::Builder& b = n.b;
  const Value& qkv = n.in(0);
  int64_t batch = qkv.type.shape[0], t = qkv.type.shape[1], d = qkv.type.shape[2] / 3;
  int64_t heads = n.i64(2), head_dim = d / heads;
  DType acc = math_dtype(n.out().dtype);
  Value x = b.binary(Binary::Add, b.convert(qkv, acc),
                     b.broadcast_in_dim(b.convert(n.in(1), acc), qkv.type.shape, {2}));
  // [B, T, 3, heads, head_dim] -> [3, B, heads, T, head_dim]
  x = b.transpose(b.reshape(x, {batch, t, 3, heads, head_dim}), {2, 0, 3, 1, 4});
  V out;
  for (int64_t i = 0; i < 3; ++i) {
    Value part = b.reshape(b.slice(x, {i, 0, 0, 0, 0}, {i + 1, batch, heads, t, head_dim}, {1, 1, 1, 1, 1}),
                           {batch, heads, t, head_dim});
    if (i == 0) {
      // CPU rounds the scale to the input's dtype before multiplying.
      Value scale = b.convert(b.constant(1.0 / std::sqrt(static_cast<double>(head_dim)),
                                         n.out().dtype),
                              acc);
      part = b.binary(Binary::Multiply, part, b.broadcast_in_dim(scale, part.type.shape, {}));
    }
    out.push_back(b.convert(part, n.out(i).dtype));
  }
  return out;
}

}  // namespace

TORCH_TPU_LOWERING(transform_bias_rescale_qkv, {"_transform_bias_rescale_qkv"},
                   transform_bias_rescale_qkv);

}  // namespace torch_tpu::ops
