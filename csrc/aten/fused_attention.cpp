// scaled_dot_product_attention on tpu as PyTorch's fused op for out-of-tree backends,
// `_scaled_dot_product_fused_attention_overrideable` (+ its backward), chosen through
// `_fused_sdp_choice_stub`. Being one op with outputs PyTorch knows (output, logsumexp),
// it is what DTensor can shard (torch_tpu/_sharding.py registers the rule): the math
// path builds a causal mask as a plain tensor, which DTensor rejects. Grouped-query
// attention (fewer key/value heads) is handled here, since the fused op has no flag.
// Compiled graphs hold the same op, and the same code as composites (tpu::_fused_attention)
// gives their ATen ops.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace torch_tpu::aten {

namespace {

bool symbolic(const at::Tensor& t) {
  return t.defined() && t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

// Eager tpu tensors, DTensors included, and traced graphs (fake tensors: Dynamo,
// AOTAutograd) take the fused op; a compiled graph's decomposition table turns it into
// the ops of `attention` below (torch_tpu/_dynamo.py). Graphs with symbolic sizes keep
// PyTorch's math decomposition, whose ops the shape buckets know.
int64_t choose_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  const auto math = static_cast<int64_t>(at::SDPBackend::math);
  if (symbolic(query) || symbolic(key) || symbolic(value) ||
      symbolic(attn_mask.value_or(at::Tensor())))
    return math;
  if (!at::globalContext().userEnabledOverrideableSDP() || dropout_p > 0.0) return math;
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4 || query.is_nested()) return math;
  const int64_t hq = query.size(1), hkv = key.size(1);
  // Unequal heads without enable_gqa: the math path raises PyTorch's own error.
  if (hq != hkv && (!enable_gqa || hkv == 0 || hq % hkv != 0 || value.size(1) != hkv)) return math;
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

double softmax_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// Keys and values repeated to the query's heads (grouped-query attention).
at::Tensor expand_heads(const at::Tensor& t, int64_t heads) {
  return t.size(1) == heads ? t : t.repeat_interleave(heads / t.size(1), 1);
}

// Sums a gradient over the query heads that share one key/value head.
at::Tensor reduce_heads(const at::Tensor& grad, int64_t heads) {
  if (grad.size(1) == heads) return grad;
  const int64_t groups = grad.size(1) / heads;
  return grad.unflatten(1, {heads, groups}).sum(2);
}

// `result` in `like`'s dtype and strides: PyTorch's meta kernels give the outputs their
// input's layout (empty_like), and DTensor plans views from that layout. Written without
// in-place ops (the composite is traced into functional graphs): `like`'s dimensions in
// the order of their strides, made contiguous, then permuted back.
at::Tensor laid_out_as(const at::Tensor& result, const at::Tensor& like) {
  at::Tensor r = result.to(like.scalar_type());
  if (like.is_contiguous()) return r;
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[order[i]] = static_cast<int64_t>(i);
  return r.permute(order).contiguous().permute(back);
}

// The type attention is computed in: float32 for float16/bfloat16 (their results are
// rounded once at the end), else the inputs' own.
at::ScalarType compute_type(const at::Tensor& t) {
  return at::isReducedFloatingType(t.scalar_type()) ? at::kFloat : t.scalar_type();
}

// Attention scores, masked. Query and key are each scaled by sqrt(scale) before their
// product, as in PyTorch's math path (the same rounding).
at::Tensor scores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& bias, bool causal,
                  double scale) {
  const at::ScalarType type = compute_type(q);
  const double root = std::sqrt(scale);
  at::Tensor s = at::matmul(q.to(type) * root, k.to(type).transpose(-2, -1) * root);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (causal) {
    at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), neg_inf);
  }
  if (bias.defined()) {
    s = bias.scalar_type() == at::kBool ? s.masked_fill(bias.logical_not(), neg_inf)
                                        : s + bias.to(type);
  }
  return s;
}

// exp(scores - logsumexp): the attention weights; rows with every key masked get zeros
// (as PyTorch's math path, whose softmax is "safe" there).
at::Tensor weights(const at::Tensor& s, const at::Tensor& lse) {
  at::Tensor l = lse.unsqueeze(-1);
  return at::where(l.isneginf(), at::zeros({}, s.options()), (s - l).exp());
}

// The attention output (in the query's layout) and the log-sum-exp of the scores.
std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& query, const at::Tensor& key,
                                             const at::Tensor& value,
                                             const std::optional<at::Tensor>& attn_bias,
                                             bool is_causal, std::optional<double> scale) {
  const int64_t heads = query.size(1);
  at::Tensor k = expand_heads(key, heads), v = expand_heads(value, heads);
  at::Tensor s =
      scores(query, k, attn_bias.value_or(at::Tensor()), is_causal, softmax_scale(query, scale));
  at::Tensor lse = s.logsumexp(-1);
  at::Tensor out = laid_out_as(at::matmul(weights(s, lse), v.to(compute_type(query))), query);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0,
              "tpu fused attention: dropout is not supported (dropout_p=", dropout_p, ")");
  auto [out, lse] = attention(query, key, value, attn_bias, is_causal, scale);
  at::Tensor seed = at::zeros({}, query.options().dtype(at::kLong));
  return {out,
          lse,
          at::Tensor(),
          at::Tensor(),
          c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)),
          seed,
          seed.clone(),
          at::Tensor()};
}

// The gradients of `attention` that grad_input_mask asks for (query, key, value, bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> grad_input_mask, const at::Tensor& out, const at::Tensor& logsumexp,
    bool is_causal, std::optional<double> scale) {
  const at::Tensor attn_bias = bias.value_or(at::Tensor());
  const int64_t heads = query.size(1);
  const double sm_scale = softmax_scale(query, scale);
  const at::ScalarType type = compute_type(query);
  at::Tensor k = expand_heads(key, heads).to(type);
  at::Tensor v = expand_heads(value, heads).to(type);
  at::Tensor q = query.to(type), g = grad_out.to(type);
  at::Tensor p = weights(scores(query, k, attn_bias, is_causal, sm_scale), logsumexp.to(type));
  // d(scores) = P * (dP - rowsum(dO * O)), with dP = dO V^T
  at::Tensor dp = at::matmul(g, v.transpose(-2, -1));
  at::Tensor ds = p * (dp - (g * out.to(type)).sum(-1, true));
  at::Tensor grad_q, grad_k, grad_v, grad_bias;
  if (grad_input_mask[0]) grad_q = laid_out_as(at::matmul(ds, k) * sm_scale, query);
  if (grad_input_mask[1]) {
    grad_k =
        laid_out_as(reduce_heads(at::matmul(ds.transpose(-2, -1), q) * sm_scale, key.size(1)), key);
  }
  if (grad_input_mask[2])
    grad_v = laid_out_as(reduce_heads(at::matmul(p.transpose(-2, -1), g), value.size(1)), value);
  if (grad_input_mask[3] && attn_bias.defined())
    grad_bias = ds.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  return {grad_q, grad_k, grad_v, grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor&, const at::Tensor&,
    c10::SymInt, c10::SymInt, double, bool is_causal, const at::Tensor&, const at::Tensor&,
    std::optional<double> scale) {
  return attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out,
                            logsumexp, is_causal, scale);
}

}  // namespace

// The same computation as composite ops, for compiled graphs: their decomposition table
// maps the fused ops onto these, and tracing them records the ATen ops they call.
TORCH_LIBRARY_FRAGMENT(tpu, m) {
  m.def(
      "_fused_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, bool "
      "is_causal, float? scale) -> (Tensor, Tensor)");
  m.def(
      "_fused_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
      "Tensor? attn_bias, bool[4] grad_input_mask, Tensor out, Tensor logsumexp, bool is_causal, "
      "float? scale) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(tpu, CompositeImplicitAutograd, m) {
  m.impl("_fused_attention", attention);
  m.impl("_fused_attention_backward", attention_backward);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The op form of the choice (SDPA itself asks the stub below), for code that calls it.
  m.impl("_fused_sdp_choice", choose_backend);
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
}

}  // namespace torch_tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::aten::choose_backend)
}  // namespace at::native
