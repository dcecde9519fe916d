"""torch.nn.attention.flex_attention on tpu, eager and compiled (`backend="tpu"`: one
program per graph, no split around the attention), forward and backward, against a dense
attention computed by plain CPU ops (CPU's flex_attention has no backward)."""

import functools

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torch_tpu
from helpers import LOW, assert_same, tol as shared_tol

tol = functools.partial(shared_tol, f32=1e-4, low=3e-2)


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv < 5)


def relative_bias(score, b, h, q, kv):
    return score + (q - kv) * 0.1


def soft_cap(score, b, h, q, kv):
    return 5.0 * torch.tanh(score / 5.0)


def head_bias(table):
    """A score function reading a captured tensor (one bias per head)."""

    def mod(score, b, h, q, kv):
        return score + table[h] * (kv - q)

    return mod


def reference(q, k, v, score_mod=None, mask_mod=None, scale=None, gqa=False):
    """Dense attention by plain ops, the index grid broadcast instead of vmapped."""
    if gqa:
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    B, H, L, E = q.shape
    S = k.size(2)
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(H).view(1, H, 1, 1)
    qi = torch.arange(L).view(1, 1, L, 1)
    kv = torch.arange(S).view(1, 1, 1, S)
    scores = (q.float() @ k.float().transpose(-2, -1)) * (scale or E**-0.5)
    if score_mod is not None:
        scores = score_mod(scores, b, h, qi, kv)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, qi, kv).expand_as(scores), float("-inf"))
    return (scores.softmax(-1).to(q.dtype) @ v), scores


def inputs(b, hq, hkv, l, s, e, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.randn(b, h, n, e, generator=g).to(dtype) for h, n in ((hq, l), (hkv, s), (hkv, s))]
    cpu = [t.requires_grad_() for t in cpu]
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    return cpu, tpu


def check(call, cpu, tpu, dtype, ref_kwargs, tpu_kwargs, compiled=False):
    if dtype in LOW:
        cpu = [c.detach().float().requires_grad_() for c in cpu]
    expected, _ = reference(*cpu, **ref_kwargs)
    fn = functools.partial(flex_attention, **tpu_kwargs)
    if compiled:
        fn = torch.compile(fn, backend="tpu", fullgraph=True)
    out = call(fn, *tpu)
    assert out.device.type == "tpu"
    assert_same(out, expected.detach().to(dtype), **tol(dtype))
    grad = torch.randn(expected.shape, generator=torch.Generator().manual_seed(7))
    expected.backward(grad.to(expected.dtype))
    out.backward(grad.to(dtype).to("tpu"))
    for c, t in zip(cpu, tpu):
        assert_same(t.grad, c.grad.to(dtype), **tol(dtype))


def plain_call(fn, q, k, v):
    return fn(q, k, v)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize(
    "score_mod,mask_mod",
    [(None, causal), (relative_bias, None), (relative_bias, causal), (soft_cap, sliding)],
    ids=["causal", "bias", "bias-causal", "softcap-sliding"],
)
def test_score_and_mask_functions(score_mod, mask_mod, compiled):
    L = S = 24
    cpu, tpu = inputs(2, 3, 3, L, S, 16)
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, None, None, L, S, device="tpu")
    check(
        plain_call,
        cpu,
        tpu,
        torch.float32,
        dict(score_mod=score_mod, mask_mod=mask_mod),
        dict(score_mod=score_mod, block_mask=block_mask),
        compiled,
    )


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_grouped_query_and_captured_tensor(compiled):
    L, S = 8, 20  # fewer queries than keys: decode-like
    cpu, tpu = inputs(1, 4, 2, L, S, 8, seed=1)
    table = torch.tensor([0.5, -0.25, 1.0, 0.1])
    check(
        plain_call,
        cpu,
        tpu,
        torch.float32,
        dict(score_mod=head_bias(table), gqa=True, scale=0.3),
        dict(score_mod=head_bias(table.to("tpu")), enable_gqa=True, scale=0.3),
        compiled,
    )


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_bfloat16(compiled):
    cpu, tpu = inputs(2, 2, 2, 16, 16, 8, dtype=torch.bfloat16, seed=2)
    block_mask = create_block_mask(causal, None, None, 16, 16, device="tpu")
    check(
        plain_call,
        cpu,
        tpu,
        torch.bfloat16,
        dict(mask_mod=causal),
        dict(block_mask=block_mask),
        compiled,
    )


def test_logsumexp_and_max_scores():
    """The auxiliary outputs (CPU's flex_attention cannot return the maximum)."""
    cpu, tpu = inputs(1, 2, 2, 12, 12, 8, seed=3)
    _, scores = reference(*cpu, score_mod=relative_bias, mask_mod=causal)
    block_mask = create_block_mask(causal, None, None, 12, 12, device="tpu")
    _, aux = flex_attention(
        *tpu,
        score_mod=relative_bias,
        block_mask=block_mask,
        return_aux=AuxRequest(lse=True, max_scores=True),
    )
    assert_same(aux.lse, scores.logsumexp(-1).detach(), **tol(torch.float32))
    assert_same(aux.max_scores, scores.amax(-1).detach(), **tol(torch.float32))


def test_compiled_attention_is_one_program_per_graph():
    """The attention is part of the graph's programs: no split around it, no op-by-op
    fallback (before, the flex_attention op split the graph and ran eagerly)."""
    cpu, tpu = inputs(1, 2, 2, 16, 16, 8, seed=4)
    block_mask = create_block_mask(causal, None, None, 16, 16, device="tpu")

    def layer(q, k, v):
        return flex_attention(q * 2, k, v, score_mod=relative_bias, block_mask=block_mask).sum()

    before = torch_tpu.metrics.snapshot()
    torch.compile(layer, backend="tpu", fullgraph=True)(*tpu).backward()
    after = torch_tpu.metrics.snapshot()
    assert after["graphs"] - before["graphs"] == 2  # forward and backward
    assert after["graph_splits"] == before["graph_splits"]
    assert after["graph_fallbacks"] == before["graph_fallbacks"]
    expected, _ = reference(cpu[0] * 2, *cpu[1:], score_mod=relative_bias, mask_mod=causal)
    expected.sum().backward()
    for c, t in zip(cpu, tpu):
        assert_same(t.grad, c.grad, **tol(torch.float32))


def test_other_devices_keep_pytorchs_check():
    q = torch.empty(1, 1, 4, 8, device="meta")
    with pytest.raises(ValueError, match="only supported on CUDA, CPU"):
        flex_attention(q, q, q)
