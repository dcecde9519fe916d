"""Batch, layer and group norm against CPU: values, saved statistics, running-stat
updates, and gradients of input, weight and bias."""

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same
from cpu_compare import check, tolerance


def r(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (3, 4, 5, 6), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_updates_running_stats(shape, affine):
    c = shape[1]
    rm_c, rv_c = torch.randn(c), torch.rand(c) + 0.5
    rm_t, rv_t = rm_c.to("tpu"), rv_c.to("tpu")
    params = [r(c), r(c)] if affine else []

    def fn(x, *wb):
        stats = (rm_t, rv_t) if x.device.type == "tpu" else (rm_c, rv_c)
        return F.batch_norm(x, *stats, *wb, training=True, momentum=0.3, eps=1e-3)

    check(fn, r(*shape), *params, tol=tolerance(torch.float32))
    assert_same(rm_t, rm_c, rtol=1e-5, atol=1e-5)
    assert_same(rv_t, rv_c, rtol=1e-5, atol=1e-5)


def test_batch_norm_eval_and_no_stats():
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    tol = tolerance(torch.float32)
    for training in (False, True):
        check(
            lambda x, w, b: F.batch_norm(
                x, rm.to(x.device), rv.to(x.device), w, b, training=training
            ),
            r(2, 3, 4, 4),
            r(3),
            r(3),
            tol=tol,
        )
    check(lambda x: F.batch_norm(x, None, None, training=True), r(5, 3, 2), tol=tol)


def test_batch_norm_module_and_channels_last():
    torch.manual_seed(0)
    cpu = torch.nn.BatchNorm2d(4)
    tpu = torch.nn.BatchNorm2d(4).to("tpu")
    x = torch.randn(3, 4, 5, 5).contiguous(memory_format=torch.channels_last)
    for _ in range(2):
        cpu(x).sum().backward()
        tpu(x.to("tpu")).sum().backward()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_same(getattr(tpu, name), getattr(cpu, name), rtol=1e-5, atol=1e-5)
    assert_same(tpu.weight.grad, cpu.weight.grad, rtol=1e-4, atol=1e-4)
    cpu.eval(), tpu.eval()
    assert_same(tpu(x.to("tpu")), cpu(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_norm_dtypes(dtype):
    tol = tolerance(dtype)
    check(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        r(4, 3, 5, dtype=dtype),
        r(3, dtype=dtype),
        r(3, dtype=dtype),
        tol=tol,
    )
    check(
        lambda x, w, b: F.layer_norm(x, (6,), w, b),
        r(3, 4, 6, dtype=dtype),
        r(6, dtype=dtype),
        r(6, dtype=dtype),
        tol=tol,
    )
    check(
        lambda x, w, b: F.group_norm(x, 2, w, b),
        r(2, 4, 5, dtype=dtype),
        r(4, dtype=dtype),
        r(4, dtype=dtype),
        tol=tol,
    )


@pytest.mark.parametrize(
    "shape,normalized",
    [((4, 7), (7,)), ((2, 3, 5), (5,)), ((2, 3, 4, 5), (4, 5)), ((6,), (6,)), ((1, 1, 8), (1, 8))],
)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(shape, normalized, affine):
    params = {"both": [r(*normalized), r(*normalized)], "weight": [r(*normalized)], "none": []}[
        affine
    ]
    check(
        lambda x, *wb: F.layer_norm(x, normalized, *wb, eps=1e-4),
        r(*shape),
        *params,
        tol=tolerance(torch.float32),
    )


def test_layer_norm_saved_stats_and_view_input():
    x = torch.randn(3, 5, 4)
    got = torch.native_layer_norm(x.to("tpu"), [4], None, None, 1e-5)
    want = torch.native_layer_norm(x, [4], None, None, 1e-5)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    check(
        lambda x, w: F.layer_norm(x.transpose(0, 2), (3,), w),
        r(3, 5, 4),
        r(3),
        tol=tolerance(torch.float32),
    )


@pytest.mark.parametrize(
    "shape,groups", [((2, 6, 5), 3), ((1, 4, 3, 3), 2), ((3, 6), 6), ((2, 8, 2, 3, 2), 1)]
)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(shape, groups, affine):
    c = shape[1]
    params = [r(c), r(c)] if affine else []
    check(
        lambda x, *wb: F.group_norm(x, groups, *wb),
        r(*shape),
        *params,
        tol=tolerance(torch.float32),
    )


def test_group_norm_saved_stats():
    x = torch.randn(2, 6, 4)
    got = torch.ops.aten.native_group_norm(x.to("tpu"), None, None, 2, 6, 4, 3, 1e-5)
    want = torch.ops.aten.native_group_norm(x, None, None, 2, 6, 4, 3, 1e-5)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)


def test_backward_output_masks():
    x, gy = torch.randn(4, 3, 5), torch.randn(4, 3, 5)
    mean, rstd = x.mean((0, 2)), 1 / (x.var((0, 2), unbiased=False) + 1e-5).sqrt()
    w = torch.randn(3)
    for mask in ([True, False, False], [False, True, True], [True, True, True]):
        got = torch.ops.aten.native_batch_norm_backward(
            gy.to("tpu"),
            x.to("tpu"),
            w.to("tpu"),
            None,
            None,
            mean.to("tpu"),
            rstd.to("tpu"),
            True,
            1e-5,
            mask,
        )
        want = torch.ops.aten.native_batch_norm_backward(
            gy, x, w, None, None, mean, rstd, True, 1e-5, mask
        )
        # A masked-off result is whatever the meta kernel makes of it (None or a tensor).
        for g, c, m in zip(got, want, mask):
            if m:
                assert_same(g, c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,normalized", [((3, 5), (5,)), ((2, 3, 4, 6), (4, 6))])
def test_rms_norm(shape, normalized):
    # F.rms_norm decomposes (_fused_rms_norm is CompositeImplicitAutograd) into
    # elementwise ops and a mean before it reaches the backend.
    check(
        lambda x, w: F.rms_norm(x, normalized, w, eps=1e-5),
        r(*shape),
        r(*normalized),
        tol=tolerance(torch.float32),
    )
    check(lambda x: F.rms_norm(x, normalized), r(*shape), tol=tolerance(torch.float32))


def test_instance_norm():
    rm, rv = torch.zeros(3), torch.ones(3)
    check(
        lambda x, w, b: F.instance_norm(
            x, rm.to(x.device), rv.to(x.device), w, b, use_input_stats=True
        ),
        r(2, 3, 4, 5),
        r(3),
        r(3),
        tol=tolerance(torch.float32),
    )


def test_native_batch_norm_eval_returns_empty_saved_stats():
    x, w, b = torch.randn(4, 3, 5), torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    expected = torch.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    got = torch.native_batch_norm(*(t.to("tpu") for t in (x, w, b, rm, rv)), False, 0.1, 1e-5)
    for g, e in zip(got, expected):
        assert_same(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_with_update(affine):
    x = torch.randn(5, 3, 4, 3)
    w, b = (torch.randn(3), torch.randn(3)) if affine else (None, None)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    rm_t, rv_t = rm.to("tpu"), rv.to("tpu")
    dev = lambda t: None if t is None else t.to("tpu")
    expected = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)
    got = torch.ops.aten._batch_norm_with_update(x.to("tpu"), dev(w), dev(b), rm_t, rv_t, 0.1, 1e-5)
    for g, e in zip(got, expected):
        assert_same(g, e, rtol=1e-5, atol=1e-5)
    assert_same(rm_t, rm, rtol=1e-6, atol=1e-6)
    assert_same(rv_t, rv, rtol=1e-6, atol=1e-6)
