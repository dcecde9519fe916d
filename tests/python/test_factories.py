"""Factories on the tpu device against CPU: ranges, eye, constant fills, tensors from data."""

import pytest
import torch

import torch_tpu
from helpers import assert_same, eps_tol, FLOATS, LOW


@pytest.mark.parametrize("args", [(5,), (2, 9), (-3, 7, 2), (10, 0, -3), (0,), (3, 3)])
@pytest.mark.parametrize("dtype", [None, torch.int32, torch.float32, torch.float64, torch.bfloat16])
def test_arange_integer_args(args, dtype):
    assert_same(torch.arange(*args, dtype=dtype, device="tpu"), torch.arange(*args, dtype=dtype))


@pytest.mark.parametrize(
    "args",
    [
        (0, 1, 0.1),
        (-3.3, 7.9, 0.37),
        (1, 2, 1 / 3),
        (5, -5, -0.3),
        (0.5, 1000.5, 1.1),
        (0, 1 - 1e-9, 0.25),
    ],
)
@pytest.mark.parametrize("dtype", FLOATS)
def test_arange_float_steps(args, dtype):
    want = torch.arange(*args, dtype=dtype)
    got = torch.arange(*args, dtype=dtype, device="tpu").cpu()
    assert got.shape == want.shape  # the length is exactly CPU's
    # Each value is start + i * step in CPU's accumulate type (f64; f32 for bf16/f16),
    # rounded once to the dtype, as CPU's scalar loop computes it. CPU's vectorised loop
    # rounds each vector's base to the dtype first, so a few of its values differ by an ulp;
    # that depends on the host's vector width, which a device result should not.
    if dtype != torch.float64:  # XLA may fuse the f64 multiply-add, which rounds once
        acc = torch.float32 if dtype in (torch.bfloat16, torch.float16) else torch.float64
        start, _, step = args
        i = torch.arange(want.numel(), dtype=acc)
        exact = (torch.tensor(start, dtype=acc) + torch.tensor(step, dtype=acc) * i).to(dtype)
        assert torch.equal(got, exact)
    # Against CPU itself: its vectorised loop may differ by an ulp (above).
    torch.testing.assert_close(got, want, **(eps_tol(dtype, 2) if dtype in LOW else {}))


def test_arange_out_and_errors():
    out = torch.empty(0, device="tpu")
    torch.arange(0, 3, 0.5, out=out)
    assert_same(out, torch.arange(0, 3, 0.5))
    long_out = torch.empty(2, dtype=torch.long, device="tpu")
    torch.arange(7, out=long_out)
    assert_same(long_out, torch.arange(7))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 1, 0, device="tpu")
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent"):
        torch.arange(0, 1, -1, device="tpu")
    with pytest.raises(RuntimeError, match="unsupported range"):
        torch.arange(0, float("inf"), device="tpu")
    # The length is computed as CPU's is (ATen's RangeUtils.h), not by the meta kernel.
    for args, dtype in [
        ((0, 1, 0.1), torch.float32),
        ((-5, 7, 3), torch.int64),
        ((2**40, 2**40 + 10, 3), torch.int64),
        ((0, 2, 0.3), torch.bfloat16),
        ((5, -5, -0.7), torch.float64),
    ]:
        assert_same(
            torch.arange(*args, dtype=dtype, device="tpu"), torch.arange(*args, dtype=dtype)
        )


def test_arange_values_do_not_recompile():
    torch.arange(1, 9, device="tpu")
    torch_tpu.metrics.reset()
    for start in range(2, 6):
        torch.arange(start, start + 8, device="tpu")
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("steps", [0, 1, 2, 7, 50])
def test_linspace_logspace(dtype, steps):
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    assert_same(
        torch.linspace(-2, 3.5, steps, dtype=dtype, device="tpu"),
        torch.linspace(-2, 3.5, steps, dtype=dtype),
        **tol,
    )
    assert_same(
        torch.linspace(10, -10, steps, dtype=dtype, device="tpu"),
        torch.linspace(10, -10, steps, dtype=dtype),
        **tol,
    )
    if dtype != torch.int64:
        assert_same(
            torch.logspace(-1, 2, steps, dtype=dtype, device="tpu"),
            torch.logspace(-1, 2, steps, dtype=dtype),
            **tol,
        )
        assert_same(
            torch.logspace(0, 3, steps, base=2, dtype=dtype, device="tpu"),
            torch.logspace(0, 3, steps, base=2, dtype=dtype),
            **tol,
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_eye(dtype):
    assert_same(torch.eye(3, dtype=dtype, device="tpu"), torch.eye(3, dtype=dtype))
    assert_same(torch.eye(2, 5, dtype=dtype, device="tpu"), torch.eye(2, 5, dtype=dtype))
    assert_same(torch.eye(0, dtype=dtype, device="tpu"), torch.eye(0, dtype=dtype))


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.int32, torch.int64, torch.bool]
)
def test_constant_fills(dtype):
    ref = torch.ones(2, 3, dtype=dtype)
    t = ref.to("tpu")
    assert_same(
        torch.full((2, 3), 1, dtype=dtype, device="tpu"), torch.full((2, 3), 1, dtype=dtype)
    )
    assert_same(torch.zeros(2, 3, dtype=dtype, device="tpu"), torch.zeros(2, 3, dtype=dtype))
    assert_same(torch.ones(4, dtype=dtype, device="tpu"), torch.ones(4, dtype=dtype))
    assert_same(torch.zeros_like(t), torch.zeros_like(ref))
    assert_same(torch.ones_like(t), torch.ones_like(ref))
    assert_same(torch.full_like(t, 0), torch.full_like(ref, 0))
    assert_same(t.new_zeros(3), ref.new_zeros(3))
    assert_same(t.new_ones((1, 2)), ref.new_ones((1, 2)))
    assert_same(t.new_full((2,), 1), ref.new_full((2,), 1))
    assert t.new_empty((2, 2)).shape == (2, 2)
    x = torch.empty(3, 4, dtype=dtype, device="tpu")
    x.fill_(1)
    assert_same(x, torch.ones(3, 4, dtype=dtype))
    x[:, 1].fill_(0)
    want = torch.ones(3, 4, dtype=dtype)
    want[:, 1] = 0
    assert_same(x, want)
    x.t().zero_()
    assert_same(x, torch.zeros(3, 4, dtype=dtype))


def test_full_float_value_and_zero_dim():
    assert_same(torch.full((2,), 2.5, device="tpu"), torch.full((2,), 2.5))
    assert_same(
        torch.full((), -1.25, dtype=torch.float64, device="tpu"),
        torch.full((), -1.25, dtype=torch.float64),
    )
    assert_same(torch.zeros(0, 3, device="tpu"), torch.zeros(0, 3))


@pytest.mark.parametrize("data", [[1, 2, 3], [[1.5, -2.0], [0.25, 4.0]], [True, False], 3.5, []])
def test_tensor_from_data(data):
    assert_same(torch.tensor(data, device="tpu"), torch.tensor(data))
    assert_same(torch.as_tensor(data, device="tpu"), torch.as_tensor(data))


@pytest.mark.parametrize("fn", [torch.triu_indices, torch.tril_indices])
@pytest.mark.parametrize(
    "rows,cols,offset", [(4, 4, 0), (3, 5, 1), (5, 2, -1), (1, 1, 0), (3, 3, 5)]
)
def test_tri_indices(fn, rows, cols, offset):
    got = fn(rows, cols, offset, device="tpu")
    assert_same(got, fn(rows, cols, offset))
    compiled = torch.compile(lambda: fn(rows, cols, offset, device="tpu"), backend="tpu")
    assert_same(compiled(), fn(rows, cols, offset))
