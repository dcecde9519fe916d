"""Paged attention in plain torch ops, so it runs on `tpu` as ordinary lowered ops (and
inside compiled graphs): a KV-cache write by scatter of the slot mapping, and attention
of every query token over its request's blocks, for prefill, decode and mixed
(chunked-prefill) batches alike, with GQA, sliding window and logit soft-capping.

Layout of one layer's cache: ``[num_blocks, block_size, num_kv_heads, 2 * head_size]``,
keys and values side by side in the last dimension, so a token's slot is one row of the
cache viewed as ``[num_blocks * block_size, num_kv_heads, 2 * head_size]`` and one
scatter writes both.

Batch description (`PagedBatch`), all device tensors with padded ("bucketed") shapes:
R requests by Q query tokens each, W blocks of context each. Each op below is one
program per bucket combination, never a Python loop over sequences.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from torch_tpu.serving.buckets import bucket

# Masked scores use a large finite negative, not -inf: a padded query row has every
# key masked, and softmax over all -inf is NaN, which would reach real rows through
# the output gather's padding entries.
_MASKED = -1e30


@dataclasses.dataclass
class PagedBatch:
    slot_mapping: torch.Tensor   # [T] int64: cache row of each token (padding: row 0)
    query_index: torch.Tensor    # [R, Q] int64: token index of query j of request r
    query_pos: torch.Tensor      # [R, Q] int64: absolute position; -1 for padding
    block_table: torch.Tensor    # [R, W] int32/64: blocks of each request (pad: 0)
    output_index: torch.Tensor   # [T] int64: r * Q + j for each token (padding: 0)
    num_tokens: int              # T, the padded token count the model runs with
    num_actual_tokens: int

    def fit(self, num_tokens: int) -> "PagedBatch":
        """The batch for a model that runs `num_tokens` token rows (the runner may pad
        past the count the metadata was built for): padding rows write to the null
        slot and read output row 0. Done once per step; every layer reuses it."""
        if num_tokens == self.num_tokens:
            return self
        fitted = self.__dict__.setdefault("_fitted", {})
        if num_tokens in fitted:
            return fitted[num_tokens]
        if num_tokens < self.num_actual_tokens:
            raise ValueError(f"{num_tokens} token rows for a batch of "
                             f"{self.num_actual_tokens} tokens")
        n = self.num_actual_tokens
        pad = (0, num_tokens - n)
        fitted[num_tokens] = dataclasses.replace(
            self, slot_mapping=torch.nn.functional.pad(self.slot_mapping[:n], pad),
            output_index=torch.nn.functional.pad(self.output_index[:n], pad),
            num_tokens=num_tokens)
        return fitted[num_tokens]


def _full(t: torch.Tensor) -> torch.Tensor:
    """The buffer a sliced view was cut from: ops then read fixed-shape inputs, so a
    new batch size does not make new programs."""
    base = t._base
    if base is not None and base.dim() == t.dim() and base.is_contiguous() \
            and t.storage_offset() == 0 and t.stride() == base.stride():
        return base
    return t


def build_batch(query_start_loc: np.ndarray, seq_lens: np.ndarray,
                block_table: torch.Tensor, slot_mapping: torch.Tensor,
                num_tokens: int, block_size: int, device: torch.device) -> PagedBatch:
    """Describes a batch from host metadata: `query_start_loc` ([R+1]) and `seq_lens`
    ([R], context length including this step's tokens) as numpy arrays; `block_table`
    ([>=R, max_blocks]) and `slot_mapping` ([>= num_actual], -1 for padding) as device
    tensors, possibly views of larger buffers.

    Requests, query length and block-table width are rounded up to buckets; what the
    host computes becomes four device tensors (one transfer each)."""
    num_reqs = len(seq_lens)
    query_start_loc = np.asarray(query_start_loc[: num_reqs + 1], dtype=np.int64)
    seq_lens = np.asarray(seq_lens, dtype=np.int64)
    query_lens = np.diff(query_start_loc)
    num_actual = int(query_start_loc[-1])
    table = _full(block_table)
    R = bucket(num_reqs)
    Q = bucket(int(query_lens.max()))
    W = bucket(-(-int(seq_lens.max()) // block_size), maximum=table.shape[1])

    j = np.arange(Q, dtype=np.int64)
    valid = j[None, :] < query_lens[:, None]                       # [r, Q]
    query_index = np.zeros((R, Q), np.int64)
    query_pos = np.full((R, Q), -1, np.int64)
    query_index[:num_reqs] = np.where(valid, query_start_loc[:-1, None] + j[None, :], 0)
    query_pos[:num_reqs] = np.where(valid, (seq_lens - query_lens)[:, None] + j[None, :], -1)

    output_index = np.zeros(num_tokens, np.int64)
    req_of_token = np.repeat(np.arange(num_reqs, dtype=np.int64), query_lens)
    pos_in_query = np.arange(num_actual, dtype=np.int64) - query_start_loc[req_of_token]
    output_index[:num_actual] = req_of_token * Q + pos_in_query

    # Padding rows read request 0's blocks: their outputs are dropped. Columns past a
    # request's last block hold stale ids; the causal mask hides whatever they point at.
    rows = np.minimum(np.arange(R), num_reqs - 1)
    flat = rows[:, None] * table.shape[1] + np.arange(W)[None, :]

    slots = _full(slot_mapping)
    if slots.shape[0] < num_tokens:
        slots = torch.nn.functional.pad(slots[:num_actual], (0, num_tokens - num_actual),
                                        value=-1)
    # Padding tokens (PAD_SLOT_ID, -1) write into row 0: block 0 is the engines' null
    # block, never handed to a request, so nothing reads what lands there.
    slots = slots[:num_tokens].to(torch.int64).clamp(min=0)

    def dev(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    return PagedBatch(slot_mapping=slots, query_index=dev(query_index),
                      query_pos=dev(query_pos),
                      block_table=table.reshape(-1)[dev(flat)].to(torch.int64),
                      output_index=dev(output_index), num_tokens=num_tokens,
                      num_actual_tokens=num_actual)


def write_kv(kv_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """Stores each token's key and value at its slot: one scatter into the cache."""
    num_blocks, block_size, kv_heads, width = kv_cache.shape
    rows = kv_cache.view(num_blocks * block_size, kv_heads, width)
    rows.index_put_((slot_mapping,), torch.cat([key, value], dim=-1).to(kv_cache.dtype))


def paged_attention(query: torch.Tensor, kv_cache: torch.Tensor, batch: PagedBatch,
                    scale: float, sliding_window: int | None = None,
                    logits_soft_cap: float | None = None) -> torch.Tensor:
    """Causal attention of `query` ([T, heads, head_size]) over the cache; returns
    [T, heads, head_size]. Rows of padding tokens are unspecified (finite)."""
    T, heads, head_size = query.shape
    num_blocks, block_size, kv_heads, _ = kv_cache.shape
    group = heads // kv_heads
    R, Q = batch.query_index.shape
    W = batch.block_table.shape[1]
    L = W * block_size

    q = query[batch.query_index.reshape(-1)].reshape(R, Q, kv_heads, group, head_size)
    kv = kv_cache[batch.block_table.reshape(-1)].reshape(R, L, kv_heads, 2 * head_size)
    k, v = kv[..., :head_size], kv[..., head_size:]

    scores = torch.einsum("rqkgd,rlkd->rkgql", q.float(), k.float()) * scale
    if logits_soft_cap:
        scores = logits_soft_cap * torch.tanh(scores / logits_soft_cap)
    key_pos = torch.arange(L, device=query.device)
    qpos = batch.query_pos[:, :, None]                               # [R, Q, 1]
    allowed = key_pos[None, None, :] <= qpos                         # causal, [R, Q, L]
    if sliding_window:
        allowed = allowed & (key_pos[None, None, :] > qpos - sliding_window)
    scores = scores.masked_fill(~allowed[:, None, None], _MASKED)
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("rkgql,rlkd->rqkgd", probs, v.float())       # [R, Q, kvh, g, d]
    out = out.reshape(R * Q, heads, head_size)[batch.output_index]
    return out.to(query.dtype)
