"""vLLM attention backend "TPU_PAGED": torch_tpu's paged attention (plain torch ops on
`tpu`, see `torch_tpu.serving.paged_attention`) behind vLLM's v1 backend interface."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

from torch_tpu.serving import paged_attention as pa
from torch_tpu.serving.buckets import token_bucket


class TpuPagedAttentionBackend(AttentionBackend):
    # The write and the attention are one call: both need the same batch description.
    forward_includes_kv_cache_update: bool = True
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto", "float32", "bfloat16", "float16"]

    @staticmethod
    def get_name() -> str:
        return "TPU_PAGED"

    @staticmethod
    def get_impl_cls() -> type["TpuPagedAttentionImpl"]:
        return TpuPagedAttentionImpl

    @staticmethod
    def get_builder_cls() -> type["TpuPagedMetadataBuilder"]:
        return TpuPagedMetadataBuilder

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER


class TpuPagedMetadataBuilder(AttentionMetadataBuilder[pa.PagedBatch]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        self.max_tokens = vllm_config.scheduler_config.max_num_batched_tokens

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> pa.PagedBatch:
        m = common_attn_metadata
        seq_lens = m.seq_lens_cpu_upper_bound
        seq_lens = (m.seq_lens.cpu() if seq_lens is None else seq_lens)[: m.num_reqs]
        # The runner pads the model's tokens to the same bucket (the metadata comes
        # unpadded): a batch then has the token count its compiled step was traced with.
        num_tokens = token_bucket(m.num_actual_tokens, self.max_tokens)
        return pa.build_batch(
            m.query_start_loc_cpu.numpy(),
            np.asarray(seq_lens),
            m.block_table_tensor,
            m.slot_mapping,
            num_tokens,
            self.block_size,
            self.device,
        )


class TpuPagedAttentionImpl(AttentionImpl[pa.PagedBatch]):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes=None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        **kwargs,
    ) -> None:
        if alibi_slopes is not None:
            raise NotImplementedError("TPU_PAGED attention does not support ALiBi")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(
                f"TPU_PAGED attention supports decoder attention only, not {attn_type}"
            )
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def forward(
        self,
        layer,
        query,
        key,
        value,
        kv_cache,
        attn_metadata,
        output,
        output_scale=None,
        output_block_scale=None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("TPU_PAGED attention has no fused output quantization")
        if attn_metadata is None:  # profiling run without a cache
            return output.zero_()
        batch = attn_metadata.fit(query.shape[0])
        if self.kv_sharing_target_layer_name is None:
            pa.write_kv(kv_cache, key, value, batch.slot_mapping)
        out = pa.paged_attention(
            query, kv_cache, batch, self.scale, self.sliding_window, self.logits_soft_cap
        )
        output.copy_(out.reshape(output.shape))
        return output


# Attention layers look their backend up by name in vLLM's registry; out-of-tree
# backends enter it by name (once per process: importing this module).
if "TPU_PAGED" not in AttentionBackendEnum.__members__:
    register_backend("TPU_PAGED", f"{__name__}.TpuPagedAttentionBackend")
