"""Runs a function on CPU and on tpu copies of the same inputs and compares the results
and the gradients of every input that requires grad (shared by the nn-op test files).

float16/bfloat16 results are compared with the CPU result computed in float32 and rounded
once to the low dtype, never with CPU's own low-precision kernels: those round
intermediate results differently on different processors (native f16 arithmetic with
AVX512-FP16 and AMX on Intel, float32 arithmetic elsewhere), so a test tuned against them
on one machine fails on another."""

import torch

from helpers import LOW, assert_same, tol


def tolerance(dtype, f32=1e-4):
    """The nn-op files' tolerances: bf16 results get four times the absolute slack."""
    out = tol(dtype, f32=f32, f64=1e-9)
    if dtype == torch.bfloat16:
        out["atol"] *= 4
    return out


def _copy(a, device, prep, upcast=False):
    if not isinstance(a, torch.Tensor):
        return a
    t = a.detach().to(device)
    if upcast and t.dtype in LOW:
        t = t.float()
    if prep is not None:
        t = prep(t)
    return t.requires_grad_(a.requires_grad)


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def _rounded(ref, like):
    """`ref` (computed from float32 inputs) in the dtype CPU's own run gave (`like`)."""
    if ref is None or not like.is_floating_point():
        return like
    return ref.detach().to(like.dtype)


def check(fn, *inputs, tol=None, prep=None, backward=True):
    """Compares fn's outputs (tensors or tuples of them) and the inputs' gradients.

    `prep` turns each tensor input into the layout under test (channels_last, a view)
    on both devices before it becomes a leaf. With float16/bfloat16 inputs, CPU's own
    run gives only the expected dtypes (and integer results); the expected values come
    from float32 inputs, rounded to those dtypes."""
    cpu_in = [_copy(a, "cpu", prep) for a in inputs]
    tpu_in = [_copy(a, "tpu", prep) for a in inputs]
    outs_c, outs_t = _outputs(fn(*cpu_in)), _outputs(fn(*tpu_in))
    low = any(isinstance(a, torch.Tensor) and a.dtype in LOW for a in inputs)
    ref_in = [_copy(a, "cpu", prep, upcast=True) for a in inputs] if low else cpu_in
    outs_r = _outputs(fn(*ref_in)) if low else outs_c
    tol = tol or {}
    for t, c, r in zip(outs_t, outs_c, outs_r):
        if c is None:
            continue
        assert_same(t, _rounded(r, c), **(tol if c.is_floating_point() else {}))
    if not backward:
        return outs_t
    diff = [(t, r) for t, c, r in zip(outs_t, outs_c, outs_r) if c is not None and c.requires_grad]
    grads = [torch.randn_like(t, device="cpu") for t, _ in diff]
    torch.autograd.backward([r for _, r in diff], [g.to(r.dtype) for g, (_, r) in zip(grads, diff)])
    torch.autograd.backward([t for t, _ in diff], [g.to("tpu") for g in grads])
    for a, r, t in zip(inputs, ref_in, tpu_in):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            assert_same(t.grad, r.grad.to(a.dtype), **tol)
    return outs_t
