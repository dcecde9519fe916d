"""Complex tensors on tpu (complex64, complex128) and the FFTs, against CPU PyTorch."""

import pytest
import torch

import torch_tpu
from helpers import assert_same, rand, tol

CDTYPES = [torch.complex64, torch.complex128]


def crand(shape, dtype, seed=0):
    part = torch.float32 if dtype == torch.complex64 else torch.float64
    return torch.complex(rand(shape, part, seed), rand(shape, part, seed + 1))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_round_trip_and_views(dtype):
    x = crand((3, 5), dtype)
    t = x.to("tpu")
    assert t.dtype == dtype
    assert torch.equal(t.cpu(), x)
    assert_same(t.real.clone(), x.real)
    assert_same(t.imag.clone(), x.imag)
    assert_same(torch.view_as_real(t).clone(), torch.view_as_real(x))
    r = torch.view_as_real(x).contiguous()
    assert_same(torch.view_as_complex(r.to("tpu")).clone(), torch.view_as_complex(r))
    # A strided view of a complex tensor, and a write through view_as_real.
    assert_same(t[:, 1::2].clone(), x[:, 1::2])
    t2, x2 = t.clone(), x.clone()
    torch.view_as_real(t2)[..., 1] = 7.0
    torch.view_as_real(x2)[..., 1] = 7.0
    assert_same(t2, x2)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_arithmetic(dtype):
    x, y = crand((4, 3), dtype, 0), crand((4, 3), dtype, 2)
    a, b = x.to("tpu"), y.to("tpu")
    assert_same(a + b, x + y, **tol(dtype))
    assert_same(a * b, x * y, **tol(dtype))
    assert_same(a / b, x / y, **tol(dtype))
    assert_same(a - 2.5, x - 2.5, **tol(dtype))
    assert_same(a * (1 - 2j), x * (1 - 2j), **tol(dtype))
    assert_same(a.abs(), x.abs(), **tol(dtype))
    assert_same(a.angle(), x.angle(), **tol(dtype))
    assert_same(a.exp(), x.exp(), **tol(dtype))
    assert_same(a * 2.0, x * 2.0, **tol(dtype))
    # Real and complex operands promote to complex.
    assert_same(a + x.real.to("tpu"), x + x.real, **tol(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_conjugation(dtype):
    x = crand((2, 6), dtype)
    t = x.to("tpu")
    c = t.conj()
    assert c.is_conj()
    assert torch.equal(c.cpu(), x.conj())
    assert_same(c.clone(), x.conj().clone())
    assert_same(torch.conj_physical(t), torch.conj_physical(x))
    assert_same(c * t, x.conj() * x, **tol(dtype))
    # Negative views (as autograd makes them) are applied too.
    assert torch.equal(torch._neg_view(t).cpu().resolve_neg(), -x)
    # A host tensor with the conjugate bit uploads its values.
    assert torch.equal(x.conj().to("tpu").cpu(), x.conj())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_polar_angle(dtype):
    re, im = rand((3, 4), dtype, 3), rand((3, 4), dtype, 4)
    assert_same(torch.complex(re.to("tpu"), im.to("tpu")), torch.complex(re, im))
    r = re.abs()
    assert_same(torch.polar(r.to("tpu"), im.to("tpu")), torch.polar(r, im), **tol(dtype))
    z = torch.tensor([-1.5, 0.0, 2.0, float("nan"), -0.0], dtype=dtype)
    assert_same(z.to("tpu").angle(), z.angle(), equal_nan=True)
    ints = torch.tensor([-3, 0, 4])
    assert_same(ints.to("tpu").angle(), ints.angle())


FFT_CASES = [
    ("fft", dict(), (7,)),
    ("fft", dict(n=10, norm="ortho"), (3, 6)),
    ("ifft", dict(dim=0, norm="forward"), (5, 4)),
    ("rfft", dict(), (9,)),
    ("rfft", dict(n=6, dim=0, norm="ortho"), (5, 3)),
    ("irfft", dict(), (5,)),
    ("irfft", dict(n=9, norm="forward"), (2, 5)),
    ("hfft", dict(n=7), (4, 4)),
    ("ihfft", dict(), (3, 7)),
    ("fft2", dict(), (2, 5, 6)),
    ("ifft2", dict(s=(4, 3), norm="ortho"), (5, 6)),
    ("rfft2", dict(), (4, 7)),
    ("irfft2", dict(s=(5, 8)), (5, 5)),
    ("fftn", dict(dim=(0, 2)), (3, 4, 5)),
    ("rfftn", dict(norm="forward"), (2, 3, 5, 4)),
    ("irfftn", dict(), (3, 4, 3)),
    ("hfftn", dict(), (3, 4)),
    ("ihfftn", dict(), (4, 5)),
]


@pytest.mark.parametrize(
    "name,kwargs,shape", FFT_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FFT_CASES)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fft_matches_cpu(name, kwargs, shape, dtype):
    fn = getattr(torch.fft, name)
    complex_input = (
        name.startswith(("i", "h"))
        and not name.startswith(("ihfft",))
        and name not in ("ifft", "ifft2")
    )
    x = (
        crand(shape, torch.complex64 if dtype == torch.float32 else torch.complex128)
        if complex_input
        else rand(shape, dtype)
    )
    expected = fn(x, **kwargs)
    torch_tpu.metrics.reset()
    got = fn(x.to("tpu"), **kwargs)
    assert torch_tpu.metrics.fallback_count() == 0
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    assert_same(got, expected, **tol)


def test_fft_of_complex_input_and_integers():
    x = crand((4, 6), torch.complex64, 5)
    assert_same(torch.fft.ifft(x.to("tpu")), torch.fft.ifft(x), rtol=1e-5, atol=1e-5)
    assert_same(
        torch.fft.fft2(x.to("tpu"), norm="ortho"),
        torch.fft.fft2(x, norm="ortho"),
        rtol=1e-5,
        atol=1e-5,
    )
    ints = torch.arange(-4, 8)
    assert_same(torch.fft.rfft(ints.to("tpu")), torch.fft.rfft(ints), rtol=1e-5, atol=1e-5)


def test_fft_round_trip_and_gradient():
    x = rand((3, 10), torch.float64, 7)
    t = x.to("tpu").requires_grad_()
    c = x.clone().requires_grad_()
    y_t = torch.fft.irfft(torch.fft.rfft(t) * 0.5, n=10).sum(0).pow(2).sum()
    y_c = torch.fft.irfft(torch.fft.rfft(c) * 0.5, n=10).sum(0).pow(2).sum()
    y_t.backward()
    y_c.backward()
    torch.testing.assert_close(y_t.detach().cpu(), y_c.detach())
    torch.testing.assert_close(t.grad.cpu(), c.grad)


def test_stft_matches_cpu():
    x = rand((2, 40), torch.float32, 8)
    window = torch.hann_window(16)
    expected = torch.stft(x, 16, hop_length=4, window=window, return_complex=True)
    got = torch.stft(x.to("tpu"), 16, hop_length=4, window=window.to("tpu"), return_complex=True)
    assert_same(got, expected, rtol=1e-5, atol=1e-5)


def test_compiled_fft(fresh_dynamo):
    def f(x):
        spec = torch.fft.rfft(x, dim=-1)
        return torch.fft.irfft(spec * spec.conj(), n=x.shape[-1]), spec.abs()

    x = rand((4, 12), torch.float32, 9)
    compiled = torch.compile(f, backend="tpu")
    got = compiled(x.to("tpu"))
    expected = f(x)
    for g, e in zip(got, expected):
        assert_same(g, e, rtol=1e-4, atol=1e-4)
    m = torch_tpu.metrics.snapshot()
    assert m["graphs"] >= 1 and m["graph_fallbacks"] == 0


@pytest.mark.parametrize("dtype", CDTYPES)
def test_comparisons_sign_and_norm(dtype):
    x = crand((3, 5), dtype, 11)
    x[0, 0] = 0
    t = x.to("tpu")
    assert_same(t == t[0], x == x[0])
    assert_same(t != 0, x != 0)
    assert_same(t.sgn(), x.sgn(), **tol(dtype))
    assert_same(
        torch.linalg.vector_norm(t, dim=1), torch.linalg.vector_norm(x, dim=1), **tol(dtype)
    )
    assert_same(t.norm(), x.norm(), **tol(dtype))


def test_ops_without_complex_lowering_raise_or_fall_back():
    """A lowering written for real types never sees complex values (XLA:CPU may crash
    compiling them): the op raises NotImplementedError, or runs on the CPU when the
    fallback is on."""
    x = crand((4,), torch.complex64, 12)
    t = x.to("tpu")
    with pytest.raises(NotImplementedError, match="pow.*complex dtypes.*set_cpu_fallback"):
        t**2
    torch_tpu.set_cpu_fallback(True)
    with pytest.warns(UserWarning, match="falls back to the CPU"):
        got = t**2
    assert_same(got, x**2, rtol=1e-5, atol=1e-5)
    torch_tpu.set_cpu_fallback(False)
    # What CPU rejects for complex, tpu rejects too.
    with pytest.raises(NotImplementedError, match="div_floor"):
        torch.div(t, t, rounding_mode="floor")
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex"):
        torch.relu(t)
