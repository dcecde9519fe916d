"""sort, argsort, topk, kthvalue, median against CPU PyTorch."""

import math

import pytest
import torch

from helpers import assert_same

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32]


def distinct(shape, dtype, seed=0):
    """Values without ties, so every index result is unique."""
    n = math.prod(shape)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return (perm - n // 2).reshape(shape).to(dtype)


def with_ties(shape, dtype, seed=0):
    return torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_sort_and_argsort(dtype):
    x = with_ties((4, 9), dtype) if dtype != torch.bool else with_ties((4, 9), torch.int64) > 0
    t = x.to("tpu")
    for dim, descending in ((-1, False), (0, True), (1, True)):
        v, i = torch.sort(t, dim=dim, descending=descending, stable=True)
        rv, ri = torch.sort(x, dim=dim, descending=descending, stable=True)
        assert_same(v, rv)
        assert_same(i, ri)
        assert_same(
            torch.argsort(t, dim=dim, descending=descending, stable=True),
            torch.argsort(x, dim=dim, descending=descending, stable=True),
        )
    # unstable sort: the values are PyTorch's, the indices point at them
    v, i = torch.sort(t, 1)
    assert_same(v, torch.sort(x, 1).values)
    assert torch.equal(torch.gather(x, 1, i.cpu()), torch.sort(x, 1).values)


def test_sort_nan_views_out_and_edges():
    x = torch.tensor([[3.0, math.nan, 1.0, -math.inf, math.nan, 0.0, math.inf, -0.5]])
    t = x.to("tpu")
    for descending in (False, True):
        v, i = torch.sort(t, descending=descending, stable=True)
        rv, ri = torch.sort(x, descending=descending, stable=True)
        assert_same(v, rv, equal_nan=True)
        assert_same(i, ri)
    y = torch.randn(6, 5)
    assert_same(torch.sort(y.to("tpu").t(), 1)[0], torch.sort(y.t(), 1)[0])
    assert_same(torch.sort(y.to("tpu")[::2], 0)[1], torch.sort(y[::2], 0)[1])
    values = torch.empty(0, device="tpu")
    indices = torch.empty(0, dtype=torch.long, device="tpu")
    torch.sort(y.to("tpu"), 1, out=(values, indices))
    assert_same(values, torch.sort(y, 1)[0])
    assert_same(indices, torch.sort(y, 1)[1])
    for e in (torch.empty(0, 3), torch.tensor(2.0)):
        assert_same(torch.sort(e.to("tpu"), 0)[0], torch.sort(e, 0)[0])
        assert_same(torch.sort(e.to("tpu"), 0)[1], torch.sort(e, 0)[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_topk(dtype):
    x = distinct((5, 8), dtype)
    t = x.to("tpu")
    for k, dim, largest in ((3, -1, True), (2, 0, False), (8, 1, False), (0, 1, True)):
        v, i = torch.topk(t, k, dim, largest=largest)
        rv, ri = torch.topk(x, k, dim, largest=largest)
        assert_same(v, rv)
        assert_same(i, ri)
    v, i = torch.topk(t, 4, sorted=False)
    rv = torch.topk(x, 4).values
    assert torch.equal(v.cpu().sort(1, descending=True).values, rv)
    assert torch.equal(torch.gather(x, 1, i.cpu()), v.cpu())


def test_topk_nan_and_grad():
    x = torch.tensor([1.0, math.nan, 3.0, 2.0])
    assert_same(torch.topk(x.to("tpu"), 2)[0], torch.topk(x, 2)[0], equal_nan=True)
    assert_same(torch.topk(x.to("tpu"), 2)[1], torch.topk(x, 2)[1])
    y = distinct((4, 6), torch.float32, 3)
    cy = y.clone().requires_grad_()
    ty = y.to("tpu").requires_grad_()
    torch.topk(cy, 2)[0].sum().backward()
    torch.topk(ty, 2)[0].sum().backward()
    assert_same(ty.grad, cy.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
def test_kthvalue_and_median(dtype):
    x = distinct((5, 7), dtype, 1)
    t = x.to("tpu")
    for k, dim, keepdim in ((1, 1, False), (3, 0, True), (7, -1, False)):
        v, i = torch.kthvalue(t, k, dim, keepdim)
        rv, ri = torch.kthvalue(x, k, dim, keepdim)
        assert_same(v, rv)
        assert_same(i, ri)
    assert_same(torch.median(t), torch.median(x))
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        for fn in (torch.median, torch.nanmedian):
            v, i = fn(t, dim, keepdim)
            rv, ri = fn(x, dim, keepdim)
            assert_same(v, rv)
            assert_same(i, ri)
    assert_same(torch.median(t[:, :6], 1)[0], torch.median(x[:, :6], 1)[0])  # even count: lower


def test_median_nan():
    x = torch.tensor(
        [
            [3.0, math.nan, 1.0, math.nan, 2.0],
            [4.0, 1.0, 2.0, 3.0, 0.0],
            [math.nan, math.nan, math.nan, math.nan, math.nan],
        ]
    )
    t = x.to("tpu")
    for fn in (torch.median, torch.nanmedian):
        v, i = fn(t, 1)
        rv, ri = fn(x, 1)
        assert_same(v, rv, equal_nan=True)
        assert_same(i, ri)
        assert_same(fn(t), fn(x), equal_nan=True)
        assert_same(fn(t[1]), fn(x[1]))
    assert_same(
        torch.median(torch.empty(0).to("tpu")), torch.median(torch.empty(0)), equal_nan=True
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(dtype, right):
    seq = torch.sort(with_ties((13,), dtype, seed=1)).values
    values = with_ties((4, 5), dtype, seed=2)
    t = lambda x: x.to("tpu")
    assert_same(
        torch.searchsorted(t(seq), t(values), right=right),
        torch.searchsorted(seq, values, right=right),
    )
    assert_same(
        torch.searchsorted(t(seq), t(values), side="right" if right else "left", out_int32=True),
        torch.searchsorted(seq, values, side="right" if right else "left", out_int32=True),
    )
    assert_same(
        torch.bucketize(t(values), t(seq), right=right), torch.bucketize(values, seq, right=right)
    )
    assert_same(torch.searchsorted(t(seq), 1, right=right), torch.searchsorted(seq, 1, right=right))
    assert_same(torch.bucketize(2, t(seq), right=right), torch.bucketize(2, seq, right=right))
    # Row-wise sequences, and a sorter that orders an unsorted sequence.
    rows = torch.sort(with_ties((4, 9), dtype, seed=4), dim=1).values
    assert_same(
        torch.searchsorted(t(rows), t(values), right=right),
        torch.searchsorted(rows, values, right=right),
    )
    raw = with_ties((4, 9), dtype, seed=5)
    sorter = torch.argsort(raw, dim=1, stable=True)
    assert_same(
        torch.searchsorted(t(raw), t(values), right=right, sorter=t(sorter)),
        torch.searchsorted(raw, values, right=right, sorter=sorter),
    )
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    torch.searchsorted(t(seq), t(values), right=right, out=out)
    assert_same(out, torch.searchsorted(seq, values, right=right))


def test_searchsorted_nan():
    seq = torch.tensor([-1.0, 0.5, 2.0, math.nan])
    values = torch.tensor([math.nan, -2.0, 0.5, 3.0, math.inf])
    for right in (False, True):
        assert_same(
            torch.searchsorted(seq.to("tpu"), values.to("tpu"), right=right),
            torch.searchsorted(seq, values, right=right),
        )


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool]
)
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((5, 9), 1), ((5, 9), 0), ((3, 4, 5), -2)])
def test_mode(dtype, shape, dim):
    x = with_ties(shape, dtype, seed=6)
    for keepdim in (False, True):
        v, i = torch.mode(x.to("tpu"), dim, keepdim)
        ev, ei = torch.mode(x, dim, keepdim)
        assert_same(v, ev)
        assert_same(i, ei)
