"""vLLM platform plugin: makes `tpu` a vLLM device with no flags or env vars.

vLLM calls `register()` through the `vllm.platform_plugins` entry point in every
process; an out-of-tree platform that answers wins over vLLM's own detection."""

from __future__ import annotations


def register() -> str | None:
    """The platform class path when a tpu device exists, else None (vLLM then keeps
    looking)."""
    try:
        import torch

        import torch_tpu  # noqa: F401  (registers the device)

        if not torch.tpu.is_available():
            return None
    except Exception:  # a broken install must not stop vLLM on other platforms
        return None
    return "torch_tpu.serving.vllm.platform.TpuPlatform"
