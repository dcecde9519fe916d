"""torch.compile(backend="tpu") on the ops real graphs contain: every function here
compiles to one program (no op-by-op fallback) and matches the same function run eagerly
on the CPU, in value and gradient. Random ops match eager tpu mode for the same seed."""

import copy
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from helpers import assert_same, run_python

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOL = dict(rtol=1e-4, atol=1e-5)


pytestmark = [pytest.mark.single_mode, pytest.mark.usefixtures("fresh_dynamo")]


def one_program():
    """Every graph since the last metrics reset compiled whole."""
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] == 0
    assert m["graphs"] > 0


def to_tpu(x):
    if isinstance(x, nn.Module):
        return copy.deepcopy(x).to("tpu")
    if isinstance(x, torch.Tensor):
        return x.detach().to("tpu").requires_grad_(x.requires_grad)
    return x


def flat(out):
    return [
        o
        for o in (out if isinstance(out, (tuple, list)) else (out,))
        if isinstance(o, torch.Tensor)
    ]


def grads(inputs):
    for x in inputs:
        if isinstance(x, nn.Module):
            yield from (p.grad for p in x.parameters())
            yield from x.buffers()
        elif isinstance(x, torch.Tensor) and x.requires_grad:
            yield x.grad


def compare(fn, *inputs, backward=False, tol=TOL):
    """fn compiled for tpu against fn eager on CPU, on the same inputs (tensors, and
    modules copied to the device): outputs, and with `backward` the gradients of a
    weighted sum of the float outputs (and modules' buffers, e.g. running stats)."""
    tpu_inputs = [to_tpu(x) for x in inputs]
    expected = flat(fn(*inputs))
    got = flat(torch.compile(fn, backend="tpu", fullgraph=True)(*tpu_inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_same(g, e, **tol)
    if backward:
        gen = torch.Generator().manual_seed(1)
        weights = [torch.randn(e.shape, generator=gen) for e in expected]
        sum(((e * w).sum() for e, w in zip(expected, weights) if e.requires_grad)).backward()
        sum(((g * w.to("tpu")).sum() for g, w in zip(got, weights) if g.requires_grad)).backward()
        for g, e in zip(grads(tpu_inputs), grads(inputs)):
            assert_same(g, e, **tol)
    one_program()


def randn(*shape, grad=False, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).requires_grad_(grad)


def test_graph_lowerings_name_real_schemas():
    for name in set(torch_tpu._C._graph_lowerings()) - set(torch_tpu._C._lowerings()):
        base, _, overload = name.partition(".")
        overloads = {
            s.overload_name for s in torch._C._jit_get_schemas_for_operator(f"aten::{base}")
        }
        assert overload in overloads, name


# ---- networks ------------------------------------------------------------------------------


def test_mlp():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    compare(lambda m, x: m(x), mlp, randn(3, 8, grad=True), backward=True)


@pytest.mark.parametrize("train", [True, False])
def test_convnet(train):
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 2),
    ).train(train)
    compare(lambda m, x: m(x), net, randn(2, 3, 12, 12, grad=train), backward=train)


def test_convolution_variants():
    torch.manual_seed(0)
    one_d = nn.Sequential(
        nn.Conv1d(2, 4, 3, stride=2, dilation=2),
        nn.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1),
    )
    two_d = nn.Sequential(
        nn.Conv2d(4, 4, 3, groups=2, bias=False, padding=2),
        nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2),
    )
    compare(
        lambda a, b, x, y: (a(x), b(y)),
        one_d,
        two_d,
        randn(2, 2, 11, grad=True),
        randn(1, 4, 5, 6, grad=True, seed=1),
        backward=True,
    )


def test_layer_and_group_norm():
    torch.manual_seed(0)
    ln, gn = nn.LayerNorm(8), nn.GroupNorm(2, 8)
    compare(
        lambda ln, gn, x: (ln(x.transpose(1, 2)), gn(x)),
        ln,
        gn,
        randn(2, 8, 5, grad=True),
        backward=True,
    )


def test_attention_and_losses():
    q, t = randn(2, 2, 5, 4, grad=True), torch.tensor([0, 3, 4, 1, 3])
    compare(
        lambda q: (
            F.scaled_dot_product_attention(q, q * 2, q + 1),
            F.scaled_dot_product_attention(q, q, q, is_causal=True),
        ),
        q,
        backward=True,
    )
    x, y = randn(5, 5, grad=True, seed=2), randn(5, 5, seed=3)
    compare(
        lambda x, y, t: (
            F.cross_entropy(x, t),
            F.mse_loss(x, y),
            F.nll_loss(F.log_softmax(x, 1), t),
            F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=3),
        ),
        x,
        y,
        t,
        backward=True,
    )


def test_interpolate():
    compare(
        lambda x: (
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(6, 7), mode="bilinear", align_corners=False),
        ),
        randn(1, 2, 4, 5, grad=True),
        backward=True,
    )


def test_bicubic_antialiased_and_unpool():
    compare(
        lambda x: (
            F.interpolate(x, scale_factor=1.5, mode="bicubic"),
            F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True),
            F.interpolate(x, size=(2, 7), mode="bicubic", antialias=True),
            F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=x.shape[-2:]),
        ),
        randn(1, 2, 5, 6, grad=True),
        backward=True,
    )


def test_cummax_frexp_and_bessel():
    compare(
        lambda x: (
            *torch.cummax(x, 1),
            *torch.cummin(x, -1),
            *torch.frexp(x),
            torch.i0(x),
            torch.special.i0e(x),
        ),
        randn(3, 7, 5, grad=True),
        backward=True,
    )


def test_special_functions_and_searches():
    x, n = randn(4, 5, seed=2), torch.tensor([0.0, 1.0, 3.0, 6.0, 9.0])
    seq = torch.sort(randn(9, seed=3)).values
    compare(
        lambda x, n, s: (
            torch.special.chebyshev_polynomial_t(x, n),
            torch.special.hermite_polynomial_h(x, n),
            torch.special.legendre_polynomial_p(x, n),
            torch.special.erfcx(x),
            torch.special.bessel_j0(x * 10),
            torch.special.modified_bessel_k1(x.abs() + 0.1),
            torch.polygamma(2, x),
            torch.special.zeta(x.abs() + 2, n + 1),
            torch.searchsorted(s, x),
            torch.bucketize(x, s, right=True),
        ),
        x,
        n,
        seq,
    )


def test_grid_sample_fractional_pool_segments_and_airy():
    x, grid = randn(2, 3, 7, 6, grad=True), torch.rand(2, 4, 5, 2) * 2.4 - 1.2
    samples, lengths = torch.rand(2, 3, 2), torch.tensor([2, 0, 4, 1])
    compare(
        lambda x, g, s, l: (
            F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
            F.grid_sample(x, g, mode="nearest", padding_mode="border"),
            F.grid_sample(x, g, mode="bicubic", align_corners=True),
            *F.fractional_max_pool2d(
                x, 2, output_size=(3, 4), return_indices=True, _random_samples=s
            ),
            torch.segment_reduce(x.detach()[0, 0], "max", lengths=l, unsafe=True),
            torch.special.airy_ai(x.detach() * 3),
        ),
        x,
        grid,
        samples,
        lengths,
    )


def test_linear_algebra():
    # The *_ex forms: the checking ones (linalg.cholesky, inv, solve) put an effectful
    # _linalg_check_errors into the graph, which then runs op by op.
    a = randn(2, 4, 4, seed=4)
    s = a @ a.mT + 4 * torch.eye(4)
    b = randn(2, 4, 3, seed=5)
    compare(
        lambda a, s, b: (
            torch.trace(a[0]),
            torch.linalg.cross(a[..., :3], b[..., :3]),
            torch.cdist(a, b.mT),
            torch.renorm(a, 2, 0, 1.0),
            *torch.linalg.cholesky_ex(s),
            torch.cholesky_solve(b, torch.linalg.cholesky_ex(s)[0]),
            torch.linalg.solve_triangular(s, b, upper=False),
            torch.linalg.det(a),
            *torch.linalg.slogdet(a),
            *torch.linalg.inv_ex(a),
            *torch.linalg.solve_ex(a, b),
            *torch.linalg.lu_factor_ex(a),
        ),
        a,
        s,
        b,
        tol=dict(rtol=1e-4, atol=1e-4),
    )


WARM_EFFECTS = """
import torch, torch_tpu
def f(a, s, b):
    return torch.linalg.cholesky(s), torch.linalg.inv(a) @ b, torch.linalg.solve(s, b)
torch.manual_seed(4)
a = torch.randn(2, 4, 4); s = a @ a.mT + 4 * torch.eye(4); b = torch.randn(2, 4, 3)
got = torch.compile(f, backend="tpu", fullgraph=True)(*(t.to("tpu") for t in (a, s, b)))
for g, e in zip(got, f(a, s, b)):
    torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-4)
print("ok")
"""


def test_graph_with_effect_tokens_runs_from_the_cache(tmp_path):
    """The split graph above has an effect token; loaded from AOTAutograd's cache (which
    does not add the token, unlike a fresh compile) it runs the same."""
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
    }
    for _ in range(2):  # cold, then warm
        r = run_python(WARM_EFFECTS, env)
        assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_checking_linear_algebra_splits_around_the_error_check():
    """linalg.cholesky / inv / solve put an effectful _linalg_check_errors (no lowering)
    into the graph: it is split around it, and no graph runs op by op."""
    a = randn(2, 4, 4, seed=4)
    s = a @ a.mT + 4 * torch.eye(4)
    b = randn(2, 4, 3, seed=5)

    def f(a, s, b):
        return torch.linalg.cholesky(s), torch.linalg.inv(a) @ b, torch.linalg.solve(s, b)

    got = torch.compile(f, backend="tpu", fullgraph=True)(*(to_tpu(t) for t in (a, s, b)))
    for g, e in zip(got, f(a, s, b)):
        assert_same(g, e, rtol=1e-4, atol=1e-4)
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] == 1 and m["graphs"] >= 2
    # The check still raises as eagerly: a singular matrix.
    with pytest.raises(torch.linalg.LinAlgError):
        torch.compile(f, backend="tpu", fullgraph=True)(
            torch.zeros(2, 4, 4, device="tpu"), to_tpu(s), to_tpu(b)
        )


def test_index_reduce_gcd_and_unfold():
    x, src = randn(5, 3, seed=6), randn(4, 3, seed=7)
    i = torch.tensor([0, 2, 2, 4])
    a, c = torch.tensor([12, 18, 7, 0]), torch.tensor([8, 27, 21, 5])
    compare(
        lambda x, s, i, a, c, img: (
            x.index_reduce(0, i, s, "amax"),
            torch.gcd(a, c),
            torch.lcm(a, c),
            F.unfold(img, 2, padding=1),
            F.channel_shuffle(img, 2),
        ),
        x,
        src,
        i,
        a,
        c,
        randn(1, 4, 5, 5, seed=8),
    )


def test_mingpt_forward_backward():
    sys.path[:0] = [str(EXAMPLES / "mingpt")]
    try:
        import data as mingpt_data
        import train as mingpt_train
    finally:
        del sys.path[:1]
    dataset = mingpt_data.CharDataset(mingpt_data.make_text(lines=50))
    model = mingpt_train.build(dataset.vocab_size, block=16, layers=1, heads=2, d=16, seed=0)
    x, y = dataset.batch(2, 16, torch.Generator().manual_seed(0))
    compare(lambda m, x, y: m(x, y), model, x, y, backward=True)


@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_compiled_optimizer_step(name):
    cpu = [randn(4, 3, grad=True), randn(3, grad=True, seed=1)]
    tpu = [to_tpu(p) for p in cpu]
    for i, (c, t) in enumerate(zip(cpu, tpu)):
        c.grad = randn(*c.shape, seed=10 + i)
        t.grad = c.grad.to("tpu")

    def make(params):
        if name == "adamw":
            return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=True)
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True)

    cpu_opt, tpu_opt = make(cpu), make(tpu)

    @torch.compile(backend="tpu")
    def step():
        tpu_opt.step()

    for _ in range(2):
        cpu_opt.step()
        step()
    for t, c in zip(tpu, cpu):
        assert_same(t.detach(), c.detach(), rtol=1e-5, atol=1e-6)
    one_program()


# ---- factories -----------------------------------------------------------------------------


def test_constant_factories():
    def fn(x):
        d = x.device
        return (
            torch.zeros(3, 4, device=d)
            + torch.ones(3, 4, device=d)
            + torch.full((3, 4), 2.5, device=d)
            + x,
            torch.zeros_like(x)
            + torch.ones_like(x)
            + torch.full_like(x, 3)
            + x.new_zeros(3, 4)
            + x.new_ones(3, 4)
            + x.new_full((3, 4), -2.0),
            torch.empty(3, 4, device=d).fill_(1)
            + torch.empty_like(x).zero_()
            + x.new_empty(3, 4).fill_(2)
            + torch.empty_strided((3, 4), (1, 3), device=d).fill_(x[0, 0]),
            torch.full((2,), 0.1, dtype=torch.float64, device=d),
            torch.full((2,), 2**53 + 1, dtype=torch.int64, device=d),
            torch.full((2,), -2.7, dtype=torch.int32, device=d),
            torch.full((2,), True, device=d),
            torch.ones(2, dtype=torch.bfloat16, device=d) * 0.3,
            torch.scalar_tensor(1.5, device=d) * x[0, 0],
        )

    compare(fn, randn(3, 4), tol=dict(rtol=0, atol=0))


def test_ranges():
    def fn(x):
        d = x.device
        return (
            torch.arange(5, device=d) + x,
            torch.arange(1, 9, 2, device=d),
            torch.arange(0, 1, 0.1, dtype=torch.float64, device=d),
            torch.arange(-3.0, 3.0, 0.7, device=d),
            torch.arange(0.5, 5, 1, dtype=torch.int64, device=d),
            torch.arange(10, 0, -3, dtype=torch.int32, device=d),
            torch.arange(0, 2, 0.25, dtype=torch.bfloat16, device=d),
            torch.arange(0, device=d),
        )

    compare(fn, torch.arange(5), tol=dict(rtol=0, atol=0))


def test_random_factories_match_eager():
    def draws(x):
        return (
            torch.rand(3, 5, device=x.device),
            torch.randn(4, device=x.device, dtype=torch.float64),
            torch.rand_like(x),
            torch.randn_like(x, dtype=torch.bfloat16),
            torch.randint(0, 7, (6,), device=x.device),
            torch.randint(100, (2, 3), device=x.device),
            torch.randint_like(x, 3, 9),
            torch.normal(1.0, 2.0, (5,), device=x.device),
            x.clone().uniform_(-2, 3),
            x.clone().normal_(1, 0.5),
            x.clone().exponential_(2.0),
            x.clone().bernoulli_(0.3),
            x.clone().log_normal_(0.5, 0.3),
            x.clone().cauchy_(),
            x.clone().geometric_(0.3),
            torch.rand(2, generator=None, device=x.device),
        )

    x = torch.zeros(2, 3, device="tpu")
    torch.manual_seed(11)
    expected = draws(x)
    after_eager = torch.rand(7, device="tpu")
    torch.manual_seed(11)
    got = torch.compile(draws, backend="tpu", fullgraph=True)(x)
    # The graph advances the generator exactly as the eager ops do.
    after_graph = torch.rand(7, device="tpu")
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert torch.equal(g.cpu(), e.cpu())
    assert torch.equal(after_graph.cpu(), after_eager.cpu())
    assert expected[0].min() >= 0 and expected[0].max() < 1
    assert expected[4].min() >= 0 and expected[4].max() < 7
    one_program()


def test_dropout_matches_eager():
    drop = nn.Dropout(0.3).train()
    x = randn(8, 16, grad=True).to("tpu").detach().requires_grad_()
    torch.manual_seed(3)
    expected = drop(x)
    expected.sum().backward()
    eager_grad, x.grad = x.grad, None
    torch.manual_seed(3)
    got = torch.compile(lambda x: drop(x), backend="tpu", fullgraph=True)(x)
    got.sum().backward()
    assert torch.equal(got.detach().cpu(), expected.detach().cpu())
    assert torch.equal(x.grad.cpu(), eager_grad.cpu())
    kept = expected.detach().cpu() != 0
    torch.testing.assert_close(expected.detach().cpu()[kept], x.detach().cpu()[kept] / 0.7)
    one_program()


# ---- indexing ------------------------------------------------------------------------------


def test_embedding():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4, padding_idx=0)
    compare(lambda e, i: e(i), emb, torch.tensor([[0, 2], [2, 9], [0, 2]]), backward=True)


@pytest.mark.parametrize(
    "norm_type,dtype",
    [
        (2.0, torch.float32),
        (1.0, torch.float32),
        (3.0, torch.float32),
        (float("inf"), torch.float32),
        (2.0, torch.bfloat16),
        (1.0, torch.float16),
    ],
)
def test_embedding_max_norm(norm_type, dtype):
    # max_norm renormalises the rows the indices name in place: a graph holds it as
    # embedding_renorm and an input mutation. The weight comes back to check the rows.
    # In half precision the bag's mean is one rounding from CPU's, as in eager mode.
    w = (randn(6, 4) * 2).to(dtype)
    idx = torch.tensor([[0, 2], [2, 5], [3, 0]])
    compare(
        lambda w, i: (
            F.embedding(i, w, max_norm=1.0, norm_type=norm_type),
            F.embedding_bag(i, w, max_norm=0.5, norm_type=norm_type),
            w,
        ),
        w,
        idx,
        tol=TOL if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2),
    )


def test_advanced_indexing():
    idx = torch.tensor([0, 3, 1, 3])
    rows = torch.tensor([[0, 4], [-1, 2]])
    compare(
        lambda x, idx, rows: (
            x[idx],
            x[idx, idx],
            x[:, idx],
            x[rows],
            x[..., 1:3][rows[:, 0]],
            x[rows, idx[:2]],
        ),
        randn(5, 4, grad=True),
        idx,
        rows,
        backward=True,
    )
    # one_hot's range checks (_assert_async) are not checked on the device, as indices are not.
    compare(
        lambda x, i: F.one_hot(i, 4) * x,
        randn(5, 4, grad=True),
        torch.tensor([1, 0, 3, 3, 2]),
        backward=True,
    )


def test_index_put():
    idx = torch.tensor([0, 3, 1])
    dup = torch.tensor([2, 0, 2])

    def fn(x, v, w, idx, dup):
        a = x.clone()
        a[idx] = v
        b = x.clone()
        b.index_put_((dup,), w, accumulate=True)
        c = x.clone()
        c[idx, idx] = 7.0
        d = x.clone()
        d[:, idx] += 1
        return a, b, c, d

    compare(
        fn,
        randn(5, 4, grad=True),
        randn(3, 4, grad=True, seed=1),
        randn(4, grad=True, seed=2),
        idx,
        dup,
        backward=True,
    )


def test_masks():
    g = torch.Generator().manual_seed(4)
    mask = torch.rand(5, 4, generator=g) > 0.5
    rows = torch.tensor([True, False, True, True, False])
    cols = torch.tensor([False, True, True, False])

    def fn(x, v, w, mask, rows, cols):
        a = x.clone()
        a[mask] = 0
        b = x.clone()
        b[rows] = v  # one row of v per true element
        c = x.clone()
        c.index_put_((rows,), v, accumulate=True)
        d = x.clone()
        d[:, cols] = w[:, :1]  # a mask after a full slice, values broadcast along it
        e = x.clone()
        e[:, cols] = w
        return (
            a,
            b,
            c,
            d,
            e,
            x.masked_fill(mask, -1.0),
            torch.where(mask, x, 2.0),
            torch.where(mask, x, x * 2),
        )

    # v and w need no gradient: theirs would be grad[rows], whose shape depends on the data.
    compare(
        fn,
        randn(5, 4, grad=True),
        randn(3, 4, seed=1),
        randn(5, 2, seed=2),
        mask,
        rows,
        cols,
        backward=True,
    )
