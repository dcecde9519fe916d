"""Pure-torch stand-in for vLLM's Triton `ComputeSlotMappingKernel.kernel`, installed
through `register_triton_kernel_overrides`.

The parameters keep the kernel's names and order, so vLLM's launcher forwards its
launch arguments by name. The host computes the flat block-table index of every token
from the query offsets and positions, and one fixed-shape gather on the device turns
them into slots, so the program never changes with the batch. Inside the tpu runner's
input preparation (`host_inputs`) both come from the runner's host arrays, the values
vLLM uploads them from: with async scheduling the device is still running the previous
step then, and reading them back would wait for it. Elsewhere they are read back.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import torch

from torch_tpu.serving.paged_attention import base_buffer

# The model runner preparing inputs on this thread (see host_inputs).
_preparing = contextvars.ContextVar("torch_tpu_vllm_preparing", default=None)


@contextlib.contextmanager
def host_inputs(runner):
    """For the duration, the kernel takes `runner`'s query offsets and positions from its
    host arrays when it is handed the runner's device buffers of them."""
    token = _preparing.set(runner)
    try:
        yield
    finally:
        _preparing.reset(token)


def _read_inputs(query_start_loc, positions, num_reqs: int, n: int):
    """Query offsets (num_reqs + 1) and positions (n) as int64 host arrays."""
    runner = _preparing.get()
    if (
        runner is not None
        and not getattr(runner, "use_async_spec_decode", False)
        and base_buffer(query_start_loc) is runner.query_start_loc.gpu
        and base_buffer(positions) is runner.positions
    ):
        # What the runner uploaded and computed its device positions from (without
        # speculative decoding, its device token counts are these host ones).
        qsl = runner.query_start_loc.np[: num_reqs + 1].astype(np.int64)
        req = np.repeat(np.arange(num_reqs), np.diff(qsl))[:n]
        computed = runner.input_batch.num_computed_tokens_cpu[req].astype(np.int64)
        return qsl, computed + runner.query_pos.np[:n]
    # Their whole buffers are read (one program each, whatever the counts) and cut here.
    qsl = base_buffer(query_start_loc).cpu().numpy()[: num_reqs + 1].astype(np.int64)
    return qsl, base_buffer(positions).cpu().numpy()[:n].astype(np.int64)


def compute_slot_mapping(
    num_tokens,
    max_num_tokens,
    query_start_loc_ptr,
    positions_ptr,
    block_table_ptr,
    block_table_stride,
    slot_mapping_ptr,
    KV_CACHE_BLOCK_SIZE,
    TOTAL_CP_WORLD_SIZE,
    TOTAL_CP_RANK,
    CP_KV_CACHE_INTERLEAVE_SIZE,
    PAD_ID,
    BLOCK_SIZE,
) -> None:
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("context parallelism is not supported on tpu")
    n = int(num_tokens)
    size = slot_mapping_ptr.shape[0]
    # The runner passes leading slices of its fixed buffers, sized by the request and
    # token counts.
    num_reqs = query_start_loc_ptr.shape[0] - 1
    qsl, pos = _read_inputs(query_start_loc_ptr, positions_ptr, num_reqs, n)
    req = np.repeat(np.arange(num_reqs), np.diff(qsl))[:n]
    flat = np.zeros(size, np.int64)
    offset = np.full(size, -1, np.int64)  # -1: padding, keeps PAD_ID
    flat[:n] = req * int(block_table_stride) + pos // KV_CACHE_BLOCK_SIZE
    offset[:n] = pos % KV_CACHE_BLOCK_SIZE
    device = slot_mapping_ptr.device
    flat_t = torch.from_numpy(flat).to(device)
    offset_t = torch.from_numpy(offset).to(device)
    blocks = block_table_ptr.reshape(-1)[flat_t].to(torch.int64)
    slots = torch.where(
        offset_t >= 0, blocks * KV_CACHE_BLOCK_SIZE + offset_t, torch.full_like(offset_t, PAD_ID)
    )
    slot_mapping_ptr.copy_(slots.to(slot_mapping_ptr.dtype))
