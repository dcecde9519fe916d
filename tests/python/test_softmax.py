"""softmax / log_softmax forward and backward against CPU PyTorch."""

import functools
import math

import pytest
import torch

from helpers import assert_same, FLOATS, tol as shared_tol, rand as shared_rand

tol = functools.partial(shared_tol, f32=None)
rand = functools.partial(shared_rand, scale=3.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_forward_and_backward(op, dtype):
    x = rand((3, 4, 5), dtype)
    for dim in (0, -1, 1):
        cx = x.clone().requires_grad_()
        tx = x.to("tpu").requires_grad_()
        cy, ty = getattr(torch, op)(cx, dim), getattr(torch, op)(tx, dim)
        assert_same(ty.detach(), cy.detach(), **tol(dtype))
        up = rand(cy.shape, dtype, 1)
        cy.backward(up)
        ty.backward(up.to("tpu"))
        assert_same(tx.grad, cx.grad, **tol(dtype))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_dtype_argument_half_to_float(op):
    x = rand((4, 6), torch.float16)
    fn = getattr(torch, op)
    assert_same(
        fn(x.to("tpu"), 1, dtype=torch.float32), fn(x, 1, dtype=torch.float32), **tol(torch.float16)
    )
    # _softmax(half_to_float=True) is what autocast calls; CPU has no kernel for it.
    got = getattr(torch.ops.aten, "_" + op)(x.to("tpu"), 1, True)
    assert got.dtype == torch.float32
    assert_same(got, fn(x.float(), 1), **tol(torch.float16))
    g = rand((4, 6), torch.float32, 2)
    back = getattr(torch.ops.aten, "_" + op + "_backward_data")
    out = fn(x.float(), 1)
    ref = back(g, out, 1, torch.float32).half()
    assert_same(back(g.to("tpu"), out.to("tpu"), 1, torch.float16), ref, **tol(torch.float16))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_edge_cases(op):
    fn = getattr(torch, op)
    s = torch.tensor(1.5)
    assert_same(fn(s.to("tpu"), 0), fn(s, 0))
    e = torch.empty(0, 4)
    assert_same(fn(e.to("tpu"), 1), fn(e, 1))
    assert_same(fn(e.to("tpu"), 0), fn(e, 0))
    y = torch.tensor(
        [
            [1e4, 1e4 - 1, -1e4],
            [-math.inf, 0.0, 1.0],
            [-math.inf, -math.inf, -math.inf],
            [math.nan, 1.0, 2.0],
        ]
    )
    assert_same(fn(y.to("tpu"), 1), fn(y, 1), equal_nan=True)
    z = torch.randn(6, 8)
    assert_same(fn(z.to("tpu").t(), 1), fn(z.t(), 1), rtol=1e-5, atol=1e-5)
    assert_same(fn(z.to("tpu")[::2, 1:], 0), fn(z[::2, 1:], 0), rtol=1e-5, atol=1e-5)
    out = torch.empty(0, device="tpu")
    getattr(torch.ops.aten, "_" + op).out(z.to("tpu"), 1, False, out=out)
    assert_same(out, fn(z, 1), rtol=1e-5, atol=1e-5)


def test_integer_input_is_promoted():
    x = torch.arange(6).reshape(2, 3)
    assert_same(
        torch.softmax(x.to("tpu"), 1, dtype=torch.float32), torch.softmax(x, 1, dtype=torch.float32)
    )
