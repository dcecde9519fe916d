"""`torch.tpu.ops.max_pool{1,2,3}d` and their backwards (TorchTPU 0.2): max pooling
without an index tensor, and its input gradient with the positions of the maxima found
again from the input.

Both are written with the ATen ops the lowering table has (`max_pool{2,3}d_with_indices`
and their backwards; 1-d pooling is 2-d pooling over a height of 1), so they run in every
eager mode and inside compiled graphs. In a compiled graph, or a fused group, the indices
the backward needs are an intermediate value of one program, never an output."""

from __future__ import annotations

from typing import Sequence, Union

import torch
import torch.nn.functional as F

_Size = Union[int, Sequence[int]]


def _sizes(op: str, what: str, value: _Size, n: int, default=None) -> list:
    """`value` as n ints: an int or a sequence of 1 or n ints (empty: `default`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    values = [int(v) for v in value]
    if not values and default is not None:
        return list(default)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"{op}: {what} must be an int or {n} ints, got {list(value)}")
    return values


def _args(op: str, n: int, input, kernel_size, stride, padding, dilation):
    if not isinstance(input, torch.Tensor) or input.dim() not in (n + 1, n + 2):
        shape = tuple(input.shape) if isinstance(input, torch.Tensor) else type(input)
        raise ValueError(f"{op}: input must have {n + 1} or {n + 2} dimensions, got {shape}")
    kernel = _sizes(op, "kernel_size", kernel_size, n)
    return (
        kernel,
        _sizes(op, "stride", stride, n, default=kernel),
        _sizes(op, "padding", padding, n),
        _sizes(op, "dilation", dilation, n),
    )


_SHAPES = {
    1: "(N, C, L) or (C, L)",
    2: "(N, C, H, W) or (C, H, W)",
    3: "(N, C, D, H, W) or (C, D, H, W)",
}


def _forward(n: int):
    op = F.max_pool1d if n == 1 else F.max_pool2d if n == 2 else F.max_pool3d

    def max_pool(input, kernel_size, stride, padding, dilation, ceil_mode: bool):  # noqa: A002
        k, s, p, d = _args(f"max_pool{n}d", n, input, kernel_size, stride, padding, dilation)
        return op(input, k, s, p, d, ceil_mode=bool(ceil_mode))

    max_pool.__name__ = max_pool.__qualname__ = f"max_pool{n}d"
    max_pool.__doc__ = f"""{n}-d max pooling of `input` {_SHAPES[n]} without indices:
    `F.max_pool{n}d`'s values. `kernel_size`, `stride`, `padding` (implicit -inf on both
    sides) and `dilation` are ints or sequences of 1 or {n} ints; an empty `stride` is
    `kernel_size`. Its gradient: `max_pool{n}d_backward`."""
    return max_pool


max_pool1d, max_pool2d, max_pool3d = _forward(1), _forward(2), _forward(3)


def _backward(n: int, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode):
    op = f"max_pool{n}d_backward"
    k, s, p, d = _args(op, n, input, kernel_size, stride, padding, dilation)
    ceil_mode = bool(ceil_mode)
    if n == 1:  # as 2-d pooling over a height of 1
        grad = _backward(
            2,
            grad_output.unsqueeze(-2),
            input.unsqueeze(-2),
            [1, k[0]],
            [1, s[0]],
            [0, p[0]],
            [1, d[0]],
            ceil_mode,
        )
        return grad.squeeze(-2)
    aten = torch.ops.aten
    forward = aten.max_pool2d_with_indices if n == 2 else aten.max_pool3d_with_indices
    backward = (
        aten.max_pool2d_with_indices_backward if n == 2 else aten.max_pool3d_with_indices_backward
    )
    with torch.no_grad():
        _, indices = forward(input, k, s, p, d, ceil_mode)
        return backward(grad_output, input, k, s, p, d, ceil_mode, indices)


def _gradient(n: int):
    def max_pool_backward(
        grad_output, input, kernel_size, stride, padding, dilation, ceil_mode: bool  # noqa: A002
    ):
        return _backward(n, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode)

    max_pool_backward.__name__ = max_pool_backward.__qualname__ = f"max_pool{n}d_backward"
    max_pool_backward.__doc__ = f"""The gradient of `max_pool{n}d` with respect to `input`
    (its shape), given the gradient of its output and the arguments it was called with:
    each window's gradient goes to the position of its maximum (the first, on ties), as
    `F.max_pool{n}d`'s backward."""
    return max_pool_backward


max_pool1d_backward, max_pool2d_backward, max_pool3d_backward = map(_gradient, (1, 2, 3))
