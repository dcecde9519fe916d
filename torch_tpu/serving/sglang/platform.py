"""SGLang's SRTPlatform for `tpu` (out of tree): names the device, its attention
backend, KV pool and allocator, and fits SGLang's server arguments to a device that
runs XLA programs (no CUDA graphs, no Triton kernels)."""

from __future__ import annotations

import importlib.util
import logging

import torch
from sglang.srt.platforms.interface import PlatformEnum, SRTPlatform

import torch_tpu  # noqa: F401  (registers the device)
from torch_tpu.serving import common
from torch_tpu.serving.device import device_total_memory, raise_virtual_devices

logger = logging.getLogger(__name__)

# SGLang's name for its Triton-free attention path; on tpu, torch_tpu's paged attention
# (see attention.py).
ATTENTION_BACKEND = "torch_native"


def _register_attention_backend() -> None:
    from torch_tpu.serving.sglang.attention import register_backend

    register_backend()


# What each backend option can be on tpu: its value if unset, and the values that work
# here (the others run CUDA, Triton or NPU kernels).
ATTENTION_OPTIONS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
SAMPLING_BACKENDS = ("pytorch",)
GRAMMAR_BACKENDS = ("xgrammar", "llguidance", "outlines", "none")
LORA_BACKEND = "torch_native"
# SGLang's default LoRA backend (a Triton kernel): on tpu it means LORA_BACKEND.
LORA_DEFAULT = "csgmv"


def _refuse(option: str, value, works) -> None:
    raise ValueError(
        f"{option}={value!r} is not supported on tpu; use "
        + " or ".join(repr(w) for w in works)
    )


def _fit_backends(server_args) -> None:
    """Sets the backend options a user left unset to what runs on tpu, and refuses, at
    start-up, a backend named that cannot (its kernels are CUDA's, Triton's or an NPU's):
    a server that starts serves every request it accepts."""
    for option in ATTENTION_OPTIONS:
        value = getattr(server_args, option)
        if value not in (None, ATTENTION_BACKEND):
            _refuse(option, value, [ATTENTION_BACKEND])
    if server_args.sampling_backend is None:
        server_args.sampling_backend = "pytorch"
    elif server_args.sampling_backend not in SAMPLING_BACKENDS:
        _refuse("sampling_backend", server_args.sampling_backend, SAMPLING_BACKENDS)
    grammar = server_args.grammar_backend
    if grammar is None:
        server_args.grammar_backend = grammar = "none"
    if grammar not in GRAMMAR_BACKENDS:
        _refuse("grammar_backend", grammar, GRAMMAR_BACKENDS)
    if grammar == "outlines" and importlib.util.find_spec("outlines") is None:
        raise ValueError(
            "grammar_backend='outlines' needs the outlines package, which is not "
            "installed; use 'xgrammar' or 'llguidance'"
        )
    if grammar == "xgrammar" and server_args.reasoning_parser:
        # SGLang wraps a custom grammar backend (grammar.py) without its reasoning
        # parser, so the grammar would constrain the thinking tokens too.
        raise ValueError(
            "grammar_backend='xgrammar' with reasoning_parser is not supported on tpu; "
            "use grammar_backend='llguidance'"
        )
    if server_args.speculative_algorithm:
        # SGLang's draft and verify steps run CUDA graphs and Triton kernels.
        raise ValueError(
            f"speculative_algorithm={server_args.speculative_algorithm!r} is not "
            "supported on tpu yet; leave it unset"
        )
    # The LoRA backend is chosen whether or not LoRA is on (adapters can be loaded
    # later); SGLang's default is a Triton kernel.
    lora = server_args.lora_backend
    if lora == LORA_DEFAULT:
        if server_args.enable_lora or server_args.lora_paths:
            logger.info(
                "lora_backend %r runs Triton kernels; using %r on tpu", lora, LORA_BACKEND
            )
        server_args.lora_backend = LORA_BACKEND
    elif lora != LORA_BACKEND:
        _refuse("lora_backend", lora, [LORA_BACKEND])


def _register_lora_backend() -> None:
    from torch_tpu.serving.sglang.lora import register_backend

    register_backend()


def _register_grammar_backend() -> None:
    from torch_tpu.serving.sglang.grammar import register_backend

    register_backend()


class TpuSRTPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"

    # --- configuration --------------------------------------------------------

    def apply_server_args_defaults(self, server_args) -> None:
        # SGLang resolves the platform while its own modules are still importing, so
        # the backend enters SGLang's registry here and in init_backend, not earlier.
        _register_attention_backend()
        # One token per page: SGLang's token allocator is plain torch (its paged
        # allocator is a Triton kernel), and the attention reads the request-to-token
        # table as a block table of one-token blocks.
        if server_args.page_size not in (None, 1):
            logger.warning("page_size %s is not supported on tpu; using 1", server_args.page_size)
        server_args.page_size = 1
        # The overlap scheduler prepares the next batch while the device runs the
        # current one. With it on, greedy tokens still equal HF's, but on XLA:CPU the
        # host shares the device's cores and its serving benchmark ran 7% slower
        # (377.9 against 405.8 tokens/s, docs/performance.md): the step loop stays
        # synchronous.
        server_args.disable_overlap_schedule = True
        # Device graphs are CUDA's; the step runs as tpu programs instead.
        server_args.disable_cuda_graph = True
        server_args.disable_piecewise_cuda_graph = True
        _fit_backends(server_args)
        common.refuse_pipeline_parallel(server_args.pp_size)
        if server_args.tp_size > 1:
            # Scheduler of rank r on device base_gpu_id + r * gpu_id_step.
            ranks = server_args.tp_size // max(server_args.nnodes, 1)
            raise_virtual_devices(
                server_args.base_gpu_id + (ranks - 1) * server_args.gpu_id_step + 1
            )

    def get_default_attention_backend(self) -> str:
        _register_attention_backend()
        return ATTENTION_BACKEND

    def get_mha_kv_pool_cls(self) -> type:
        from torch_tpu.serving.sglang.memory_pool import TpuMHATokenToKVPool

        return TpuMHATokenToKVPool

    def get_paged_allocator_cls(self) -> type:
        from torch_tpu.serving.sglang.memory_pool import TpuTokenToKVPoolAllocator

        return TpuTokenToKVPoolAllocator

    def get_graph_runner_cls(self) -> type:
        raise NotImplementedError("device graphs are not supported on tpu")

    def get_compile_backend(self, mode: str | None = None) -> str:
        return "tpu"

    def init_backend(self) -> None:
        from torch_tpu.serving.sglang.collectives import register_collective_kernels

        # Each scheduler process calls this (importing SGLang's model runner) before
        # it loads the model.
        common.start_up()
        _register_attention_backend()
        register_collective_kernels()
        _register_grammar_backend()
        _register_lora_backend()

    # --- device ---------------------------------------------------------------

    def get_device(self, device_id: int = 0) -> torch.device:
        return torch.device("tpu", device_id or 0)

    def set_device(self, device: torch.device) -> None:
        torch.tpu.set_device(device)

    def get_device_name(self, device_id: int = 0) -> str:
        return torch.tpu.get_device_name(device_id)

    def get_device_uuid(self, device_id: int = 0) -> str:
        return f"tpu-{device_id}"

    def get_device_capability(self, device_id: int = 0):
        return None

    def get_device_total_memory(self, device_id: int = 0) -> int:
        # Not split between tensor parallel ranks (vLLM's plugin splits it): SGLang's
        # default static fraction reserves about 3.5 GiB per rank for activations, so a
        # split host share would leave nothing; each rank's pool is what is left.
        return device_total_memory(device_id)

    def get_current_memory_usage(self, device=None) -> float:
        return float(torch.tpu.max_memory_allocated(device))

    def get_available_memory(self, device_id: int = 0) -> tuple[int, int]:
        total = device_total_memory(device_id)
        return total - torch.tpu.memory_allocated(device_id), total

    def empty_cache(self) -> None:
        torch.tpu.empty_cache()

    def synchronize(self) -> None:
        torch.tpu.synchronize()

    def is_pin_memory_available(self, device=None) -> bool:
        return False

    def get_torch_distributed_backend_str(self) -> str:
        # SGLang's groups run collectives on tpu tensors (tensor parallel layers) and
        # on CPU tensors (its world group's barriers and object exchanges): tpu_dist
        # for the first, gloo for the second, as one c10d backend string.
        return "cpu:gloo,tpu:tpu_dist"

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        super().seed_everything(seed)
        if seed is not None:
            torch.tpu.manual_seed_all(seed)
