"""Small linear-algebra ops lowered in csrc/ops/linalg.cpp (trace, linalg.cross, cdist,
pdist, renorm), compared with CPU PyTorch forward and backward, in several dtypes, odd
sizes, broadcasting and every p-norm branch."""
import math

import pytest
import torch

from conftest import assert_same, rand, tol
from cpu_compare import check

FLOATS = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (7, 2), (1, 1)])
def test_trace(dtype, shape):
    x = rand(shape, dtype)
    assert_same(torch.trace(x.to("tpu")), torch.trace(x), **tol(dtype))


def test_trace_rejects_bool_and_vectors_like_cpu():
    for x in (torch.ones(3, 3, dtype=torch.bool), torch.ones(3)):
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.trace(x)
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.trace(x.to("tpu")).cpu()


def test_trace_backward():
    x = torch.randn(4, 6, requires_grad=True)
    check(torch.trace, x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_cross(dtype):
    a, b = rand((5, 3, 7), dtype, seed=1), rand((5, 3, 7), dtype, seed=2)
    assert_same(torch.linalg.cross(a.to("tpu"), b.to("tpu"), dim=1), torch.linalg.cross(a, b, dim=1),
                **tol(dtype))
    # Broadcast operands, the default last dim, torch.cross and out=.
    c, d = rand((4, 1, 3), dtype, seed=3), rand((1, 2, 3), dtype, seed=4)
    assert_same(torch.linalg.cross(c.to("tpu"), d.to("tpu")), torch.linalg.cross(c, d), **tol(dtype))
    assert_same(torch.cross(a.to("tpu"), b.to("tpu"), dim=1), torch.cross(a, b, dim=1), **tol(dtype))
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.linalg.cross(c.to("tpu"), d.to("tpu"), out=out)
    assert_same(out, torch.linalg.cross(c, d), **tol(dtype))


def test_cross_backward_and_errors():
    a, b = torch.randn(6, 3, requires_grad=True), torch.randn(6, 3, requires_grad=True)
    check(torch.linalg.cross, a, b)
    with pytest.raises(RuntimeError):
        torch.linalg.cross(torch.randn(2, 4).to("tpu"), torch.randn(2, 4).to("tpu"))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist(p, dtype):
    a, b = rand((2, 7, 5), dtype, seed=1), rand((2, 9, 5), dtype, seed=2)
    assert_same(torch.cdist(a.to("tpu"), b.to("tpu"), p=p), torch.cdist(a, b, p=p), **tol(dtype))


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_euclid_modes(mode):
    # 30 rows take the matrix-product form unless told not to; broadcast batch dims.
    a, b = torch.randn(3, 1, 30, 4, dtype=torch.float64), torch.randn(2, 11, 4, dtype=torch.float64)
    assert_same(torch.cdist(a.to("tpu"), b.to("tpu"), compute_mode=mode),
                torch.cdist(a, b, compute_mode=mode), rtol=1e-9, atol=1e-9)


def test_cdist_empty():
    a, b = torch.randn(0, 3), torch.randn(4, 3)
    assert_same(torch.cdist(a.to("tpu"), b.to("tpu")), torch.cdist(a, b))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 1.5, math.inf])
def test_pdist(p):
    x = torch.randn(7, 5, dtype=torch.float64)
    assert_same(torch.nn.functional.pdist(x.to("tpu"), p=p), torch.nn.functional.pdist(x, p=p),
                rtol=1e-9, atol=1e-9)
    one = torch.randn(1, 3)
    assert_same(torch.nn.functional.pdist(one.to("tpu"), p=p), torch.nn.functional.pdist(one, p=p))


@pytest.mark.parametrize("p", [1, 2, 3, 0.5, math.inf])
@pytest.mark.parametrize("dtype", FLOATS)
def test_renorm(p, dtype):
    x = rand((5, 3, 4), dtype, seed=5, scale=2.0)
    for dim in (0, 1, -1):
        assert_same(torch.renorm(x.to("tpu"), p, dim, 1.5), torch.renorm(x, p, dim, 1.5),
                    **tol(dtype, f32=2e-5))
    y, yc = x.to("tpu"), x.clone()
    y.renorm_(2, 0, 0.7)
    yc.renorm_(2, 0, 0.7)
    assert_same(y, yc, **tol(dtype, f32=2e-5))


def test_renorm_backward():
    x = (torch.randn(4, 5) * 3).requires_grad_()
    check(lambda t: torch.renorm(t, 2, 0, 1.0), x)
