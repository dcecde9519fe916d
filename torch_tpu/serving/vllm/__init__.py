"""vLLM platform plugin: makes `tpu` a vLLM device with no flags or env vars.

vLLM calls `register()` through the `vllm.platform_plugins` entry point in every
process; an out-of-tree platform that answers wins over vLLM's own detection."""

from __future__ import annotations


def register() -> str | None:
    """The platform class path when a tpu device exists, else None (vLLM then keeps
    looking)."""
    from torch_tpu.serving.device import tpu_available

    if not tpu_available():
        return None
    return "torch_tpu.serving.vllm.platform.TpuPlatform"
