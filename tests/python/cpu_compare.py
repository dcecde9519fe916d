"""Runs a function on CPU and on tpu copies of the same inputs and compares the results
and the gradients of every input that requires grad (shared by the nn-op test files)."""
import torch

from conftest import assert_same, tol


def tolerance(dtype, f32=1e-4):
    """The nn-op files' tolerances: bf16 results get four times the absolute slack."""
    out = tol(dtype, f32=f32, f64=1e-9)
    if dtype == torch.bfloat16:
        out["atol"] *= 4
    return out


def _copy(a, device, prep):
    if not isinstance(a, torch.Tensor):
        return a
    t = a.detach().to(device)
    if prep is not None:
        t = prep(t)
    return t.requires_grad_(a.requires_grad)


def check(fn, *inputs, tol=None, prep=None, backward=True):
    """Compares fn's outputs (tensors or tuples of them) and the inputs' gradients.

    `prep` turns each tensor input into the layout under test (channels_last, a view)
    on both devices before it becomes a leaf."""
    cpu_in = [_copy(a, "cpu", prep) for a in inputs]
    tpu_in = [_copy(a, "tpu", prep) for a in inputs]
    out_c, out_t = fn(*cpu_in), fn(*tpu_in)
    outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
    outs_t = out_t if isinstance(out_t, tuple) else (out_t,)
    tol = tol or {}
    for t, c in zip(outs_t, outs_c):
        if c is None:
            continue
        assert_same(t, c, **(tol if c.is_floating_point() else {}))
    if not backward:
        return outs_t
    diff = [(t, c) for t, c in zip(outs_t, outs_c) if c is not None and c.requires_grad]
    grads = [torch.randn_like(c) for _, c in diff]
    torch.autograd.backward([c for _, c in diff], grads)
    torch.autograd.backward([t for t, _ in diff], [g.to("tpu") for g in grads])
    for a, c, t in zip(inputs, cpu_in, tpu_in):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            assert_same(t.grad, c.grad, **tol)
    return outs_t
