"""Fused eager mode: ops are recorded and a pending group runs as one program at a flush
point. Every test compares with CPU PyTorch (or with op mode) on the same inputs."""

import json
import re
import warnings

import pytest
import torch

import torch_tpu
from helpers import assert_same, rand, run_python


def pending() -> int:
    return torch_tpu._C._fused_pending()


@pytest.fixture
def fused():
    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("fused")
    torch.tpu.synchronize()  # ops an earlier test left pending are not this test's group
    yield
    torch_tpu.set_eager_mode(before)


def test_mode_switch_and_bad_mode():
    before = torch_tpu.get_eager_mode()
    with pytest.raises(ValueError, match="unknown mode 'lazy'"):
        torch_tpu.set_eager_mode("lazy")
    torch_tpu.set_eager_mode("fused")
    assert torch_tpu.get_eager_mode() == "fused"
    a = torch.ones(3, device="tpu") + 1
    assert pending() >= 1
    torch_tpu.set_eager_mode("op")  # switching flushes
    assert pending() == 0
    assert_same(a, torch.full((3,), 2.0))
    torch_tpu.set_eager_mode(before)


def test_ops_are_recorded_and_run_as_one_program(fused):
    x, y = rand((4, 5), torch.float32), rand((4, 5), torch.float32, seed=1)
    a, b = x.to("tpu"), y.to("tpu")
    runs = torch_tpu.metrics.snapshot()["executions"]
    c = (a + b) * 2
    d = c.sin().exp()
    assert pending() == 4
    assert torch_tpu.metrics.snapshot()["executions"] == runs
    ref_c = (x + y) * 2
    assert_same(d, ref_c.sin().exp())
    assert pending() == 0
    assert torch_tpu.metrics.snapshot()["executions"] == runs + 1
    assert_same(c, ref_c)


@pytest.mark.parametrize(
    "trigger",
    ["item", "cpu", "tolist", "repr", "synchronize", "flush", "nonzero", "event", "compiled_graph"],
)
def test_flush_points(fused, trigger):
    x = rand((6,), torch.float32)
    a = x.to("tpu") * 3 - 1
    ref = x * 3 - 1
    assert pending() > 0
    if trigger == "item":
        assert a.sum().item() == pytest.approx(ref.sum().item(), rel=1e-5)
    elif trigger == "cpu":
        torch.testing.assert_close(a.cpu(), ref)
    elif trigger == "tolist":
        assert a.tolist() == pytest.approx(ref.tolist(), rel=1e-6)
    elif trigger == "repr":
        assert "tpu" in repr(a)
    elif trigger == "synchronize":
        torch.tpu.synchronize()
    elif trigger == "flush":
        torch_tpu.flush()
    elif trigger == "nonzero":  # a data-dependent shape
        n = (a > 0).nonzero()
        assert_same(n, (ref > 0).nonzero())
    elif trigger == "event":
        torch.tpu.Event().record()
    elif trigger == "compiled_graph":
        f = torch.compile(lambda t: t * 2, backend="tpu")
        assert_same(f(a), ref * 2)
    assert pending() == 0
    assert_same(a, ref)


def test_threshold_flushes_by_itself():
    r = run_python(
        "import torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('fused')\n"
        "a = torch.zeros(3, device='tpu')\n"
        "for i in range(10):\n"
        "    a = a + 1\n"
        "    assert torch_tpu._C._fused_pending() <= 4, torch_tpu._C._fused_pending()\n"
        "print(a.cpu().tolist(), torch_tpu.metrics.snapshot()['fused_groups'])\n",
        env={"TORCH_TPU_FUSED_MAX_OPS": "4"},
    )
    assert r.returncode == 0, r.stderr
    values, groups = r.stdout.strip().rsplit(" ", 1)
    assert values == "[10.0, 10.0, 10.0]"
    assert int(groups) >= 3


def test_cpu_fallback_is_a_flush_point(fused):
    torch_tpu.set_cpu_fallback(True)
    g = torch.Generator().manual_seed(0)
    alpha, x = torch.rand(5, generator=g) + 0.5, torch.rand(5, generator=g) + 0.1
    # Pending values of the fused group feed an op without a lowering, which runs on the
    # CPU (aten::_standard_gamma_grad stands for any such op).
    a, b = alpha.to("tpu") * 2.0, x.to("tpu") + 1.0
    torch_tpu.metrics.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once per process, maybe by an earlier test
        y = torch._standard_gamma_grad(a, b)
    assert torch_tpu.metrics.fallback_count() == 1
    assert_same(
        y * 3.0, torch._standard_gamma_grad(alpha * 2.0, x + 1.0) * 3.0, rtol=1e-5, atol=1e-6
    )


def test_views_and_in_place_across_flushes(fused):
    x = rand((4, 6), torch.float32)
    a = x.to("tpu").clone()
    ref = x.clone()
    v = a[1:3, ::2]
    rv = ref[1:3, ::2]
    v.mul_(2)
    rv.mul_(2)
    a.t()[0].add_(5)
    ref.t()[0].add_(5)
    assert_same(v, rv)  # flush
    v.sub_(1)
    rv.sub_(1)
    a[1:3].add_(a[0])  # reads and writes one storage (apart: CPU refuses an overlap)
    ref[1:3].add_(ref[0])
    assert_same(a, ref)


def test_storage_freed_before_flush_is_a_temporary(fused):
    x = rand((5,), torch.float32)
    a = x.to("tpu")
    t = a.exp()
    out = t * 2
    del t  # never materialised: not an output of the group
    assert_same(out, x.exp() * 2)


def test_rng_draws_equal_op_mode():
    def draws():
        torch.manual_seed(7)
        a = torch.rand(5, 3, device="tpu")
        b = torch.nn.functional.dropout(torch.ones(7, device="tpu"), 0.5)
        c = torch.randn(2, device="tpu") + a.sum()
        return [t.cpu() for t in (a, b, c)] + [torch.tpu.get_rng_state()]

    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("op")
    op = draws()
    torch_tpu.set_eager_mode("fused")
    fused = draws()
    torch_tpu.set_eager_mode(before)
    for x, y in zip(op, fused):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_errors_raise_at_the_op(fused):
    a = torch.ones(3, device="tpu") * 2
    with pytest.raises(RuntimeError, match="size of tensor a .3. must match"):
        a + torch.ones(4, device="tpu")
    with pytest.raises(RuntimeError, match="same device|different devices|expected"):
        a + torch.ones(3)
    # The group recorded before the errors is intact.
    assert_same(a + 1, torch.full((3,), 3.0))


def test_data_dependent_op_inside_a_group(fused):
    x = rand((8,), torch.float32)
    a = x.to("tpu") + 1
    m = a[a > 1]  # boolean mask: its shape needs the values
    b = m * 2 + a.sum()
    ref = x + 1
    assert_same(b, ref[ref > 1] * 2 + ref.sum())


@pytest.fixture(params=["op", "fused"])
def each_mode(request):
    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(request.param)
    yield request.param
    torch_tpu.set_eager_mode(before)


def test_donation_never_corrupts_a_live_alias(each_mode):
    x = rand((16,), torch.float32)
    a = x.to("tpu")
    same = a  # the same tensor
    view = a[4:]  # a view of its storage
    snapshot = a.clone()  # reads the old contents in the same group
    a.mul_(3).add_(1)
    host_copy = torch.empty(16, device="tpu")
    host_copy.copy_(x)  # adopts an uploaded buffer
    host_copy.add_(2)
    ref = x * 3 + 1
    assert_same(snapshot, x)
    assert_same(same, ref)
    assert_same(view, ref[4:])
    assert_same(host_copy, x + 2)


def _train(mode, opt_name, steps=3, clip=False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    cpu_model.load_state_dict(model.state_dict())
    model.to("tpu")
    make = {
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
        "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
        "adam_foreach": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True),
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    }[opt_name]
    opt, cpu_opt = make(model.parameters()), make(cpu_model.parameters())
    x, y = rand((5, 6), torch.float32), rand((5, 2), torch.float32, seed=3)
    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        for _ in range(steps):
            for m, o, inp, tgt in (
                (model, opt, x.to("tpu"), y.to("tpu")),
                (cpu_model, cpu_opt, x, y),
            ):
                loss = torch.nn.functional.mse_loss(m(inp), tgt)
                loss.backward()
                if clip:
                    torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
                o.step()
                o.zero_grad()
            assert pending() == 0  # the end of a step is a flush point
    finally:
        torch_tpu.set_eager_mode(before)
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        assert_same(p, q.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt_name", ["adamw", "adamw_fused", "adam_foreach", "sgd"])
@pytest.mark.parametrize("mode", ["op", "fused"])
def test_optimizer_steps_match_cpu(mode, opt_name):
    _train(mode, opt_name, clip=opt_name == "sgd")


def test_optimizer_step_is_one_program_and_schedule_never_recompiles():
    model = torch.nn.Linear(4, 4).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    x = torch.randn(3, 4, device="tpu")
    for i in range(4):
        model(x).sum().backward()
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()
        opt.step()
        after = torch_tpu.metrics.snapshot()
        sched.step()
        opt.zero_grad()
        assert after["executions"] - before["executions"] == 1
        if i >= 2:  # warmed up (step 1 creates the state): the lr changes, nothing compiles
            assert after["compiles"] == before["compiles"]


def test_repeat_step_hits_the_group_cache(fused):
    model = torch.nn.Linear(8, 8).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="tpu")
    for i in range(4):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss.item()
        if i == 1:
            warm = torch_tpu.metrics.snapshot()["compiles"]
    assert torch_tpu.metrics.snapshot()["compiles"] == warm


def test_in_place_ops_donate_in_op_mode(tmp_path):
    # The program of an in-place op on a tensor nothing else holds takes its buffer as a
    # donated argument; with a second holder (a storage sharing the buffer) it does not.
    r = run_python(
        "import torch, torch_tpu\n"
        "torch_tpu.set_eager_mode('op')\n"
        "a = torch.arange(6.0).to('tpu') * 1\n"
        "a.add_(1)\n"
        "print(a.cpu().tolist())\n",
        env={"TORCH_TPU_DUMP_DIR": str(tmp_path), "TORCH_TPU_CACHE_DIR": str(tmp_path / "c")},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]"
    texts = [p.read_text() for p in tmp_path.glob("*.mlir")]
    assert any("tf.aliasing_output" in t for t in texts)


def test_in_place_chain_donates_buffers_still_being_computed(each_mode):
    # Each in-place op donates the buffer the op before it is still computing: the run
    # waits for it on the device, the host goes on, and the values are those of CPU.
    cpu = torch.randn(512, 512)
    x = cpu.to("tpu")
    donated = torch_tpu.metrics.snapshot()["donated_bytes"]
    for i in range(8):
        x.mul_(1.5).add_(i)
        cpu.mul_(1.5).add_(i)
        if each_mode == "fused":
            torch_tpu.flush()
    # Op mode: one program (and one donation) per op; fused: one per flushed pair.
    runs = 16 if each_mode == "op" else 8
    assert torch_tpu.metrics.snapshot()["donated_bytes"] - donated == runs * x.nbytes
    torch.testing.assert_close(x.cpu(), cpu)


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_adamw_step_donates_parameters_and_states(mode):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(4, 16, device="tpu")
    n_bytes = 4 * sum(p.numel() for p in model.parameters())
    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        for _ in range(3):
            model(x).sum().backward()
            torch_tpu.flush()
            donated = torch_tpu.metrics.snapshot()["donated_bytes"]
            opt.step()
            step_donated = torch_tpu.metrics.snapshot()["donated_bytes"] - donated
            opt.zero_grad()
    finally:
        torch_tpu.set_eager_mode(before)
    # The steady step overwrites parameters, exp_avg and exp_avg_sq in place.
    assert step_donated >= 3 * n_bytes


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_clip_grad_norm_is_one_program(mode):
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    cpu_model.load_state_dict(model.state_dict())
    model.to("tpu")
    x = rand((4, 6), torch.float32)
    model(x.to("tpu")).pow(2).sum().backward()
    cpu_model(x).pow(2).sum().backward()
    before = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        torch_tpu.flush()
        runs = torch_tpu.metrics.snapshot()["executions"]
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        torch_tpu.flush()
        assert torch_tpu.metrics.snapshot()["executions"] - runs == 1
    finally:
        torch_tpu.set_eager_mode(before)
    cpu_norm = torch.nn.utils.clip_grad_norm_(cpu_model.parameters(), 0.5)
    assert_same(norm, cpu_norm, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-6)


# The program of a rotary-embedding block (HF Llama's rotate_half, then an RMSNorm):
# recorded in fused mode and compiled by torch.compile, each dumped by XLA after its
# optimisations. Prints the largest error against CPU.
ROTARY = """
import json, sys, torch, torch_tpu
from torch_tpu.compiler import custom_compiler_options

def block(x, w, cos, sin):
    h = x @ w
    h1, h2 = h[..., :8], h[..., 8:]  # rotate_half: two slices of an intermediate
    y = h * cos + torch.cat((-h2, h1), dim=-1) * sin
    return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)

g = torch.Generator().manual_seed(0)
args = [torch.randn(s, generator=g) for s in [(4, 2, 6, 16), (16, 16), (6, 16), (6, 16)]]
want = block(*args)
tpu = [a.to("tpu") for a in args]
errors = []
torch_tpu.set_eager_mode("fused")
with custom_compiler_options({"xla_dump_to": sys.argv[1] + "/fused"}):
    errors.append((block(*tpu).cpu() - want).abs().max().item())
torch_tpu.set_eager_mode("op")
with custom_compiler_options({"xla_dump_to": sys.argv[1] + "/compiled"}):
    errors.append((torch.compile(block, backend="tpu")(*tpu).cpu() - want).abs().max().item())
print(json.dumps(errors))
"""


def test_fused_program_slices_statically_and_fuses_like_a_compiled_graph(tmp_path):
    # A view of a value computed in the same group is a static slice (its offset is in the
    # key), and the literal exponent 2 a constant: XLA then fuses the group as it fuses
    # the compiled graph of the same code. With runtime offsets and exponents the group
    # held dynamic-slices and powf calls (and 20% more fusions than the graph).
    (tmp_path / "block.py").write_text(ROTARY)
    r = run_python(
        f"import runpy, sys; sys.argv = ['block', {str(tmp_path)!r}]; "
        f"runpy.run_path({str(tmp_path / 'block.py')!r}, run_name='__main__')",
        env={"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache"), "XLA_FLAGS": None},
    )
    assert r.returncode == 0, r.stderr
    assert max(json.loads(r.stdout.strip().splitlines()[-1])) < 1e-4

    def optimized(kind):
        texts = [p.read_text() for p in (tmp_path / kind).glob("*after_optimizations.txt")]
        assert texts, f"no {kind} program dumped"
        return max(texts, key=len)  # the block (not a transfer's small program)

    fused, compiled = optimized("fused"), optimized("compiled")
    for op in ("dynamic-slice(", "power("):
        assert op not in fused, f"the fused program holds a {op[:-1]}:\n{fused}"

    def fusions(text):
        return len(re.findall(r"\bfusion\(", text))

    assert fusions(fused) <= 1.2 * fusions(compiled), (fusions(fused), fusions(compiled))
