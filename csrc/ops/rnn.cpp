// The fused recurrent cells PyTorch's nn.LSTM / nn.GRU call on accelerators
// (_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and their backward ops. The gate
// pre-activations come in as two matmul results; the cell adds the biases, applies the
// gate activations and saves a workspace the backward reads.
#include "hlo/builder.h"
#include "ops/common.h"
#include "ops/registry.h"
#include "ops/reduction.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;

// Column block `k` of width `h` of a [batch, n*h] matrix.
Value chunk(hlo::Builder& b, const Value& x, int64_t k, int64_t h) {
  int64_t rows = x.type.shape[0];
  return b.slice(x, {0, k * h}, {rows, (k + 1) * h}, {1, 1});
}

// input_gates + hidden_gates + the optional biases, in the math dtype.
Value gate_sum(Node& n, hlo::DType t) {
  hlo::Builder& b = n.b;
  const std::vector<int64_t>& shape = n.in(0).type.shape;
  Value sum = b.binary(Binary::Add, cast_to(b, n.in(0), t, shape), cast_to(b, n.in(1), t, shape));
  for (size_t i : {3, 4})
    if (n.has(i)) sum = b.binary(Binary::Add, sum, cast_to(b, n.in(i), t, shape));
  return sum;
}

// The sum over the batch of a [batch, k] gradient: a bias's gradient.
Value batch_sum(hlo::Builder& b, const Value& x) {
  return b.reduce(x, b.constant(0, x.type.dtype), {0}, hlo::Binary::Add);
}

V lstm_cell(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  hlo::DType t = math_dtype(n.out(0).dtype);
  Value gates = gate_sum(n, t);
  int64_t h = gates.type.shape[1] / 4;
  Value cx = cast_to(b, n.in(2), t, n.in(2).type.shape);
  Value ig = m.sigmoid(chunk(b, gates, 0, h)), fg = m.sigmoid(chunk(b, gates, 1, h));
  Value cg = m.tanh(chunk(b, gates, 2, h)), og = m.sigmoid(chunk(b, gates, 3, h));
  Value cy = m.add(m.mul(fg, cx), m.mul(ig, cg));
  Value hy = m.mul(og, m.tanh(cy));
  return {hy, cy, b.concatenate({ig, fg, cg, og}, 1)};
}

// (grad_hy?, grad_cy?, cx, cy, workspace, has_bias) -> (grad_gates, grad_cx, grad_bias)
V lstm_cell_backward(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  hlo::DType t = math_dtype(n.out(0).dtype);
  Value cx = cast_to(b, n.in(2), t, n.in(2).type.shape);
  Value cy = cast_to(b, n.in(3), t, cx.type.shape);
  Value ws = cast_to(b, n.in(4), t, n.in(4).type.shape);
  int64_t h = cx.type.shape[1];
  Value zero = m.k(0, cx), one = m.k(1, cx);
  Value ghy = n.has(0) ? cast_to(b, n.in(0), t, cx.type.shape) : zero;
  Value gcy = n.has(1) ? cast_to(b, n.in(1), t, cx.type.shape) : zero;
  Value ig = chunk(b, ws, 0, h), fg = chunk(b, ws, 1, h), cg = chunk(b, ws, 2, h),
        og = chunk(b, ws, 3, h);
  Value tcy = m.tanh(cy);
  Value gc = m.add(m.mul(m.mul(ghy, og), m.sub(one, m.mul(tcy, tcy))), gcy);
  auto dsig = [&](const Value& s) { return m.mul(s, m.sub(one, s)); };
  Value gi = m.mul(m.mul(gc, cg), dsig(ig));
  Value gf = m.mul(m.mul(gc, cx), dsig(fg));
  Value gg = m.mul(m.mul(gc, ig), m.sub(one, m.mul(cg, cg)));
  Value go = m.mul(m.mul(ghy, tcy), dsig(og));
  Value grad_gates = b.concatenate({gi, gf, gg, go}, 1);
  return {grad_gates, m.mul(gc, fg), batch_sum(b, grad_gates)};
}

V gru_cell(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  hlo::DType t = math_dtype(n.out(0).dtype);
  const std::vector<int64_t>& shape = n.in(0).type.shape;
  Value in_gates = cast_to(b, n.in(0), t, shape), hid_gates = cast_to(b, n.in(1), t, shape);
  if (n.has(3)) in_gates = m.add(in_gates, cast_to(b, n.in(3), t, shape));
  if (n.has(4)) hid_gates = m.add(hid_gates, cast_to(b, n.in(4), t, shape));
  int64_t h = shape[1] / 3;
  Value hx = cast_to(b, n.in(2), t, n.in(2).type.shape);
  Value rg = m.sigmoid(m.add(chunk(b, in_gates, 0, h), chunk(b, hid_gates, 0, h)));
  Value ig = m.sigmoid(m.add(chunk(b, in_gates, 1, h), chunk(b, hid_gates, 1, h)));
  Value hn = chunk(b, hid_gates, 2, h);
  Value ng = m.tanh(m.add(chunk(b, in_gates, 2, h), m.mul(rg, hn)));
  Value hy = m.add(ng, m.mul(ig, m.sub(hx, ng)));
  return {hy, b.concatenate({rg, ig, ng, hx, hn}, 1)};
}

// (grad_hy, workspace, has_bias) -> (grad_input_gates, grad_hidden_gates, grad_hx,
// grad_input_bias, grad_hidden_bias)
V gru_cell_backward(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  hlo::DType t = math_dtype(n.out(0).dtype);
  Value ghy = cast_to(b, n.in(0), t, n.in(0).type.shape);
  Value ws = cast_to(b, n.in(1), t, n.in(1).type.shape);
  int64_t h = ghy.type.shape[1];
  Value rg = chunk(b, ws, 0, h), ig = chunk(b, ws, 1, h), ng = chunk(b, ws, 2, h),
        hx = chunk(b, ws, 3, h), hn = chunk(b, ws, 4, h);
  Value one = m.k(1, ghy);
  Value gig = m.mul(m.mul(ghy, m.sub(hx, ng)), m.mul(ig, m.sub(one, ig)));
  Value ghx = m.mul(ghy, ig);
  Value gin = m.mul(m.mul(ghy, m.sub(one, ig)), m.sub(one, m.mul(ng, ng)));
  Value ghn = m.mul(gin, rg);
  Value gir = m.mul(m.mul(gin, hn), m.mul(rg, m.sub(one, rg)));
  Value grad_in = b.concatenate({gir, gig, gin}, 1);
  Value grad_hid = b.concatenate({gir, gig, ghn}, 1);
  return {grad_in, grad_hid, ghx, batch_sum(b, grad_in), batch_sum(b, grad_hid)};
}

}  // namespace

TORCH_TPU_LOWERING(lstm_cell, {"_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell.out"}, lstm_cell);
TORCH_TPU_LOWERING(lstm_cell_backward,
                   {"_thnn_fused_lstm_cell_backward_impl",
                    "_thnn_fused_lstm_cell_backward_impl.out"},
                   lstm_cell_backward);
TORCH_TPU_LOWERING(gru_cell, {"_thnn_fused_gru_cell", "_thnn_fused_gru_cell.out"}, gru_cell);
TORCH_TPU_LOWERING(gru_cell_backward,
                   {"_thnn_fused_gru_cell_backward", "_thnn_fused_gru_cell_backward.out"},
                   gru_cell_backward);

}  // namespace torch_tpu::ops
