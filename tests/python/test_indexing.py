"""Indexing ops against CPU: gathers, scatters, advanced indexing, masks, embeddings."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from helpers import assert_same

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]
# A cheaper spread for ops whose lowering does not depend on the dtype's kind beyond these.
SOME = [torch.float32, torch.bfloat16, torch.int32, torch.bool]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def tpu(t):
    return t.to("tpu")


def grad_check(fn, *inputs, tol=None):
    """fn's value and the gradients of its float inputs agree with CPU."""
    cpu_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    tpu_in = [tpu(x.detach()).requires_grad_(x.is_floating_point()) for x in inputs]
    out_cpu, out_tpu = fn(*cpu_in), fn(*tpu_in)
    assert_same(out_tpu, out_cpu, **(tol or {}))
    w = make(out_cpu.shape, out_cpu.dtype, seed=7)
    (out_cpu * w).sum().backward()
    (out_tpu * tpu(w)).sum().backward()
    for c, t in zip(cpu_in, tpu_in):
        if c.requires_grad:
            assert_same(t.grad, c.grad, **(tol or {}))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_and_embedding(dtype):
    x = make((5, 4, 3), dtype)
    idx = torch.tensor([4, 0, 3, 2, 2])
    for dim in (0, 1, -1):
        i = idx % x.shape[dim]
        assert_same(tpu(x).index_select(dim, tpu(i)), x.index_select(dim, i))
    assert_same(
        tpu(x).index_select(0, tpu(torch.tensor([], dtype=torch.long))),
        x.index_select(0, torch.tensor([], dtype=torch.long)),
    )


def test_embedding_forward_backward():
    w = make((10, 4))
    idx = torch.tensor([[1, 2, 2], [9, 0, 1]])
    grad_check(lambda w: F.embedding(tpu(idx) if w.device.type == "tpu" else idx, w), w)


@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (None, True), (-1, True)])
def test_embedding_dense_backward(padding_idx, scale):
    w = make((10, 4))
    idx = torch.tensor([[1, 2, 2], [9, 0, 2]])

    def fn(w):
        i = tpu(idx) if w.device.type == "tpu" else idx
        return F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale)

    grad_check(fn, w)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag(mode, last):
    w = make((10, 3))
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 9])
    offsets = torch.tensor([0, 3, 3, 7] + ([9] if last else []))

    def fn(w):
        on = w.device.type == "tpu"
        return F.embedding_bag(
            tpu(idx) if on else idx,
            w,
            tpu(offsets) if on else offsets,
            mode=mode,
            include_last_offset=last,
        )

    grad_check(fn, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_embedding_renorm(dtype, norm_type):
    # F.embedding's max_norm: the rows the indices name (repeats and all) scaled in place
    # where their norm exceeds max_norm; the others stay as they are. Bit for bit but in
    # f32, whose scale CPU divides in f64.
    w = make((6, 4), dtype) * 2
    idx = torch.tensor([[0, 2], [2, 5], [3, 0]])
    got = tpu(w)
    out = F.embedding(tpu(idx), got, max_norm=1.0, norm_type=norm_type)
    tol = {} if dtype == torch.float32 else dict(rtol=0, atol=0)
    assert_same(out, F.embedding(idx, w, max_norm=1.0, norm_type=norm_type), **tol)
    assert_same(got, w, **tol)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    # CPU's embedding_bag scales some rows by another index's count (torch 2.13); the
    # reference is the documented rule, built from F.embedding, which CPU gets right.
    w = make((10, 3))
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 9])
    bags = torch.tensor([0, 0, 0, 2, 2, 2, 2, 3, 3])
    ref = w.clone().requires_grad_()
    rows = F.embedding(idx, ref, scale_grad_by_freq=True)
    out = torch.zeros(4, 3).index_add(0, bags, rows)
    if mode == "mean":
        out = out / torch.tensor([3.0, 1.0, 4.0, 2.0]).unsqueeze(1)
    out.sum().backward()
    got = tpu(w).requires_grad_()
    F.embedding_bag(
        tpu(idx), got, tpu(torch.tensor([0, 3, 3, 7])), mode=mode, scale_grad_by_freq=True
    ).sum().backward()
    assert_same(got.grad, ref.grad)


@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_per_sample_weights_and_padding(padding_idx):
    w = make((10, 3))
    psw = make((8,), seed=3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 3, 5])

    def fn(w, psw):
        on = w.device.type == "tpu"
        return F.embedding_bag(
            tpu(idx) if on else idx,
            w,
            tpu(offsets) if on else offsets,
            mode="sum",
            per_sample_weights=psw,
            padding_idx=padding_idx,
        )

    grad_check(fn, w, psw, tol=dict(rtol=1e-5, atol=1e-5))


def test_embedding_bag_forward_only():
    w, idx, offsets = make((10, 3)), torch.tensor([1, 2, 4, 5, 9]), torch.tensor([0, 2])
    with torch.no_grad():
        for mode in ("sum", "max"):
            assert_same(
                F.embedding_bag(tpu(idx), tpu(w), tpu(offsets), mode=mode),
                F.embedding_bag(idx, w, offsets, mode=mode),
            )


def test_embedding_bag_2d_input_mean_padding():
    w = make((6, 2))
    idx = torch.tensor([[0, 1, 5], [5, 5, 2]])

    def fn(w):
        return F.embedding_bag(
            tpu(idx) if w.device.type == "tpu" else idx, w, mode="mean", padding_idx=5
        )

    grad_check(fn, w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather(dtype):
    x = make((4, 5, 3), dtype)
    g = torch.Generator().manual_seed(1)
    for dim in (0, 1, 2, -2):
        idx = torch.randint(0, x.shape[dim], (3, 4, 2), generator=g)
        assert_same(torch.gather(tpu(x), dim, tpu(idx)), torch.gather(x, dim, idx))
    # Negative indices are PyTorch errors on CPU; an empty index gives an empty result.
    empty = torch.zeros(0, 5, 3, dtype=torch.long)
    assert_same(torch.gather(tpu(x), 0, tpu(empty)), torch.gather(x, 0, empty))


def test_zero_dim_self_and_index():
    x, v = torch.tensor(1.5), torch.tensor(-2.0)
    i = torch.tensor(0)
    assert_same(torch.gather(tpu(x), 0, tpu(i)), torch.gather(x, 0, i))
    assert_same(tpu(x).index_select(0, tpu(i)), x.index_select(0, i))
    assert_same(tpu(x).scatter(0, tpu(i), tpu(v)), x.scatter(0, i, v))
    assert_same(tpu(x).scatter_add(0, tpu(i), tpu(v)), x.scatter_add(0, i, v))
    assert_same(tpu(x).index_add(0, tpu(i), tpu(v)), x.index_add(0, i, v))
    assert_same(tpu(x).index_fill(0, tpu(i), 3.0), x.index_fill(0, i, 3.0))
    assert_same(tpu(torch.arange(5.0))[tpu(torch.tensor(-2))], torch.arange(5.0)[torch.tensor(-2)])


def test_gather_backward_and_noncontiguous():
    x = make((6, 5)).t()
    idx = torch.tensor([[0, 5, 5], [1, 1, 2]])
    grad_check(lambda x: torch.gather(x, 1, tpu(idx) if x.device.type == "tpu" else idx), x)


@pytest.mark.parametrize("dtype", SOME)
def test_scatter_src_value_add(dtype):
    x = make((4, 5), dtype)
    src = make((4, 5), dtype, seed=2)
    idx = torch.tensor([[0, 1, 2], [3, 3, 0]])  # unique per column: deterministic overwrite
    for dim in (0, -1):
        i = idx if dim == 0 else idx.clamp(max=4)
        i = torch.tensor([[0, 1, 2], [3, 4, 1]]) if dim == -1 else i
        assert_same(tpu(x).scatter(dim, tpu(i), tpu(src)), x.scatter(dim, i, src))
        assert_same(tpu(x).scatter(dim, tpu(i), 1), x.scatter(dim, i, 1))
        if dtype != torch.bool:
            dup = torch.tensor([[0, 0, 0], [1, 1, 0]])
            assert_same(
                tpu(x).scatter_add(dim, tpu(dup), tpu(src)),
                x.scatter_add(dim, dup, src),
                **(
                    {"rtol": 2e-2, "atol": 2e-2}
                    if not dtype.is_floating_point or dtype != torch.float32
                    else {}
                ),
            )
    y = tpu(x)
    y.scatter_(1, tpu(torch.tensor([[4], [0]])), tpu(src))
    assert_same(y, x.clone().scatter_(1, torch.tensor([[4], [0]]), src))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    x = make((5, 3), dtype)
    src = make((6, 3), dtype, seed=4)
    idx = torch.tensor([[0, 1, 0], [0, 4, 1], [2, 1, 1], [0, 0, 0], [4, 4, 4], [2, 2, 2]])
    got = tpu(x).scatter_reduce(0, tpu(idx), tpu(src), reduce, include_self=include_self)
    assert_same(got, x.scatter_reduce(0, idx, src, reduce, include_self=include_self))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_scatter_reduce_bf16(reduce):
    x, src = make((5, 3), torch.bfloat16), make((6, 3), torch.bfloat16, seed=4)
    idx = torch.tensor([[0, 1, 0], [0, 4, 1], [2, 1, 1], [0, 0, 0], [4, 4, 4], [2, 2, 2]])
    assert_same(
        tpu(x).scatter_reduce(0, tpu(idx), tpu(src), reduce, include_self=False),
        x.scatter_reduce(0, idx, src, reduce, include_self=False),
        rtol=2e-2,
        atol=2e-2,
    )


def test_scatter_legacy_reduce_and_backward():
    x = make((3, 4))
    src = make((3, 4), seed=5)
    idx = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    for reduce in ("add", "multiply"):
        assert_same(
            tpu(x).scatter(0, tpu(idx), tpu(src), reduce=reduce),
            x.scatter(0, idx, src, reduce=reduce),
        )
    uidx = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 1]])
    grad_check(
        lambda x, s: x.scatter(0, tpu(uidx) if x.device.type == "tpu" else uidx, s), x, src[:2]
    )
    grad_check(
        lambda x, s: x.scatter_add(0, tpu(idx) if x.device.type == "tpu" else idx, s), x, src[:2]
    )


@pytest.mark.parametrize("dtype", SOME)
def test_advanced_indexing(dtype):
    x = make((4, 5, 6), dtype)
    i = torch.tensor([0, -1, 2])
    j = torch.tensor([[1], [3]])
    cases = [
        lambda t, d: t[d(i)],
        lambda t, d: t[:, d(i)],
        lambda t, d: t[d(i), :, d(i)],  # separated: index dims go first
        lambda t, d: t[d(j), d(i)],  # broadcast index tensors
        lambda t, d: t[None, d(i), None, 1:3],  # None entries and slices
        lambda t, d: t[..., d(i)],
        lambda t, d: t[d(torch.tensor(1)), d(i)],
        lambda t, d: t[d(i)[:0]],
        lambda t, d: t[d(i.int())],  # int32 indices
        lambda t, d: t.transpose(0, 2)[d(j), 1:, d(i)],  # a non-contiguous self
    ]
    for case in cases:
        assert_same(case(tpu(x), tpu), case(x, lambda t: t))


# The result shape is computed without a meta tensor (which cost 47 of a small gather's
# 58 µs); its checks keep PyTorch's errors.
def test_advanced_indexing_errors_match_cpu():
    x = make((4, 5, 6))
    bad = [
        (torch.tensor([0.5]),),
        (torch.tensor([0, 1]), torch.tensor([0, 1, 2])),
        (torch.tensor([[0], [1]]), torch.tensor([0, 1, 2]), torch.tensor([1, 1])),
    ]
    for idx in bad:
        with pytest.raises(IndexError) as cpu_error:
            x[idx]
        with pytest.raises(IndexError) as tpu_error:
            tpu(x)[tuple(tpu(t) for t in idx)]
        assert str(tpu_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_bool_mask_indexing(dtype):
    x = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, seed=3)
    row = torch.tensor([True, False, True, True])
    assert_same(tpu(x)[tpu(mask)], x[mask])
    assert_same(tpu(x)[tpu(row)], x[row])
    assert_same(tpu(x)[:, tpu(row[:1].repeat(5))], x[:, row[:1].repeat(5)])
    assert_same(tpu(x)[tpu(row), 1:], x[row, 1:])
    assert_same(tpu(x)[row], x[row])  # a CPU mask
    none = torch.zeros(4, 5, dtype=torch.bool)
    assert_same(tpu(x)[tpu(none)], x[none])


def test_index_backward():
    x = make((5, 4))
    i = torch.tensor([0, 3, 3, -1])
    grad_check(lambda x: x[tpu(i) if x.device.type == "tpu" else i], x)
    mask = make((5, 4), torch.bool, seed=9)
    grad_check(lambda x: x[tpu(mask) if x.device.type == "tpu" else mask], x)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = make((5, 4), dtype)
    v = make((3, 4), dtype, seed=2)
    i = torch.tensor([0, -1, 2])
    y = tpu(x)
    y.index_put_((tpu(i),), tpu(v), accumulate=accumulate)
    assert_same(y, x.clone().index_put_((i,), v, accumulate=accumulate))
    # Duplicates with accumulate add up; a scalar value broadcasts.
    d = torch.tensor([1, 1, 1, 3])
    y = tpu(x)
    y.index_put_(
        (tpu(d), tpu(torch.tensor([0, 0, 2, 3]))), tpu(v[0, 0]), accumulate=True
    ) if accumulate else y.index_put_((tpu(d[2:]),), tpu(v[0]))
    want = x.clone()
    if accumulate:
        want.index_put_((d, torch.tensor([0, 0, 2, 3])), v[0, 0], accumulate=True)
    else:
        want.index_put_((d[2:],), v[0])
    assert_same(y, want)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_masks_and_setitem(accumulate):
    x = make((4, 5))
    mask = make((4, 5), torch.bool, seed=1)
    y = tpu(x)
    y[tpu(mask)] = 2.5
    want = x.clone()
    want[mask] = 2.5
    assert_same(y, want)
    vals = make((int(mask.sum()),), seed=3)
    y = tpu(x)
    y.index_put_((tpu(mask),), tpu(vals), accumulate=accumulate)
    assert_same(y, x.clone().index_put_((mask,), vals, accumulate=accumulate))
    y = tpu(x)
    y.t()[tpu(torch.tensor([4, 0]))] = tpu(torch.arange(4.0))
    want = x.clone()
    want.t()[torch.tensor([4, 0])] = torch.arange(4.0)
    assert_same(y, want)
    y = tpu(x)
    y[1:, tpu(torch.tensor([0, 2]))] = tpu(torch.tensor(-1.0))
    want = x.clone()
    want[1:, torch.tensor([0, 2])] = -1.0
    assert_same(y, want)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        tpu(x).index_put_((tpu(torch.tensor([0, 1])),), tpu(torch.ones(3, 5)))


def test_index_put_backward():
    x, v = make((5, 3)), make((2, 3), seed=1)
    i = torch.tensor([4, 1])
    grad_check(
        lambda x, v: x.index_put((tpu(i) if x.device.type == "tpu" else i,), v, accumulate=True),
        x,
        v,
    )


@pytest.mark.parametrize("dtype", SOME)
def test_masked_fill(dtype):
    x = make((3, 4), dtype)
    mask = make((3, 4), torch.bool, seed=1)
    assert_same(tpu(x).masked_fill(tpu(mask), 1), x.masked_fill(mask, 1))
    assert_same(
        tpu(x).masked_fill(tpu(mask[0]), tpu(torch.tensor(0))),
        x.masked_fill(mask[0], torch.tensor(0)),
    )
    y = tpu(x).t()
    y.masked_fill_(tpu(mask.t()), 0)
    assert_same(y, x.t().masked_fill(mask.t(), 0))
    grad_check(
        lambda x: x.masked_fill(tpu(mask) if x.device.type == "tpu" else mask, 0.5), make((3, 4))
    )


@pytest.mark.parametrize("dtype", SOME)
def test_nonzero_and_masked_select(dtype):
    x = make((3, 4, 2), dtype)
    if dtype != torch.bool:
        x[x.abs() < 20 if not dtype.is_floating_point else x.abs() < 0.5] = 0
    assert_same(tpu(x).nonzero(), x.nonzero())
    assert_same(torch.nonzero(tpu(x), as_tuple=True)[1], torch.nonzero(x, as_tuple=True)[1])
    mask = make((4, 2), torch.bool, seed=5)
    assert_same(tpu(x).masked_select(tpu(mask)), x.masked_select(mask))
    empty = torch.zeros(0, 3, dtype=dtype)
    assert_same(tpu(empty).nonzero(), empty.nonzero())
    assert_same(tpu(torch.tensor(5)).nonzero(), torch.tensor(5).nonzero())
    assert_same(tpu(x)[0, 0, 0:1].t().nonzero(), x[0, 0, 0:1].t().nonzero())


def test_masked_ops_span_several_scan_blocks():
    # Long enough for the blocked prefix sum behind them to recurse twice.
    x = make((70, 50), seed=1)
    mask = make((70, 50), torch.bool, seed=2)
    assert_same(tpu(x).nonzero(), x.nonzero())
    assert_same(tpu(x)[tpu(mask)], x[mask])
    src = make((3500,), seed=3)
    assert_same(tpu(x).masked_scatter(tpu(mask), tpu(src)), x.masked_scatter(mask, src))


def test_masked_select_and_scatter_backward():
    x = make((3, 4))
    mask = make((3, 4), torch.bool, seed=5)
    grad_check(lambda x: x.masked_select(tpu(mask) if x.device.type == "tpu" else mask), x)
    src = make((12,), seed=6)
    grad_check(
        lambda x, s: x.masked_scatter(tpu(mask) if x.device.type == "tpu" else mask, s), x, src
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_masked_scatter(dtype):
    x = make((3, 4), dtype)
    mask = make((4,), torch.bool, seed=2)
    src = make((20,), dtype, seed=3)
    assert_same(tpu(x).masked_scatter(tpu(mask), tpu(src)), x.masked_scatter(mask, src))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_index_add_copy_fill(dtype):
    x = make((5, 3), dtype)
    src = make((4, 3), dtype, seed=1)
    dup = torch.tensor([0, 4, 0, 3])
    uniq = torch.tensor([0, 4, 2, 1])
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
    assert_same(tpu(x).index_add(0, tpu(dup), tpu(src)), x.index_add(0, dup, src), **tol)
    assert_same(
        tpu(x).index_add(0, tpu(dup), tpu(src), alpha=2), x.index_add(0, dup, src, alpha=2), **tol
    )
    assert_same(tpu(x).index_copy(0, tpu(uniq), tpu(src)), x.index_copy(0, uniq, src))
    assert_same(
        tpu(x).index_fill(1, tpu(torch.tensor([2, 0])), 7), x.index_fill(1, torch.tensor([2, 0]), 7)
    )
    assert_same(
        tpu(x).index_fill(-1, tpu(torch.tensor([1])), tpu(torch.tensor(3))),
        x.index_fill(-1, torch.tensor([1]), torch.tensor(3)),
    )
    y = tpu(x).t()
    y.index_add_(1, tpu(dup), tpu(src.t().contiguous()))
    assert_same(y, x.t().index_add(1, dup, src.t()), **tol)


def test_index_add_copy_backward():
    x, src = make((5, 3)), make((4, 3), seed=1)
    dup = torch.tensor([0, 4, 0, 1])
    grad_check(
        lambda x, s: x.index_add(0, tpu(dup) if x.device.type == "tpu" else dup, s, alpha=0.5),
        x,
        src,
    )
    uniq = torch.tensor([0, 4, 2, 1])
    grad_check(
        lambda x, s: x.index_copy(0, tpu(uniq) if x.device.type == "tpu" else uniq, s), x, src
    )


def test_take_and_put():
    x = make((3, 4))
    idx = torch.tensor([[0, -1], [5, 11]])
    assert_same(torch.take(tpu(x), tpu(idx)), torch.take(x, idx))
    src = make((2, 2), seed=1)
    assert_same(tpu(x).put(tpu(idx), tpu(src)), x.put(idx, src))
    dup = torch.tensor([1, 1, 2])
    assert_same(
        tpu(x).put(tpu(dup), tpu(src.flatten()[:3]), accumulate=True),
        x.put(dup, src.flatten()[:3], accumulate=True),
    )
    grad_check(lambda x: torch.take(x, tpu(idx) if x.device.type == "tpu" else idx), x)


def test_out_of_range_host_indices_raise_like_cpu():
    x = tpu(make((4, 3)))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[torch.tensor([0, 4])]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 0"):
        x[torch.tensor([-5])] = 1.0
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 3"):
        x[:, torch.tensor([3])]


def test_out_of_range_index_is_clamped_not_checked():
    # Checking would need a device sync per op; XLA's gather clamps (CPU raises IndexError).
    x = tpu(torch.arange(4.0))
    assert x.index_select(0, tpu(torch.tensor([7]))).cpu().tolist() == [3.0]


def test_nonzero_compiles_once_per_input_shape():
    x = tpu(make((16,), torch.bool, seed=0))
    x.nonzero()
    torch_tpu.metrics.reset()
    counts = {int(tpu(make((16,), torch.bool, seed=s)).nonzero().shape[0]) for s in range(1, 4)}
    assert len(counts) > 1
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    # Repeated indices, an index that no source slice reaches, odd sizes, two dims.
    x = make((5, 7), dtype, seed=1)
    for dim, index in ((0, torch.tensor([0, 2, 2, 4, 0, 2])), (1, torch.tensor([6, 1, 1, 3]))):
        shape = [5, 7]
        shape[dim] = index.numel()
        src = make(tuple(shape), dtype, seed=2)
        expected = x.index_reduce(dim, index, src, reduce, include_self=include_self)
        got = tpu(x).index_reduce(dim, tpu(index), tpu(src), reduce, include_self=include_self)
        t = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
        assert_same(got, expected, **t)
        y = tpu(x)
        y.index_reduce_(dim, tpu(index), tpu(src), reduce, include_self=include_self)
        assert_same(y, expected, **t)


def test_index_reduce_backward():
    x = make((4, 3), seed=3)
    src = make((5, 3), seed=4)
    index = torch.tensor([0, 3, 3, 1, 0])
    grad_check(
        lambda a, s: a.index_reduce(0, tpu(index) if a.device.type == "tpu" else index, s, "amax"),
        x,
        src,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("size", [0, 3, 11, 40])
def test_nonzero_static(dtype, size):
    x = make((5, 7), dtype, seed=5)
    if dtype != torch.bool:
        x = torch.where(x.abs() < (0.5 if dtype.is_floating_point else 20), torch.zeros_like(x), x)
        x[1] = 0
    for fill in (-1, 7):
        assert_same(
            torch.nonzero_static(tpu(x), size=size, fill_value=fill),
            torch.nonzero_static(x, size=size, fill_value=fill),
        )
    e = torch.zeros(0, 3)
    assert_same(torch.nonzero_static(tpu(e), size=4), torch.nonzero_static(e, size=4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_unique_and_unique_consecutive(dtype):
    x = make((6, 7), dtype, seed=8)
    if dtype != torch.bool:
        x = (x if dtype.is_floating_point else x // 10).round()
    if dtype.is_floating_point:
        # One NaN: CPU orders several NaNs (each its own value) arbitrarily.
        x[0, 2] = float("nan")
    for sorted_ in (True, False):
        for inv in (False, True):
            for counts in (False, True):
                got = torch.unique(tpu(x), sorted=sorted_, return_inverse=inv, return_counts=counts)
                exp = torch.unique(x, sorted=sorted_, return_inverse=inv, return_counts=counts)
                for g, e in zip(
                    got if isinstance(got, tuple) else (got,),
                    exp if isinstance(exp, tuple) else (exp,),
                ):
                    assert_same(g, e, equal_nan=True)
                got = torch.unique_consecutive(tpu(x), return_inverse=inv, return_counts=counts)
                exp = torch.unique_consecutive(x, return_inverse=inv, return_counts=counts)
                for g, e in zip(
                    got if isinstance(got, tuple) else (got,),
                    exp if isinstance(exp, tuple) else (exp,),
                ):
                    assert_same(g, e, equal_nan=True)
    # Slices along a dim (sorted and consecutive), 0-d and empty inputs.
    y = torch.tensor([[1, 1, 2, 2, 2], [3, 3, 4, 4, 5]]).to(dtype)
    z = make((7, 3, 2), dtype, seed=9)
    z = z if dtype == torch.bool else (z > 0).to(dtype)  # few distinct slices
    for t in (y, z):
        for dim in (0, 1, -1):
            got = torch.unique_consecutive(tpu(t), return_inverse=True, return_counts=True, dim=dim)
            for g, e in zip(
                got, torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=dim)
            ):
                assert_same(g, e)
            got = torch.unique(tpu(t), return_inverse=True, return_counts=True, dim=dim)
            for g, e in zip(got, torch.unique(t, return_inverse=True, return_counts=True, dim=dim)):
                assert_same(g, e)
            assert_same(torch.unique(tpu(t), dim=dim), torch.unique(t, dim=dim))
    for t in (x[0, 4], x[:0]):
        for g, e in zip(
            torch.unique(tpu(t), return_inverse=True, return_counts=True),
            torch.unique(t, return_inverse=True, return_counts=True),
        ):
            assert_same(g, e, equal_nan=True)
