"""Which PJRT plugin the `tpu` device runs on: found here, loaded at first device use."""

import importlib.util
import os


def find_plugin() -> str:
    """TORCH_TPU_PJRT_PLUGIN if set; else libtpu if installed; else xla-cpu-pjrt."""
    path = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if path:
        return path
    for module, filename in (("libtpu", "libtpu.so"),
                             ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")):
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
    """Virtual device count for the CPU plugin (TORCH_TPU_NUM_DEVICES, default 1)."""
    value = os.environ.get("TORCH_TPU_NUM_DEVICES", "1")
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"TORCH_TPU_NUM_DEVICES must be a positive integer, got {value!r}") from None
    if count < 1:
        raise ValueError(f"TORCH_TPU_NUM_DEVICES must be a positive integer, got {value!r}")
    return count
