"""Shape ops against CPU: cat/stack, views, padding, repeat, flip, roll, triangles,
unfold, diagonals, repeat_interleave, clones of views."""

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same

from test_indexing import DTYPES, make, tpu
from test_indexing import grad_check as grad_check_tol


def grad_check(fn, *inputs):
    grad_check_tol(fn, *inputs, tol=dict(rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_and_stack(dtype):
    a, b = make((2, 3), dtype), make((4, 3), dtype, seed=1)
    assert_same(torch.cat([tpu(a), tpu(b)]), torch.cat([a, b]))
    assert_same(torch.cat([tpu(a.t()), tpu(b.t())], dim=-1), torch.cat([a.t(), b.t()], dim=-1))
    assert_same(torch.stack([tpu(a), tpu(a)], dim=1), torch.stack([a, a], dim=1))
    assert_same(torch.stack([tpu(a), tpu(a)], dim=-1), torch.stack([a, a], dim=-1))


def test_cat_empty_inputs_and_promotion():
    a = make((2, 3))
    legacy = torch.tensor([])
    assert_same(torch.cat([tpu(a), tpu(legacy), tpu(a)]), torch.cat([a, legacy, a]))
    assert_same(torch.cat([tpu(a[:0]), tpu(a)]), torch.cat([a[:0], a]))
    assert_same(torch.cat([tpu(a[:0]), tpu(a[:0])]), torch.cat([a[:0], a[:0]]))
    i = torch.arange(3).reshape(1, 3)
    assert_same(torch.cat([tpu(a), tpu(i)]), torch.cat([a, i]))
    h = make((1, 3), torch.bfloat16)
    assert_same(torch.cat([tpu(h), tpu(i), tpu(a.half())]), torch.cat([h, i, a.half()]))
    out = tpu(torch.empty(0))
    torch.cat([tpu(a), tpu(a)], out=out)
    assert_same(out, torch.cat([a, a]))
    grad_check(lambda x, y: torch.cat([x, y], 1), a, make((2, 1), seed=3))
    grad_check(lambda x, y: torch.stack([x, y]), a, make((2, 3), seed=3))


def test_split_chunk_narrow_are_views():
    x = make((6, 4))
    t = tpu(x)
    for got, want in zip(t.split(4), x.split(4)):
        assert_same(got, want)
    for got, want in zip(t.split([1, 3, 2]), x.split([1, 3, 2])):
        assert_same(got, want)
    for got, want in zip(t.chunk(3, dim=1), x.chunk(3, dim=1)):
        assert_same(got, want)
    n = t.narrow(1, 1, 2)
    assert n.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert_same(n.contiguous(), x.narrow(1, 1, 2).contiguous())
    assert_same(n.clone(), x.narrow(1, 1, 2).clone())
    grad_check(lambda x: torch.cat(x.split(2)[::-1]), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_constant_pad(dtype):
    x = make((2, 3, 4), dtype)
    for pad in [(1, 2), (0, 1, 2, 0), (-1, 2), (1, 1, -1, 0, 2, 0)]:
        assert_same(F.pad(tpu(x), pad, value=1), F.pad(x, pad, value=1))
    assert_same(F.pad(tpu(x[:0]), (1, 1)), F.pad(x[:0], (1, 1)))
    if dtype == torch.float32:
        grad_check(lambda x: F.pad(x, (1, -1, 2, 0)), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_reflection_replication_pad(mode, dims):
    shape = (2, 3, 5, 4, 6)[: 2 + dims]
    x = make(shape)
    pad = (2, 1, 0, 3, 1, 1)[: 2 * dims]
    grad_check(lambda x: F.pad(x, pad, mode=mode), x)
    grad_check(lambda x: F.pad(x, pad, mode=mode), make(shape[1:]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_flip_roll(dtype):
    x = make((2, 3), dtype)
    assert_same(tpu(x).repeat(2, 1, 3), x.repeat(2, 1, 3))
    assert_same(tpu(x).repeat(1, 0), x.repeat(1, 0))
    assert_same(tpu(x).flip(0, -1), x.flip(0, -1))
    assert_same(tpu(x.t()).flip(1), x.t().flip(1))
    assert_same(tpu(x).roll(4), x.roll(4))
    assert_same(tpu(x).roll((1, -1), (0, 1)), x.roll((1, -1), (0, 1)))
    assert_same(tpu(x[:0]).roll(1, 0), x[:0].roll(1, 0))
    assert_same(tpu(x[0, 0]).flip(0), x[0, 0].flip(0))


def test_repeat_flip_roll_backward():
    x = make((2, 3))
    grad_check(lambda x: x.repeat(2, 2), x)
    grad_check(lambda x: x.flip(1), x)
    grad_check(lambda x: x.roll(1, 1), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu(dtype):
    x = make((2, 4, 5), dtype)
    for k in (-1, 0, 2):
        assert_same(tpu(x).tril(k), x.tril(k))
        assert_same(tpu(x).triu(k), x.triu(k))
    y = tpu(x).transpose(1, 2)
    y.tril_(1)
    assert_same(y, x.transpose(1, 2).tril(1))


def test_unfold_view_and_backward():
    x = make((3, 10))
    t = tpu(x)
    u = t.unfold(1, 4, 3)
    assert u.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert_same(u.contiguous(), x.unfold(1, 4, 3).contiguous())
    grad_check(lambda x: x.unfold(1, 4, 3), x)
    grad_check(lambda x: x.unfold(0, 2, 1), x)
    grad_check(lambda x: x.unfold(-1, 3, 3), x)


def test_diagonals():
    x = make((4, 5))
    assert_same(tpu(x).diag(), x.diag())
    assert_same(tpu(x).diag(1), x.diag(1))
    assert_same(tpu(x[0]).diag(-1), x[0].diag(-1))
    assert_same(torch.diag_embed(tpu(x), 1), torch.diag_embed(x, 1))
    assert_same(tpu(x).diagonal(0, 1, 0), x.diagonal(0, 1, 0))
    grad_check(lambda x: x.diagonal(-1), x)
    grad_check(lambda x: torch.diag_embed(x), x)


def test_repeat_interleave():
    x = make((3, 2))
    r = torch.tensor([2, 0, 3])
    assert_same(torch.repeat_interleave(tpu(r)), torch.repeat_interleave(r))
    assert_same(tpu(x).repeat_interleave(tpu(r), dim=0), x.repeat_interleave(r, dim=0))
    assert_same(tpu(x).repeat_interleave(2), x.repeat_interleave(2))
    assert_same(torch.repeat_interleave(tpu(r), output_size=5), torch.repeat_interleave(r))
    assert_same(
        torch.repeat_interleave(tpu(torch.zeros(2, dtype=torch.long))),
        torch.repeat_interleave(torch.zeros(2, dtype=torch.long)),
    )
    grad_check(lambda x: x.repeat_interleave(2, dim=1), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_clone_contiguous_of_views(dtype):
    x = make((4, 6), dtype)
    t = tpu(x)
    for view in (
        lambda a: a.t(),
        lambda a: a[1:, ::2],
        lambda a: a.expand(2, 4, 6),
        lambda a: a.unsqueeze(1)[:, :, 2:],
    ):
        assert_same(view(t).clone(), view(x).clone())
        assert_same(view(t).contiguous(), view(x).contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 5), 3), ((1, 4, 7), 2), ((3, 9, 2, 2, 3), 3)])
def test_channel_shuffle(dtype, shape, groups):
    x = make(shape, dtype)
    assert_same(F.channel_shuffle(tpu(x), groups), F.channel_shuffle(x, groups))
    assert_same(
        torch.native_channel_shuffle(tpu(x), groups), torch.native_channel_shuffle(x, groups)
    )
