"""Unary math through the lowering table, compared with CPU PyTorch: every dtype the CPU
kernels accept (and the same errors where they reject one), special values, in-place and
out= forms, views, empty and 0-d tensors, and gradients."""

import functools
import math

import pytest
import torch

import helpers
from helpers import assert_same, same_or_same_error, tol as shared_tol

tol = functools.partial(shared_tol, f32=2e-5, f64=1e-9, equal_nan=True)

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.bool]
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0, -2.5]


DOMAINS = {
    "any": (-4, 4),
    "pos": (0.05, 6),
    "unit": (-0.95, 0.95),
    "ge1": (1.05, 6),
    "open01": (0.02, 0.98),
    "small": (-2.5, 2.5),
}


def sample(domain, dtype, shape=(4, 6), specials=True, seed=0):
    lo, hi = DOMAINS[domain]
    return helpers.sample(dtype, shape, seed, lo, hi, SPECIALS if specials else (), int_scale=2)


# name: (input domain, differentiable)
FLOAT_OPS = {
    "exp": ("any", True),
    "exp2": ("any", True),
    "expm1": ("any", True),
    "log": ("pos", True),
    "log2": ("pos", True),
    "log10": ("pos", True),
    "log1p": ("pos", True),
    "sqrt": ("pos", True),
    "rsqrt": ("pos", True),
    "reciprocal": ("any", True),
    "sin": ("any", True),
    "cos": ("any", True),
    "tan": ("small", True),
    "tanh": ("any", True),
    "asin": ("unit", True),
    "acos": ("unit", True),
    "atan": ("any", True),
    "sinh": ("any", True),
    "cosh": ("any", True),
    "asinh": ("any", True),
    "acosh": ("ge1", True),
    "atanh": ("unit", True),
    "sigmoid": ("any", True),
    "erf": ("any", True),
    "erfc": ("any", True),
    "erfinv": ("unit", True),
    "lgamma": ("pos", True),
    "digamma": ("pos", True),
    "sinc": ("any", True),
    "logit": ("open01", True),
}
EXACT_OPS = {
    "neg": True,
    "abs": True,
    "sign": True,
    "sgn": True,
    "floor": True,
    "ceil": True,
    "round": True,
    "trunc": True,
    "frac": True,
    "bitwise_not": False,
    "logical_not": False,
    "signbit": False,
    "isnan": False,
    "isposinf": False,
    "isneginf": False,
    "isinf": False,
    "isfinite": False,
    "nan_to_num": False,
}


# f16 takes the bf16 path (f32 math): checked on a few ops.
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != torch.float16])
@pytest.mark.parametrize("name", sorted(FLOAT_OPS))
def test_float_unary(name, dtype):
    x = sample(FLOAT_OPS[name][0], dtype)
    same_or_same_error(getattr(torch, name), x, **tol(dtype))


@pytest.mark.parametrize("name", ["exp", "log1p", "rsqrt", "erfinv", "lgamma", "atanh"])
def test_float_unary_f16(name):
    x = sample(FLOAT_OPS[name][0], torch.float16)
    same_or_same_error(getattr(torch, name), x, **tol(torch.float16))


SPECIAL_OPS = {
    "i1": "any",
    "i1e": "any",
    "ndtri": "open01",
    "entr": "any",
    "expit": "any",
    "psi": "pos",
    "gammaln": "pos",
    "i0": "any",
    "i0e": "any",
    "modified_bessel_i0": "any",
    "modified_bessel_i1": "any",
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
@pytest.mark.parametrize("name", sorted(SPECIAL_OPS))
def test_special_unary(name, dtype):
    same_or_same_error(getattr(torch.special, name), sample(SPECIAL_OPS[name], dtype), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_angle_of_reals(dtype):
    same_or_same_error(torch.angle, sample("any", dtype), **tol(dtype))


@pytest.mark.parametrize("name", ["ndtri", "entr"])
def test_special_grad(name):
    fn = getattr(torch.special, name)
    cpu = sample("open01", torch.float32, (7,), specials=False).requires_grad_()
    x = cpu.detach().to("tpu").requires_grad_()
    fn(cpu).sum().backward()
    fn(x).sum().backward()
    assert_same(x.grad, cpu.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(EXACT_OPS))
def test_exact_unary(name, dtype):
    x = sample("any", dtype) * (1 if dtype == torch.bool else 3)
    same_or_same_error(getattr(torch, name), x, **tol(dtype))


@pytest.mark.parametrize("name", sorted(FLOAT_OPS) + sorted(n for n, d in EXACT_OPS.items() if d))
def test_unary_inplace_out_views_empty(name):
    domain = FLOAT_OPS.get(name, ("any",))[0]
    fn = getattr(torch, name)
    cpu = sample(domain, torch.float32, (6, 4), specials=False)
    x = cpu.to("tpu")
    t = tol(torch.float32)
    assert_same(fn(x.t()), fn(cpu.t()), **t)
    y, ref = x.clone(), cpu.clone()
    getattr(y[1:4], name + "_")()
    getattr(ref[1:4], name + "_")()
    assert_same(y, ref, **t)
    out = torch.empty(0, device="tpu")
    fn(x, out=out)
    assert_same(out, fn(cpu), **t)
    assert_same(fn(torch.empty(0, 3, device="tpu")), fn(torch.empty(0, 3)))
    assert_same(fn(x[2, 1]), fn(cpu[2, 1]), **t)


# sgn's backward needs _efficientzerotensor (a factory op lowered elsewhere).
@pytest.mark.parametrize(
    "name",
    sorted(n for n, (_, d) in FLOAT_OPS.items() if d)
    + sorted(n for n, d in EXACT_OPS.items() if d and n != "sgn"),
)
def test_unary_grad(name):
    domain = FLOAT_OPS.get(name, ("any",))[0]
    fn = getattr(torch, name)
    cpu = sample(domain, torch.float32, (5, 3), specials=False, seed=1).requires_grad_()
    x = cpu.detach().to("tpu").requires_grad_()
    g = torch.randn(3, 5)
    fn(cpu.t()).backward(g)
    fn(x.t()).backward(g.to("tpu"))
    assert_same(x.grad, cpu.grad, rtol=1e-4, atol=1e-4)


def test_integer_inputs_promote_and_int_out_is_rejected():
    cpu = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    assert_same(cpu.to("tpu").sqrt(), cpu.sqrt())
    assert_same(cpu.to("tpu").lgamma(), cpu.lgamma())
    assert_same(cpu.to("tpu").neg(), cpu.neg())
    assert_same(cpu.to("tpu").sign(), cpu.sign())
    with pytest.raises(RuntimeError, match="can.t be cast"):
        torch.sin(cpu.to("tpu"), out=torch.empty(2, 2, dtype=torch.long, device="tpu"))


def test_digamma_poles_and_polygamma():
    cpu = torch.tensor([0.0, -0.0, -1.0, -2.5, 1e-3, 7.0])
    x = cpu.to("tpu")
    assert_same(torch.digamma(x), torch.digamma(cpu), equal_nan=True)
    for n in (0, 1, 2, 3):
        assert_same(torch.polygamma(n, x[3:]), torch.polygamma(n, cpu[3:]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_round_decimals(decimals, dtype):
    cpu = (torch.randn(40, dtype=torch.float64) * 500).to(dtype)
    cpu[:4] = torch.tensor([2.5, -2.5, 0.125, 1234.5])
    out = torch.round(cpu.to("tpu"), decimals=decimals)
    assert_same(out, torch.round(cpu, decimals=decimals), **tol(dtype))
    y = cpu.to("tpu")
    y.round_(decimals=decimals)
    assert_same(y, torch.round(cpu, decimals=decimals), **tol(dtype))


def test_round_half_to_even():
    cpu = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, 2.5001])
    assert_same(cpu.to("tpu").round(), cpu.round())


@pytest.mark.parametrize("kw", [{}, {"nan": 1.5}, {"nan": -1.0, "posinf": 7.0, "neginf": -9.0}])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_nan_to_num(kw, dtype):
    cpu = torch.tensor([math.nan, math.inf, -math.inf, 1.25, -0.0], dtype=dtype)
    assert_same(torch.nan_to_num(cpu.to("tpu"), **kw), torch.nan_to_num(cpu, **kw))
    y = cpu.to("tpu")
    y.nan_to_num_(**kw)
    assert_same(y, torch.nan_to_num(cpu, **kw))


@pytest.mark.parametrize("eps", [None, 1e-3, 0.2])
def test_logit_eps_and_backward(eps):
    cpu = torch.tensor([-0.5, 0.0, 1e-4, 0.1, 0.5, 0.9, 1.0, 1.5]).requires_grad_()
    x = cpu.detach().to("tpu").requires_grad_()
    assert_same(torch.logit(x, eps), torch.logit(cpu, eps), equal_nan=True)
    torch.logit(cpu, eps).sum().backward()
    torch.logit(x, eps).sum().backward()
    assert_same(x.grad, cpu.grad, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool])
def test_bitwise_not_integers(dtype):
    cpu = (
        torch.tensor([0, 1, 5, 127], dtype=dtype)
        if dtype != torch.bool
        else torch.tensor([True, False])
    )
    assert_same(torch.bitwise_not(cpu.to("tpu")), torch.bitwise_not(cpu))
    assert_same(~cpu.to("tpu"), ~cpu)


def test_logical_not_out_dtype():
    cpu = torch.tensor([0.0, 2.0, math.nan, -1.0])
    out = torch.empty(4, dtype=torch.float32, device="tpu")
    torch.logical_not(cpu.to("tpu"), out=out)
    assert_same(out, torch.logical_not(cpu, out=torch.empty(4)))


def test_isinf_isfinite_on_integers_and_floats():
    for cpu in (torch.tensor([1, -3]), torch.tensor([math.inf, -math.inf, math.nan, 1.0])):
        x = cpu.to("tpu")
        for fn in (torch.isinf, torch.isfinite, torch.isnan, torch.isposinf, torch.isneginf):
            assert_same(fn(x), fn(cpu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_frexp(dtype):
    info = torch.finfo(dtype)
    special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        0.75,
        3.0,
        -1024.5,
        info.max,
        -info.max,
        info.tiny,
        info.smallest_normal * 0.25,
        -info.smallest_normal * 0.5,
        info.eps,
    ]
    x = torch.cat(
        [
            torch.tensor(special, dtype=torch.float64).to(dtype),
            (torch.randn(7, 5, generator=torch.Generator().manual_seed(0)) * 100)
            .to(dtype)
            .flatten(),
        ]
    )
    mantissa, exponent = torch.frexp(x.to("tpu"))
    want_mantissa, want_exponent = torch.frexp(x)
    assert_same(mantissa, want_mantissa, rtol=0, atol=0)
    assert_same(exponent, want_exponent)
    out = (
        torch.empty(0, dtype=dtype, device="tpu"),
        torch.empty(0, dtype=torch.int32, device="tpu"),
    )
    torch.frexp(x.to("tpu"), out=out)
    assert_same(out[0], want_mantissa, rtol=0, atol=0)


def test_frexp_rejects_integers():
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.frexp(torch.arange(3, device="tpu"))


def test_sgn_backward_of_reals_is_zero_like_cpu():
    # Autograd builds sgn's gradient of a real input with _efficientzerotensor.
    x = torch.tensor([-2.0, 0.0, 3.0, math.nan, -0.0])
    grads = []
    for device in ("cpu", "tpu"):
        z = x.clone().to(device).requires_grad_()
        (torch.sgn(z) * 2 + z * 3).sum().backward()  # the zero gradient added to another
        grads.append(z.grad)
    assert_same(grads[1], grads[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_i0_over_its_range(dtype):
    # Both sides of the switch from the power series to the asymptotic series at |x| = 20.
    x = torch.cat(
        [
            torch.linspace(-60, 60, 241, dtype=torch.float64),
            torch.tensor([19.999, 20.0, 20.001, -20.001, 85.0, 300.0, -700.0]),
        ]
    ).to(dtype)
    same_or_same_error(torch.special.i0e, x, **tol(dtype))
    same_or_same_error(torch.i0, x[x.abs() < 85], **tol(dtype))
    cpu = x[x.abs() < 60].clone().requires_grad_()
    tpu = cpu.detach().to("tpu").requires_grad_()
    for fn in (torch.i0, torch.special.i0e):
        cpu.grad = tpu.grad = None
        fn(cpu).sum().backward()
        fn(tpu).sum().backward()
        assert_same(tpu.grad, cpu.grad, **tol(dtype))
