"""DTensor sharding rules for the tpu ops DTensor does not know.

`F.scaled_dot_product_attention` on tpu runs PyTorch's fused op for out-of-tree backends,
`_scaled_dot_product_fused_attention_overrideable` (csrc/aten/fused_attention.cpp), for
which DTensor has no rule (it has them for CUDA's flash/efficient/cudnn ops). Attention
is independent per batch element and per head, so the rule is theirs: every tensor
replicated, or all sharded on the batch (0) or the head (1) dimension; the logsumexp
follows the output, the RNG state is replicated. Registered when the first tpu_dist group
is created (a DTensor on tpu needs one), so `import torch` does not import DTensor."""

from __future__ import annotations

import torch

_registered = False


def _bias_placement(bias, p):
    """A mask/bias broadcast over the sharded dimension stays replicated."""
    from torch.distributed.tensor import Replicate, Shard

    if bias is None:
        return None
    if isinstance(p, Shard) and bias.ndim == 4 and bias.shape[p.dim] > 1:
        return p
    return Replicate()


def _forward_rule(
    query,
    key,
    value,
    attn_bias=None,
    dropout_p=0.0,
    is_causal=False,
    return_debug_mask=False,
    *,
    scale=None,
):
    from torch.distributed.tensor import Replicate, Shard

    strategies = []
    for p in (Replicate(), Shard(0), Shard(1)):
        outputs = [p, p, None, None, None, None, Replicate(), Replicate(), None]
        inputs = [p, p, p, _bias_placement(attn_bias, p), None, None, None]
        strategies.append((outputs, inputs))
    return strategies


def _backward_rule(
    grad_out,
    query,
    key,
    value,
    attn_bias,
    grad_input_mask,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    from torch.distributed.tensor import Partial, Replicate, Shard

    strategies = []
    for p in (Replicate(), Shard(0), Shard(1)):
        bias = _bias_placement(attn_bias, p)
        # A bias shared by the sharded heads (or batch) gets each rank's partial sum.
        grad_bias = (
            None
            if bias is None
            else (Partial() if isinstance(p, Shard) and bias == Replicate() else bias)
        )
        outputs = [p, p, p, grad_bias]
        inputs = [
            p,
            p,
            p,
            p,
            bias,
            None,
            p,
            p,
            None,
            None,
            None,
            None,
            None,
            None,
            Replicate(),
            Replicate(),
        ]
        strategies.append((outputs, inputs))
    return strategies


def register() -> None:
    global _registered
    if _registered:
        return
    from torch.distributed.tensor.experimental import register_sharding

    aten = torch.ops.aten
    register_sharding(aten._scaled_dot_product_fused_attention_overrideable.default)(_forward_rule)
    register_sharding(aten._scaled_dot_product_fused_attention_overrideable_backward.default)(
        _backward_rule
    )
    _registered = True
