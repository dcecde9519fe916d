"""vLLM's LoRA on tpu: the punica wrapper (vLLM's per-platform object that applies the
adapters of a batch inside the LoRA layers) for a device whose steps are padded to
token buckets.

vLLM's PyTorch wrapper (its CPU one) maps tokens to adapters at the batch's real token
count, while the tpu runner pads every step to its token bucket: its einsums then meet
44 mapping rows against 64 token rows and fail. Here the mapping lives in a buffer of
the step budget's size whose rows past the real tokens map to no adapter (-1), and each
LoRA op reads as many rows as the step has: the padded bucket. Every token takes the
per-token path (vLLM's "decode" kernels), never the per-segment prefill path, whose
Python loop over a batch's segments would make a program per batch composition. The
adapters' stacked weights are the LoRA layers' buffers: a compiled step reads them as
inputs, so loading another adapter compiles nothing."""

from __future__ import annotations

import torch
from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU


def _per_token(x: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, dtype):
    """Row t of x times the transposed weights of adapter indices[t] ([slots, (1,)
    out, in] stacked); rows whose index is -1 (no adapter, padding) give zeros."""
    if weights.dim() == 4:
        weights = weights.squeeze(1)
    chosen = weights[indices.clamp_min(0)].to(dtype)
    out = torch.einsum("ti,toi->to", x.to(dtype), chosen)
    return out * (indices >= 0).unsqueeze(-1).to(dtype)


class TpuPunicaWrapper(PunicaWrapperCPU):
    def update_metadata(self, mapping, lora_index_to_id, max_loras, vocab_size, **kwargs):
        # Padding rows (past the real tokens, up to the bucket): no adapter.
        self._token_lora_indices.fill_(-1)
        self._update_base_metadata(mapping, lora_index_to_id, max_loras, vocab_size)
        self.is_prefill = False  # the per-token path for every step

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        return self._token_lora_indices[: x.size(0)]

    def _shrink_decode(self, y, x, w_t_all, scale):
        y[:, : w_t_all.size(-2)] = scale * _per_token(x, w_t_all, self._rows(x), y.dtype)

    def _expand_decode(self, y, x, w_t_all, add_inputs):
        out = _per_token(x, w_t_all, self._rows(x), y.dtype)
        n = min(out.size(1), y.size(1))
        if add_inputs:
            y[:, :n] += out[:, :n]
        else:
            y[:, :n] = out[:, :n]

    def _expand_slice_decode(self, y, x, w_t_all, y_offset, y_slice_size, add_inputs):
        out = _per_token(x, w_t_all, self._rows(x), y.dtype)
        if add_inputs:
            y[:, y_offset : y_offset + y_slice_size] += out
        else:
            y[:, y_offset : y_offset + y_slice_size] = out
