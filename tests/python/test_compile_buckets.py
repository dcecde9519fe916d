"""Bounded dynamic shapes in compiled graphs (torch_tpu/_buckets.py): a graph traced with
a dynamic dimension compiles one program per bucket of its size and runs at the real
size. Values and gradients equal CPU PyTorch for sizes on, between and at the ends of
buckets; graphs that would not stay exact keep one program per shape and say why."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _buckets

pytestmark = pytest.mark.single_mode

SIZES = [2, 3, 7, 8, 9, 15, 16, 17]  # buckets 8, 8, 8, 8, 16, 16, 16, 32


def graphs():
    return torch_tpu.metrics.snapshot()["graphs"]


def attention(x, w):
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    scores = q @ k.transpose(-1, -2) / 4.0
    return torch.softmax(scores.masked_fill(scores > 1.0, -1e9), -1) @ v


def causal_attention(x, w):
    """Masks built in the graph from the dynamic size, as Hugging Face models do."""
    n = x.shape[0]
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    scores = q @ k.transpose(-1, -2) / 4.0
    pos = torch.arange(n, device=x.device)
    causal = pos[None, :] <= pos[:, None]
    upper = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
    scores = scores.masked_fill(~causal, float("-inf")).masked_fill(upper, float("-inf"))
    return torch.softmax(scores, -1) @ v


# name -> f(x, w), x of shape [n, 16] (n dynamic), w of shape [3, 16, 16]
FAMILIES = {
    "elementwise": lambda x, w: torch.where(x > 0, x.exp(), -x) * 2 + x.sigmoid(),
    "matmul": lambda x, w: F.gelu(x @ w[0]) @ w[1].T,
    "reductions": lambda x, w: torch.stack([x.sum(0), x.amax(0), x.amin(0), (x * x).sum(0)]),
    "row_reductions": lambda x, w: x.sum(1) + x.amax(1) + x.mean(1),
    "softmax": lambda x, w: torch.softmax(x, 0) + torch.log_softmax(x @ w[0], 0),
    "norms": lambda x, w: F.layer_norm(x, (16,)) + F.rms_norm(x, (16,)),
    "flatten": lambda x, w: (x.unsqueeze(0) * 2).reshape(-1, 16).sum(0) + x.reshape(-1).amax(),
    "attention": attention,
    "causal_attention": causal_attention,
    "created": lambda x, w: torch.ones(x.shape[0], device=x.device).sum() * x
    + torch.zeros(x.shape[0], 16, device=x.device).amax(0),
}


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def run_sizes(f, sizes, grad=False, seed=0):
    """f compiled with a dynamic first dimension over `sizes`, against CPU."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(3, 16, 16, generator=g) / 4
    cf = torch.compile(f, backend="tpu")
    for n in sizes:
        x = torch.randn(n, 16, generator=g)
        xt = x.to("tpu").requires_grad_(grad)
        torch._dynamo.mark_dynamic(xt, 0)
        wt = w.to("tpu").requires_grad_(grad)
        out = cf(xt, wt)
        xc, wc = x.clone().requires_grad_(grad), w.clone().requires_grad_(grad)
        ref = f(xc, wc)
        assert out.shape == ref.shape, (n, out.shape, ref.shape)
        torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-5, atol=1e-5, msg=f"size {n}")
        if grad:
            cot = torch.randn(ref.shape, generator=g)
            out.backward(cot.to("tpu"))
            ref.backward(cot)
            torch.testing.assert_close(
                xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4, msg=f"x.grad, size {n}"
            )
            if wc.grad is None:
                assert wt.grad is None
            else:
                torch.testing.assert_close(
                    wt.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4, msg=f"w.grad, size {n}"
                )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_bucketed_values_equal_cpu_one_program_per_bucket(family):
    before = graphs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "compiles once per shape"
        run_sizes(FAMILIES[family], SIZES)
    # One static graph for the first size, then one per bucket (8, 16, 32) of the
    # dynamic graph Dynamo traces at the first new size.
    assert graphs() - before <= 1 + 3, graphs() - before


@pytest.mark.parametrize("family", ["matmul", "softmax", "norms", "causal_attention"])
def test_bucketed_gradients_equal_cpu(family):
    run_sizes(FAMILIES[family], [3, 5, 9, 12], grad=True)


def test_a_known_bucket_compiles_no_graph():
    f = FAMILIES["matmul"]
    run_sizes(f, [3, 5])  # traced dynamic at 5: bucket 8 compiled
    before = graphs()
    run_sizes(f, [6, 7, 8], seed=1)
    assert graphs() == before


@pytest.mark.parametrize(
    "f, why",
    [
        (lambda x, w: x.mean(0), "divides by the size of a dynamic dimension"),
        (lambda x, w: x.cumsum(0), "is not known to stay exact"),
        (lambda x, w: x[1:] * 2, "along a dynamic dimension"),
        (
            lambda x, w: torch.full((x.shape[0],), x.shape[0], device=x.device) * x.sum(1),
            "takes a dynamic size as a value",
        ),
    ],
)
def test_unsafe_graph_compiles_per_shape_and_says_why(f, why):
    torch_tpu._dynamo._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_sizes(f, [3, 5, 6])
    messages = [str(w.message) for w in caught if "compiles once per input shape" in str(w.message)]
    assert len(messages) == 1 and why in messages[0], messages


def test_splitting_a_merged_dynamic_dimension_is_refused_and_exact():
    def f(x, w):
        return x.reshape(-1).cos().reshape(x.shape[0], 16)

    torch_tpu._dynamo._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_sizes(f, [4, 6, 10])
    assert any("splits a dimension" in str(w.message) for w in caught)


class Block(torch.nn.Module):
    """A transformer-like block on [batch, n, 16]: linear layers flatten the batch and
    the dynamic dimension and split them again (the compiler makes those batched
    matmuls), layer norm, attention with a causal mask from the dynamic size."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
        n = x.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        s = (q @ k.transpose(-1, -2) / 4.0).masked_fill(~causal, float("-inf"))
        return x + self.out(torch.softmax(s, -1) @ v)


@pytest.mark.parametrize("batch", [1, 3])
def test_block_with_batch_is_bucketed_values_and_gradients(batch):
    torch.manual_seed(0)
    ref = Block()
    dev = Block()
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("tpu")
    step = torch.compile(dev, backend="tpu")
    before = graphs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for n in (3, 5, 9, 12):
            x = torch.randn(batch, n, 16)
            xt = x.to("tpu").requires_grad_()
            torch._dynamo.mark_dynamic(xt, 1)
            xc = x.clone().requires_grad_()
            out, want = step(xt), ref(xc)
            torch.testing.assert_close(out.cpu(), want.detach(), rtol=1e-5, atol=1e-5)
            out.square().sum().backward()
            want.square().sum().backward()
            torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
            for (name, p), q in zip(dev.named_parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-4, msg=name)
                p.grad = q.grad = None
    # forward and backward for buckets 8 and 16
    assert graphs() - before == 4


def test_buckets_off_and_bucket_size(monkeypatch):
    f = FAMILIES["matmul"]
    monkeypatch.setenv("TORCH_TPU_SHAPE_BUCKETS", "off")
    before = graphs()
    run_sizes(f, [3, 5, 6, 7])
    assert graphs() - before == 4  # one per shape
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_TPU_SHAPE_BUCKETS", "4")
    before = graphs()
    run_sizes(f, [3, 5, 6, 7, 8, 9])  # static 3, then buckets 8 (5..8) and 12
    assert graphs() - before == 3
    monkeypatch.setenv("TORCH_TPU_SHAPE_BUCKETS", "tiny")
    with pytest.raises(ValueError, match="TORCH_TPU_SHAPE_BUCKETS"):
        _buckets.setting()


def test_bucket_rule():
    assert [_buckets.bucket(n) for n in (1, 8, 9, 100, 1024, 1025, 1153)] == [
        8,
        8,
        16,
        128,
        1024,
        1152,
        1280,
    ]
    assert [_buckets.bucket(n, 10) for n in (1, 10, 11)] == [10, 10, 20]


def test_bucket_size_option():
    f = FAMILIES["elementwise"]
    g = torch.Generator().manual_seed(0)
    cf = torch.compile(f, backend="tpu", options={"bucket_size": 32})
    before = graphs()
    for n in (3, 20, 31, 32):
        x = torch.randn(n, 16, generator=g)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 0)
        torch.testing.assert_close(cf(xt, None).cpu(), f(x, None))
    assert graphs() - before == 1  # marked dynamic from the first call: the 32 bucket


def test_max_buckets_option_runs_sizes_at_compiled_buckets():
    f = FAMILIES["elementwise"]
    g = torch.Generator().manual_seed(0)
    cf = torch.compile(f, backend="tpu", options={"max_buckets": 2})
    before = graphs()
    # Buckets 64 and 8 are compiled; 20 (bucket 32) then runs at 64, 5 at 8; 100 (bucket
    # 128) is held by no compiled bucket: it compiles one more, with a warning.
    for n, new_graphs in ((40, 1), (3, 1), (20, 0), (5, 0), (64, 0)):
        x = torch.randn(n, 16, generator=g)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 0)
        start = graphs()
        torch.testing.assert_close(cf(xt, None).cpu(), f(x, None))
        assert graphs() - start == new_graphs, n
    x = torch.randn(100, 16, generator=g)
    xt = x.to("tpu")
    torch._dynamo.mark_dynamic(xt, 0)
    with pytest.warns(UserWarning, match="more than max_buckets=2"):
        torch.testing.assert_close(cf(xt, None).cpu(), f(x, None))
    assert graphs() - before == 3


def test_compile_log_says_new_bucket():
    torch_tpu.metrics.reset()
    run_sizes(lambda x, w: (x @ w[2]).tanh() * 3, [3, 5, 9])  # buckets 8, 8, 16
    graphs_built = [r for r in torch_tpu.metrics.compile_log() if r["what"].startswith("graph")]
    assert [r["reason"] for r in graphs_built][-2:] == ["new program", "new bucket"], graphs_built
    assert all(r["what"].endswith(", bucketed)") for r in graphs_built[-2:])
