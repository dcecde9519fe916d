"""Trace reuse in fused eager mode (runtime/fused_group.h): a group that repeats an earlier
one shares its op records and runs its program, and a call that repeats a trace's next op
records it from its signature alone (aten/call_memo.h's ReplayCall). Every test compares
with CPU PyTorch on the same inputs, or bit for bit with the full record path (reuse off)
or op mode, and reads the `fused_reuses` and `fused_replays` counters to know which path
ran."""

import pytest
import torch

import torch_tpu
from helpers import assert_same, rand

C = torch_tpu._C


def pending() -> int:
    return C._fused_pending()


def reuses() -> int:
    return torch_tpu.metrics.snapshot()["fused_reuses"]


def replays() -> int:
    return torch_tpu.metrics.snapshot()["fused_replays"]


@pytest.fixture
def fused():
    mode, reuse = torch_tpu.get_eager_mode(), C._trace_reuse()
    torch_tpu.set_eager_mode("fused")
    C._set_trace_reuse(True)
    torch.tpu.synchronize()  # ops an earlier test left pending are not this test's group
    yield
    torch_tpu.set_eager_mode(mode)
    C._set_trace_reuse(reuse)


def block(t, b, w, acc):
    """Ten recorded ops of mixed kinds (the transpose is a view, read by mm)."""
    t = t + b
    t = t * 0.5
    t = t.tanh()
    s = t.sum(0)
    t = t - s
    t = t.t().mm(w)
    t = t.relu()
    acc.add_(t, alpha=0.25)
    return t.amax(1, keepdim=True) - acc


def inputs(device, seed=0):
    return [rand((4, 4), torch.float32, seed=seed + i).to(device) for i in range(4)]


def step(device, variant=None, seed=0):
    """499 recorded ops, a 500th that `variant` changes, then 22 more; returns the results
    (fused mode runs them as one group)."""
    t, b, w, acc = inputs(device, seed)
    other = rand((4, 4), torch.float32, seed=seed + 9)
    row, other64 = other[:1].clone().to(device), other.double().to(device)
    other = other.to(device)
    for _ in range(49):
        t = block(t, b, w, acc)
    t = (t * 1.5).sin().cos() + b
    t = (t - 0.25).abs().sqrt().neg() + w  # 499
    if device == "tpu" and torch_tpu.get_eager_mode() == "fused":
        assert pending() == 499
    if variant is None:
        t = t * other
    elif variant == "shape":  # a broadcast operand: (1, 4) instead of (4, 4)
        t = t * row
    elif variant == "dtype":  # in float64, then back
        t = (t * other64).float()
    elif variant == "alias":  # both operands one storage: one parameter, not two
        t = b * b
    elif variant == "view_write":  # an in-place write to a view instead of a new tensor
        t[1:3].mul_(other[1:3])
    else:
        raise ValueError(variant)
    for _ in range(2):
        t = block(t, b, w, acc)
    t = t + 1
    t = t.exp()
    return t, acc


def run(n, variant_at=None, variant=None):
    """`n` steps on tpu (step `variant_at` with `variant`); their results on the host."""
    out = []
    for i in range(n):
        t, acc = step("tpu", variant if i == variant_at else None, seed=i)
        out.append((t.cpu(), acc.cpu()))
    return out


def test_repeated_steps_reuse_and_match_the_full_record_path(fused):
    before, replayed = reuses(), replays()
    reused = run(4)
    assert reuses() - before == 3  # every step after the first
    # In steps 1-3, nearly all of the 521 ops came from their signature alone (ReplayCall);
    # step 0 recorded them in full.
    assert replays() - replayed >= 3 * 480
    C._set_trace_reuse(False)
    before = reuses()
    full = run(4)
    assert reuses() == before
    for i, ((t, acc), (t_full, acc_full)) in enumerate(zip(reused, full)):
        torch.testing.assert_close(t, t_full, rtol=0, atol=0)
        torch.testing.assert_close(acc, acc_full, rtol=0, atol=0)
        ref_t, ref_acc = step("cpu", seed=i)
        torch.testing.assert_close(t, ref_t, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(acc, ref_acc, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["shape", "dtype", "alias", "view_write"])
def test_a_step_whose_500th_op_differs_runs_exactly(fused, variant):
    before = reuses()
    results = run(4, variant_at=2, variant=variant)
    # Steps 1 and 3 repeat step 0; step 2 differs at its 500th op and is recorded from
    # there in full, and step 3 finds step 0's trace again.
    assert reuses() - before == 2
    for i, (t, acc) in enumerate(results):
        ref_t, ref_acc = step("cpu", variant if i == 2 else None, seed=i)
        assert t.dtype == ref_t.dtype
        torch.testing.assert_close(t, ref_t, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(acc, ref_acc, rtol=1e-4, atol=1e-5)
    # The changed step's group is a trace too: both steps now repeat one, and give what
    # the full record path gives.
    before = reuses()
    again = run(2, variant_at=1, variant=variant)
    assert reuses() - before == 2
    C._set_trace_reuse(False)
    full = run(2, variant_at=1, variant=variant)
    for (t, acc), (t_full, acc_full) in zip(again, full):
        torch.testing.assert_close(t, t_full, rtol=0, atol=0)
        torch.testing.assert_close(acc, acc_full, rtol=0, atol=0)


def test_rng_ops_draw_the_same_numbers_with_and_without_reuse():
    def draws(mode, reuse, steps=4):
        torch_tpu.set_eager_mode(mode)
        C._set_trace_reuse(reuse)
        torch.manual_seed(11)
        x = torch.ones(6, 5, device="tpu")
        out = []
        for _ in range(steps):
            a = torch.nn.functional.dropout(x, 0.5)
            b = torch.rand(6, 5, device="tpu") + a
            c = torch.randn(3, device="tpu").mul_(2)
            out += [a.cpu(), b.cpu(), c.cpu()]
        return out + [torch.tpu.get_rng_state()]

    mode, reuse = torch_tpu.get_eager_mode(), C._trace_reuse()
    try:
        before = reuses()
        reused = draws("fused", True)
        # One group per step; the first also makes x, so the third and fourth repeat.
        assert reuses() - before == 2
        full = draws("fused", False)
        op = draws("op", True)
    finally:
        torch_tpu.set_eager_mode(mode)
        C._set_trace_reuse(reuse)
    for x, y, z in zip(reused, full, op):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
        torch.testing.assert_close(x, z, rtol=0, atol=0)
    # Different steps drew different numbers: the offsets advanced.
    assert not torch.equal(reused[0], reused[3])


def test_a_step_with_two_groups_reuses_both(fused):
    x = rand((8,), torch.float32)
    a, ref = x.to("tpu"), x
    before = reuses()
    for _ in range(3):
        s = (a * 2).sum().item()  # a host read: the first group ends here
        assert s == pytest.approx((ref * 2).sum().item(), rel=1e-5)
        a, ref = (a + 1).tanh(), (ref + 1).tanh()
        assert_same(a, ref)  # the second group
    assert reuses() - before == 4  # both groups of the last two steps


def test_a_step_that_donates_differently_runs_the_full_path(fused):
    # `p.mul_` donates p's old buffer, unless the group reads that buffer again: in step
    # 3, `q` is p itself, so the same ops (same keys, same inputs) must not donate, and
    # that step cannot run the program of the steps before it; step 4 repeats steps 0-2,
    # not step 3.
    x, y = rand((16,), torch.float32), rand((16,), torch.float32, seed=1)
    p, ref_p = x.to("tpu"), x.clone()
    for i in range(5):
        q, ref_q = (p, ref_p) if i == 3 else (y.to("tpu"), y)
        before = torch_tpu.metrics.snapshot()
        r = q + 1
        ref_r = ref_q + 1
        p.mul_(0.5)
        ref_p.mul_(0.5)
        assert_same(r, ref_r)
        assert_same(p, ref_p)
        after = torch_tpu.metrics.snapshot()
        assert after["fused_reuses"] - before["fused_reuses"] == (0 if i in (0, 3) else 1)
        assert (after["donated_bytes"] > before["donated_bytes"]) == (i != 3)


def test_clearing_the_program_cache_drops_the_traces(fused):
    x = rand((5,), torch.float32)
    a = x.to("tpu")
    for _ in range(2):
        assert_same(a * 3 + 1, x * 3 + 1)
    torch_tpu.metrics.reset()
    C._clear_cache(True, False)
    assert_same(a * 3 + 1, x * 3 + 1)
    snap = torch_tpu.metrics.snapshot()
    assert snap["fused_reuses"] == 0
    assert snap["cache_misses"] >= 1


def test_a_step_under_other_compile_options_is_not_reused(fused):
    # Compile options (custom_compiler_options, allow_excess_precision) are part of every
    # program's key: a step repeating a trace compiled without them runs a program
    # compiled with them, then reuses that one, and the trace again once they are gone.
    from torch_tpu.compiler import custom_compiler_options

    x = rand((6,), torch.float32)
    a = x.to("tpu")

    def run():
        before = torch_tpu.metrics.snapshot()
        assert_same((a * 3 + 1).exp(), (x * 3 + 1).exp())
        after = torch_tpu.metrics.snapshot()
        return [after[k] - before[k] for k in ("fused_reuses", "cache_misses")]

    run()
    assert run() == [1, 0]
    with custom_compiler_options({"xla_cpu_enable_fast_math": False}):
        assert run() == [0, 1]  # a program of its own (from XLA, or the disk tier)
        assert run() == [1, 0]
    assert run() == [1, 0]


def test_replayed_ops_read_new_scalars_offsets_and_values(fused):
    # Calls recorded from their signature alone (a trace's op) must read this step's
    # operands: a Python scalar that changes every step, a slice of a real buffer at an
    # offset that moves, a slice of a pending value, an in-place write (its version
    # bumped), and in step 2 an input made real by a host read: that op no longer
    # repeats the trace (an external where the trace read a value) and is recorded in full.
    data = rand((12, 4), torch.float32, seed=3)  # x below: never offset 0 (another layout)
    w = rand((4, 4), torch.float32, seed=4)

    def loop(device):
        d, wt = data.to(device), w.to(device)
        acc = torch.zeros(4, 4, device=device)
        acc.cpu()  # its group runs now, not as part of step 0's
        out = []
        for i in range(5):
            x = d[i + 1 : i + 5]  # a view of a real buffer, at a new offset each step
            y = (x.mm(wt) * (0.3 + 0.07 * i)).tanh()  # a new scalar value each step
            if i == 2:
                y.cpu()  # y is real now, not a pending value
            z = y[1:3] + y[:2]  # views of a pending value (static offsets)
            version = acc._version
            acc.add_(y, alpha=0.5)
            assert acc._version > version
            out.append((z.cpu(), acc.cpu().clone()))  # on the CPU, cpu() is acc itself
        return out

    before, replayed = reuses(), replays()
    got = loop("tpu")
    # Steps 1, 3 and 4 repeat step 0 (5 ops each); step 2 its first three ops, up to the
    # host read, and the group after it reads y as an external (recorded in full).
    assert replays() - replayed == 3 * 5 + 3
    assert reuses() - before == 3
    C._set_trace_reuse(False)
    full = loop("tpu")
    for (z, acc), (z_full, acc_full), (z_ref, acc_ref) in zip(got, full, loop("cpu")):
        torch.testing.assert_close(z, z_full, rtol=0, atol=0)
        torch.testing.assert_close(acc, acc_full, rtol=0, atol=0)
        torch.testing.assert_close(z, z_ref, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(acc, acc_ref, rtol=1e-4, atol=1e-5)
