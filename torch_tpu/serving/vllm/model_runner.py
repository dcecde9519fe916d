"""vLLM's v1 model runner on `tpu`: the GPU runner (vLLM's device-generic one) with
what differs on a device without CUDA streams, events or graphs, and with padding to
the shape buckets that keep the number of compiled programs bounded."""

from __future__ import annotations

import contextlib
import dataclasses

import torch
from vllm.config import CUDAGraphMode
from vllm.logger import init_logger
from vllm.model_executor.layers.linear import UnquantizedLinearMethod
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheConfig
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.utils import bind_kv_cache

from torch_tpu.serving import common
from torch_tpu.serving import paged_attention as pa
from torch_tpu.serving.buckets import token_bucket
from torch_tpu.serving.precompile import SavedSteps, package_dir
from torch_tpu.serving.vllm import slot_mapping

# Under "vllm." so that vLLM's logging configuration shows these messages.
logger = init_logger(f"vllm.{__name__}")


@contextlib.contextmanager
def _cuda_as_tpu():
    """The GPU runner makes CUDA streams and events in its constructor, and with async
    scheduling copies each step's sampled tokens to the host on a side stream
    (`AsyncGPUModelRunnerOutput`: the current stream, a stream context, a blocking
    event). For the duration these are torch_tpu's: one in-order queue per device, an
    event captures the work enqueued before it, and the copy is a non-blocking one
    into pinned memory. Its plain `torch.Event()`s are tpu events already."""
    names = ("Stream", "Event", "current_stream", "stream")
    saved = {name: getattr(torch.cuda, name) for name in names}
    for name in names:
        setattr(torch.cuda, name, getattr(torch.tpu, name))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def _step_bucket(args: tuple, kwargs: dict) -> tuple:
    """Which compiled step a model call is: the shapes of its tensor arguments and of the
    attention metadata it reads from the forward context (the block-table width), and
    whether it has attention at all."""
    from vllm.forward_context import get_forward_context, is_forward_context_available

    shapes = tuple(tuple(a.shape) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
    metadata = get_forward_context().attn_metadata if is_forward_context_available() else None
    if isinstance(metadata, dict) and metadata:
        batch = next(iter(metadata.values()))
        return shapes, tuple(
            tuple(getattr(batch, f.name).shape)
            for f in dataclasses.fields(batch)
            if isinstance(getattr(batch, f.name), torch.Tensor)
        )
    return shapes, metadata is None


def steps_dir(vllm_config) -> str:
    """Where an engine's saved steps live: keyed by vLLM's hash of its configuration,
    which covers what changes the step besides the buckets (the model and its dtype,
    quantization, LoRA on/off and its limits, speculative decoding, the runner), per
    rank."""
    return package_dir(f"vllm {vllm_config.compute_hash()}", vllm_config.parallel_config.rank)


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        with _cuda_as_tpu():
            super().__init__(vllm_config, device)
        self.use_cuda_graph = False
        common.raise_recompile_limits()
        # Serving after the warm-up (worker.compile_or_warm_up_model ends it).
        self.steady = common.SteadyState()

    # --- device differences ---------------------------------------------------

    def _sync_device(self) -> None:
        torch.tpu.synchronize()

    def _prepare_inputs(self, *args, **kwargs):
        with slot_mapping.host_inputs(self):
            return super()._prepare_inputs(*args, **kwargs)

    def sample_tokens(self, *args, **kwargs):
        with _cuda_as_tpu():
            return super().sample_tokens(*args, **kwargs)

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        # A host read waits for the tokens; no pinned buffer and event needed.
        return sampled_token_ids.tolist()

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        """Reused blocks keep stale keys and values: the attention mask only lets a
        query see positions below its request's length, all written this request."""

    def initialize_kv_cache_tensors(
        self,
        kv_cache_config: KVCacheConfig,
        kernel_block_sizes: list[int],
        kv_cache_allocation_context=None,
    ) -> dict[str, torch.Tensor]:
        """One tensor per layer in the paged-attention layout (`pa.kv_cache_shape`:
        [2, kv_heads, blocks, block_size, head_size]) and the cache dtype. vLLM's
        default packs every layer into one int8 buffer viewed per layer; on tpu a write
        into a view rewrites its whole base buffer, so each layer owns its buffer and
        its scatter touches only that layer."""
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
                    raise NotImplementedError(
                        f"{type(spec).__name__} caches (layer {name}) are not supported on tpu"
                    )
                kv_caches[name] = torch.zeros(
                    pa.kv_cache_shape(
                        num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size
                    ),
                    dtype=spec.dtype,
                    device=self.device,
                )
        for name, target in self.shared_kv_cache_layers.items():
            kv_caches[name] = kv_caches[target]
        bind_kv_cache(
            kv_caches,
            self.compilation_config.static_forward_context,
            self.kv_caches,
            kv_cache_groups=kv_cache_config.kv_cache_groups,
            layer_kv_caches=kv_caches,
        )
        return kv_caches

    # --- warm starts -----------------------------------------------------------

    def load_model(self, *args, **kwargs) -> None:
        """The GPU runner's, with the linear weights laid out for the dot
        (`common.lay_out_linear_weights`); then (compiled mode) the model's step becomes
        SavedSteps: an engine of the same configuration started before left what Dynamo
        traced for each bucket, and this one loads it at the bucket's first step instead
        of tracing (torch_tpu/serving/precompile.py)."""
        super().load_model(*args, **kwargs)
        common.lay_out_linear_weights(self.model, UnquantizedLinearMethod)
        self.saved_steps = None
        if getattr(self.model, "_compiled_call_impl", None) is None:
            return  # eager
        self.saved_steps = SavedSteps(
            self.model._call_impl,
            steps_dir(self.vllm_config),
            _step_bucket,
            dynamic=False,
            steady=self.steady,
        )
        self.model._compiled_call_impl = self.saved_steps

    def save_compiled_steps(self) -> None:
        """After the warm-up: the buckets traced in this engine, for the next one."""
        if self.saved_steps is not None:
            written = self.saved_steps.save()
            logger.info(
                "tpu warm start: %d step buckets loaded, %d saved", self.saved_steps.loaded, written
            )

    # --- bounded compiles -----------------------------------------------------

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        mode, desc, ubatch, across_dp, stats = super()._determine_batch_execution_and_padding(
            num_tokens, *args, **kwargs
        )
        desc = dataclasses.replace(
            desc, num_tokens=token_bucket(desc.num_tokens, self.max_num_tokens)
        )
        return mode, desc, ubatch, across_dp, stats

    def _get_slot_mappings(
        self, num_tokens_padded, num_reqs_padded, num_tokens_unpadded, *args, **kwargs
    ):
        """The forward context's slot mappings, which the step graph reads, at the token
        bucket's size in every step: vLLM sizes them to the real token count (unless
        CUDA graphs pad), which would fail the step's guards at each new count."""
        num_tokens_padded = max(
            num_tokens_padded, token_bucket(num_tokens_unpadded, self.max_num_tokens)
        )
        return super()._get_slot_mappings(
            num_tokens_padded, num_reqs_padded, num_tokens_unpadded, *args, **kwargs
        )

    def capture_model(self) -> int:
        """vLLM's CUDA-graph capture hook, used for warm-up: runs the model once for
        every (token bucket, block-table width bucket) pair, attention included, so
        every step program a session can need compiles (or loads from the disk cache)
        now. Returns the bytes graphs hold: none."""
        count = common.CompileCount()
        if self.saved_steps is not None:
            self.saved_steps.arm()
        block_size = self.cache_config.block_size
        max_blocks = -(-self.max_model_len // block_size)
        token_buckets = common.token_buckets(self.max_num_tokens)
        width_buckets = common.width_buckets(max_blocks, max_blocks)
        # A step of one token is its own Dynamo graph (Dynamo specializes sizes of 1).
        for num_tokens, blocks in common.bucket_pairs(token_buckets, width_buckets, (1,)):
            self._dummy_run(
                num_tokens,
                cudagraph_runtime_mode=CUDAGraphMode.NONE,
                force_attention=True,
                skip_eplb=True,
                profile_seq_lens=blocks * block_size,
            )
        torch.tpu.synchronize()
        counts = count.counts()
        self.warmup_compiles = counts["compiles"]
        logger.info(
            "tpu warm-up: token buckets %s x block-table widths %s: %d programs "
            "compiled in %.1f s",
            token_buckets,
            width_buckets,
            self.warmup_compiles,
            counts["seconds"],
        )
        return 0
