"""Which PJRT plugin the `tpu` device runs on: found here, loaded at first device use."""

import importlib.util
import os

from torch_tpu import _settings


def find_plugin() -> str:
    """TORCH_TPU_PJRT_PLUGIN if set; else libtpu if installed; else xla-cpu-pjrt."""
    path = _settings.get("TORCH_TPU_PJRT_PLUGIN")
    if path:
        return path
    for module, filename in (
        ("libtpu", "libtpu.so"),
        ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so"),
    ):
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            continue
        if spec is not None and spec.origin:
            candidate = os.path.join(os.path.dirname(spec.origin), filename)
            if os.path.exists(candidate):
                return candidate
    return ""


def num_devices() -> int:
    """Virtual device count for the CPU plugin: TORCH_TPU_NUM_DEVICES if set; else, under a
    launcher (torchrun sets LOCAL_WORLD_SIZE), one per local process, so that
    `tpu:LOCAL_RANK` exists in every process as `cuda:LOCAL_RANK` does on a GPU host;
    else 1. Other plugins report their own devices."""
    count = _settings.get("TORCH_TPU_NUM_DEVICES")
    if count is not None:
        return count
    value = os.environ.get("LOCAL_WORLD_SIZE", "1")
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"LOCAL_WORLD_SIZE must be an integer, got {value!r}") from None
