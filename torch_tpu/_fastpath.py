"""Graph decompositions of the inference fast path of nn.MultiheadAttention and
nn.TransformerEncoderLayer (eval, no_grad), for compiled graphs.

Eager mode runs `_native_multi_head_attention` and `_transformer_encoder_layer_fwd`
through their device-generic ATen kernels (csrc/aten/composite_kernels.cpp), which call
lowered ops. A compiled graph has no lowering for the two, so they are written here as the
same ops (projections, `_transform_bias_rescale_qkv`, `_masked_softmax`, layer norms,
the feed-forward) and the graph compiles whole. Only traced, never run per call.
"""

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def native_multi_head_attention(
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask=None,
    need_weights=True,
    average_attn_weights=True,
    mask_type=None,
):
    # One projection per input: the same rows as CPU's fused one for self-attention.
    w_q, w_k, w_v = qkv_weight.chunk(3, 0)
    qkv = torch.cat([query @ w_q.t(), key @ w_k.t(), value @ w_v.t()], dim=2)
    q, k, v = aten._transform_bias_rescale_qkv(qkv, qkv_bias, num_head)
    scores = q @ k.transpose(-1, -2)
    if mask is not None:
        scores = aten._masked_softmax(scores, mask.to(torch.bool), scores.dim() - 1, mask_type)
    else:
        scores = torch.softmax(scores, -1)
    context = (scores @ v).transpose(1, 2)
    batch, t = context.shape[:2]
    out = F.linear(context.reshape(batch, t, embed_dim), proj_weight, proj_bias)
    if not need_weights:
        return out, scores.new_empty((0,))
    if average_attn_weights:
        scores = scores.sum(1) / num_head
    return out, scores


def transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = native_multi_head_attention(
        x,
        x,
        x,
        embed_dim,
        num_heads,
        qkv_weight,
        qkv_bias,
        proj_weight,
        proj_bias,
        mask,
        need_weights=False,
        mask_type=mask_type,
    )[0]
    x = x + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    x = F.linear(x, ffn_weight_1, ffn_bias_1)
    x = F.gelu(x) if use_gelu else F.relu(x)
    x = F.linear(x, ffn_weight_2, ffn_bias_2) + residual
    return x if norm_first else norm(x, norm_weight_2, norm_bias_2)


def table() -> dict:
    return {
        aten._native_multi_head_attention.default: native_multi_head_attention,
        aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd,
    }
