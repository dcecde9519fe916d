"""Convolutions through convolution_overrideable / convolution_backward_overrideable:
values, input/weight/bias gradients and every output_mask, against CPU."""

import pytest
import torch
import torch.nn.functional as F

from cpu_compare import check, tolerance


def r(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


CASES = [
    # (conv fn, input shape, weight shape, kwargs)
    (F.conv1d, (2, 4, 11), (6, 2, 3), dict(dilation=2, groups=2)),
    (F.conv1d, (1, 3, 8), (5, 3, 4), dict(stride=3, padding=2)),
    (F.conv2d, (2, 3, 9, 9), (4, 3, 3, 3), dict(stride=2, padding=1)),
    (F.conv2d, (1, 4, 7, 8), (4, 1, 3, 2), dict(groups=4, padding=(1, 0), dilation=(2, 1))),
    (F.conv2d, (3, 6, 10, 7), (8, 3, 5, 3), dict(stride=(3, 2), groups=2)),  # rows left over
    (F.conv2d, (2, 3, 6, 6), (4, 3, 3, 3), dict(padding="same")),
    (F.conv3d, (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), dict(padding=1, stride=(1, 2, 2))),
    (F.conv3d, (2, 4, 4, 5, 4), (4, 2, 2, 3, 2), dict(groups=2, dilation=(1, 2, 1))),
]

TRANSPOSED = [
    (F.conv_transpose1d, (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (
        F.conv_transpose2d,
        (2, 4, 5, 5),
        (4, 3, 3, 3),
        dict(stride=2, padding=1, output_padding=1, groups=2),
    ),
    (F.conv_transpose2d, (1, 3, 4, 6), (3, 5, 2, 3), dict(stride=(3, 1), dilation=(1, 2))),
    (F.conv_transpose2d, (2, 2, 5, 5), (2, 2, 3, 3), dict(padding=2)),  # padding past the kernel
    (
        F.conv_transpose3d,
        (1, 2, 3, 4, 3),
        (2, 4, 3, 2, 3),
        dict(stride=2, padding=(1, 0, 1), output_padding=(1, 1, 0)),
    ),
]


@pytest.mark.parametrize("case", range(len(CASES + TRANSPOSED)))
def test_conv_values_and_grads(case):
    fn, xs, ws, kw = (CASES + TRANSPOSED)[case]
    bias = case % 2 == 0
    out_channels = (
        ws[1] * kw.get("groups", 1) if fn.__name__.startswith("conv_transpose") else ws[0]
    )
    args = [r(*xs), r(*ws)] + ([r(out_channels)] if bias else [])
    check(lambda x, w, *b: fn(x, w, *b, **kw), *args, tol=tolerance(torch.float32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_conv_dtypes(dtype):
    tol = tolerance(dtype)
    check(
        lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2),
        r(2, 4, 6, 6, dtype=dtype),
        r(6, 2, 3, 3, dtype=dtype),
        r(6, dtype=dtype),
        tol=tol,
    )
    check(
        lambda x, w: F.conv_transpose2d(x, w, stride=2),
        r(1, 3, 4, 4, dtype=dtype),
        r(3, 2, 3, 3, dtype=dtype),
        tol=tol,
    )


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(
    "mask",
    [
        (True, False, False),
        (False, True, False),
        (False, False, True),
        (True, True, False),
        (False, True, True),
        (True, True, True),
    ],
)
def test_backward_output_mask(transposed, mask):
    x, w = torch.randn(2, 4, 6, 6), torch.randn(4, 2, 3, 3)
    y = torch.ops.aten.convolution_overrideable(
        x.to("tpu"),
        w.to("tpu"),
        None,
        [2, 2],
        [1, 1],
        [1, 1],
        transposed,
        [1, 1] if transposed else [0, 0],
        2,
    )
    gy = torch.randn(y.shape)
    got = torch.ops.aten.convolution_backward_overrideable(
        gy.to("tpu"),
        x.to("tpu"),
        w.to("tpu"),
        [2, 2],
        [1, 1],
        [1, 1],
        transposed,
        [1, 1] if transposed else [0, 0],
        2,
        list(mask),
    )
    want = torch.ops.aten.convolution_backward(
        gy,
        x,
        w,
        [y.shape[1]],
        [2, 2],
        [1, 1],
        [1, 1],
        transposed,
        [1, 1] if transposed else [0, 0],
        2,
        list(mask),
    )
    for g, c, m in zip(got, want, mask):
        assert (g is not None) == m
        if m:
            torch.testing.assert_close(g.cpu(), c, rtol=1e-4, atol=1e-4)


def test_channels_last_and_views():
    tol = tolerance(torch.float32)
    check(
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        r(2, 3, 7, 6),
        r(5, 3, 3, 3),
        r(5),
        prep=lambda t: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t,
        tol=tol,
    )
    check(
        lambda x, w: F.conv2d(x.transpose(2, 3)[:, :, ::2], w),
        r(2, 3, 9, 10),
        r(4, 3, 2, 2),
        tol=tol,
    )


def test_module_training_step():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2)
    )
    tpu = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2)
    ).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 3, 12, 12)
    cpu(x).sum().backward()
    tpu(x.to("tpu")).sum().backward()
    for pc, pt in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(pt.grad.cpu(), pc.grad, rtol=1e-4, atol=1e-4)


def test_empty_batch():
    check(lambda x, w: F.conv2d(x, w), r(0, 3, 5, 5), r(4, 3, 3, 3), backward=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    "kernel,dilation,padding,stride",
    [
        ((2, 3), 1, 0, 1),
        ((3, 3), (2, 1), (1, 2), (2, 3)),
        ((1, 1), 1, 0, 1),
        ((3, 2), 1, 1, (1, 2)),
    ],
)
def test_unfold_and_fold(dtype, kernel, dilation, padding, stride):
    import torch.nn.functional as F

    t = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    x = torch.randn(2, 3, 7, 9, dtype=dtype, requires_grad=dtype != torch.bfloat16)
    args = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    check(lambda v: F.unfold(v, **args), x, tol=t, backward=x.requires_grad)
    # Unbatched input, and fold of the columns back to the image (with overlaps summed).
    check(lambda v: F.unfold(v, **args), x.detach()[0], tol=t, backward=False)
    cols = F.unfold(x.detach(), **args).requires_grad_(x.requires_grad)
    check(lambda v: F.fold(v, output_size=(7, 9), **args), cols, tol=t, backward=cols.requires_grad)
    check(lambda v: F.fold(v, output_size=(7, 9), **args), cols.detach()[0], tol=t, backward=False)
