"""Control flow in compiled graphs: torch.ops.higher_order.cond, while_loop and scan
become stablehlo.case / stablehlo.while in the graph's one program (their bodies lowered
by the same table as the rest), and torch.tpu.ops.optimization_barrier is part of the
program. Every result is compared with the same function run eagerly on CPU."""

import glob
import os

import pytest
import torch
from torch._higher_order_ops.cond import cond
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import torch_tpu
from helpers import assert_same, eps_tol, rand, run_python


pytestmark = pytest.mark.usefixtures("fresh_dynamo")

TOL = dict(rtol=1e-5, atol=1e-5)


def counts():
    m = torch_tpu.metrics.snapshot()
    return m["graphs"], m["graph_fallbacks"], m["graph_splits"]


def tpu_leaves(*tensors):
    return [t.detach().to("tpu").requires_grad_(t.requires_grad) for t in tensors]


def cpu_leaves(*tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def check_value_and_grad(fn, *inputs, tol=TOL, graphs=2):
    """fn compiled on tpu against fn eager on CPU: outputs and the gradients of every
    input that requires grad, with the compiled forward and backward one program each."""
    cpu = cpu_leaves(*inputs)
    tpu = tpu_leaves(*inputs)
    ref = fn(*cpu)
    out = torch.compile(fn, backend="tpu", fullgraph=True)(*tpu)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    out = out if isinstance(out, (tuple, list)) else (out,)
    for o, r in zip(out, ref):
        assert_same(o.detach(), r.detach(), **tol)
    weights = [rand(r.shape, r.dtype, seed=40 + i) for i, r in enumerate(ref)]
    sum((r * w).sum() for r, w in zip(ref, weights)).backward()
    sum((o * w.to("tpu")).sum() for o, w in zip(out, weights)).backward()
    for t, c in zip(tpu, cpu):
        if c.requires_grad:
            assert_same(t.grad, c.grad, **tol)
    assert counts() == (graphs, 0, 0)


def test_scan_rnn_value_and_gradient():
    def rnn(xs, w, u, h0):
        def step(h, x):
            h = torch.tanh(h @ w + x @ u)
            return h, h.sum(-1)

        return scan(step, h0, xs)

    xs = rand((7, 3, 5), torch.float32, seed=1).requires_grad_()
    w = rand((4, 4), torch.float32, seed=2, scale=0.5).requires_grad_()
    u = rand((5, 4), torch.float32, seed=3, scale=0.5).requires_grad_()
    h0 = rand((3, 4), torch.float32, seed=4).requires_grad_()
    check_value_and_grad(rnn, xs, w, u, h0)


def test_scan_reverse_dim_and_several_carries():
    def f(xs, ys, a):
        def step(carry, x):
            s, p = carry
            s = s + x["x"] * a
            p = p * torch.sigmoid(x["y"])
            return (s, p), (s - p, x["x"].exp())

        return scan(
            step, (torch.zeros_like(a), torch.ones_like(a)), {"x": xs, "y": ys}, dim=1, reverse=True
        )

    xs = rand((2, 6, 3), torch.float32, seed=5).requires_grad_()
    ys = rand((2, 6, 3), torch.float32, seed=6).requires_grad_()
    a = rand((2, 3), torch.float32, seed=7).requires_grad_()
    check_value_and_grad(lambda xs, ys, a: torch.utils._pytree.tree_leaves(f(xs, ys, a)), xs, ys, a)


def test_scan_over_stacked_layers_matches_the_unrolled_layers():
    # The use case: one compiled layer body for all layers (weights stacked on dim 0).
    def layers_scanned(x, w1, b1, w2):
        def layer(h, p):
            w1, b1, w2 = p
            return h + torch.relu(h @ w1 + b1) @ w2, ()

        out, _ = scan(layer, x, (w1, b1, w2))
        return out

    def layers_unrolled(x, w1, b1, w2):
        for i in range(w1.shape[0]):
            x = x + torch.relu(x @ w1[i] + b1[i]) @ w2[i]
        return x

    x = rand((4, 8), torch.float32, seed=8).requires_grad_()
    w1 = rand((6, 8, 16), torch.float32, seed=9, scale=0.2).requires_grad_()
    b1 = rand((6, 16), torch.float32, seed=10, scale=0.1).requires_grad_()
    w2 = rand((6, 16, 8), torch.float32, seed=11, scale=0.2).requires_grad_()
    check_value_and_grad(layers_scanned, x, w1, b1, w2)
    cpu_out = layers_unrolled(*cpu_leaves(x, w1, b1, w2))
    torch.testing.assert_close(layers_scanned(*cpu_leaves(x, w1, b1, w2)), cpu_out, **TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_scan_low_precision(dtype):
    def cumulative(xs, h0):
        return scan(lambda h, x: (h * 0.5 + x, h.clone()), h0, xs)

    xs, h0 = rand((5, 8), dtype, seed=12), rand((8,), dtype, seed=13)
    out = torch.compile(cumulative, backend="tpu", fullgraph=True)(xs.to("tpu"), h0.to("tpu"))
    ref = cumulative(xs, h0)
    # Each step rounds once in the low dtype on both sides; XLA may keep the carry wider.
    for o, r in zip(out, ref):
        assert_same(o, r, **eps_tol(dtype, 8))
    assert counts() == (1, 0, 0)


@pytest.mark.parametrize("take", [True, False])
def test_cond_value_and_gradient_both_branches(take):
    def f(p, x, y):
        return cond(p, lambda x, y: (x.sin() * y, x + 1), lambda x, y: (x.cos() + y, x * y), (x, y))

    p = torch.tensor(take)
    x = rand((3, 4), torch.float32, seed=14).requires_grad_()
    y = rand((3, 4), torch.float32, seed=15).requires_grad_()
    check_value_and_grad(f, p, x, y)


def test_cond_on_data_compiles_once_for_both_outcomes():
    def f(x):
        return cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 10, (x,))

    g = torch.compile(f, backend="tpu", fullgraph=True)
    for seed in range(4):
        x = rand((5,), torch.float32, seed=seed)
        assert_same(g(x.to("tpu")), f(x))
    assert counts() == (1, 0, 0)


def test_while_loop_forward():
    # PyTorch's while_loop backward stacks every iteration at a size known only after
    # running (an unbacked size), which cannot be one program: forward only here.
    def f(i, x, w):
        return while_loop(
            lambda i, x: (i < 6) & (x.abs().sum() < 1e4),
            lambda i, x: (i + 1, torch.tanh(x @ w) * 3 + x),
            (i, x),
        )

    i = torch.tensor(0)
    x = rand((3, 4), torch.float32, seed=16)
    w = rand((4, 4), torch.float32, seed=17)
    g = torch.compile(f, backend="tpu", fullgraph=True)
    out = g(i.to("tpu"), x.to("tpu"), w.to("tpu"))
    ref = f(i, x, w)
    assert_same(out[0], ref[0])
    assert_same(out[1], ref[1], **TOL)
    assert counts() == (1, 0, 0)


def test_while_loop_gradient_is_right_though_not_one_program():
    # What a user gets asking for it: PyTorch's trace of the backward meets the unbacked
    # size, Dynamo runs the function eagerly on tpu; values and gradients are right.
    def f(i, x, w):
        return while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, torch.tanh(x @ w)), (i, x))[1]

    x = rand((3,), torch.float32, seed=23).requires_grad_()
    w = rand((3, 3), torch.float32, seed=24).requires_grad_()
    cx, cw = cpu_leaves(x, w)
    tx, tw = tpu_leaves(x, w)
    ref = f(torch.tensor(0), cx, cw)
    out = torch.compile(f, backend="tpu")(torch.tensor(0).to("tpu"), tx, tw)
    assert_same(out.detach(), ref.detach(), **TOL)
    ref.sum().backward()
    out.sum().backward()
    assert_same(tx.grad, cx.grad, **TOL)
    assert_same(tw.grad, cw.grad, **TOL)


def test_while_loop_data_dependent_trip_count():
    def f(x):
        return while_loop(lambda x: x.sum() < 1000, lambda x: (x * 1.5 + 1,), (x,))

    g = torch.compile(f, backend="tpu", fullgraph=True)
    for scale in (1.0, 10.0):
        x = rand((6,), torch.float32, seed=18).abs() * scale
        assert_same(g(x.to("tpu"))[0], f(x)[0], **TOL)
    assert counts() == (1, 0, 0)


def test_nested_cond_inside_scan():
    def f(xs, h0):
        def step(h, x):
            h = cond(x.sum() > 0, lambda h, x: h + x, lambda h, x: h * 0.9, (h, x))
            return h, h.clone()

        return scan(step, h0, xs)

    xs = rand((6, 3), torch.float32, seed=19).requires_grad_()
    h0 = rand((3,), torch.float32, seed=20).requires_grad_()
    check_value_and_grad(f, xs, h0)


def test_scan_with_dynamic_sizes_compiles_once_per_shape():
    # A body traced with symbolic sizes is specialised with the graph (not bucketed).
    def f(xs, h):
        return scan(lambda h, x: (h * torch.sigmoid(x) + x, h.clone()), h, xs)

    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in (4, 6, 9):
        xs, h = rand((n, 3), torch.float32, seed=n), rand((3,), torch.float32, seed=30)
        out, ref = g(xs.to("tpu"), h.to("tpu")), f(xs, h)
        assert_same(out[0], ref[0], **TOL)
        assert_same(out[1], ref[1], **TOL)
    assert counts() == (3, 0, 0)


def test_random_op_in_a_body_runs_op_by_op_with_a_warning():
    def f(xs, h0):
        return scan(lambda h, x: (h + torch.rand_like(x), h.clone()), h0, xs)

    xs, h0 = torch.zeros(4, 3), torch.zeros(3)
    g = torch.compile(f, backend="tpu", fullgraph=True)
    with pytest.warns(UserWarning, match="control-flow body"):
        out = g(xs.to("tpu"), h0.to("tpu"))
    steps = out[1].cpu()
    assert ((steps >= 0) & (steps < 4)).all()
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 1


def test_optimization_barrier_in_a_compiled_graph():
    def f(x, y):
        a, b = torch.tpu.ops.optimization_barrier([x.sin(), y * 2])
        return a.cos() + b

    x = rand((4, 5), torch.float32, seed=21).requires_grad_()
    y = rand((4, 5), torch.float32, seed=22).requires_grad_()
    cpu_ref = lambda x, y: x.sin().cos() + y * 2  # noqa: E731  (the barrier is an identity)
    cx, cy = cpu_leaves(x, y)
    tx, ty = tpu_leaves(x, y)
    out = torch.compile(f, backend="tpu", fullgraph=True)(tx, ty)
    ref = cpu_ref(cx, cy)
    assert_same(out.detach(), ref.detach(), **TOL)
    out.sum().backward()
    ref.sum().backward()
    assert_same(tx.grad, cx.grad, **TOL)
    assert_same(ty.grad, cy.grad, **TOL)
    assert counts() == (2, 0, 0)


def loop_program(code: str, tmp_path) -> str:
    """Runs `code` (which prints whether it matched CPU) in a fresh process dumping its
    programs; returns the one program with a loop."""
    out = run_python(code, env={"TORCH_TPU_DUMP_DIR": str(tmp_path), "TORCH_TPU_DISK_CACHE": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
    texts = [open(p).read() for p in glob.glob(os.path.join(tmp_path, "*.mlir"))]
    graph = [t for t in texts if "stablehlo.while" in t]
    assert len(graph) == 1
    return graph[0]


def test_programs_hold_the_loop_and_the_barrier_once(tmp_path):
    # The dumped programs: a scan over 8 layers holds its body once (one product per
    # matmul of the layer) inside a stablehlo.while; the barrier is in the graph.
    code = (
        "import torch, torch_tpu\n"
        "from torch._higher_order_ops.scan import scan\n"
        "def f(x, w, barrier=torch.tpu.ops.optimization_barrier):\n"
        "    y, _ = scan(lambda h, w: (torch.tanh(h @ w), ()), x, w)\n"
        "    return barrier([y.sin()])[0].cos()\n"
        "x, w = torch.randn(2, 4), torch.randn(8, 4, 4)\n"
        "out = torch.compile(f, backend='tpu', fullgraph=True)(x.to('tpu'), w.to('tpu'))\n"
        "ref = f(x, w, barrier=lambda ts: ts)  # an identity on values\n"
        "print(torch.allclose(out.cpu(), ref, rtol=1e-5, atol=1e-5))\n"
    )
    graph = loop_program(code, tmp_path)
    assert graph.count("stablehlo.dot_general") == 1
    assert "stablehlo.optimization_barrier" in graph


def test_matmul_precision_reaches_loop_bodies(tmp_path):
    # A body's products carry the precision in effect, as the graph's own do.
    code = (
        "import torch, torch_tpu\n"
        "from torch._higher_order_ops.scan import scan\n"
        "torch.set_float32_matmul_precision('medium')\n"
        "f = lambda x, w: scan(lambda h, w: (h @ w, ()), x, w)[0]\n"
        "x, w = torch.randn(2, 4), torch.randn(3, 4, 4)\n"
        "out = torch.compile(f, backend='tpu', fullgraph=True)(x.to('tpu'), w.to('tpu'))\n"
        "print(torch.allclose(out.cpu(), f(x, w), rtol=1e-4, atol=1e-4))\n"
    )
    graph = loop_program(code, tmp_path)
    assert "#stablehlo<precision DEFAULT>" in graph
    assert "HIGHEST" not in graph


@pytest.mark.single_mode
def test_warm_start_loads_control_flow_graphs(tmp_path):
    # The nested specs are stored in AOTAutograd's cache like any graph's: a second
    # process compiles nothing and gets the same values and gradients.
    code = (
        "import torch, torch_tpu\n"
        "from torch._higher_order_ops.scan import scan\n"
        "f = lambda x, w: scan(lambda h, w: (torch.tanh(h @ w), h.sum()), x, w)\n"
        "g = torch.Generator().manual_seed(0)\n"
        "x, w = torch.randn(2, 4, generator=g), torch.randn(5, 4, 4, generator=g)\n"
        "tw = w.to('tpu').requires_grad_()\n"
        "out = torch.compile(f, backend='tpu', fullgraph=True)(x.to('tpu'), tw)\n"
        "(out[0].sum() + out[1].sum()).backward()\n"
        "cw = w.clone().requires_grad_()\n"
        "ref = f(x, cw)\n"
        "(ref[0].sum() + ref[1].sum()).backward()\n"
        "same = all(torch.allclose(a.detach().cpu(), b.detach(), rtol=1e-5, atol=1e-5)\n"
        "           for a, b in [(out[0], ref[0]), (out[1], ref[1]), (tw.grad, cw.grad)])\n"
        "m = torch_tpu.metrics.snapshot()\n"
        "print(same, m['compiles'], m['graph_fallbacks'])\n"
    )
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
    }
    runs = [run_python(code, env=env) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    cold, warm = (r.stdout.split() for r in runs)
    assert cold[0] == "True" and int(cold[1]) > 0 and cold[2] == "0"
    assert warm == ["True", "0", "0"]
