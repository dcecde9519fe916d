"""vLLM's worker on `tpu`: the GPU worker with tpu's device set-up, runner and memory
accounting (no CUDA memory pools, no sleep mode)."""

from __future__ import annotations

import contextlib

import torch
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.config import CUDAGraphMode
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.worker_base import CompilationTimes
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from torch_tpu.serving import common
from torch_tpu.serving.device import device_total_memory
from torch_tpu.serving.vllm.model_runner import TpuModelRunner

# Under "vllm." so that vLLM's logging configuration shows these messages.
logger = init_logger(f"vllm.{__name__}")


class TpuWorker(Worker):
    def init_device(self) -> None:
        common.start_up()
        self.device = torch.device("tpu", self.local_rank)
        torch.tpu.set_device(self.device)
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(
            self.vllm_config,
            self.rank,
            self.distributed_init_method,
            self.local_rank,
            current_platform.dist_backend,
        )
        set_random_seed(self.model_config.seed)
        self._init_workspace_and_model_runner()

    def _make_model_runner(self) -> TpuModelRunner:
        return TpuModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag: str):
        # CUDA's sleep-mode allocator pools do not exist here; plain allocation.
        return contextlib.nullcontext()

    def _scoped_allocator_max_split(self, max_split_size_mb: int):
        return contextlib.nullcontext()

    def sleep(self, level: int = 1) -> None:
        logger.warning("sleep mode is not supported on tpu; ignored")

    def wake_up(self, tags=None) -> None:
        logger.warning("sleep mode is not supported on tpu; ignored")

    @torch.inference_mode()
    def determine_available_memory(self) -> int:
        """Runs the largest batch once (which also compiles it), then leaves
        `gpu_memory_utilization` of the device's memory, less the peak the weights and
        that batch used, to the KV cache (or exactly `kv_cache_memory_bytes`)."""
        torch.tpu.reset_peak_memory_stats(self.device)
        self.model_runner.profile_run()
        torch.tpu.synchronize()
        if self.cache_config.kv_cache_memory_bytes:
            return int(self.cache_config.kv_cache_memory_bytes)
        # The workers of this host (tensor parallel ranks) share a host-backed device's
        # memory.
        total = device_total_memory(
            self.device.index or 0, devices_on_host=self.parallel_config.local_world_size
        )
        peak = torch.tpu.max_memory_allocated(self.device)
        available = int(total * self.cache_config.gpu_memory_utilization) - peak
        logger.info(
            "tpu memory: %.2f GiB total, %.2f GiB peak in profiling, %.2f GiB for the KV cache",
            total / 2**30,
            peak / 2**30,
            available / 2**30,
        )
        return max(available, 0)

    def compile_or_warm_up_model(self) -> CompilationTimes:
        """tpu's warm-up instead of the GPU worker's (CUDA kernel tuning, graph
        capture): every token bucket once, unless the model runs eagerly, then the
        sampler (a pooling model: the pooler) at its largest batch; the random state is
        reset after."""
        if not self.model_config.enforce_eager:
            self.model_runner.capture_model()
        max_reqs = min(
            self.scheduler_config.max_num_seqs, self.scheduler_config.max_num_batched_tokens
        )
        hidden, last_hidden = self.model_runner._dummy_run(
            num_tokens=max_reqs, skip_eplb=True, cudagraph_runtime_mode=CUDAGraphMode.NONE
        )
        # A pooling model (runner="pooling": embeddings, classification, scores) has a
        # pooler and no sampler, as in vLLM's GPU worker.
        if self.model_runner.is_pooling_model:
            self.model_runner._dummy_pooler_run(hidden)
        else:
            self.model_runner._dummy_sampler_run(hidden_states=last_hidden)
        self.model_runner.save_compiled_steps()
        self.model_runner.steady.warmed_up(compiled=self.model_runner.saved_steps is not None)
        set_random_seed(self.model_config.seed)
        return CompilationTimes(
            language_model=self.compilation_config.compilation_time,
            encoder=self.compilation_config.encoder_compilation_time,
        )
