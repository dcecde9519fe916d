"""SGLang platform plugin: makes `tpu` an SGLang device.

SGLang calls `register()` through the `sglang.srt.platforms` entry point (named `tpu`;
`SGLANG_PLATFORM=tpu` selects it when several platform plugins are installed). Then
`sgl.Engine(model_path=..., device="tpu")` and `python -m sglang.launch_server
--device tpu` run on the tpu device, with torch_tpu's paged attention
(the `torch_native` attention backend, the default on this platform)."""

from __future__ import annotations


def register() -> str | None:
    """The platform class path when a tpu device exists, else None (SGLang then uses
    its own detection)."""
    from torch_tpu.serving.device import tpu_available

    if not tpu_available():
        return None
    return "torch_tpu.serving.sglang.platform.TpuSRTPlatform"
