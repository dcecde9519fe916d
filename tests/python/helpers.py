"""What the test files share: sampling inputs, tolerances derived from the dtype,
comparing a tpu result with CPU PyTorch's, running code in a fresh interpreter, a free
port. (Fixtures live in conftest.py.)"""

import os
import socket
import subprocess
import sys
import tempfile

import pytest
import torch


def run_python(
    code: str, env: dict | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for plugin choice, device count, autoload).

    By default it runs outside the checkout so `import torch_tpu` finds the installed
    package, not the source tree (which has no built extension); `cwd` runs it elsewhere.
    A None value in `env` unsets it."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        cwd=cwd or tempfile.gettempdir(),
    )


FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
LOW = (torch.bfloat16, torch.float16)


def tol(dtype, f32=1e-5, f64=None, low=2e-2, equal_nan=False) -> dict:
    """assert_close tolerances for results of `dtype`: `low` for bf16/f16, `f32` for
    float32 and complex64, `f64` for float64 and complex128 (None: assert_close's own
    default for the dtype)."""
    bound = (
        low
        if dtype in LOW
        else f32
        if dtype in (torch.float32, torch.complex64)
        else f64
        if dtype in (torch.float64, torch.complex128)
        else None
    )
    out = {} if bound is None else dict(rtol=bound, atol=bound)
    if equal_nan:
        out["equal_nan"] = True
    return out


def eps_tol(dtype, ulps) -> dict:
    """rtol = atol = `ulps` times `dtype`'s machine epsilon. For a half-type result
    compared with the float32 result rounded once, 1 covers that rounding and a last-bit
    difference in the float32 sums; an op that rounds intermediate results in the half
    type needs about one more per rounding step on the result's path."""
    bound = ulps * torch.finfo(dtype).eps
    return dict(rtol=bound, atol=bound)


def rand(shape, dtype, seed=0, scale=1.0):
    """A seeded CPU sample: normal floats times `scale`, small signed ints, fair bools."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).mul(scale).to(dtype)
    return torch.randint(-9, 10, shape, generator=g).to(dtype)


def assert_same(tpu_tensor: torch.Tensor, cpu_tensor: torch.Tensor, **tol):
    assert tpu_tensor.device.type == "tpu"
    host = tpu_tensor.cpu()
    assert host.dtype == cpu_tensor.dtype
    assert host.shape == cpu_tensor.shape
    torch.testing.assert_close(host, cpu_tensor, **tol)


def sample(dtype, shape, seed=0, lo=-5.0, hi=5.0, specials=(), int_scale=1):
    """A seeded CPU sample, uniform in [lo, hi) (drawn in float64, then cast): bools are
    the upper half, integers `x * int_scale` rounded. `specials` (edge values such as NaN,
    infinities, signed zeros) overwrite the first elements of a floating sample big
    enough to hold them all."""
    g = torch.Generator().manual_seed(seed)
    x = lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float64)
    if dtype == torch.bool:
        return x > (lo + hi) / 2
    if not dtype.is_floating_point:
        return (x * int_scale).round().to(dtype)
    x = x.to(dtype)
    if specials and x.numel() >= len(specials):
        x.view(-1)[: len(specials)] = torch.tensor(specials, dtype=dtype)
    return x


def to_tpu(a):
    return a.to("tpu") if isinstance(a, torch.Tensor) else a


def same_or_same_error(fn, *cpu_args, **tolerance):
    """fn on CPU and on tpu agree: equal results (returned), or both raise."""
    errors = (RuntimeError, NotImplementedError, TypeError)
    try:
        expected = fn(*cpu_args)
    except errors:
        with pytest.raises(errors):
            fn(*map(to_tpu, cpu_args)).cpu()
        return None
    assert_same(fn(*map(to_tpu, cpu_args)), expected, **tolerance)
    return expected


def same_error(fn, *cpu_args):
    """fn raises on CPU, and on tpu the same exception type with the same message."""
    with pytest.raises(Exception) as cpu:
        fn(*cpu_args)
    with pytest.raises(type(cpu.value)) as got:
        fn(*map(to_tpu, cpu_args)).cpu()
    assert str(got.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a rendezvous or a server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
