"""Reductions, scans and statistics against CPU PyTorch: values, indices, gradients."""

import math

import pytest
import torch

from helpers import assert_same, FLOATS, rand, tol

INTS = [torch.int64, torch.int32]
ALL = FLOATS + INTS + [torch.bool]


def grad_check(fn, x, **t):
    """fn's gradient on tpu matches CPU's, for a random upstream gradient."""
    cx = x.detach().clone().requires_grad_()
    tx = x.detach().to("tpu").requires_grad_()
    cy, ty = fn(cx), fn(tx)
    cy = cy if isinstance(cy, torch.Tensor) else cy[0]
    ty = ty if isinstance(ty, torch.Tensor) else ty[0]
    assert_same(ty.detach(), cy.detach(), **t)
    up = rand(cy.shape, cy.dtype, 7)
    cy.backward(up)
    ty.backward(up.to("tpu"))
    assert_same(tx.grad, cx.grad, **t)


DIMS = [None, 1, -1, (0, 2), (-3, -1), ()]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["sum", "prod", "mean"])
def test_sum_prod_mean(op, dtype):
    x = rand((3, 4, 5), dtype)
    if op == "mean" and not dtype.is_floating_point:
        with pytest.raises(RuntimeError, match="could not infer output dtype"):
            torch.mean(x.to("tpu"))
        return
    if op == "prod" and dtype != torch.bool:  # keep products in range
        x = (x / 4 + 1).to(dtype) if dtype.is_floating_point else x.clamp(-2, 2)
    t = x.to("tpu")
    fn = getattr(torch, op)
    assert_same(fn(t), fn(x), **tol(dtype))
    # prod takes one dim at a time
    dims = [1, -1, 0] if op == "prod" else DIMS[1:]
    for k, dim in enumerate(dims):
        keepdim = k % 2 == 1
        assert_same(fn(t, dim, keepdim=keepdim), fn(x, dim, keepdim=keepdim), **tol(dtype))


@pytest.mark.parametrize("op", ["sum", "prod", "mean"])
def test_dtype_argument_and_out(op):
    x = rand((4, 6), torch.float16)
    t = x.to("tpu")
    fn = getattr(torch, op)
    assert_same(fn(t, dtype=torch.float32), fn(x, dtype=torch.float32), **tol(torch.float16))
    assert_same(fn(t, 1, dtype=torch.float64), fn(x, 1, dtype=torch.float64), **tol(torch.float16))
    out = torch.empty(0, dtype=torch.float32, device="tpu")
    fn(t, 0, keepdim=True, dtype=torch.float32, out=out)
    assert_same(out, fn(x, 0, keepdim=True, dtype=torch.float32), **tol(torch.float16))
    if op == "sum":
        ints = rand((4, 6), torch.int32)
        assert_same(torch.sum(ints.to("tpu"), 1), torch.sum(ints, 1))  # int32 -> int64
        assert_same(torch.sum(x.to("tpu"), dtype=torch.int32), torch.sum(x, dtype=torch.int32))


def test_views_empty_and_zero_dim():
    x = torch.randn(6, 8)
    t = x.to("tpu")
    assert_same(t[::2, 1:].sum(0), x[::2, 1:].sum(0))
    assert_same(t.t().prod(1, keepdim=True), x.t().prod(1, keepdim=True))
    assert_same(t.t()[1:].amax(0), x.t()[1:].amax(0))
    assert_same(t.t().argmax(1), x.t().argmax(1))
    e = torch.empty(0, 3)
    for fn in (
        lambda v: v.sum(0),
        lambda v: v.prod(0),
        lambda v: v.mean(0),
        lambda v: v.sum(),
        lambda v: v.amax(1),
        lambda v: v.any(0),
        lambda v: v.all(0),
        lambda v: v.cumsum(0),
        lambda v: v.logsumexp(0),
        lambda v: v.norm(dim=0),
        lambda v: v.std(0),
        lambda v: v.max(1)[0],
    ):
        assert_same(fn(e.to("tpu")), fn(e), equal_nan=True)
    s = torch.tensor(2.5)
    for fn in (
        lambda v: v.sum(),
        lambda v: v.sum(0),
        lambda v: v.prod(0),
        lambda v: v.max(),
        lambda v: v.max(0)[0],
        lambda v: v.max(-1)[1],
        lambda v: v.argmax(),
        lambda v: v.argmin(0),
        lambda v: v.cumsum(0),
        lambda v: v.logsumexp(0),
        lambda v: v.amin(),
        lambda v: v.any(),
        lambda v: v.norm(),
    ):
        assert_same(fn(s.to("tpu")), fn(s))
    for _ in range(2):  # also once the shape has been seen
        with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
            torch.empty(0, device="tpu").max()


@pytest.mark.parametrize("dtype", ALL)
def test_max_min_argmax_amax(dtype):
    x = rand((4, 5, 6), dtype)
    t = x.to("tpu")
    for name in ("max", "min"):
        fn = getattr(torch, name)
        assert_same(fn(t), fn(x))
        for dim, keepdim in ((1, False), (-1, True)):
            v, i = fn(t, dim, keepdim=keepdim)
            rv, ri = fn(x, dim, keepdim=keepdim)
            assert_same(v, rv)
            assert_same(i, ri)  # ties: first occurrence
    for name in ("argmax", "argmin") if dtype != torch.bool else ():
        fn = getattr(torch, name)
        assert_same(fn(t), fn(x))
        assert_same(fn(t, -1, keepdim=True), fn(x, -1, keepdim=True))
    for name in ("amax", "amin"):
        fn = getattr(torch, name)
        assert_same(fn(t, (0, 2)), fn(x, (0, 2)))
        assert_same(fn(t, -2, keepdim=True), fn(x, -2, keepdim=True))
    lo, hi = torch.aminmax(t, dim=1)
    rlo, rhi = torch.aminmax(x, dim=1)
    assert_same(lo, rlo)
    assert_same(hi, rhi)


def test_ties_and_nan_follow_pytorch():
    x = torch.tensor(
        [
            [1.0, 3.0, 3.0, 0.0],
            [2.0, math.nan, 5.0, math.nan],
            [math.nan, 1.0, math.nan, -1.0],
            [-math.inf, -math.inf, -math.inf, -math.inf],
        ]
    )
    t = x.to("tpu")
    for fn in (lambda v: v.max(1), lambda v: v.min(1), lambda v: v.max(0), lambda v: v.min(0)):
        got, ref = fn(t), fn(x)
        assert_same(got[0], ref[0], equal_nan=True)
        assert_same(got[1], ref[1])
    for fn in (
        lambda v: v.argmax(1),
        lambda v: v.argmin(1),
        lambda v: v.argmax(),
        lambda v: v.argmin(0),
        lambda v: v.amax(1),
        lambda v: v.amin(0),
        lambda v: v.max(),
        lambda v: v.min(),
        lambda v: v[0].max(),
        lambda v: v[3].argmax(),
    ):
        assert_same(fn(t), fn(x), equal_nan=True)
    ints = torch.tensor([[5, 7, 7, 1], [-3, -3, -3, -3]])
    assert_same(ints.to("tpu").argmax(1), ints.argmax(1))
    assert_same(ints.to("tpu").min(1)[1], ints.min(1)[1])


def test_max_dim_out_forms():
    x = rand((3, 5), torch.float32)
    values = torch.empty(0, device="tpu")
    indices = torch.empty(0, dtype=torch.long, device="tpu")
    torch.max(x.to("tpu"), 1, keepdim=True, out=(values, indices))
    rv, ri = torch.max(x, 1, keepdim=True)
    assert_same(values, rv)
    assert_same(indices, ri)
    torch.min(x.to("tpu"), 0, out=(values, indices))
    assert_same(values, torch.min(x, 0)[0])
    assert_same(indices, torch.min(x, 0)[1])
    out = torch.empty(0, dtype=torch.long, device="tpu")
    torch.argmax(x.to("tpu"), 0, out=out)
    assert_same(out, x.argmax(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_var_std(op, dtype):
    x = (rand((4, 5, 6), dtype).float() * 3 + 1).to(dtype)
    t = x.to("tpu")
    fn = getattr(torch, op)

    def check(**kw):
        got, ref = fn(t, **kw), fn(x, **kw)
        for g, r in zip(got, ref) if isinstance(ref, tuple) else [(got, ref)]:
            assert_same(g, r, **tol(dtype))

    for correction in (None, 0, 1, 2.5):  # a runtime scalar: one program for all values
        check(dim=1, correction=correction)
    for dim in (None, (0, 2), -1):
        check(dim=dim, keepdim=dim == -1)
    one = torch.tensor([1.5])  # N - correction = 0
    assert_same(
        fn(one.to("tpu"), 0)[0] if "mean" in op else fn(one.to("tpu")),
        fn(one, 0)[0] if "mean" in op else fn(one),
        equal_nan=True,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
def test_logsumexp(dtype):
    x = rand((3, 4, 5), dtype)
    t = x.to("tpu")
    for dim in (0, -1, (0, 2)):
        for keepdim in (False, True):
            assert_same(
                torch.logsumexp(t, dim, keepdim), torch.logsumexp(x, dim, keepdim), **tol(dtype)
            )
    y = torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [1e4, 1e4 - 1]])
    assert_same(torch.logsumexp(y.to("tpu"), 1), torch.logsumexp(y, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.5, -1, math.inf, -math.inf])
def test_vector_norms(p, dtype):
    x = rand((4, 6), dtype)
    x[0, 1] = 0
    t = x.to("tpu")
    la = torch.linalg.vector_norm
    assert_same(la(t, p), la(x, p), **tol(dtype))
    assert_same(la(t, p, dim=1, keepdim=True), la(x, p, dim=1, keepdim=True), **tol(dtype))
    assert_same(la(t, p, dim=(-2, -1)), la(x, p, dim=(-2, -1)), **tol(dtype))
    assert_same(torch.norm(t, p, dim=0), torch.norm(x, p, dim=0), **tol(dtype))
    assert_same(la(t, p, dtype=torch.float64), la(x, p, dtype=torch.float64), **tol(dtype))
    if p not in (math.inf, -math.inf):  # the full form of norm is linalg's
        assert_same(torch.norm(t, p), torch.norm(x, p), **tol(dtype))


def test_norm_program_is_shared_across_p():
    import torch_tpu

    t = torch.randn(5).to("tpu")
    torch.linalg.vector_norm(t, 3.0).cpu()
    torch_tpu.metrics.reset()
    # (The literal ords 0, 1, 2, 0.5 are constants of programs of their own: op_call.cpp.)
    for p in (1.5, 4.0, 0.25, math.inf, -math.inf):
        torch.linalg.vector_norm(t, p).cpu()
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumulative(op, dtype):
    x = rand((3, 7), dtype)
    if op == "cumprod" and dtype.is_floating_point:
        x = (x / 4 + 1).to(dtype)
    if op == "cumprod" and dtype in INTS:
        x = x.clamp(-2, 2)
    t = x.to("tpu")
    fn = getattr(torch, op)
    for dim in (0, 1, -1):
        assert_same(fn(t, dim), fn(x, dim), **tol(dtype))
    assert_same(fn(t.t(), 0), fn(x.t(), 0), **tol(dtype))
    if dtype.is_floating_point:
        assert_same(fn(t, 1, dtype=torch.float64), fn(x, 1, dtype=torch.float64), **tol(dtype))
        y = t.clone()
        getattr(y, op + "_")(0)
        assert_same(y, fn(x, 0), **tol(dtype))
    out = torch.empty(0, dtype=torch.int64 if not dtype.is_floating_point else dtype, device="tpu")
    fn(t, 1, out=out)
    assert_same(out, fn(x, 1), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_logcumsumexp(dtype):
    x = rand((3, 6), dtype)
    x[0, 2], x[1, :2], x[2, 3] = -math.inf, math.inf, math.nan
    t = x.to("tpu")
    for dim in (1, -2):
        assert_same(
            torch.logcumsumexp(t, dim), torch.logcumsumexp(x, dim), equal_nan=True, **tol(dtype)
        )
    grad_check(lambda v: v.logcumsumexp(1), rand((3, 6), dtype, 1), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_nansum_and_count_nonzero(dtype):
    x = rand((4, 5), dtype)
    if dtype.is_floating_point:
        x[0, 1], x[2, 2] = math.nan, math.nan
    t = x.to("tpu")
    for dim in (None, 1, (0, 1)):
        assert_same(torch.nansum(t, dim), torch.nansum(x, dim), **tol(dtype))
        assert_same(torch.count_nonzero(t, dim), torch.count_nonzero(x, dim))
    assert_same(
        torch.nansum(t, 0, keepdim=True, dtype=torch.float64),
        torch.nansum(x, 0, keepdim=True, dtype=torch.float64),
        **tol(dtype),
    )


def test_cumsum_long_is_exact():
    x = torch.arange(1, 2001, dtype=torch.int64).reshape(2, 1000)
    assert_same(x.to("tpu").cumsum(1), x.cumsum(1))


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int32, torch.uint8])
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all(op, dtype):
    x = rand((3, 4, 5), torch.int64).clamp(0, 1).to(dtype)
    x[0] = 1
    t = x.to("tpu")
    fn = getattr(torch, op)
    assert_same(fn(t), fn(x))
    for dim, keepdim in ((0, False), (-1, True), ((0, 2), False), ((), True)):
        assert_same(fn(t, dim, keepdim=keepdim), fn(x, dim, keepdim=keepdim))
    out = torch.empty(0, dtype=fn(x).dtype, device="tpu")
    fn(t, 1, out=out)
    assert_same(out, fn(x, 1))


GRADS = {
    "sum_dim": lambda v: v.sum((0, 2), keepdim=True),
    "mean_dim": lambda v: v.mean(-1),
    "sum": lambda v: v.sum(),
    "prod_dim": lambda v: v.prod(1),
    "prod": lambda v: v.prod(),
    "max_dim": lambda v: v.max(1),
    "min_dim": lambda v: v.min(-1, keepdim=True),
    "max": lambda v: v.max(),
    "amax": lambda v: v.amax((0, 1)),
    "amin": lambda v: v.amin(-1),
    "var": lambda v: v.var(1),
    "std": lambda v: v.std((0, 2), correction=0),
    "var_mean": lambda v: torch.var_mean(v, 1)[0],
    "std_mean": lambda v: torch.std_mean(v, 1)[1],
    "logsumexp": lambda v: v.logsumexp(1),
    "norm2": lambda v: torch.linalg.vector_norm(v, dim=1),
    "norm1": lambda v: torch.linalg.vector_norm(v, 1, dim=-1),
    "norm3": lambda v: torch.linalg.vector_norm(v, 3),
    "norm_inf": lambda v: torch.linalg.vector_norm(v, math.inf, dim=0),
    "cumsum": lambda v: v.cumsum(1),
    "cumprod": lambda v: v.cumprod(-1),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_gradients(name):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(3))
    grad_check(GRADS[name], x, rtol=1e-4, atol=1e-4)


def test_gradients_non_contiguous():
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
    grad_check(lambda v: v.t()[1:].sum(0), x)
    grad_check(lambda v: v[:, ::2].logsumexp(0), x, rtol=1e-5, atol=1e-5)
    grad_check(lambda v: v.t().max(1)[0], x)


@pytest.mark.parametrize("bins,lo,hi", [(7, 0, 0), (4, -1.0, 1.0), (5, 0.5, 0.5), (3, 10, 20)])
@pytest.mark.parametrize("shape", [(13,), (3, 5), (0,)])
def test_histc(bins, lo, hi, shape):
    x = rand(shape, torch.float32, seed=3)
    if x.numel():
        x[0] = 0.5  # a value on an edge
    assert_same(torch.histc(x.to("tpu"), bins, lo, hi), torch.histc(x, bins, lo, hi))


def test_histc_integer_routing_counts():
    # Hugging Face's MoE routing counts expert ids with histc (int32 off the CPU).
    ids = torch.randint(0, 6, (37,), generator=torch.Generator().manual_seed(0))
    got = torch.histc(ids.to(torch.int32).to("tpu"), bins=6, min=0, max=6)
    want = torch.bincount(ids, minlength=6).to(torch.int32)
    assert got.dtype == torch.int32
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op, dtype):
    fn = getattr(torch, op)
    # Odd sizes, small integer values so ties are common (the later index wins).
    x = torch.randint(-3, 4, (3, 7, 5), generator=torch.Generator().manual_seed(1)).to(dtype)
    if dtype.is_floating_point:
        x[0, 2, 1], x[1, 4, 3], x[2, 0, 0] = math.nan, math.nan, -math.inf
        x[2, 5, 0] = math.nan
    t = x.to("tpu")
    for dim in (0, 1, -1):
        values, indices = fn(t, dim)
        want_values, want_indices = fn(x, dim)
        assert_same(values, want_values, equal_nan=True)
        assert_same(indices, want_indices)
    values, indices = (
        torch.empty(0, dtype=dtype, device="tpu"),
        torch.empty(0, dtype=torch.int64, device="tpu"),
    )
    fn(t, 2, out=(values, indices))
    assert_same(indices, fn(x, 2)[1])
    for shape in ((), (0, 3)):
        y = rand(shape, dtype, 2)
        assert_same(fn(y.to("tpu"), 0)[1], fn(y, 0)[1])


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_gradients(op):
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(5))
    x[1, 3:6] = 0.25  # ties: the gradient goes to the later index
    grad_check(lambda v: getattr(torch, op)(v, 1), x)
    grad_check(lambda v: getattr(torch, op)(v.t(), 0), x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("weights", [None, torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("size,minlength", [(37, 0), (37, 20), (0, 3), (1, 0)])
def test_bincount(dtype, weights, size, minlength):
    g = torch.Generator().manual_seed(size)
    x = torch.randint(0, 9, (size,), generator=g).to(dtype)
    w = None if weights is None else torch.randn(size, generator=g).to(weights)
    want = torch.bincount(x, w, minlength)
    got = torch.bincount(x.to("tpu"), None if w is None else w.to("tpu"), minlength)
    assert_same(got, want, **tol(want.dtype))


def test_bincount_rejects_bad_input_like_cpu():
    for bad in (torch.tensor([1, -1]), torch.tensor([[1, 2]]), torch.tensor([0.5])):
        with pytest.raises(RuntimeError, match="bincount only supports"):
            torch.bincount(bad.to("tpu"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(torch.tensor([1, 2], device="tpu"), torch.ones(3, device="tpu"))


@pytest.mark.parametrize("dtype", ALL + [torch.uint8, torch.int8])
def test_hash_tensor(dtype):
    x = rand((5, 7), dtype, seed=3)
    h = torch.ops.aten.hash_tensor
    assert_same(h(x.to("tpu")), h(x))
    for dim, keepdim in (([1], False), ([0], True), ([0, 1], False)):
        assert_same(h(x.to("tpu"), dim, keepdim=keepdim), h(x, dim, keepdim=keepdim))
    assert_same(
        h(torch.empty(0, 3, dtype=dtype).to("tpu"), [1]), h(torch.empty(0, 3, dtype=dtype), [1])
    )


# ---- segment_reduce ----


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("initial", [None, 1.5])
def test_segment_reduce_lengths_and_offsets(reduce, dtype, initial):
    data = rand((9, 5), dtype, seed=4)
    data[2, 1] = float("nan")
    lengths = torch.tensor([3, 0, 4, 1, 1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    for kw in (dict(lengths=lengths), dict(offsets=offsets)):
        want = torch.segment_reduce(data, reduce, initial=initial, unsafe=True, **kw)
        got = torch.segment_reduce(
            data.to("tpu"),
            reduce,
            initial=initial,
            unsafe=True,
            **{k: v.to("tpu") for k, v in kw.items()},
        )
        assert_same(got, want, **tol(dtype, low=3e-2), equal_nan=True)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_segment_reduce_batched_lengths_along_axis(reduce):
    # 2-d lengths: one segmentation per row, reducing along axis 1 of 3-d data.
    data = rand((2, 7, 3), torch.float32, seed=5)
    lengths = torch.tensor([[2, 4, 1], [0, 5, 2]])
    offsets = torch.cat([torch.zeros(2, 1, dtype=torch.long), lengths.cumsum(1)], 1)
    for kw in (dict(lengths=lengths), dict(offsets=offsets)):
        want = torch.segment_reduce(data, reduce, axis=1, **kw)
        got = torch.segment_reduce(
            data.to("tpu"), reduce, axis=1, **{k: v.to("tpu") for k, v in kw.items()}
        )
        assert_same(got, want, **tol(torch.float32), equal_nan=True)
