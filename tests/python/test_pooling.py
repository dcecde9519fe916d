"""Max, average and adaptive pooling against CPU: values, indices (exactly CPU's) and
input gradients."""

import pytest
import torch
import torch.nn.functional as F

from cpu_compare import check, tolerance

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)


def r(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


TOL = tolerance(torch.float32, 1e-5)

MAX_CASES = [
    (F.max_pool2d, (2, 3, 8, 8), dict(kernel_size=3, stride=2, padding=1)),
    (F.max_pool2d, (1, 2, 7, 9), dict(kernel_size=(2, 3), stride=(2, 1), ceil_mode=True)),
    (F.max_pool2d, (2, 2, 9, 9), dict(kernel_size=3, dilation=2, padding=1)),
    (F.max_pool2d, (3, 7, 7), dict(kernel_size=2)),  # no batch dim
    (F.max_pool3d, (1, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2), padding=(1, 0, 1))),
    (F.max_pool3d, (2, 1, 5, 5, 5), dict(kernel_size=3, stride=2, ceil_mode=True)),
    (F.max_pool1d, (2, 3, 11), dict(kernel_size=3, stride=2, padding=1)),
]


@pytest.mark.parametrize("fn,shape,kw", MAX_CASES)
def test_max_pool_values_indices_grads(fn, shape, kw):
    check(lambda x: fn(x, return_indices=True, **kw), r(*shape), tol=TOL)


def test_max_pool_ties_infinities_and_nan():
    x = torch.tensor(
        [
            [
                [
                    [1.0, 1.0, 2.0, 2.0],
                    [1.0, 1.0, 2.0, 2.0],
                    [float("-inf")] * 4,
                    [float("-inf"), float("nan"), 0.0, float("nan")],
                ]
            ]
        ]
    )
    check(
        lambda x: F.max_pool2d(x, 2, return_indices=True),
        x,
        backward=False,
        tol=dict(rtol=0, atol=0, equal_nan=True),
    )
    check(
        lambda x: F.max_pool2d(x, 3, stride=1, padding=1, return_indices=True),
        torch.zeros(1, 1, 4, 5),
        backward=False,
    )  # all ties: the first element wins


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_pool_dtypes(dtype):
    tol = tolerance(dtype)
    x = torch.randn(2, 3, 6, 6, dtype=dtype, requires_grad=True)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), x, tol=tol)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), x, tol=tol)
    check(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), x, tol=tol)


AVG_CASES = [
    (F.avg_pool2d, (2, 3, 8, 8), dict(kernel_size=3, stride=2, padding=1)),
    (F.avg_pool2d, (2, 3, 8, 8), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    (F.avg_pool2d, (1, 2, 7, 9), dict(kernel_size=(2, 3), stride=2, padding=1, ceil_mode=True)),
    (
        F.avg_pool2d,
        (1, 2, 7, 9),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    ),
    (F.avg_pool2d, (2, 6, 5), dict(kernel_size=2, divisor_override=3)),
    (F.avg_pool3d, (1, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2), padding=1)),
    (
        F.avg_pool3d,
        (1, 2, 5, 5, 5),
        dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False),
    ),
    (F.avg_pool1d, (2, 3, 10), dict(kernel_size=4, stride=3, padding=2)),
]


@pytest.mark.parametrize("fn,shape,kw", AVG_CASES)
def test_avg_pool(fn, shape, kw):
    check(lambda x: fn(x, **kw), r(*shape), tol=TOL)


@pytest.mark.parametrize(
    "shape,out",
    [
        ((2, 3, 8, 9), (3, 5)),
        ((1, 2, 7, 7), (7, 7)),
        ((2, 5, 6), (4, 4)),
        ((1, 2, 10, 3), (3, 2)),
        ((2, 3, 6, 6), (1, 1)),
        ((1, 2, 3, 2), (5, 4)),
    ],
)
def test_adaptive_pool_2d(shape, out):
    check(lambda x: F.adaptive_avg_pool2d(x, out), r(*shape), tol=TOL)
    check(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), r(*shape), tol=TOL)


@pytest.mark.parametrize("out", [(2, 3, 4), (1, 1, 1)])
def test_adaptive_pool_3d(out):
    check(lambda x: F.adaptive_avg_pool3d(x, out), r(1, 2, 5, 6, 7), tol=TOL)
    check(lambda x: F.adaptive_max_pool3d(x, out, return_indices=True), r(2, 5, 6, 7), tol=TOL)


def test_pooling_channels_last_and_views():
    channels_last = lambda t: t.contiguous(memory_format=torch.channels_last)
    check(
        lambda x: F.max_pool2d(x, 3, 2, return_indices=True),
        r(2, 3, 9, 8),
        prep=channels_last,
        tol=TOL,
    )
    check(lambda x: F.avg_pool2d(x, 2), r(2, 3, 9, 8), prep=channels_last, tol=TOL)
    check(lambda x: F.adaptive_avg_pool2d(x.transpose(2, 3), (2, 3)), r(1, 3, 9, 8), tol=TOL)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_max_pool_integers_with_padding(dtype):
    x = torch.randint(0, 100, (2, 3, 7, 6)).to(dtype)
    out_c = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
    out_t = torch.nn.functional.max_pool2d(x.to("tpu"), 3, stride=2, padding=1)
    assert torch.equal(out_t.cpu(), out_c)


@pytest.mark.parametrize(
    "dim,shape,kw",
    [
        (2, (2, 3, 7, 9), dict(kernel_size=2)),
        (2, (1, 3, 6, 4), dict(kernel_size=2)),
        (2, (1, 2, 8, 5), dict(kernel_size=(3, 2), stride=(2, 1), padding=1)),
        (3, (1, 2, 5, 6, 7), dict(kernel_size=2)),
        (3, (2, 1, 4, 5, 3), dict(kernel_size=(2, 3, 1), stride=(2, 2, 1), padding=(1, 1, 0))),
    ],
    ids=["2d", "2d-even", "2d-overlap-pad", "3d", "3d-pad"],
)
def test_max_unpool(dim, shape, kw):
    pool, unpool = getattr(F, f"max_pool{dim}d"), getattr(F, f"max_unpool{dim}d")
    x = r(*shape)
    size = shape[-dim:]
    check(
        lambda v: unpool(*pool(v, return_indices=True, **kw), output_size=size, **kw),
        x,
        tol=tolerance(torch.float32),
    )
    if all(s % 2 == 0 for s in size) and kw == dict(kernel_size=2):
        # Without output_size: the size the pooling parameters give back.
        check(
            lambda v: unpool(*pool(v, return_indices=True, **kw), **kw),
            x,
            tol=tolerance(torch.float32),
        )


# ---- fractional max pooling (the samples given, as OpInfo passes them) ----

FRACTIONAL_CASES = [
    (F.fractional_max_pool2d, (2, 3, 9, 7), dict(kernel_size=2, output_size=(4, 5))),
    (
        F.fractional_max_pool2d,
        (3, 11, 8),
        dict(kernel_size=(3, 2), output_ratio=(0.5, 0.5)),
    ),  # no batch
    (F.fractional_max_pool2d, (1, 2, 5, 5), dict(kernel_size=3, output_size=1)),
    (F.fractional_max_pool3d, (2, 2, 7, 6, 5), dict(kernel_size=2, output_size=(3, 4, 2))),
    (F.fractional_max_pool3d, (2, 5, 6, 7), dict(kernel_size=(1, 2, 3), output_size=3)),
]


@pytest.mark.parametrize("fn,shape,kw", FRACTIONAL_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fractional_max_pool(fn, shape, kw, dtype):
    spatial = 2 if fn is F.fractional_max_pool2d else 3
    batch = shape[0] if len(shape) == spatial + 2 else 1
    samples = torch.rand(
        batch, shape[-spatial - 1], spatial, generator=torch.Generator().manual_seed(7)
    )
    x = r(*shape, dtype=dtype)
    check(
        lambda x, s: fn(x, return_indices=True, _random_samples=s, **kw),
        x,
        samples.to(dtype),
        tol=tolerance(dtype, 1e-5),
    )


def test_fractional_max_pool_nan_and_ties():
    x = torch.tensor(
        [
            [
                [
                    [1.0, 1.0, 2.0, float("nan")],
                    [1.0, 1.0, 2.0, 2.0],
                    [float("-inf")] * 4,
                    [0.0, float("nan"), 0.0, 0.0],
                ]
            ]
        ]
    )
    s = torch.tensor([[[0.3, 0.8]]])
    check(
        lambda x, s: F.fractional_max_pool2d(
            x, 2, output_size=2, return_indices=True, _random_samples=s
        ),
        x,
        s,
        backward=False,
        tol=dict(rtol=0, atol=0, equal_nan=True),
    )
