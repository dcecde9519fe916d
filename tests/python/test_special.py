"""torch.special functions lowered in csrc/ops/special.cpp, compared with CPU PyTorch:
the orthogonal polynomials over degrees and points that reach every branch (negative
and NaN degrees, the ends of the interval, the closed trigonometric form, the
recurrence), erfcx, log_ndtr, spherical_bessel_j0 and the Hurwitz zeta function, in
f32, f64 and promoted integer inputs, with odd sizes, out= forms and broadcasting."""

import math

import pytest
import torch

from helpers import assert_same

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)

POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]

TOL = {torch.float32: dict(rtol=2e-5, atol=1e-5), torch.float64: dict(rtol=1e-9, atol=1e-9)}


def points(dtype, count=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(count, dtype=torch.float64).uniform_(-1.2, 1.2, generator=g)
    # (NaN points are left out: CPU gives non-NaN garbage for some of these at NaN.)
    x[:8] = torch.tensor([1.0, -1.0, 0.0, 0.5, 2.5, -3.0, 1.5, 0.999])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_match_cpu(name, dtype):
    fn = getattr(torch.special, name)
    x = points(dtype).reshape(37, 1)
    # Degrees 0..12 (both sides of the closed-form threshold), negative, fractional, NaN.
    n = torch.tensor([0, 1, 2, 3, 5, 7, 9, 12, -1, 2.7, math.nan], dtype=dtype)
    assert_same(fn(x.to("tpu"), n.to("tpu")), fn(x, n), equal_nan=True, **TOL[dtype])
    # A scalar degree and an out= result.
    out = torch.empty(0, dtype=dtype, device="tpu")
    fn(x.to("tpu"), 4, out=out)
    assert_same(out, fn(x, 4), equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_promote_integers(name):
    fn = getattr(torch.special, name)
    x = torch.arange(-3, 4).reshape(7, 1)
    n = torch.arange(0, 5)
    assert_same(fn(x.to("tpu"), n.to("tpu")), fn(x, n), rtol=1e-5, atol=1e-5)


def test_polynomials_reject_half_like_cpu():
    x = torch.ones(3, dtype=torch.bfloat16)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.special.chebyshev_polynomial_t(x, x)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.special.chebyshev_polynomial_t(x.to("tpu"), x.to("tpu")).cpu()


def wide(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(5, 41, dtype=torch.float64).uniform_(-30, 30, generator=g)
    x.view(-1)[:12] = torch.tensor(
        [0.0, -0.0, 1e-8, -1.0, -1.0001, 25.9, 26.1, 40.0, -26.0, math.inf, -math.inf, math.nan]
    )
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("name", ["erfcx", "log_ndtr", "spherical_bessel_j0"])
def test_scalar_functions_match_cpu(name, dtype):
    fn = getattr(torch.special, name)
    x = wide(torch.float64)
    if name == "erfcx":
        x = x.clamp(min=-8)  # exp(x^2) overflows f32 below about -9.4
    x = x.to(dtype) if dtype.is_floating_point else x.clamp(-20, 20).round().to(dtype)
    expected = fn(x)
    tol = TOL.get(dtype, TOL[torch.float32])
    assert_same(fn(x.to("tpu")), expected, equal_nan=True, **tol)


def test_erfcx_overflow_and_small_values():
    x = torch.tensor([-27.0, -10.0, 1e-300, 1e10, 1e200], dtype=torch.float64)
    assert_same(torch.special.erfcx(x.to("tpu")), torch.special.erfcx(x), rtol=1e-9, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_matches_cpu(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.empty(9, 1, dtype=torch.float64).uniform_(-2, 12, generator=g)
    x[:5, 0] = torch.tensor([1.0, 2.0, 3.0, 0.5, 50.0])
    q = torch.empty(13, dtype=torch.float64).uniform_(-5, 20, generator=g)
    q[:6] = torch.tensor([1.0, 0.5, -2.0, -2.5, 0.0, 2e8])
    x, q = x.to(dtype), q.to(dtype)
    assert_same(
        torch.special.zeta(x.to("tpu"), q.to("tpu")),
        torch.special.zeta(x, q),
        equal_nan=True,
        **TOL[dtype],
    )


def test_zeta_scalar_and_integer_inputs():
    q = torch.arange(1, 8)
    assert_same(
        torch.special.zeta(torch.tensor(3).to("tpu"), q.to("tpu")),
        torch.special.zeta(torch.tensor(3), q),
        rtol=1e-5,
        atol=1e-6,
    )
    assert_same(
        torch.special.zeta(2.0, q.double().to("tpu")),
        torch.special.zeta(2.0, q.double()),
        rtol=1e-9,
        atol=1e-12,
    )


def test_empty_and_0d():
    e = torch.empty(0, 3)
    assert_same(torch.special.erfcx(e.to("tpu")), torch.special.erfcx(e))
    assert_same(
        torch.special.hermite_polynomial_h(e.to("tpu"), e.to("tpu")),
        torch.special.hermite_polynomial_h(e, e),
    )
    s = torch.tensor(0.3)
    assert_same(
        torch.special.legendre_polynomial_p(s.to("tpu"), torch.tensor(5.0).to("tpu")),
        torch.special.legendre_polynomial_p(s, torch.tensor(5.0)),
    )


BESSEL = [
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("name", BESSEL)
def test_bessel_match_cpu(name, dtype):
    # Both sides of the series / expansion switch (9 and 17), zero, negatives, tiny and
    # huge arguments, inf and NaN.
    fn = getattr(torch.special, name)
    g = torch.Generator().manual_seed(2)
    x = torch.empty(3, 67, dtype=torch.float64).uniform_(-25, 40, generator=g)
    x.view(-1)[:16] = torch.tensor(
        [
            0.0,
            1e-6,
            -1e-6,
            0.5,
            8.99,
            9.01,
            16.99,
            17.01,
            17.0,
            9.0,
            -3.0,
            100.0,
            700.0,
            math.inf,
            -math.inf,
            math.nan,
        ]
    )
    x = x.to(dtype) if dtype.is_floating_point else x.clamp(-30, 30).round().to(dtype)
    expected = fn(x)
    tol = TOL.get(dtype, TOL[torch.float32])
    if dtype == torch.float64:
        # CPU's own J/Y approximations are off by up to 1e-6 just above x = 5 (against
        # mpmath; ours stay within 1e-14 there), so f64 gets f32-like slack.
        tol = dict(rtol=2e-6, atol=2e-6)
    assert_same(fn(x.to("tpu")), expected, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("order", [0, 1, 2, 3, 4, 7])
def test_polygamma_match_cpu(order, dtype):
    # Negative non-integers (the reflection and the zeta sum run through them), poles,
    # small, large.
    g = torch.Generator().manual_seed(3)
    x = torch.empty(61, dtype=torch.float64).uniform_(-9, 30, generator=g)
    x[:10] = torch.tensor([-8.5, -3.2, -0.5, 0.1, 0.5, 1.0, 2.5, 1e-3, 200.0, -2.0])
    x = x.to(dtype) if dtype.is_floating_point else x.clamp(1, 30).round().to(dtype)
    expected = torch.polygamma(order, x)
    tol = dict(rtol=2e-5, atol=1e-5) if dtype != torch.float64 else dict(rtol=1e-7, atol=1e-7)
    assert_same(torch.polygamma(order, x.to("tpu")), expected, equal_nan=True, **tol)
    assert_same(torch.special.polygamma(order, x.to("tpu")), expected, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_match_cpu(name, dtype):
    fn = getattr(torch, name)
    g = torch.Generator().manual_seed(4)
    a = torch.empty(13, 1, dtype=torch.float64).uniform_(0.05, 30, generator=g)
    x = torch.empty(41, dtype=torch.float64).uniform_(0, 40, generator=g)
    a[:5, 0] = torch.tensor([0.0, -1.0, math.inf, 1.0, 500.0])
    x[:6] = torch.tensor([0.0, -2.0, math.inf, 1e-8, 499.0, math.nan])
    a, x = a.to(dtype), x.to(dtype)
    tol = {
        torch.float64: dict(rtol=1e-8, atol=1e-10),
        torch.float32: dict(rtol=2e-5, atol=1e-6),
        torch.bfloat16: dict(rtol=2e-2, atol=1e-2),
    }[dtype]
    assert_same(fn(a.to("tpu"), x.to("tpu")), fn(a, x), equal_nan=True, **tol)
    y = a.to("tpu").expand(13, 41).clone()
    getattr(y, name + "_")(x.to("tpu"))
    assert_same(y, fn(a, x), equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_airy_ai_matches_cpu(dtype):
    # Every branch: the oscillating asymptotic form below -2.09, the series between, the
    # decaying form from 2.09 (and past 8.32), 0 beyond 103.892, NaN at +-inf and NaN.
    g = torch.Generator().manual_seed(3)
    x = torch.empty(3, 37, dtype=torch.float64).uniform_(-12, 12, generator=g)
    x.view(-1)[:14] = torch.tensor(
        [
            0.0,
            -2.09,
            -2.0899,
            2.09,
            2.0899,
            8.3,
            8.4,
            -30.0,
            50.0,
            103.9,
            200.0,
            math.inf,
            -math.inf,
            math.nan,
        ]
    )
    x = x.to(dtype)
    want = torch.special.airy_ai(x)
    got = torch.special.airy_ai(x.to("tpu"))
    t = TOL[torch.float64 if dtype == torch.float64 else torch.float32]
    assert_same(got, want, **t, equal_nan=True)
    out = torch.empty(0, dtype=want.dtype, device="tpu")
    torch.special.airy_ai(x.to("tpu"), out=out)
    assert_same(out, want, **t, equal_nan=True)
