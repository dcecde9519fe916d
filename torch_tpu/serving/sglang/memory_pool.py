"""SGLang's KV pool and token allocator on `tpu`.

The pool keeps each layer's keys and values in the layout of torch_tpu's paged
attention (`torch_tpu.serving.paged_attention`): ``[2, kv_heads, slots, 1, head_dim]``,
one token per block, keys and values in two planes, so one scatter writes both and the
attention gathers both. One buffer per layer: on tpu a write into a view rewrites its
whole base buffer, so layers never share one."""

from __future__ import annotations

import torch
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, unwrap_write_loc

from torch_tpu.serving import paged_attention as pa


class TpuMHATokenToKVPool(MHATokenToKVPool):
    def _create_buffers(self):
        if self.is_quantized_kv_cache:
            raise NotImplementedError("quantized KV caches are not supported on tpu")
        if self.v_head_dim != self.head_dim:
            raise NotImplementedError(
                "keys and values of different head sizes are not supported on tpu"
            )
        if self.page_size != 1:
            raise NotImplementedError(f"page size {self.page_size} on tpu (expected 1)")
        self.k_scale_buffer = self.v_scale_buffer = None
        self.native_k_scale_buffer = self.native_v_scale_buffer = None
        self.dq_k_buffer = self.dq_v_buffer = None
        # Slot 0 (the padded page) absorbs the writes of padding tokens.
        rows = self.size + self.page_size
        self.kv_buffer = [
            torch.zeros(
                pa.kv_cache_shape(rows, 1, self.head_num, self.head_dim),
                dtype=self.store_dtype,
                device=self.device,
            )
            for _ in range(self.layer_num)
        ]
        # SGLang's own users of k_buffer/v_buffer (sizes, CPU copies) see views, in
        # SGLang's [slots, heads, head_dim].
        self.k_buffer = [kv[0, :, :, 0].transpose(0, 1) for kv in self.kv_buffer]
        self.v_buffer = [kv[1, :, :, 0].transpose(0, 1) for kv in self.kv_buffer]
        self._kv_buffer_descs = None

    def _init_data_ptrs_and_strides(self):
        """Raw device pointers feed SGLang's CUDA slot-move kernels; none here."""

    def get_kv_size_bytes(self):
        size = sum(kv.numel() * kv.element_size() for kv in self.kv_buffer)
        return size // 2, size // 2

    def get_paged_kv_buffer(self, layer_id: int) -> torch.Tensor:
        """The layer's cache in the paged-attention layout."""
        return self.kv_buffer[layer_id - self.start_layer]

    def set_kv_buffer(
        self,
        layer,
        loc_info,
        cache_k,
        cache_v,
        k_scale=None,
        v_scale=None,
        layer_id_override=None,
        dcp_kv_mask=None,
    ):
        if dcp_kv_mask is not None:
            raise NotImplementedError("decode context parallelism is not supported on tpu")
        loc, _, _ = unwrap_write_loc(loc_info)
        layer_id = layer_id_override if layer_id_override is not None else layer.layer_id
        if k_scale is not None:
            cache_k = cache_k / k_scale
        if v_scale is not None:
            cache_v = cache_v / v_scale
        pa.write_kv(self.get_paged_kv_buffer(layer_id), cache_k, cache_v, loc.to(torch.int64))

    def move_kv_cache(self, tgt_loc: torch.Tensor, src_loc: torch.Tensor):
        for kv in self.kv_buffer:  # slots are dimension 2 (one-token blocks)
            kv[:, :, tgt_loc] = kv[:, :, src_loc]


class TpuTokenToKVPoolAllocator(TokenToKVPoolAllocator):
    """SGLang's token allocator (plain torch ops), built the way SGLang builds an
    out-of-tree platform's allocator (with a page size, which must be 1)."""

    def __init__(self, size, page_size, dtype, device, kvcache, need_sort):
        if page_size != 1:
            raise NotImplementedError(f"page size {page_size} on tpu (expected 1)")
        super().__init__(size, dtype, device, kvcache, need_sort)
