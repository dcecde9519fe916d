"""Matrix products against CPU: the table ops (baddbmm, addbmm, addmv, mv, dot, vdot) and
what linear, matmul, einsum and friends decompose into, with gradients."""

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same, same_error
from cpu_compare import check, tolerance


def r(*shape, dtype=torch.float32, grad=True):
    if not dtype.is_floating_point:
        return torch.randint(-5, 5, shape, dtype=dtype)
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


TOL = tolerance(torch.float32)

ADD_PRODUCTS = [
    (torch.baddbmm, (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    (torch.baddbmm, (1, 4), (3, 3, 5), (3, 5, 4)),  # broadcast self
    (torch.addbmm, (3, 4), (2, 3, 5), (2, 5, 4)),
    (torch.addmv, (3,), (3, 4), (4,)),
    (torch.addmv, (1,), (3, 4), (4,)),
]


@pytest.mark.parametrize("fn,s,a,b", ADD_PRODUCTS)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_add_products(fn, s, a, b, beta, alpha):
    check(lambda s, a, b: fn(s, a, b, beta=beta, alpha=alpha), r(*s), r(*a), r(*b), tol=TOL)


def test_beta_zero_ignores_nan_and_inplace_out_forms():
    s = torch.full((2, 3, 4), float("nan"))
    a, b = torch.randn(2, 3, 5), torch.randn(2, 5, 4)
    assert_same(
        torch.baddbmm(s.to("tpu"), a.to("tpu"), b.to("tpu"), beta=0),
        torch.baddbmm(s, a, b, beta=0),
        rtol=1e-4,
        atol=1e-4,
    )
    base = torch.randn(2, 3, 4)
    t = base.to("tpu")
    t.baddbmm_(a.to("tpu"), b.to("tpu"), alpha=0.5)
    assert_same(t, base.clone().baddbmm_(a, b, alpha=0.5), rtol=1e-4, atol=1e-4)
    out = torch.empty(0, device="tpu")
    torch.addmv(torch.randn(3).to("tpu"), a[0].to("tpu"), b[0, :, 0].to("tpu"), out=out)
    assert out.shape == (3,)
    v = torch.empty(0, device="tpu")
    torch.mv(a[0].to("tpu"), b[0, :, 0].to("tpu"), out=v)
    assert_same(v, torch.mv(a[0], b[0, :, 0]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32]
)
def test_dtypes(dtype):
    tol = tolerance(dtype) if dtype.is_floating_point else {}
    x, y, v = r(2, 3, 4, dtype=dtype), r(2, 4, 5, dtype=dtype), r(4, dtype=dtype)
    check(
        lambda x, y: torch.baddbmm(torch.ones((), dtype=x.dtype, device=x.device), x, y),
        x,
        y,
        tol=tol,
        backward=dtype.is_floating_point,
    )
    check(lambda x, v: torch.mv(x[0], v), x, v, tol=tol, backward=dtype.is_floating_point)
    check(lambda v: torch.dot(v, v), v, tol=tol, backward=dtype.is_floating_point)


@pytest.mark.parametrize(
    "xs,ws,bias",
    [
        ((3, 5), (4, 5), True),
        ((2, 3, 5), (4, 5), True),
        ((2, 3, 5), (4, 5), False),
        ((5,), (4, 5), True),
        ((1, 1, 2, 5), (3, 5), True),
    ],
)
def test_linear(xs, ws, bias):
    args = [r(*xs), r(*ws)] + ([r(ws[0])] if bias else [])
    check(lambda x, w, *b: F.linear(x, w, *b), *args, tol=TOL)


@pytest.mark.parametrize(
    "a,b",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
        ((4,), (4,)),
        ((2, 1, 3, 4), (5, 4, 6)),
        ((3, 4), (2, 4, 2)),
    ],
)
def test_matmul_broadcasting(a, b):
    check(lambda x, y: x @ y, r(*a), r(*b), tol=TOL)


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
        ("bi,oij,bj->bo", [(2, 3), (5, 3, 4), (2, 4)]),
        ("i,j->ij", [(4,), (3,)]),
        ("i,i->", [(4,), (4,)]),
        ("ii->i", [(4, 4)]),
        ("abc->cb", [(2, 3, 4)]),
    ],
)
def test_einsum(eq, shapes):
    check(lambda *xs: torch.einsum(eq, *xs), *[r(*s) for s in shapes], tol=TOL)


def test_vector_products_and_views():
    check(torch.vdot, r(5), r(5), tol=TOL)
    check(torch.outer, r(4), r(3), tol=TOL)
    check(
        lambda x, y: torch.tensordot(x, y, dims=([1, 2], [0, 1])), r(2, 3, 4), r(3, 4, 5), tol=TOL
    )
    check(lambda x, y: x.transpose(0, 1) @ y[:, ::2], r(4, 3), r(4, 6), tol=TOL)
    check(lambda x, y: torch.bmm(x.transpose(1, 2), y), r(2, 4, 3), r(2, 4, 5), tol=TOL)
    check(lambda x, y: torch.mv(x.t(), y[::2]), r(4, 3), r(8), tol=TOL)


def test_empty():
    check(lambda x, y: torch.mv(x, y), r(0, 3), r(3), tol=TOL, backward=False)
    check(lambda x, y: torch.dot(x, y), r(0), r(0), tol=TOL, backward=False)


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape))).to(dtype)


@pytest.mark.parametrize(
    "fn,args",
    [
        (torch.mm, (_r(3, 4), _r(5, 2))),
        (torch.mm, (_r(3, 4), _r(2, 3, 4))),
        (torch.mm, (_r(3, 4), _r(4, 2, dtype=torch.float64))),
        (torch.bmm, (_r(2, 3, 4), _r(3, 4, 2))),
        (torch.bmm, (_r(2, 3, 4), _r(2, 4, 2, dtype=torch.float64))),
        (torch.addmm, (_r(3, 2), _r(3, 4), _r(5, 2))),
        (torch.addmm, (_r(3, 2, dtype=torch.float64), _r(3, 4), _r(4, 2))),
        (lambda s, a, b: s.addmm_(a, b), (_r(3, 3), _r(3, 4), _r(4, 2))),
        (lambda a, b, o: torch.mm(a, b, out=o), (_r(3, 4), _r(4, 2), _r(3, 2).double())),
        (torch.mm, (_r(3, 4, dtype=torch.bool), _r(4, 2, dtype=torch.bool))),
        (torch.bmm, (_r(2, 3, 4, dtype=torch.bool), _r(2, 4, 2, dtype=torch.bool))),
        (
            torch.addmm,
            (_r(3, 2, dtype=torch.bool), _r(3, 4, dtype=torch.bool), _r(4, 2, dtype=torch.bool)),
        ),
        (torch.matmul, (_r(3, 4, dtype=torch.bool), _r(4, 2, dtype=torch.bool))),
    ],
    ids=[
        "mm-shapes",
        "mm-3d",
        "mm-dtypes",
        "bmm-batches",
        "bmm-dtypes",
        "addmm-shapes",
        "addmm-bias-dtype",
        "addmm_-inplace-shape",
        "mm-out-dtype",
        "mm-bool",
        "bmm-bool",
        "addmm-bool",
        "matmul-bool",
    ],
)
def test_errors_are_cpus(fn, args):
    """mm, bmm and addmm run through the lowering table; their errors are CPU's words
    (PyTorch's Python meta kernels word them differently), from CPU's own checks."""
    same_error(fn, *args)
