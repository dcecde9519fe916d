"""`torch.tpu.ops.splash_sdpa` (TorchTPU 0.2): TorchTPU's splash-attention entry point,
here over the engine's fused attention (`F.scaled_dot_product_attention` on tpu, one op
with its own backward: csrc/aten/fused_attention.cpp).

The splash kernel's tiling (block sizes, fused or vmapped backward, layouts) has no
counterpart in that op: those arguments are checked and otherwise unused. The results
are the attention `F.scaled_dot_product_attention` computes with the same mask."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

_LAYOUTS = ("HEAD_DIM_MINOR", "SEQ_MINOR")


def _window_mask(length: int, window: int, device) -> torch.Tensor:
    """[length, length] bool: query i sees keys i - window .. i."""
    rows = torch.arange(length, device=device)
    behind = rows[:, None] - rows[None, :]
    return (behind >= 0) & (behind <= window)


def splash_sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: Optional[float] = None,
    is_causal: bool = True,
    local_window_size: Optional[int] = None,
    enable_gqa: bool = False,
    block_q: int = 512,
    block_kv: int = 512,
    block_dkv: int = 512,
    block_kv_compute: int = 512,
    block_q_dkv: int = 512,
    block_kv_dkv: int = 512,
    block_kv_dkv_compute: int = 512,
    block_q_dq: Optional[int] = None,
    block_kv_dq: Optional[int] = None,
    use_fused_bwd_kernel: bool = True,
    use_vmap_bwd: bool = True,
    q_layout: str = "HEAD_DIM_MINOR",
    k_layout: str = "HEAD_DIM_MINOR",
    v_layout: str = "HEAD_DIM_MINOR",
) -> torch.Tensor:
    """Self-attention of `q` (batch, heads, seq, dim) over `k` and `v` (batch, kv_heads,
    seq, dim), differentiable in all three, as `F.scaled_dot_product_attention`:

    - `local_window_size` w: sliding-window causal attention, query i sees keys
      i - w .. i (it takes precedence over `is_causal`);
    - else `is_causal` (the default, as TorchTPU's): query i sees keys 0 .. i;
    - else every key.

    `scale` defaults to 1/sqrt(dim). `enable_gqa` must say whether there are fewer
    key/value heads than query heads (grouped-query attention; the query heads divide
    evenly among them). The block sizes, `use_fused_bwd_kernel`, `use_vmap_bwd` and the
    layouts tune TorchTPU's Pallas kernel; they are checked (positive block sizes,
    layouts HEAD_DIM_MINOR or SEQ_MINOR) and have no effect on this engine."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "splash_sdpa: q, k and v must be (batch, heads, seq, dim), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    heads, kv_heads, seq = q.shape[1], k.shape[1], q.shape[2]
    if enable_gqa != (heads != kv_heads):
        raise ValueError(
            f"splash_sdpa: enable_gqa ({enable_gqa}) does not match the inputs: "
            f"{heads} query heads, {kv_heads} key/value heads"
        )
    if heads % kv_heads:
        raise ValueError(
            f"splash_sdpa: {heads} query heads do not divide among {kv_heads} key/value heads"
        )
    if k.shape[2] != seq or v.shape[2] != seq:
        raise ValueError(
            f"splash_sdpa: self-attention: q, k and v must have one sequence length, got "
            f"{seq}, {k.shape[2]}, {v.shape[2]}"
        )
    blocks = dict(
        block_q=block_q,
        block_kv=block_kv,
        block_dkv=block_dkv,
        block_kv_compute=block_kv_compute,
        block_q_dkv=block_q_dkv,
        block_kv_dkv=block_kv_dkv,
        block_kv_dkv_compute=block_kv_dkv_compute,
        block_q_dq=block_q_dq,
        block_kv_dq=block_kv_dq,
    )
    for name, size in blocks.items():
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"splash_sdpa: {name} must be a positive int, got {size!r}")
    for name, layout in (("q_layout", q_layout), ("k_layout", k_layout), ("v_layout", v_layout)):
        if layout not in _LAYOUTS:
            raise ValueError(f"splash_sdpa: {name} must be one of {_LAYOUTS}, got {layout!r}")
    gqa = heads != kv_heads
    if local_window_size is not None:
        if isinstance(local_window_size, bool) or not isinstance(local_window_size, int):
            raise ValueError(
                f"splash_sdpa: local_window_size must be an int, got {local_window_size!r}"
            )
        if local_window_size < 0:
            raise ValueError(
                f"splash_sdpa: local_window_size must not be negative, got {local_window_size}"
            )
        mask = _window_mask(seq, local_window_size, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=bool(is_causal), scale=scale, enable_gqa=gqa
    )
