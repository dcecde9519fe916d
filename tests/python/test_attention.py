"""scaled_dot_product_attention on tpu (the fused op for out-of-tree backends; the math
path with dropout), eager and in compiled graphs, forward and backward, against CPU."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import LOW, assert_same, tol as shared_tol

tol = functools.partial(shared_tol, f32=1e-4, f64=3e-2, low=3e-2)


def inputs(b, hq, hkv, l, s, e, ev=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    ev = ev or e
    cpu = [
        torch.randn(b, hq, l, e, generator=g),
        torch.randn(b, hkv, s, e, generator=g),
        torch.randn(b, hkv, s, ev, generator=g),
    ]
    cpu = [t.to(dtype).requires_grad_() for t in cpu]
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    return cpu, tpu


@pytest.fixture(params=["eager", "compiled"])
def attend(request):
    """Attention on tpu eagerly, or as one compiled graph (forward and backward)."""
    if request.param == "eager":
        return F.scaled_dot_product_attention
    torch._dynamo.reset()  # each test's shapes and flags compile afresh (no recompile limit)
    return torch.compile(F.scaled_dot_product_attention, backend="tpu", fullgraph=True)


def compare(cpu, tpu, dtype, attend=F.scaled_dot_product_attention, **kwargs):
    """Half types are compared with CPU's float32 attention rounded once (CPU's own bf16
    kernels differ between processors)."""
    mask = kwargs.pop("attn_mask", None)
    if dtype in LOW:
        cpu = [c.detach().float().requires_grad_() for c in cpu]
    out_c = F.scaled_dot_product_attention(*cpu, attn_mask=mask, **kwargs)
    out_t = attend(*tpu, attn_mask=None if mask is None else mask.to("tpu"), **kwargs)
    assert_same(out_t, out_c.detach().to(dtype), **tol(dtype))
    grad = torch.randn(out_c.shape, generator=torch.Generator().manual_seed(9)).to(dtype)
    out_c.backward(grad.to(out_c.dtype))
    out_t.backward(grad.to("tpu"))
    for c, t in zip(cpu, tpu):
        assert_same(t.grad, c.grad.to(dtype), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_plain_and_causal(dtype, causal, attend):
    cpu, tpu = inputs(2, 3, 3, 5, 7, 8, dtype=dtype)
    compare(cpu, tpu, dtype, attend, is_causal=causal)


def test_boolean_mask_broadcast(attend):
    cpu, tpu = inputs(2, 2, 2, 4, 6, 8, ev=5)
    mask = torch.rand(4, 6, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[:, 0] = True  # every query sees at least one key
    compare(cpu, tpu, torch.float32, attend, attn_mask=mask)


def test_fully_masked_row_is_zero_like_cpu(attend):
    cpu, tpu = inputs(1, 1, 1, 3, 4, 8)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    compare(cpu, tpu, torch.float32, attend, attn_mask=mask)


def test_float_mask_and_scale(attend):
    cpu, tpu = inputs(2, 2, 2, 5, 5, 4)
    bias = torch.randn(2, 1, 5, 5, generator=torch.Generator().manual_seed(4))
    compare(cpu, tpu, torch.float32, attend, attn_mask=bias, scale=0.3)


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention(causal, attend):
    cpu, tpu = inputs(2, 6, 2, 5, 5, 8)
    compare(cpu, tpu, torch.float32, attend, is_causal=causal, enable_gqa=True)


def test_three_dim_inputs(attend):
    g = torch.Generator().manual_seed(5)
    cpu = [torch.randn(3, 4, 8, generator=g).requires_grad_() for _ in range(3)]
    tpu = [t.detach().to("tpu").requires_grad_() for t in cpu]
    compare(cpu, tpu, torch.float32, attend)


def test_dropout_is_seeded_and_is_the_math_path_with_that_mask():
    p = 0.3
    cpu, tpu = inputs(2, 2, 2, 4, 6, 8)
    q, k, v = tpu
    torch.manual_seed(11)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    torch.manual_seed(11)
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    assert torch.equal(out.detach().cpu(), again.detach().cpu())
    # The math path's only draw is one native_dropout over the [B, H, L, S] weights, so
    # the same seed reproduces its mask.
    torch.manual_seed(11)
    _, mask = torch.ops.aten.native_dropout(torch.ones(2, 2, 4, 6, device="tpu"), p, True)
    mask = mask.cpu()
    assert 0.4 < mask.float().mean() < 0.95
    qc, kc, vc = cpu
    weights = torch.softmax(qc @ kc.transpose(-2, -1) / math.sqrt(8), -1)
    expected = (weights * mask / (1 - p)) @ vc
    assert_same(out, expected.detach(), rtol=1e-4, atol=1e-5)
    grad = torch.randn(out.shape)
    out.backward(grad.to("tpu"))
    expected.backward(grad)
    for c, t in zip(cpu, tpu):
        assert_same(t.grad, c.grad, rtol=1e-4, atol=1e-5)


def test_eager_runs_the_fused_op_and_math_stays_selectable():
    """Eager attention is PyTorch's fused op for out-of-tree backends (one op DTensor can
    shard, see dist_training.dtensor_attention); sdpa_kernel(MATH) still picks the math
    path."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func.__name__)
            return func(*args, **(kwargs or {}))

    _, (q, k, v) = inputs(1, 2, 2, 3, 3, 4)
    fused = "_scaled_dot_product_fused_attention_overrideable.default"
    with Ops() as seen:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert fused in seen.names and fused.replace(".default", "_backward.default") in seen.names
    with sdpa_kernel(SDPBackend.MATH), Ops() as seen:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert fused not in seen.names, seen.names


def test_compiled_graphs_hold_the_fused_attention():
    """In a compiled graph attention is the fused op, decomposed by the backend's table
    into the ops eager mode runs it with (log-sum-exp, no softmax), forward and backward:
    one graph each, no split."""
    import torch_tpu
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch_tpu._dynamo import decompositions

    seen = []

    def record(gm, _):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return make_boxed_func(gm)

    torch._dynamo.reset()  # static shapes (graphs with symbolic sizes keep the math path)
    recording = aot_autograd(
        fw_compiler=record, bw_compiler=record, decompositions=decompositions()
    )
    _, (q, k, v) = inputs(1, 4, 2, 3, 3, 4)
    f = torch.compile(F.scaled_dot_product_attention, backend=recording, fullgraph=True)
    f(q, k, v, is_causal=True, enable_gqa=True).sum().backward()
    assert "aten.logsumexp.default" in seen and "aten._softmax.default" not in seen, seen

    before = torch_tpu.metrics.snapshot()
    compiled = torch.compile(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        backend="tpu",
        fullgraph=True,
    )
    _, (q, k, v) = inputs(1, 2, 2, 3, 3, 4)
    compiled(q, k, v).sum().backward()
    after = torch_tpu.metrics.snapshot()
    assert after["graphs"] - before["graphs"] == 2
    assert after["graph_splits"] == before["graph_splits"]
