"""Nearest, nearest-exact, (bi/tri)linear, bicubic and antialiased upsampling against CPU,
values and input gradients, with sizes and with scale factors."""

import pytest
import torch
import torch.nn.functional as F

from helpers import eps_tol
from cpu_compare import check, tolerance

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype).requires_grad_()


TOL = tolerance(torch.float32, 1e-5)

CASES = [
    ((2, 3, 5), dict(scale_factor=2)),
    ((2, 3, 5), dict(size=12)),
    ((2, 3, 7), dict(size=4)),
    ((1, 2, 4, 5), dict(scale_factor=2.5)),
    ((1, 2, 4, 5), dict(size=(7, 3))),
    ((2, 1, 6, 6), dict(scale_factor=(0.7, 1.3))),
    ((1, 2, 3, 4, 5), dict(scale_factor=2)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7))),
]
LINEAR = {3: "linear", 4: "bilinear", 5: "trilinear"}


@pytest.mark.parametrize("shape,kw", CASES)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest(shape, kw, mode):
    check(lambda x: F.interpolate(x, mode=mode, **kw), r(*shape), tol=TOL)


@pytest.mark.parametrize("shape,kw", CASES)
@pytest.mark.parametrize("align_corners", [False, True])
def test_linear(shape, kw, align_corners):
    mode = LINEAR[len(shape)]
    check(
        lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw), r(*shape), tol=TOL
    )


def test_recompute_scale_factor_and_size_one():
    check(
        lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
        r(1, 2, 5, 4),
        tol=TOL,
    )
    check(
        lambda x: F.interpolate(x, size=(1, 6), mode="bilinear", align_corners=True),
        r(1, 2, 5, 4),
        tol=TOL,
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_dtypes(dtype):
    x = r(1, 2, 4, 5, dtype=dtype)
    check(lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), x, tol=tolerance(dtype))
    check(lambda x: F.interpolate(x, size=(6, 9), mode="bilinear"), x, tol=tolerance(dtype))


def test_channels_last_and_views():
    check(
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        r(2, 3, 4, 5),
        prep=lambda t: t.contiguous(memory_format=torch.channels_last),
        tol=TOL,
    )
    check(
        lambda x: F.interpolate(x[:, :, ::2], size=(5, 5), mode="nearest"), r(1, 3, 8, 4), tol=TOL
    )


CASES_2D = [c for c in CASES if len(c[0]) == 4] + [
    ((1, 3, 9, 11), dict(size=(4, 3))),  # shrinking: antialiasing widens the filter
    ((2, 1, 13, 7), dict(scale_factor=(0.3, 0.6))),
    ((1, 1, 5, 5), dict(size=(5, 5))),
]


@pytest.mark.parametrize("shape,kw", CASES_2D)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "mode,antialias",
    [("bicubic", False), ("bilinear", True), ("bicubic", True)],
    ids=["bicubic", "bilinear-aa", "bicubic-aa"],
)
def test_bicubic_and_antialiased(shape, kw, align_corners, mode, antialias):
    check(
        lambda x: F.interpolate(
            x, mode=mode, align_corners=align_corners, antialias=antialias, **kw
        ),
        r(*shape),
        tol=TOL,
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_bicubic_and_antialiased_dtypes(dtype):
    x = r(1, 2, 7, 6, dtype=dtype)
    # PyTorch's CPU kernels have no bf16 antialiasing to compare with.
    modes = [("bicubic", False)] + (
        [] if dtype == torch.bfloat16 else [("bilinear", True), ("bicubic", True)]
    )
    for mode, antialias in modes:
        check(
            lambda x: F.interpolate(x, size=(4, 9), mode=mode, antialias=antialias),
            x,
            tol=tolerance(dtype),
        )


# ---- grid_sample (grid_sampler_2d / grid_sampler_3d) ----


def grid(*shape, dtype=torch.float32, seed=0):
    # Past [-1, 1] on purpose, so every padding mode is exercised.
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g) * 2.6 - 1.3).to(dtype)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_grid_sample_2d(mode, padding_mode, align_corners, dtype):
    x = torch.randn(2, 3, 5, 7).to(dtype)
    g = grid(2, 4, 6, 2, dtype=dtype)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check(
        lambda x, g: F.grid_sample(x, g, **kw),
        x,
        g,
        backward=False,
        tol=tolerance(dtype, 1e-5) if dtype != torch.float16 else eps_tol(dtype, 2),
    )


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 4, 5, 3, dtype=torch.float64)
    g = grid(2, 3, 2, 5, 3, dtype=torch.float64, seed=1)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check(
        lambda x, g: F.grid_sample(x, g, **kw), x, g, backward=False, tol=tolerance(torch.float64)
    )


def test_grid_sample_exact_pixel_centres_and_size_one_dims():
    # An identity grid reads every element back; a size-1 dim reflects to 0.
    x = torch.randn(1, 2, 5, 3)
    theta = torch.tensor([[[1.0, 0, 0], [0, 1.0, 0]]])
    g = F.affine_grid(theta, (1, 2, 5, 3), align_corners=False)
    for mode in ("bilinear", "nearest", "bicubic"):
        out = check(
            lambda x, g: F.grid_sample(x, g, mode=mode, align_corners=False),
            x,
            g,
            backward=False,
            tol=TOL,
        )[0]
        if mode != "bicubic":
            torch.testing.assert_close(out.cpu(), x, **TOL)
    check(
        lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=True),
        torch.randn(1, 2, 1, 4),
        grid(1, 3, 3, 2, seed=2),
        backward=False,
        tol=TOL,
    )
