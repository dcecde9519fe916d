"""torch_tpu: an XLA accelerator as the plain PyTorch device `tpu`.

Importing it (which `import torch` does through the `torch.backends` entry point)
registers the device; the PJRT plugin itself loads at first device use.
"""

import os

import torch

from torch_tpu import _C, _plugin

__version__ = "0.2.0"

_C._configure(_plugin.find_plugin(), _plugin.num_devices())

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from torch_tpu import metrics, tpu  # noqa: E402
from torch_tpu._printing import install as _install_printing  # noqa: E402

torch._register_device_module("tpu", tpu)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
_install_printing()

from torch_tpu import _distributed  # noqa: E402

_distributed.register()


def set_cpu_fallback(enabled: bool) -> None:
    """Run ops that have no tpu lowering on the CPU (copy in, run, copy out) instead of
    raising NotImplementedError. Each fallen-back op warns once and is counted in
    `torch_tpu.metrics`."""
    _C._set_cpu_fallback(bool(enabled))


def cpu_fallback_enabled() -> bool:
    return _C._cpu_fallback_enabled()


set_cpu_fallback(os.environ.get("TORCH_TPU_CPU_FALLBACK", "0") == "1")


def _autoload() -> None:
    """Entry point for torch's device-backend autoload: importing this module is the work."""


__all__ = ["metrics", "tpu", "set_cpu_fallback", "cpu_fallback_enabled", "__version__"]
