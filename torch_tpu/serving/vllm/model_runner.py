"""vLLM's v1 model runner on `tpu`: the GPU runner (vLLM's device-generic one) with
what differs on a device without CUDA streams, events or graphs, and with padding to
the shape buckets that keep the number of compiled programs bounded."""

from __future__ import annotations

import contextlib
import dataclasses
import time

import torch
from vllm.logger import init_logger
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheConfig
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

import torch_tpu
from torch_tpu.serving.buckets import bucket, buckets_up_to

logger = init_logger(__name__)

# Smallest token bucket: decode batches of 1..16 requests share one program.
MIN_TOKENS = 16


class _Event:
    """Stands in for torch.Event/torch.cuda.Event: tpu work is ordered by data
    dependencies, so recording is free and waiting means synchronizing the device."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, *args, **kwargs) -> None:
        pass

    def wait(self, *args, **kwargs) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        torch.tpu.synchronize()


class _Stream:
    """Stands in for torch.cuda.Stream: one in-order queue per device."""

    def __init__(self, *args, **kwargs) -> None:
        self.device = torch.device("tpu", torch.tpu.current_device())

    def wait_stream(self, *args, **kwargs) -> None:
        pass

    def synchronize(self) -> None:
        torch.tpu.synchronize()


@contextlib.contextmanager
def _without_cuda_streams():
    """The GPU runner creates CUDA streams and events in its constructor; it gets
    stand-ins for the duration."""
    saved = torch.Event, torch.cuda.Stream, torch.cuda.Event
    torch.Event, torch.cuda.Stream, torch.cuda.Event = _Event, _Stream, _Event
    try:
        yield
    finally:
        torch.Event, torch.cuda.Stream, torch.cuda.Event = saved


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        with _without_cuda_streams():
            super().__init__(vllm_config, device)
        self.use_cuda_graph = False

    # --- device differences ---------------------------------------------------

    def _sync_device(self) -> None:
        torch.tpu.synchronize()

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        # A host read waits for the tokens; no pinned buffer and event needed.
        return sampled_token_ids.tolist()

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        """Reused blocks keep stale keys and values: the attention mask only lets a
        query see positions below its request's length, all written this request."""

    def initialize_kv_cache_tensors(self, kv_cache_config: KVCacheConfig,
                                    kernel_block_sizes: list[int],
                                    kv_cache_allocation_context=None
                                    ) -> dict[str, torch.Tensor]:
        """One tensor per layer, [blocks, block_size, kv_heads, 2 * head_size] in the
        cache dtype. vLLM's default packs every layer into one int8 buffer viewed per
        layer; on tpu a write into a view rewrites its whole base buffer, so each layer
        owns its buffer and its scatter touches only that layer."""
        kv_caches: dict[str, torch.Tensor] = {}
        specs = {}
        for group in kv_cache_config.kv_cache_groups:
            for name in group.layer_names:
                specs[name] = group.kv_cache_spec
        for tensor in kv_cache_config.kv_cache_tensors:
            num_blocks = kv_cache_config.num_blocks_of(tensor)
            for name in tensor.layers:
                spec = specs[name]
                spec = getattr(spec, "kv_cache_specs", {}).get(name, spec)
                if not isinstance(spec, AttentionSpec):
                    raise NotImplementedError(f"{type(spec).__name__} caches (layer "
                                              f"{name}) are not supported on tpu")
                kv_caches[name] = torch.zeros(
                    num_blocks, spec.block_size, spec.num_kv_heads, 2 * spec.head_size,
                    dtype=spec.dtype, device=self.device)
        for name, target in self.shared_kv_cache_layers.items():
            kv_caches[name] = kv_caches[target]
        bind_kv_cache(kv_caches, self.compilation_config.static_forward_context,
                      self.kv_caches, kv_cache_groups=kv_cache_config.kv_cache_groups,
                      layer_kv_caches=kv_caches)
        return kv_caches

    # --- bounded compiles -----------------------------------------------------

    def _token_bucket(self, num_tokens: int) -> int:
        return bucket(num_tokens, minimum=MIN_TOKENS, maximum=self.max_num_tokens)

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        mode, desc, ubatch, across_dp, stats = \
            super()._determine_batch_execution_and_padding(num_tokens, *args, **kwargs)
        desc = dataclasses.replace(desc, num_tokens=self._token_bucket(desc.num_tokens))
        return mode, desc, ubatch, across_dp, stats

    def capture_model(self) -> int:
        """vLLM's CUDA-graph capture hook, used for warm-up: runs the model once per
        token bucket (prefill shapes) and decode batches of every request bucket, so
        the programs a session needs compile (or load from the disk cache) now."""
        start = time.perf_counter()
        compiles = torch_tpu.metrics.snapshot()["compiles"]
        sizes = buckets_up_to(self.max_num_tokens, MIN_TOKENS)
        for num_tokens in reversed(sizes):
            self._dummy_run(num_tokens, skip_eplb=True)
        torch.tpu.synchronize()
        compiled = torch_tpu.metrics.snapshot()["compiles"] - compiles
        logger.info("tpu warm-up: %d token buckets %s, %d programs compiled, %.1f s",
                    len(sizes), sizes, compiled, time.perf_counter() - start)
        return 0
