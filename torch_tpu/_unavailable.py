"""What `import torch` leaves behind when torch_tpu cannot start.

torch imports torch_tpu through its device-backend autoload, so an exception here would
make all of PyTorch unimportable. Instead the `tpu` device name stays reserved, one line
of warning says what went wrong, and the first use of the device raises a RuntimeError
that names the cause and the fix. `torch.tpu.is_available()` is False, as
`torch.cuda.is_available()` is on a machine without CUDA.
"""

from __future__ import annotations

import os
import sys
import types
import warnings

import torch

_library = None  # the PrivateUse1 fallback kernel's registration, kept alive


def _source_tree(package_dir: str) -> str | None:
    """The checkout `package_dir` belongs to, if it is a source tree without a built
    extension (what Python finds first when it runs in the repository root)."""
    root = os.path.dirname(package_dir)
    if not os.path.exists(os.path.join(root, "pyproject.toml")):
        return None
    built = any(name.startswith("_C") and name.endswith(".so") for name in os.listdir(package_dir))
    return None if built else root


def explain(error: BaseException) -> str:
    package_dir = os.path.dirname(os.path.abspath(__file__))
    root = _source_tree(package_dir)
    if root is not None and isinstance(error, ImportError):
        return (
            f"torch_tpu could not load its C++ extension: Python imported the source tree "
            f"{package_dir}, which has no built extension, instead of the installed "
            f"package. Run Python outside {root}, or install torch_tpu in editable mode "
            f"there: pip install --no-build-isolation -e {root}"
        )
    if isinstance(error, ImportError):
        return (
            f"torch_tpu could not load its C++ extension ({error}). It must be built "
            f"against the installed torch {torch.__version__}: reinstall torch_tpu with "
            f"pip install --no-build-isolation --force-reinstall torch_tpu"
        )
    return f"torch_tpu failed to start: {type(error).__name__}: {error}"


def _device_module(message: str) -> types.ModuleType:
    module = types.ModuleType("torch_tpu.tpu", "torch.tpu while torch_tpu cannot start")
    module.is_available = lambda: False
    module.is_initialized = lambda: False
    module.device_count = lambda: 0

    def unavailable(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(message)

    module.__getattr__ = unavailable
    return module


def install(error: BaseException) -> str:
    """Reserves the `tpu` device with errors naming `error`; returns the message."""
    global _library
    message = explain(error)
    first_line = message.split(". ")[0]
    warnings.warn(
        f"{first_line}; the tpu device is unavailable (details on first use)",
        RuntimeWarning,
        stacklevel=2,
    )
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        torch.utils.rename_privateuse1_backend("tpu")
    if not hasattr(torch, "tpu"):
        torch._register_device_module("tpu", _device_module(message))
    if _library is None and "torch_tpu._C" not in sys.modules:
        # With the extension loaded its kernels own the key; they report a failed start.
        def fail(op, *args, **kwargs):
            raise RuntimeError(f"{op}: {message}")

        _library = torch.library.Library("_", "IMPL")
        _library.fallback(fail, "PrivateUse1")
    sys.modules.setdefault("torch_tpu.tpu", torch.tpu)
    return message
