"""Pure-torch stand-in for vLLM's Triton `ComputeSlotMappingKernel.kernel`, installed
through `register_triton_kernel_overrides`.

The parameters keep the kernel's names and order, so vLLM's launcher forwards its
launch arguments by name. The host computes the flat block-table index of every token
(it has the query offsets and positions in host memory a moment earlier; a read of
these small arrays is cheaper than a device program per batch size), and one fixed-shape
gather on the device turns them into slots, so the program never changes with the batch.
"""

from __future__ import annotations

import numpy as np
import torch

from torch_tpu.serving.paged_attention import base_buffer


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
    # token counts; their whole buffers are read (one program each, whatever the
    # counts) and cut here.
    num_reqs = query_start_loc_ptr.shape[0] - 1
    qsl = base_buffer(query_start_loc_ptr).cpu().numpy()[: num_reqs + 1].astype(np.int64)
    pos = base_buffer(positions_ptr).cpu().numpy()[:n].astype(np.int64)
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
