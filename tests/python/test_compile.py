"""torch.compile(backend="tpu"): one program per graph, results equal to CPU eager, and
the semantics a PyTorch user relies on (input mutation, optimizer steps, RNG, graph breaks,
no_grad, modes, new shapes, dynamic=True)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from helpers import assert_same


pytestmark = [pytest.mark.single_mode, pytest.mark.usefixtures("fresh_dynamo")]


def graphs():
    m = torch_tpu.metrics.snapshot()
    return m["graphs"], m["graph_fallbacks"]


def test_backend_is_found_by_name_through_the_entry_point():
    assert "tpu" in torch._dynamo.list_backends()
    f = torch.compile(lambda x: x * 2 + 1, backend="tpu")
    assert_same(f(torch.arange(4.0).to("tpu")), torch.arange(4.0) * 2 + 1)


def compiled_step_matches_cpu(cpu: nn.Module, tpu: nn.Module, x: torch.Tensor) -> None:
    """`tpu` compiled and `cpu` give the same output for `x`; both then run a backward."""
    out = torch.compile(tpu, backend="tpu")(x.to("tpu"))
    ref = cpu(x)
    assert_same(out, ref, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    ref.square().sum().backward()


def test_mlp_forward_and_backward_match_cpu_as_one_program_each():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled_step_matches_cpu(cpu, tpu, torch.randn(5, 8))
    for p, q in zip(tpu.parameters(), cpu.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert graphs() == (2, 0)  # forward and backward
    assert torch_tpu.metrics.snapshot()["graph_runs"] == 2


def test_no_grad_gives_an_inference_graph():
    lin = nn.Linear(4, 3)
    tpu = copy.deepcopy(lin).to("tpu")
    x = torch.randn(2, 4)
    with torch.no_grad():
        out = torch.compile(tpu, backend="tpu")(x.to("tpu"))
    assert not out.requires_grad
    assert_same(out, lin(x).detach(), rtol=1e-6, atol=1e-6)
    assert graphs() == (1, 0)


def test_mutated_inputs_are_written_back():
    def f(x, buf):
        buf.add_(x)
        buf.mul_(2)
        return buf.sum()

    x, buf = torch.randn(3, 4), torch.randn(3, 4)
    tx, tbuf = x.to("tpu"), buf.to("tpu")
    alias = tbuf.view(12)
    out = torch.compile(f, backend="tpu")(tx, tbuf)
    ref = f(x, buf)
    assert_same(out, ref, rtol=1e-5, atol=1e-5)
    assert_same(tbuf, buf)
    assert_same(alias, buf.view(12))  # every alias of the storage sees the write
    assert graphs() == (1, 0)


def test_mutating_a_view_input_writes_through_to_its_base():
    def f(v):
        v.mul_(10)
        return v + 1

    base = torch.arange(12.0).reshape(3, 4)
    tbase = base.to("tpu")
    out = torch.compile(f, backend="tpu")(tbase[:, 1])
    ref = f(base[:, 1])
    assert_same(out, ref)
    assert_same(tbase, base)


def test_mutated_inputs_donate_their_buffers():
    """A graph input written as a whole gives its old buffer to the run (donation); the
    storage takes the written-back buffer, so every alias reads the new values."""

    def f(x, buf):
        buf.mul_(2).add_(x)
        return buf.sum()

    compiled = torch.compile(f, backend="tpu")
    x, buf = torch.randn(64), torch.randn(64)
    tx, tbuf = x.to("tpu"), buf.to("tpu")
    alias = tbuf[8:]
    donated = torch_tpu.metrics.snapshot()["donated_bytes"]
    for _ in range(3):
        out = compiled(tx, tbuf)
        ref = f(x, buf)
    assert torch_tpu.metrics.snapshot()["donated_bytes"] - donated == 3 * tbuf.nbytes
    assert_same(out, ref, rtol=1e-5, atol=1e-5)
    assert_same(tbuf, buf, rtol=1e-5, atol=1e-5)
    assert_same(alias, buf[8:], rtol=1e-5, atol=1e-5)


def laid_out(t: torch.Tensor, order) -> torch.Tensor:
    """`t` with its buffer laid out in `order` (dimensions outermost first)."""
    inverse = [order.index(d) for d in range(t.dim())]
    return t.permute(order).contiguous().permute(inverse)


def executions():
    return torch_tpu.metrics.snapshot()["executions"]


def test_a_transposed_weight_is_taken_as_laid_out_without_a_copy():
    """A weight stored transposed (serving's layout: `w.t().contiguous().t()`) enters the
    graph as its buffer; the program transposes, and XLA reads the dot's operand as it
    lies. Before, every call first ran a program copying it row-major."""
    torch.manual_seed(0)
    x, w, b = torch.randn(6, 32), torch.randn(48, 32), torch.randn(48)
    tw = laid_out(w.to("tpu"), [1, 0])
    assert tw.stride() == (1, 48)
    compiled = torch.compile(F.linear, backend="tpu")
    tx, tb = x.to("tpu"), b.to("tpu")
    assert_same(compiled(tx, tw, tb), F.linear(x, w, b), rtol=1e-5, atol=1e-5)
    before = executions()
    out = compiled(tx, tw, tb)
    assert executions() - before == 1  # the graph alone
    assert_same(out, F.linear(x, w, b), rtol=1e-5, atol=1e-5)
    assert graphs() == (1, 0)


@pytest.mark.parametrize("order", [[2, 0, 1], [1, 2, 0], [0, 2, 1]])
def test_permuted_inputs_of_rank_three_match_cpu(order):
    x = torch.randn(3, 4, 5)
    tx = laid_out(x.to("tpu"), order)
    f = torch.compile(lambda a: (a * 2).sum(1) + a[:, 0], backend="tpu")
    assert_same(f(tx), (x * 2).sum(1) + x[:, 0])
    before = executions()
    f(tx)
    assert executions() - before == 1


def test_a_permuted_input_that_does_not_hold_its_buffer_is_copied_as_laid_out():
    # The same sizes and strides (Dynamo's guards) at another offset: the graph's program
    # is reused, its argument a copy laid out as the program takes it.
    f = torch.compile(lambda a, b: a @ b, backend="tpu")
    a = torch.randn(4, 6)
    first, second = torch.randn(5, 6), torch.randn(7, 6)
    assert_same(f(a.to("tpu"), first.to("tpu").t()), a @ first.t(), rtol=1e-5, atol=1e-5)
    moved = second.to("tpu")[2:].t()  # [6, 5], strides (1, 6), offset 12
    assert moved.stride() == (1, 6) and moved.storage_offset() == 12
    assert_same(f(a.to("tpu"), moved), a @ second[2:].t(), rtol=1e-5, atol=1e-5)
    assert graphs() == (1, 0)


def test_a_transposed_weight_trains_and_is_written_in_place():
    torch.manual_seed(0)
    cpu = nn.Linear(16, 8)
    tpu = copy.deepcopy(cpu).to("tpu")
    tpu.weight.data = laid_out(tpu.weight.data, [1, 0])
    compiled_step_matches_cpu(cpu, tpu, torch.randn(4, 16))
    assert_same(tpu.weight.grad, cpu.weight.grad, rtol=1e-5, atol=1e-5)
    step = torch.compile(lambda w, g: w.sub_(g, alpha=0.1), backend="tpu")
    with torch.no_grad():
        step(tpu.weight, tpu.weight.grad)
        cpu.weight.sub_(cpu.weight.grad, alpha=0.1)
    assert tpu.weight.stride() == (1, 8)
    assert_same(tpu.weight.detach(), cpu.weight.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    ],
    ids=["sgd_momentum", "adamw"],
)
def test_compiled_optimizer_step_updates_parameters_in_place(make):
    torch.manual_seed(0)
    cpu = nn.Linear(6, 3)
    tpu = copy.deepcopy(cpu).to("tpu")
    opt_cpu, opt_tpu = make(cpu.parameters()), make(tpu.parameters())

    @torch.compile(backend="tpu")
    def step():
        opt_tpu.step()

    x = torch.randn(4, 6)
    for _ in range(3):
        for model, opt, inp in ((cpu, opt_cpu, x), (tpu, opt_tpu, x.to("tpu"))):
            opt.zero_grad()
            model(inp).square().mean().backward()
        opt_cpu.step()
        weight = tpu.weight
        step()
        assert tpu.weight is weight  # updated in place
    for p, q in zip(tpu.parameters(), cpu.parameters()):
        assert_same(p, q.detach(), rtol=1e-5, atol=1e-6)
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 0


def test_dropout_in_a_graph_draws_like_eager_for_a_seed():
    def f(x):
        return F.dropout(x, p=0.5, training=True) * 3

    x = torch.ones(64, 32, device="tpu")
    compiled = torch.compile(f, backend="tpu")
    torch.manual_seed(123)
    a = compiled(x)
    after_compiled = torch.rand(4, device="tpu")
    torch.manual_seed(123)
    b = f(x)
    after_eager = torch.rand(4, device="tpu")
    assert torch.equal(a.cpu(), b.cpu())
    # The graph advances the generator exactly as eager mode does.
    assert torch.equal(after_compiled.cpu(), after_eager.cpu())
    kept = (a.cpu() != 0).float().mean().item()
    assert 0.4 < kept < 0.6
    assert not torch.equal(compiled(x).cpu(), a.cpu())  # each call draws anew
    torch.manual_seed(7)
    assert not torch.equal(compiled(x).cpu(), a.cpu())
    assert graphs() == (1, 0)


@pytest.mark.parametrize("shape", [(7,), (5, 3), (1,), (2, 3, 5)])
def test_random_draws_match_eager_for_odd_sizes(shape):
    # Eager kernels and graphs build their Nodes through one builder (aten/node_builder):
    # the same counters per draw, rounded the same way, so the numbers are identical and
    # the generator ends in the same state.
    def f(x):
        a = torch.rand(shape, device=x.device)
        b = F.dropout(x, p=0.3, training=True)
        c = torch.randn_like(x)
        return a, b, c

    x = torch.ones(shape, device="tpu")
    compiled = torch.compile(f, backend="tpu")
    torch.manual_seed(11)
    got = compiled(x)
    state_compiled = torch.tpu.get_rng_state()
    torch.manual_seed(11)
    want = f(x)
    state_eager = torch.tpu.get_rng_state()
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w.cpu())
    assert torch.equal(state_compiled, state_eager)
    assert graphs() == (1, 0)


def test_graph_breaks_split_into_programs():
    def f(x):
        y = x.sin() * 2
        torch._dynamo.graph_break()
        return y.cos() + 1

    x = torch.randn(5)
    out = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert_same(out, f(x), rtol=1e-6, atol=1e-6)
    assert graphs() == (2, 0)


def test_data_dependent_python_control_flow_breaks_the_graph():
    def f(x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1

    compiled = torch.compile(f, backend="tpu")
    for x in (torch.ones(3), -torch.ones(3)):
        assert_same(compiled(x.to("tpu")), f(x))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_modes_are_accepted(mode):
    f = torch.compile(lambda x: x.exp().sum(0), backend="tpu", mode=mode)
    x = torch.randn(3, 4)
    assert_same(f(x.to("tpu")), x.exp().sum(0), rtol=1e-6, atol=1e-6)


def test_unknown_mode_and_options_are_rejected():
    with pytest.raises(Exception, match="unknown mode"):
        torch.compile(lambda x: x + 1, backend="tpu", mode="fastest")(torch.ones(2, device="tpu"))
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"unknown option\(s\) \['x'\]; valid options are"):
        torch.compile(lambda x: x + 1, backend="tpu", options={"x": 1})(torch.ones(2, device="tpu"))


def test_new_shapes_recompile_once_each_and_are_cached():
    f = torch.compile(lambda x: (x * x).sum(-1), backend="tpu")
    shapes = [(2, 3), (4, 3), (5, 7)] * 3
    compiles, graphs = [], []
    for s in shapes:
        x = torch.randn(*s)
        assert_same(f(x.to("tpu")), (x * x).sum(-1), rtol=1e-5, atol=1e-5)
        compiles.append(torch_tpu.metrics.snapshot()["compiles"])
        graphs.append(torch_tpu.metrics.snapshot()["graphs"])
    # After the first round no graph compiles (the dynamic graph serves (2, 3) from its
    # bucket in the second round: only its input's small padding program is new); the
    # third round compiles nothing.
    assert graphs[2] == graphs[-1]
    assert compiles[5] == compiles[-1]


def test_dynamic_true_gives_exact_results_for_every_shape():
    def f(x, y):
        return (x @ y).relu() + x.shape[0]

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n, k in ((2, 3), (5, 3), (7, 4), (2, 3)):
        x, y = torch.randn(n, k), torch.randn(k, 6)
        assert_same(compiled(x.to("tpu"), y.to("tpu")), f(x, y), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 0


def test_dynamic_training_graph_specialises_forward_and_backward():
    lin = nn.Linear(4, 2)
    tpu = copy.deepcopy(lin).to("tpu")
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    for n in (3, 6):
        x = torch.randn(n, 4)
        tpu.zero_grad()
        lin.zero_grad()
        compiled(x.to("tpu")).sum().backward()
        lin(x).sum().backward()
        assert_same(tpu.weight.grad, lin.weight.grad, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 0


def test_tensor_constants_and_cpu_inputs_in_a_graph():
    table = torch.tensor([[1.0, 0.5, 2.0], [3.0, 4.0, 0.25]])

    def f(x):
        return x * table.to(x.device) + torch.tensor([1, 2, 3]).to(x.device)

    x = torch.randn(2, 3)
    assert_same(torch.compile(f, backend="tpu")(x.to("tpu")), f(x))
    assert graphs() == (1, 0)


def test_low_precision_and_integer_graphs():
    def f(x, i):
        return (x * 0.1 + 1).to(torch.float32), i * 3 - (i // 2)

    x = torch.randn(4, 4).to(torch.bfloat16)
    i = torch.arange(16).reshape(4, 4)
    a, b = torch.compile(f, backend="tpu")(x.to("tpu"), i.to("tpu"))
    ra, rb = f(x, i)
    # XLA may keep bf16 intermediates in f32 (as Inductor's fused kernels do): within
    # bf16 rounding of eager, not bit-equal.
    assert_same(a, ra, rtol=8e-3, atol=8e-3)
    assert_same(b, rb)


@pytest.mark.parametrize(
    "f,shape",
    [
        (lambda x: x.diagonal() + 1, (4, 5)),
        (lambda x: x.diagonal(1) * 2, (4, 5)),
        (lambda x: x.diagonal(-2) - 1, (4, 5)),
        (lambda x: torch.diagonal(x, -1, 2, 0) * 1, (3, 2, 4)),
        (lambda x: x.diagonal(7) + 0, (4, 5)),
        (lambda x: x.unfold(1, 3, 2) + 1, (2, 7)),
        (lambda x: x.unfold(0, 4, 3).sum(-1), (11,)),
        (lambda x: x.t()[1:, ::2].unsqueeze(0).expand(2, -1, -1) * 2, (5, 4)),
        (lambda x: torch.stack(x.unbind(1)[::-1], 0) + x.split([1, 3], 1)[1].sum(), (3, 4)),
    ],
    ids=[
        "diag",
        "diag_up",
        "diag_down",
        "diag_3d",
        "diag_empty",
        "unfold",
        "unfold_1d",
        "view_chain",
        "unbind_split",
    ],
)
def test_views_in_graphs_match_cpu_with_gradients(f, shape):
    x = torch.randn(*shape, requires_grad=True)
    tx = x.detach().to("tpu").requires_grad_()
    out = torch.compile(f, backend="tpu", fullgraph=True)(tx)
    ref = f(x)
    assert_same(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    assert_same(tx.grad, x.grad, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 0


@torch.library.custom_op("torch_tpu_test::triple", mutates_args=())
def _triple(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@_triple.register_fake
def _(x):
    return torch.empty_like(x)


_triple.register_autograd(lambda ctx, grad: grad * 3)


def test_a_graph_is_split_around_an_op_without_lowering():
    """The runs of ops before and after the custom op become two programs; the custom
    op runs eagerly between them."""

    def f(x):
        return _triple(x.sin()) + 1

    x = torch.randn(6)
    with pytest.warns(UserWarning, match="split into programs around .*torch_tpu_test.triple"):
        out = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert_same(out, f(x), rtol=1e-6, atol=1e-6)
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] == 1 and m["graphs"] == 2
    assert "1 split around unlowered ops" in torch_tpu.metrics.report()


def test_a_graph_of_nothing_but_unlowered_ops_runs_op_by_op_with_a_warning():
    def f(x):
        return _triple(_triple(x))

    x = torch.randn(6)
    with pytest.warns(UserWarning, match="runs op by op: .*torch_tpu_test.triple"):
        out = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert_same(out, f(x))
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 1 and m["graphs"] == 0
    assert "1 run op by op" in torch_tpu.metrics.report()


def test_split_graph_with_symbolic_sizes_and_backward():
    """A graph traced with dynamic sizes is specialised per shape, then split; gradients
    flow through the eager piece (its autograd formula) and the programs around it."""

    def f(x, w):
        return (_triple(x @ w).relu() * x.shape[0]).sum(-1)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 5):
        x, w = torch.randn(n, 4), torch.randn(4, 4, requires_grad=True)
        tw = w.detach().to("tpu").requires_grad_()
        out = compiled(x.to("tpu"), tw)
        ref = f(x, w)
        assert_same(out, ref.detach(), rtol=1e-5, atol=1e-5)
        out.square().sum().backward()
        ref.square().sum().backward()
        assert_same(tw.grad, w.grad, rtol=1e-5, atol=1e-5)
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] >= 1


def test_rng_state_calls_inside_compiled_code_run_eagerly():
    from torch.testing._utils import freeze_rng_state

    def f(a):
        with freeze_rng_state():
            torch.manual_seed(42)
            return torch.rand_like(a)

    a = torch.zeros(3, 4, device="tpu")
    torch.tpu.manual_seed(5)
    out = torch.compile(f, backend="tpu")(a)
    after = torch.rand(2, device="tpu")
    torch.tpu.manual_seed(5)
    assert torch.equal(out.cpu(), f(a).cpu())
    assert torch.equal(after.cpu(), torch.rand(2, device="tpu").cpu())  # state restored
