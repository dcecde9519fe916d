"""torch.tpu.ops (TorchTPU 0.2's names): max_pool1d/2d/3d and their backwards against
F.max_pool* and its CPU gradient (ties, padding, dilation, ceil mode, no batch, compiled),
the jagged helpers against the same calls on CPU nested tensors, and splash_sdpa
(causal, sliding window, GQA/MQA; values and gradients) against CPU attention with
hand-built masks."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401
from helpers import assert_same, rand, tol

POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}

# (spatial dims, input shape, kernel, stride, padding, dilation, ceil_mode)
POOL_CASES = [
    (1, (2, 3, 11), [3], [2], [1], [1], False),
    (1, (3, 10), 4, [], 0, 2, True),  # no batch; empty stride = kernel
    (2, (2, 3, 8, 8), [3, 3], [2, 2], [1, 1], [1, 1], False),
    (2, (1, 2, 7, 9), [2, 3], [2, 1], [0, 1], [1, 1], True),
    (2, (2, 9, 9), [3, 3], [1, 1], [1, 1], [2, 2], False),
    (3, (1, 2, 5, 6, 7), [2, 2, 2], [1, 2, 2], [1, 0, 1], [1, 1, 1], False),
    (3, (2, 1, 5, 5, 5), 3, 2, 0, 1, True),
]


def _cpu_pool(n, x, k, s, p, d, ceil, grad):
    s = k if s == [] else s
    leaf = x.clone().requires_grad_()
    out = POOL[n](leaf, k, s, p, d, ceil_mode=ceil)
    out.backward(grad)
    return out.detach(), leaf.grad


def _ops(n):
    ops = torch.tpu.ops
    return getattr(ops, f"max_pool{n}d"), getattr(ops, f"max_pool{n}d_backward")


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_and_backward(case, ties):
    n, shape, k, s, p, d, ceil = case
    # Small integers make many windows tie: the gradient goes to the first maximum.
    x = rand(shape, torch.int64).float() if ties else rand(shape, torch.float32)
    forward, backward = _ops(n)
    out_shape = POOL[n](x, k, k if s == [] else s, p, d, ceil_mode=ceil).shape
    grad = rand(out_shape, torch.float32, seed=1)
    expected, expected_grad = _cpu_pool(n, x, k, s, p, d, ceil, grad)
    xt = x.to("tpu")
    assert_same(forward(xt, k, s, p, d, ceil), expected)
    assert_same(backward(grad.to("tpu"), xt, k, s, p, d, ceil), expected_grad, **tol(torch.float32))


def test_max_pool_bf16_and_compiled(fresh_dynamo):
    x = rand((2, 3, 9, 8), torch.bfloat16)
    k, s, p, d = [3, 2], [2, 2], [1, 0], [1, 1]
    grad = rand((2, 3, 5, 4), torch.bfloat16, seed=1)
    expected, expected_grad = _cpu_pool(2, x, k, s, p, d, False, grad)
    forward, backward = _ops(2)

    def step(a, g):
        return forward(a, k, s, p, d, False), backward(g, a, k, s, p, d, False)

    for fn in (step, torch.compile(step, backend="tpu")):
        out, got = fn(x.to("tpu"), grad.to("tpu"))
        assert_same(out, expected)
        assert_same(got, expected_grad, **tol(torch.bfloat16))


def test_max_pool_checks_arguments():
    x = torch.zeros(2, 3, 8, 8, device="tpu")
    with pytest.raises(ValueError, match="kernel_size"):
        torch.tpu.ops.max_pool2d(x, [2, 2, 2], [1, 1], [0, 0], [1, 1], False)
    with pytest.raises(ValueError, match="dimensions"):
        torch.tpu.ops.max_pool3d(x[0, 0], [2], [1], [0], [1], False)


LENGTHS = (3, 5, 2)


def _nested(device, lengths=LENGTHS):
    parts = [rand((n, 4), torch.float32, seed=i) for i, n in enumerate(lengths)]
    return parts, torch.nested.nested_tensor([t.to(device) for t in parts], layout=torch.jagged)


def test_align_and_strip_jagged():
    from torch.tpu.ops import align_jagged_to_multiple, strip_jagged_padding

    parts, cpu = _nested("cpu")
    _, nt = _nested("tpu")
    aligned = align_jagged_to_multiple(nt, 8, padding_value=0.5)
    expected = align_jagged_to_multiple(cpu, 8, padding_value=0.5)
    assert aligned.values().shape == (16, 4) and aligned.is_nested
    assert_same(aligned.values(), expected.values())
    assert torch.equal(aligned.values()[10:].cpu(), torch.full((6, 4), 0.5))
    assert aligned.offsets() is nt.offsets() and aligned.shape[1] is nt.shape[1]
    assert align_jagged_to_multiple(nt, 5) is nt  # 10 rows already are a multiple
    # A layer runs on the padded buffer; stripping gives the unpadded layer's result.
    weight = rand((3, 4), torch.float32, seed=9)
    layer = F.linear(aligned, weight.to("tpu"))
    for stripped in (strip_jagged_padding(layer, 10), strip_jagged_padding(layer)):
        assert stripped.values().shape == (10, 3)
        for got, part in zip(stripped.unbind(), parts):
            assert_same(got, part @ weight.T, **tol(torch.float32))
    assert strip_jagged_padding(nt) is nt


def test_jagged_checks():
    from torch.tpu.ops import align_jagged_to_multiple, strip_jagged_padding

    _, nt = _nested("tpu")
    with pytest.raises(ValueError, match="jagged"):
        align_jagged_to_multiple(torch.zeros(4, 4, device="tpu"))
    with pytest.raises(ValueError, match="multiple"):
        align_jagged_to_multiple(nt, 0)
    with pytest.raises(ValueError, match="valid_tokens"):
        strip_jagged_padding(nt, 11)


def _reference_attention(q, k, v, allowed, scale=None):
    """softmax(q k^T * scale, masked to `allowed` [L, L]) v, the key/value heads repeated
    for their query heads: attention written out on CPU."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1) @ v


def _allowed(length, causal, window):
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    if window is not None:
        return (j <= i) & (j >= i - window)
    return j <= i if causal else torch.ones(length, length, dtype=torch.bool)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize(
    "causal,window", [(True, None), (False, None), (True, 2), (False, 0), (True, 100)]
)
def test_splash_sdpa(kv_heads, causal, window):
    L, D = 7, 8
    q = rand((2, 4, L, D), torch.float32, seed=1).requires_grad_()
    k = rand((2, kv_heads, L, D), torch.float32, seed=2).requires_grad_()
    v = rand((2, kv_heads, L, D), torch.float32, seed=3).requires_grad_()
    grad = rand((2, 4, L, D), torch.float32, seed=4)
    scale = 0.3 if window == 2 else None
    expected = _reference_attention(q, k, v, _allowed(L, causal, window), scale)
    expected.backward(grad)
    tq, tk, tv = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
    out = torch.tpu.ops.splash_sdpa(
        tq,
        tk,
        tv,
        scale=scale,
        is_causal=causal,
        local_window_size=window,
        enable_gqa=kv_heads != 4,
    )
    assert_same(out, expected.detach(), **tol(torch.float32, f32=1e-5))
    out.backward(grad.to("tpu"))
    for got, want in ((tq, q), (tk, k), (tv, v)):
        assert_same(got.grad, want.grad, **tol(torch.float32, f32=1e-5))


def test_splash_sdpa_compiled_and_bf16(fresh_dynamo):
    L, D = 9, 16
    q, k, v = (rand((1, 4, L, D), torch.bfloat16, seed=s) for s in (1, 2, 3))
    k, v = k[:, :2], v[:, :2]
    expected = _reference_attention(q.float(), k.float(), v.float(), _allowed(L, True, 3))
    fn = torch.compile(torch.tpu.ops.splash_sdpa, backend="tpu")
    out = fn(q.to("tpu"), k.to("tpu"), v.to("tpu"), local_window_size=3, enable_gqa=True)
    assert out.dtype == torch.bfloat16
    assert_same(out.float(), expected, **tol(torch.bfloat16))


def test_splash_sdpa_checks():
    q = torch.zeros(1, 4, 8, 8, device="tpu")
    kv = torch.zeros(1, 2, 8, 8, device="tpu")
    splash = torch.tpu.ops.splash_sdpa
    with pytest.raises(ValueError, match="enable_gqa"):
        splash(q, kv, kv)
    with pytest.raises(ValueError, match="enable_gqa"):
        splash(q, q, q, enable_gqa=True)
    with pytest.raises(ValueError, match="q_layout"):
        splash(q, q, q, q_layout="ROW")
    with pytest.raises(ValueError, match="block_q"):
        splash(q, q, q, block_q=0)
    with pytest.raises(ValueError, match="local_window_size"):
        splash(q, q, q, local_window_size=-1)
