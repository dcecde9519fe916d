"""torch_tpu's paged attention (plain torch ops on `tpu`, see
`torch_tpu.serving.paged_attention`) behind SGLang's AttentionBackend, registered as
SGLang's `torch_native` backend on the tpu platform.

Why that name: SGLang picks its host-side helpers (cache-index writes, positions,
last-location lookups) by backend name, and `torch_native` is the one name for which
they are plain torch ops rather than Triton kernels. On tpu the backend behind the
name is this one (one program per layer call), not SGLang's per-sequence loop; it
enters SGLang's registry through `register_attention_backend`, in the processes where
the tpu platform is active.

SGLang keeps, per request slot, the cache slot of every token (`req_to_token`); with
one token per page that table is a block table of one-token blocks. A step's batch
(prefill, decode, or a mix with chunked prefill) is described once per forward pass,
every layer reuses it, and each layer call is one KV write and one attention over
the whole batch, padded to a token bucket and a block-table width bucket."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.layers.quantization.unquant import UnquantizedLinearMethod

from torch_tpu.serving import paged_attention as pa
from torch_tpu.serving import common
from torch_tpu.serving.buckets import MIN_TOKENS, bucket, token_bucket

NAME = "torch_native"
# Smallest block-table width (tokens, with one-token blocks): contexts up to this
# length share one attention program per token bucket (why it is not vLLM's: see
# common.width_buckets).
MIN_WIDTH = 64


class TpuPagedAttnBackend(AttentionBackend):
    def __init__(self, model_runner):
        super().__init__()
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.batch: pa.PagedBatch | None = None
        self.max_tokens = max_step_tokens(model_runner)
        self.context_len = model_runner.model_config.context_len
        self.min_width = min(MIN_WIDTH, self.req_to_token_pool.req_to_token.shape[1])
        # The linear weights laid out for the dot, then compiled steps (compiled.py),
        # unless eager mode is asked for. SGLang builds this backend after loading the
        # model and allocating the KV pool, before the scheduler serves: the steps warm
        # up here.
        from torch_tpu.serving.sglang import compiled

        common.lay_out_linear_weights(model_runner.model, UnquantizedLinearMethod)
        # LoRA's token-to-adapter buffer holds the largest padded step.
        lora = getattr(getattr(model_runner, "lora_manager", None), "lora_backend", None)
        if hasattr(lora, "reserve"):
            lora.reserve(max(common.token_buckets(self.max_tokens)), model_runner.model)
        compiled.install(model_runner, self)

    def width_buckets(self) -> list[int]:
        """Every block-table width a batch of contexts up to the context length can
        get (the width `pa.build_batch` picks for the longest context)."""
        return common.width_buckets(
            self.context_len, self.req_to_token_pool.req_to_token.shape[1], self.min_width
        )

    def init_forward_metadata(self, forward_batch) -> None:
        mode = forward_batch.forward_mode
        if mode.is_idle():
            self.batch = None
            return
        if forward_batch.encoder_lens is not None:
            raise NotImplementedError("encoder-decoder attention is not supported on tpu")
        seq_lens = _host(forward_batch.seq_lens_cpu, forward_batch.seq_lens)
        if mode.is_decode():
            query_lens = np.ones(len(seq_lens), np.int64)
        elif mode.is_extend():
            query_lens = np.asarray(forward_batch.extend_seq_lens_cpu, np.int64)
        else:
            raise NotImplementedError(f"{mode} batches are not supported on tpu")
        rows = _host(forward_batch.req_pool_indices_cpu, forward_batch.req_pool_indices)
        query_start_loc = np.concatenate([[0], np.cumsum(query_lens)])
        num_actual = int(query_start_loc[-1])
        # Past the step token budget (not expected), an unbounded bucket: it compiles.
        num_tokens = (
            token_bucket(num_actual, self.max_tokens)
            if num_actual <= self.max_tokens
            else bucket(num_actual, minimum=MIN_TOKENS)
        )
        # SGLang's out_cache_loc can be a view of a reused buffer whose other entries
        # are live slots: padded here (-1: padding), so that padding rows never
        # write there.
        slots = F.pad(
            forward_batch.out_cache_loc[:num_actual].to(torch.int64),
            (0, num_tokens - num_actual),
            value=-1,
        )
        self.batch = pa.build_batch(
            query_start_loc,
            seq_lens,
            self.req_to_token_pool.req_to_token,
            slots,
            num_tokens,
            block_size=1,
            device=self.device,
            min_blocks=self.min_width,
            table_rows=rows,
        )

    def forward(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        if forward_batch.forward_mode.is_idle():
            return q.new_empty(q.shape[0], layer.tp_q_head_num * layer.v_head_dim)
        if layer.is_cross_attention:
            raise NotImplementedError("cross attention is not supported on tpu")
        if getattr(layer, "logit_capping_method", "tanh") != "tanh":
            raise NotImplementedError(f"logit capping {layer.logit_capping_method}")
        batch = self.batch
        n = q.shape[0]
        query = _pad_rows(q.reshape(n, layer.tp_q_head_num, layer.qk_head_dim), batch.num_tokens)
        kv_cache = self.token_to_kv_pool.get_paged_kv_buffer(layer.layer_id)
        if save_kv_cache and k is not None and v is not None:
            key = _pad_rows(k.reshape(n, layer.tp_k_head_num, layer.qk_head_dim), batch.num_tokens)
            value = _pad_rows(v.reshape(n, layer.tp_v_head_num, layer.v_head_dim), batch.num_tokens)
            pa.write_kv(kv_cache, key, value, batch.slot_mapping)
        # SGLang's window admits the query's position and `sliding_window_size`
        # before it; the paged op's admits `sliding_window` positions in all.
        window = layer.sliding_window_size
        out = pa.paged_attention(
            query,
            kv_cache,
            batch,
            layer.scaling,
            sliding_window=window + 1 if window > -1 else None,
            logits_soft_cap=layer.logit_cap or None,
        )
        return out[:n].reshape(n, layer.tp_q_head_num * layer.v_head_dim)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self.forward(q, k, v, layer, forward_batch, save_kv_cache)

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        return self.forward(q, k, v, layer, forward_batch, save_kv_cache)

    def support_triton(self) -> bool:
        return False


def max_step_tokens(model_runner) -> int:
    """The most tokens one step can hold: a prefill chunk (SGLang's chunk budget
    includes the decode tokens of a mixed batch) or, without chunked prefill, the
    larger of the prefill budget and a whole context; and one token per running
    request for decode."""
    args = model_runner.server_args
    chunk = args.chunked_prefill_size
    prefill = (
        chunk
        if chunk is not None and chunk > 0
        else max(args.max_prefill_tokens, model_runner.model_config.context_len)
    )
    return max(prefill, model_runner.req_to_token_pool.size)


def _host(cpu: torch.Tensor | None, device: torch.Tensor) -> np.ndarray:
    """A per-request array on the host: SGLang's CPU copy when it has one."""
    t = cpu if cpu is not None else device.cpu()
    return np.asarray(t.tolist() if not isinstance(t, torch.Tensor) else t.numpy(), dtype=np.int64)


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return t if t.shape[0] == rows else F.pad(t, (0, 0) * (t.dim() - 1) + (0, rows - t.shape[0]))


def register_backend() -> None:
    """Makes this class SGLang's `torch_native` attention backend; idempotent."""
    from sglang.srt.layers.attention.attention_registry import register_attention_backend

    register_attention_backend(NAME)(TpuPagedAttnBackend)
