import os
import subprocess
import sys
import tempfile

import pytest
import torch

import torch_tpu  # noqa: F401  (autoload does this too; explicit for clarity)


def run_python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for plugin choice, device count, autoload).

    It runs outside the checkout so `import torch_tpu` finds the installed package, not
    the source tree (which has no built extension)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300, cwd=tempfile.gettempdir())


def assert_same(tpu_tensor: torch.Tensor, cpu_tensor: torch.Tensor, **tol):
    assert tpu_tensor.device.type == "tpu"
    host = tpu_tensor.cpu()
    assert host.dtype == cpu_tensor.dtype
    assert host.shape == cpu_tensor.shape
    torch.testing.assert_close(host, cpu_tensor, **tol)


@pytest.fixture(autouse=True)
def _no_fallback():
    torch_tpu.set_cpu_fallback(False)
    yield
    torch_tpu.set_cpu_fallback(False)
