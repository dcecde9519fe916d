"""vLLM's Platform for `tpu` (out of tree): names the device, the attention backend
and the worker, and fits vLLM's configuration to a device that runs XLA programs."""

from __future__ import annotations

import os

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

import torch_tpu
from torch_tpu.serving import common
from torch_tpu.serving.device import device_total_memory, raise_virtual_devices

# Under "vllm." so that vLLM's logging configuration shows these messages.
logger = init_logger(f"vllm.{__name__}")


def refuse_unsupported(vllm_config) -> None:
    """Refuses, when the configuration is built, what the platform cannot serve yet:
    speculative decoding (n-gram needs numba, which the engine venv lacks; the other
    methods' rejection sampler launches Triton kernels)."""
    spec = vllm_config.speculative_config
    if spec is not None:
        raise ValueError(
            f"speculative decoding (method={spec.method!r}) is not supported on tpu yet; "
            "leave speculative_config unset"
        )


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    # vLLM's device groups (tensor/pipeline parallel collectives on tpu tensors) use
    # torch_tpu's c10d backend; its CPU groups are gloo groups of their own.
    dist_backend: str = "tpu_dist"
    # No device_control_env_var: torch_tpu has no CUDA_VISIBLE_DEVICES-like variable (each
    # XLA:CPU process has its own virtual devices), so vLLM keeps its placeholder name.
    # Small helpers vLLM compiles on their own (sampler, logprobs) use dynamic shapes;
    # they stay eager ops on the device, the model step is what we compile.
    simple_compile_backend: str = "eager"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_attn_backend_cls(
        cls, selected_backend, attn_selector_config, num_heads: int | None = None
    ) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError("MLA and sparse attention are not supported on tpu")
        if selected_backend is not None and selected_backend.name != "TPU_PAGED":
            logger.info(
                "attention backend %s is not available on tpu; using TPU_PAGED",
                selected_backend.name,
            )
        return "torch_tpu.serving.vllm.attention.TpuPagedAttentionBackend"

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"dtype {dtype} is not supported on tpu")

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return device_total_memory(device_id)

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def get_current_memory_usage(cls, device=None) -> float:
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def import_kernels(cls) -> None:
        """vLLM's compiled kernels (vllm._C) are CUDA/CPU code; tpu runs none of them."""

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        from vllm.triton_utils.dispatcher import register_kernels

        from torch_tpu.serving.vllm.slot_mapping import compute_slot_mapping

        register_kernels(
            {"vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping}
        )

    @classmethod
    def verify_quantization(cls, quant: str) -> None:
        """Quantized linear layers need kernels the platform registers; it registers
        none yet, so a quantized model is refused when its configuration is built
        (vLLM's kernel tables would otherwise fail while building the model, without
        naming a reason)."""
        raise ValueError(
            f"quantization={quant!r} is not supported on tpu yet; serve an unquantized "
            "checkpoint"
        )

    @classmethod
    def get_punica_wrapper(cls) -> str:
        return "torch_tpu.serving.vllm.lora.TpuPunicaWrapper"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        # vLLM's device-generic communicator: torch.distributed on the device group.
        return (
            "vllm.distributed.device_communicators.base_device_communicator."
            "DeviceCommunicatorBase"
        )

    @classmethod
    def use_custom_op_collectives(cls) -> bool:
        """Tensor parallel collectives reach the model as vLLM's custom ops
        (torch.ops.vllm.all_reduce, ...): in a compiled step they are ops without a
        lowering, so the step graph is split around them and they run eagerly on the
        device group, between the step's programs."""
        return True

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode, CUDAGraphMode

        parallel = vllm_config.parallel_config
        if parallel.worker_cls == "auto":
            parallel.worker_cls = "torch_tpu.serving.vllm.worker.TpuWorker"
        common.refuse_pipeline_parallel(parallel.pipeline_parallel_size)
        refuse_unsupported(vllm_config)
        if parallel.world_size > 1:
            raise_virtual_devices(parallel.local_world_size)  # worker r on tpu:r
        cache = vllm_config.cache_config
        if cache is not None and not cache.user_specified_block_size:
            cache.block_size = 16

        compilation = vllm_config.compilation_config
        # No CUDA graphs: the compiled step program is the graph. "Capture" in the
        # worker is our warm-up over the shape buckets instead.
        compilation.cudagraph_mode = CUDAGraphMode.NONE
        compilation.cudagraph_capture_sizes = []
        model = vllm_config.model_config
        eager = (model is not None and model.enforce_eager) or common.eager_requested("vllm")
        if eager or compilation.mode == CompilationMode.NONE:
            compilation.mode = CompilationMode.NONE
        else:
            # vLLM's own compile mode drives Inductor; the standard torch.compile path
            # takes any backend, so the model step becomes one tpu program per bucket.
            compilation.mode = CompilationMode.STOCK_TORCH_COMPILE
            compilation.backend = "tpu"

        # The engine core and workers start by spawn: a forked child would inherit
        # the parent's PJRT client and its threads.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"


__all__ = ["TpuPlatform", "device_total_memory", "torch_tpu"]
