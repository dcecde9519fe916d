"""torch_tpu: an XLA accelerator as the plain PyTorch device `tpu`.

Importing it (which `import torch` does through the `torch.backends` entry point)
registers the device; the PJRT plugin itself loads at first device use.
"""


def _autoload() -> None:
    """Entry point for torch's device-backend autoload: importing this module is the work.
    Defined before `import torch`, which looks it up on this half-imported module when
    torch_tpu is imported first."""


import torch  # noqa: E402


def __getattr__(name: str):
    # The version is written once, in pyproject.toml; reading the installed metadata
    # takes ~30 ms, so only when asked (every `import torch` imports this module).
    if name == "__version__":
        from importlib.metadata import version

        return version("torch_tpu")
    raise AttributeError(f"module 'torch_tpu' has no attribute '{name}'")


def _start() -> None:
    import atexit

    from torch_tpu import _C, _plugin, _settings

    # Settings are checked before the device is configured (loading the extension starts
    # nothing): a bad one leaves no half-started device behind.
    _settings.check_all()
    plugin, num_devices = _plugin.find_plugin(), _plugin.num_devices()

    _C._configure(plugin, num_devices)
    # Before the interpreter finalizes, no autograd worker may still hold a finished
    # backward's Python objects (csrc/aten/autograd_exit.h).
    atexit.register(_C._drain_autograd_workers)
    from torch_tpu import _bucket_rule

    _bucket_rule.apply()
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")

    from torch_tpu import tpu
    from torch_tpu._printing import install as install_printing

    torch._register_device_module("tpu", tpu)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    install_printing()
    from torch_tpu import _default_backend, _distributed, _eager, _flex_attention, _meta

    _meta.register()
    _distributed.register()
    _eager.register()
    _default_backend.install()
    _flex_attention.install()
    set_cpu_fallback(_settings.get("TORCH_TPU_CPU_FALLBACK"))


def set_cpu_fallback(enabled: bool) -> None:
    """Run ops that have no tpu lowering on the CPU (copy in, run, copy out) instead of
    raising NotImplementedError. Each fallen-back op warns once and is counted in
    `torch_tpu.metrics`."""
    _C._set_cpu_fallback(bool(enabled))


def cpu_fallback_enabled() -> bool:
    return _C._cpu_fallback_enabled()


# `import torch` imports this module (device-backend autoload): it must never raise, or
# one broken or shadowed torch_tpu would make all of PyTorch unusable.
try:
    _start()
except Exception as _error:  # noqa: BLE001
    from torch_tpu import _unavailable

    _unavailable.install(_error)
else:
    from torch_tpu import _C, metrics, tpu
    from torch_tpu._eager import flush, get_eager_mode, set_eager_mode
    from torch_tpu._no_compile import no_compile


__all__ = [
    "metrics",
    "tpu",
    "set_cpu_fallback",
    "cpu_fallback_enabled",
    "set_eager_mode",
    "get_eager_mode",
    "flush",
    "no_compile",
    "__version__",
]
