"""Binary and ternary elementwise ops through the lowering table, compared with CPU
PyTorch: promotion (tensor/tensor, tensor/Python scalar, int with float), broadcasting,
views, in-place and out= forms, edge values (NaN, signed zeros, negative divisors and
exponents, oversized shifts) and gradients."""

import functools
import math

import pytest
import torch

import helpers
from helpers import assert_same, same_or_same_error, to_tpu, tol as shared_tol

tol = functools.partial(shared_tol, f32=2e-5, f64=2e-5, equal_nan=True)

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]
# Dtypes that go through the same code paths as DTYPES: checked on a few ops only.
MORE_DTYPES = [torch.float16, torch.float64, torch.int32, torch.uint8]


# Edge values at the start of each floating sample.
SPECIALS = [0.0, -0.0, math.nan, math.inf, -math.inf, 2.0]


def sample(dtype, shape, seed, lo=-5, hi=5, specials=True):
    return helpers.sample(dtype, shape, seed, lo, hi, SPECIALS if specials else ())


BINARY = {
    "pow": torch.pow,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "xlogy": torch.xlogy,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "floor_divide": torch.floor_divide,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "heaviside": torch.heaviside,
    "rsub": torch.rsub,
    "xlog1py": torch.special.xlog1py,
    "nextafter": torch.nextafter,
    "clamp_min": torch.clamp_min,
    "clamp_max": torch.clamp_max,
}
# Integer division by zero raises on CPU; the device need not match it.
NONZERO_DIVISOR = {"remainder", "fmod", "floor_divide"}


def divisor(name, y):
    if name in NONZERO_DIVISOR and not y.dtype.is_floating_point:
        return torch.where(y == 0, torch.ones_like(y), y)
    if name == "pow" and not y.dtype.is_floating_point and y.dtype != torch.bool:
        return y.abs() % 4
    return y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tensor_tensor_broadcast(name, dtype):
    fn = BINARY[name]
    x = sample(dtype, (3, 1, 5), 0)
    y = divisor(name, sample(dtype, (4, 1), 1))
    same_or_same_error(fn, x, y, **tol(dtype))


@pytest.mark.parametrize("dtype", MORE_DTYPES)
@pytest.mark.parametrize(
    "name",
    ["pow", "remainder", "maximum", "bitwise_xor", "lt", "atan2", "floor_divide", "copysign"],
)
def test_binary_more_dtypes(name, dtype):
    x = sample(dtype, (3, 1, 5), 0, lo=0 if dtype == torch.uint8 else -5)
    y = divisor(name, sample(dtype, (4, 1), 1, lo=0 if dtype == torch.uint8 else -5))
    same_or_same_error(BINARY[name], x, y, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tensor_scalar_promotion(name, dtype):
    fn = BINARY[name]
    x = sample(dtype, (2, 5), 2, specials=False)
    for scalar in (3, -1.75, True):
        if name in NONZERO_DIVISOR | {"pow"} and not dtype.is_floating_point and scalar is not True:
            scalar = abs(scalar)
        same_or_same_error(lambda a: fn(a, scalar), x, **tol(dtype))


@pytest.mark.parametrize(
    "name", ["pow", "remainder", "bitwise_and", "eq", "lt", "atan2", "maximum"]
)
def test_scalar_first_overloads(name):
    fn = BINARY[name]
    x = sample(torch.float32, (7,), 3, lo=0.5, hi=3, specials=False)
    same_or_same_error(lambda a: fn(2, a), x, **tol(torch.float32))
    xi = sample(torch.int64, (7,), 3, lo=1, hi=4)
    same_or_same_error(lambda a: fn(3, a), xi)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_inplace_out_views(name):
    fn = BINARY[name]
    cpu_x = sample(torch.float32, (6, 4), 4, specials=False)
    cpu_y = sample(torch.float32, (4,), 5, lo=0.5, hi=3, specials=False)
    x, y = cpu_x.to("tpu"), cpu_y.to("tpu")
    t = tol(torch.float32)
    try:
        expected = fn(cpu_x.t()[:, 1:5], cpu_y[None, :])
    except RuntimeError:
        return  # the op has no float form (bitwise ops): covered by the dtype tests
    assert_same(fn(x.t()[:, 1:5], y[None, :]), expected, **t)
    if name != "rsub":  # torch.rsub has no out=
        out = torch.empty(0, device="tpu", dtype=expected.dtype)
        fn(x, y, out=out)
        assert_same(out, fn(cpu_x, cpu_y), **t)
    assert_same(fn(torch.empty(0, 4, device="tpu"), y), fn(torch.empty(0, 4), cpu_y))
    assert_same(fn(x[1, 2], y[3]), fn(cpu_x[1, 2], cpu_y[3]), **t)
    method = getattr(torch.Tensor, name + "_", None)
    if method is not None and fn(cpu_x, cpu_y).dtype == cpu_x.dtype:
        a, ref = x.clone(), cpu_x.clone()
        method(a[::2], y)
        method(ref[::2], cpu_y)
        assert_same(a, ref, **t)


GRAD = [
    "pow",
    "remainder",
    "fmod",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "atan2",
    "hypot",
    "copysign",
    "xlogy",
    "logaddexp",
    "logaddexp2",
    "rsub",
    "clamp_min",
    "clamp_max",
    "xlog1py",
]


@pytest.mark.parametrize("name", GRAD)
def test_binary_grad(name):
    fn = BINARY[name]
    cpu_x = sample(torch.float32, (3, 4), 6, lo=0.3, hi=3, specials=False).requires_grad_()
    cpu_y = sample(torch.float32, (4,), 7, lo=0.3, hi=3, specials=False).requires_grad_()
    x = cpu_x.detach().to("tpu").requires_grad_()
    y = cpu_y.detach().to("tpu").requires_grad_()
    g = torch.randn(3, 4)
    fn(cpu_x, cpu_y).backward(g)
    fn(x, y).backward(g.to("tpu"))
    assert_same(x.grad, cpu_x.grad, rtol=1e-4, atol=1e-4)
    assert_same(y.grad, cpu_y.grad, rtol=1e-4, atol=1e-4)


def test_remainder_and_fmod_signs():
    a = torch.tensor([5, -5, 5, -5, 0, 7])
    b = torch.tensor([3, 3, -3, -3, 3, -7])
    for x, y in ((a, b), (a.double() + 0.5, b.double()), (a.float(), b.float())):
        for fn in (torch.remainder, torch.fmod, torch.floor_divide):
            assert_same(fn(x.to("tpu"), y.to("tpu")), fn(x, y))
    cpu = torch.tensor([5.0, -5.0, 1.0])
    assert_same(torch.remainder(cpu.to("tpu"), 0.0), torch.remainder(cpu, 0.0), equal_nan=True)
    assert_same(torch.remainder(-7, a[:4].to("tpu")), torch.remainder(-7, a[:4]))


def test_integer_pow_negative_exponents():
    base = torch.tensor([1, -1, -1, 2, -2, 0, 3])
    exp = torch.tensor([-3, -3, -2, -1, -2, 2, 4])
    assert_same(base.to("tpu") ** exp.to("tpu"), base**exp)
    assert_same(base.to("tpu") ** 0.5, base**0.5, equal_nan=True)
    assert_same(2 ** base.abs().to("tpu"), 2 ** base.abs())
    assert_same(2.5 ** base.to("tpu"), 2.5**base)


def test_float_pow_edge_values():
    b = torch.tensor([0.0, -0.0, -2.0, math.nan, 1.0, math.inf, -math.inf, 4.0])
    for e in (0.0, 0.5, 2.0, -1.0, 3.0, math.nan, -0.5):
        assert_same(b.to("tpu") ** e, b**e, equal_nan=True)
    e = torch.tensor([0.0, -1.0, 0.5, 0.0, math.nan, -2.0, 3.0, 0.25])
    assert_same(b.to("tpu") ** e.to("tpu"), b**e, equal_nan=True)


def test_maximum_propagates_nan_fmax_ignores_it():
    x = torch.tensor([1.0, math.nan, math.nan, -0.0, 3.0])
    y = torch.tensor([math.nan, 2.0, math.nan, 0.0, 1.0])
    for fn in (torch.maximum, torch.minimum, torch.fmax, torch.fmin):
        assert_same(fn(x.to("tpu"), y.to("tpu")), fn(x, y), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_shifts(dtype):
    x = torch.tensor([1, -5, 7, 100, -128, 3]).to(dtype)
    s = torch.tensor([0, 1, 3, 9, 70, -1]).to(dtype)
    for fn in (torch.bitwise_left_shift, torch.bitwise_right_shift):
        assert_same(fn(x.to("tpu"), s.to("tpu")), fn(x, s))
    assert_same(x.to("tpu") << 2, x << 2)
    assert_same(x.to("tpu") >> 1, x >> 1)
    a, ref = x.to("tpu"), x.clone()
    a <<= 1
    ref <<= 1
    assert_same(a, ref)
    a >>= 2
    ref >>= 2
    assert_same(a, ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_comparisons_round_scalar_to_tensor_dtype(dtype):
    cpu = torch.tensor([0.1, 0.2, 1.0, 3.0]).to(dtype)
    x = cpu.to("tpu")
    for s in (0.1, 1, True, 2.5):
        for op in ("eq", "ne", "lt", "le", "gt", "ge"):
            assert_same(getattr(x, op)(s), getattr(cpu, op)(s))
    y, ref = x.clone(), cpu.clone()
    y.lt_(1.0)
    ref.lt_(1.0)
    assert_same(y, ref)
    out = torch.empty(4, dtype=torch.float32, device="tpu")
    torch.ge(x, 1, out=out)
    assert_same(out, torch.ge(cpu, 1, out=torch.empty(4)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
def test_where(dtype):
    c = sample(torch.bool, (3, 1), 8)
    x = sample(dtype, (1, 4), 9)
    y = sample(dtype, (3, 4), 10)
    assert_same(
        torch.where(c.to("tpu"), x.to("tpu"), y.to("tpu")), torch.where(c, x, y), equal_nan=True
    )
    assert_same(torch.where(c.to("tpu"), x.to("tpu"), 2), torch.where(c, x, 2), equal_nan=True)
    assert_same(torch.where(c.to("tpu"), 1.5, x.to("tpu")), torch.where(c, 1.5, x), equal_nan=True)
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.where(c.to("tpu"), x.to("tpu"), y.to("tpu"), out=out)
    assert_same(out, torch.where(c, x, y), equal_nan=True)


def test_where_grad():
    c = torch.tensor([True, False, True])
    cx = torch.randn(3, requires_grad=True)
    cy = torch.randn(3, requires_grad=True)
    x = cx.detach().to("tpu").requires_grad_()
    y = cy.detach().to("tpu").requires_grad_()
    torch.where(c, cx, cy).pow(2).sum().backward()
    torch.where(c.to("tpu"), x, y).pow(2).sum().backward()
    assert_same(x.grad, cx.grad)
    assert_same(y.grad, cy.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_clamp_overloads(dtype):
    cpu = sample(dtype, (4, 5), 11)
    x = cpu.to("tpu")
    t = tol(dtype)
    for lo, hi in ((-1, 2), (None, 0.5), (1.5, None), (3, -3)):
        assert_same(x.clamp(lo, hi), cpu.clamp(lo, hi), **t)
    lo_t, hi_t = sample(dtype, (5,), 12, hi=0), sample(dtype, (4, 1), 13, lo=0)
    assert_same(x.clamp(lo_t.to("tpu"), hi_t.to("tpu")), cpu.clamp(lo_t, hi_t), **t)
    assert_same(x.clamp(min=lo_t.to("tpu")), cpu.clamp(min=lo_t), **t)
    assert_same(x.clamp(max=hi_t.to("tpu")), cpu.clamp(max=hi_t), **t)
    y, ref = x.clone(), cpu.clone()
    y[1:].clamp_(-2, 2)
    ref[1:].clamp_(-2, 2)
    assert_same(y, ref, **t)
    y.clamp_min_(0)
    ref.clamp_min_(0)
    assert_same(y, ref, **t)
    out = torch.empty(0, dtype=torch.float64, device="tpu")
    torch.clamp(x, -1, 1, out=out)
    assert_same(out, cpu.clamp(-1, 1).double(), **t)


def test_clamp_grad_and_nan():
    cpu = torch.tensor([-3.0, -1.0, 0.0, 0.5, 2.0, math.nan], requires_grad=True)
    x = cpu.detach().to("tpu").requires_grad_()
    assert_same(x.clamp(-1, 1), cpu.clamp(-1, 1), equal_nan=True)
    cpu.clamp(-1, 1).sum().backward()
    x.clamp(-1, 1).sum().backward()
    assert_same(x.grad, cpu.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_lerp(dtype):
    a = sample(dtype, (3, 4), 14, specials=False)
    b = sample(dtype, (4,), 15, specials=False)
    w = torch.rand(3, 1).to(dtype)
    t = tol(dtype)
    for weight in (0.3, 0.75, 1.0, w):
        assert_same(
            torch.lerp(a.to("tpu"), b.to("tpu"), to_tpu(weight)), torch.lerp(a, b, weight), **t
        )
    y, ref = a.to("tpu"), a.clone()
    y.lerp_(b.to("tpu"), 0.6)
    ref.lerp_(b, 0.6)
    assert_same(y, ref, **t)


def test_lerp_grad():
    ca, cb, cw = (torch.rand(4, requires_grad=True) for _ in range(3))
    a, b, w = (t.detach().to("tpu").requires_grad_() for t in (ca, cb, cw))
    torch.lerp(ca, cb, cw).sum().backward()
    torch.lerp(a, b, w).sum().backward()
    for got, want in ((a, ca), (b, cb), (w, cw)):
        assert_same(got.grad, want.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(op, dtype):
    s = sample(dtype, (3, 4), 16, lo=1, hi=4, specials=False)
    t1 = sample(dtype, (4,), 17, lo=1, hi=4, specials=False)
    t2 = sample(dtype, (3, 1), 18, lo=1, hi=4, specials=False)
    fn = getattr(torch, op)
    same_or_same_error(lambda a, b, c: fn(a, b, c, value=2), s, t1, t2, **tol(dtype))
    same_or_same_error(lambda a, b, c: fn(a, b, c, value=-0.5), s, t1, t2, **tol(dtype))
    if dtype.is_floating_point:
        y, ref = s.to("tpu"), s.clone()
        getattr(y, op + "_")(t1.to("tpu"), t2.to("tpu"), value=0.25)
        getattr(ref, op + "_")(t1, t2, value=0.25)
        assert_same(y, ref, **tol(dtype))
        cs = s.float().requires_grad_()
        c1 = t1.float().requires_grad_()
        c2 = t2.float().requires_grad_()
        ts, tt1, tt2 = (t.detach().to("tpu").requires_grad_() for t in (cs, c1, c2))
        fn(cs, c1, c2, value=1.5).sum().backward()
        fn(ts, tt1, tt2, value=1.5).sum().backward()
        for got, want in ((ts, cs), (tt1, c1), (tt2, c2)):
            assert_same(got.grad, want.grad, rtol=1e-5, atol=1e-5)


def test_python_operators_with_scalars():
    cpu = torch.tensor([1.0, -2.0, 3.5])
    x = cpu.to("tpu")
    assert_same(1 - x, 1 - cpu)
    assert_same(2**x, 2**cpu)
    assert_same(x**2, cpu**2)
    assert_same(x % 1.5, cpu % 1.5)
    assert_same(-7 % x, -7 % cpu)
    assert_same(x // 2, cpu // 2)
    assert_same(torch.tensor([3, 4]).to("tpu") * 0.5, torch.tensor([3, 4]) * 0.5)
    assert_same(torch.tensor([3, 4]).to("tpu") > 3.5, torch.tensor([3, 4]) > 3.5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    g = torch.Generator().manual_seed(5)
    lo = 0 if dtype == torch.uint8 else -60
    a = torch.randint(lo, 61, (7, 9), generator=g).to(dtype)
    b = torch.randint(lo, 61, (9,), generator=g).to(dtype)
    a[0, :3] = 0
    b[:2] = 0
    for fn in (torch.gcd, torch.lcm):
        assert_same(fn(a.to("tpu"), b.to("tpu")), fn(a, b))
    x = a.to("tpu")
    x.gcd_(b.to("tpu"))
    assert_same(x, torch.gcd(a, b))
    # Fibonacci neighbours take the most steps.
    f = torch.tensor([832040, 1346269, 0, 7], dtype=torch.int64)
    h = torch.tensor([514229, 832040, 0, 0], dtype=torch.int64)
    assert_same(torch.gcd(f.to("tpu"), h.to("tpu")), torch.gcd(f, h))
    with pytest.raises(RuntimeError):
        torch.gcd(torch.ones(2).to("tpu"), torch.ones(2).to("tpu")).cpu()


def test_equal():
    a = torch.randn(4, 5)
    t = a.to("tpu")
    assert torch.equal(t, a.clone().to("tpu"))
    b = a.clone()
    b[3, 4] += 1
    assert not torch.equal(t, b.to("tpu"))
    assert not torch.equal(t, a[:, :4].to("tpu"))
    assert torch.equal(t[:, ::2], a[:, ::2].contiguous().to("tpu"))
    n = torch.tensor([1.0, math.nan])
    assert torch.equal(n.to("tpu"), n.to("tpu")) == torch.equal(n, n)
    assert torch.equal(
        torch.tensor([1, 2]).to("tpu"), torch.tensor([1.0, 2.0]).to("tpu")
    ) == torch.equal(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    assert torch.equal(torch.empty(0).to("tpu"), torch.empty(0).to("tpu"))
