"""torch.tpu.ops: ragged_dot and its weight gradient (eager and compiled, values and
gradients against a per-group CPU reference), all_gather_dim and reduce_scatter_dim on
two ranks."""

import pytest
import torch

import torch_tpu  # noqa: F401
from helpers import assert_same, rand

SIZES = [3, 0, 4, 2]  # an empty group included; 9 rows of 10 are grouped, the last is 0


def _reference(lhs, rhs, sizes):
    out = torch.zeros(lhs.shape[0], rhs.shape[2], dtype=lhs.dtype)
    start = 0
    for i, n in enumerate(sizes):
        out[start : start + n] = lhs[start : start + n] @ rhs[i]
        start += n
    return out


def _inputs(dtype=torch.float32):
    lhs = rand((10, 6), dtype, seed=1).requires_grad_()
    rhs = rand((len(SIZES), 6, 5), dtype, seed=2).requires_grad_()
    grad = rand((10, 5), dtype, seed=3)
    return lhs, rhs, grad


@pytest.mark.parametrize("compiled", [False, True])
def test_ragged_dot_value_and_gradients(compiled, fresh_dynamo):
    lhs, rhs, grad = _inputs()
    expected = _reference(lhs, rhs, SIZES)
    expected.backward(grad)
    t_lhs = lhs.detach().to("tpu").requires_grad_()
    t_rhs = rhs.detach().to("tpu").requires_grad_()
    sizes = torch.tensor(SIZES, device="tpu")
    fn = torch.tpu.ops.ragged_dot
    if compiled:
        fn = torch.compile(fn, backend="tpu")
    out = fn(t_lhs, t_rhs, sizes)
    out.backward(grad.to("tpu"))
    assert_same(out.detach(), expected.detach(), rtol=1e-5, atol=1e-5)
    assert_same(t_lhs.grad, lhs.grad, rtol=1e-5, atol=1e-5)
    assert_same(t_rhs.grad, rhs.grad, rtol=1e-5, atol=1e-5)


def test_ragged_dot_weight_grad_and_out():
    lhs, rhs, grad = _inputs()
    _reference(lhs, rhs, SIZES).backward(grad)
    sizes = torch.tensor(SIZES)  # on the host: moved to the device by the op
    wg = torch.tpu.ops.ragged_dot_weight_grad(lhs.detach().to("tpu"), grad.to("tpu"), sizes)
    assert_same(wg, rhs.grad, rtol=1e-5, atol=1e-5)
    out = torch.empty(10, 5, device="tpu")
    r = torch.tpu.ops.ragged_dot(lhs.detach().to("tpu"), rhs.detach().to("tpu"), sizes, out=out)
    assert r is out
    assert_same(out, _reference(lhs, rhs, SIZES).detach(), rtol=1e-5, atol=1e-5)


def test_ragged_dot_bf16():
    lhs, rhs, _ = _inputs()
    expected = _reference(lhs.detach().bfloat16().float(), rhs.detach().bfloat16().float(), SIZES)
    out = torch.tpu.ops.ragged_dot(
        lhs.detach().bfloat16().to("tpu"), rhs.detach().bfloat16().to("tpu"), torch.tensor(SIZES)
    )
    eps = torch.finfo(torch.bfloat16).eps
    assert_same(out, expected.bfloat16(), rtol=2 * eps, atol=2 * eps * expected.abs().max().item())


def test_ragged_dot_checks_shapes():
    x = torch.zeros(4, 3, device="tpu")
    with pytest.raises(ValueError, match="rhs"):
        torch.tpu.ops.ragged_dot(x, torch.zeros(2, 4, 5, device="tpu"), torch.tensor([2, 2]))
    with pytest.raises(ValueError, match="group_sizes"):
        torch.tpu.ops.ragged_dot(x, torch.zeros(2, 3, 5, device="tpu"), torch.tensor([4]))
    with pytest.raises(TypeError, match="integers"):
        torch.tpu.ops.ragged_dot(x, torch.zeros(1, 3, 5, device="tpu"), torch.tensor([4.0]))


def init_rank(rank, world, init_method):
    """Joins the group of a rank process (dist_launch): host-staged tpu_dist."""
    import datetime

    import torch.distributed as dist

    import torch_tpu  # noqa: F401, F811  (in the rank process)

    dist.init_process_group(
        "cpu:gloo,tpu:tpu_dist",
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )


def collectives_worker(rank, world, init_method):
    """Runs in each of two processes (dist_launch): the functional collectives."""
    init_rank(rank, world, init_method)
    from torch.profiler import ProfilerActivity, profile

    base = torch.arange(12.0).reshape(3, 4)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        g = torch.tpu.ops.all_gather_dim((base + 100 * rank).to("tpu"), 1).cpu()
    staged = [e for e in prof.events() if e.name == "tpu_dist::stage_to_host"]
    want_g = torch.cat([base + 100 * r for r in range(world)], 1)
    y = torch.arange(8.0).reshape(4, 2)
    s = torch.tpu.ops.reduce_scatter_dim((y * (rank + 1)).to("tpu"), 0).cpu()
    want_s = sum(y * (r + 1) for r in range(world)).chunk(world, 0)[rank]
    m = torch.tpu.ops.reduce_scatter_dim((y * (rank + 1)).to("tpu"), -1, reduce_op="max").cpu()
    want_m = (y * world).chunk(world, 1)[rank]
    return [
        torch.equal(g, want_g),
        torch.equal(s, want_s),
        torch.equal(m, want_m),
        len(staged) >= 1,
    ]


def test_all_gather_and_reduce_scatter_dim():
    from dist_launch import launch

    out = launch(collectives_worker, 2, timeout=200)
    # values, and the profiler's host event for the staging of the all-gather
    assert out == {0: [True] * 4, 1: [True] * 4}


# Two ranks' ragged_all_to_all plans: rank -> (input_offsets, send_sizes, output_offsets,
# recv_sizes). Rank 0 keeps rows 0-1 (written at 1) and sends rows 2-4 to rank 1 (written
# at 0); rank 1 sends row 3 to rank 0 (written at 4) and keeps rows 0-1 (written at 3).
RAGGED = {0: ([0, 2], [2, 3], [1, 0], [2, 1]), 1: ([3, 0], [1, 2], [4, 3], [3, 2])}


def ragged_reference(operands, outputs):
    """Every rank's result, computed on the CPU from all ranks' inputs."""
    results = [o.clone() for o in outputs]
    for src, (in_off, send, out_off, _) in RAGGED.items():
        for dst in RAGGED:
            rows = operands[src][in_off[dst] : in_off[dst] + send[dst]]
            results[dst] = torch.cat(
                [results[dst][: out_off[dst]], rows, results[dst][out_off[dst] + send[dst] :]]
            )
    return results


def p2p_worker(rank, world, init_method):
    """Runs in each of two processes (dist_launch): send/recv and ragged_all_to_all."""
    import torch.distributed as dist

    init_rank(rank, world, init_method)
    ok = []
    a, b = torch.arange(6.0).reshape(2, 3), torch.arange(4, dtype=torch.int64)
    if rank == 0:
        torch.tpu.ops.send([a.to("tpu"), b.to("tpu")], 1, tag=7).wait()
        got = torch.zeros(3, device="tpu")
        torch.tpu.ops.recv([got], 1, tag=8).wait()
        ok.append(torch.equal(got.cpu(), torch.full((3,), 5.0)))
    else:
        x, y = torch.zeros(2, 3, device="tpu"), torch.zeros(4, dtype=torch.int64, device="tpu")
        torch.tpu.ops.recv([x, y], 0, tag=7).wait()
        ok.append(torch.equal(x.cpu(), a) and torch.equal(y.cpu(), b))
        torch.tpu.ops.send([torch.full((3,), 5.0, device="tpu")], 0, tag=8).wait()

    operands = [(torch.arange(18.0).reshape(6, 3) + 100 * r).requires_grad_() for r in RAGGED]
    outputs = [torch.full((6, 3), -1.0 - r).requires_grad_() for r in RAGGED]
    weights = [torch.linspace(-1, 2, 18).reshape(6, 3) * (r + 1) for r in RAGGED]
    want = ragged_reference(operands, outputs)
    sum((w * y).sum() for w, y in zip(weights, want)).backward()
    plan = [torch.tensor(v, device="tpu") for v in RAGGED[rank]]
    op = operands[rank].detach().to("tpu").requires_grad_()
    out0 = outputs[rank].detach().to("tpu").requires_grad_()
    got = torch.tpu.ops.ragged_all_to_all(op, out0, *plan)
    (weights[rank].to("tpu") * got).sum().backward()
    ok.append(torch.equal(got.detach().cpu(), want[rank].detach()))
    ok.append(torch.equal(op.grad.cpu(), operands[rank].grad))
    ok.append(torch.equal(out0.grad.cpu(), outputs[rank].grad))
    # Inside a compiled graph (fullgraph: no break; the graph is split around the op).
    op.grad = out0.grad = None
    step = torch.compile(
        lambda a, b, w: (w * torch.tpu.ops.ragged_all_to_all(a * 1.0, b, *plan)).sum(),
        backend="tpu",
        fullgraph=True,
    )
    step(op, out0, weights[rank].to("tpu")).backward()
    ok.append(torch.equal(op.grad.cpu(), operands[rank].grad))
    ok.append(torch.equal(out0.grad.cpu(), outputs[rank].grad))
    into = torch.zeros(6, 3, device="tpu")
    res = torch.tpu.ops.ragged_all_to_all(
        op.detach(), out0.detach(), *plan, dist.group.WORLD.group_name, out=into
    )
    ok.append(res is into and torch.equal(into.cpu(), want[rank].detach()))
    try:
        torch.tpu.ops.ragged_all_to_all(op, out0, plan[0], torch.tensor([9, 9]), *plan[2:])
        ok.append(False)
    except ValueError as e:
        ok.append("past the operand" in str(e))
    return ok


def test_send_recv_and_ragged_all_to_all():
    from dist_launch import launch

    out = launch(p2p_worker, 2, timeout=200)
    # send/recv; ragged_all_to_all's values, both gradients eager and compiled, out=,
    # a bad size
    assert out == {0: [True] * 8, 1: [True] * 8}


def test_optimization_barrier_values_and_gradient():
    a = rand((3, 4), torch.float32, seed=5).requires_grad_()
    b = rand((5,), torch.int64, seed=6)
    ta = a.detach().to("tpu").requires_grad_()
    x, y = torch.tpu.ops.optimization_barrier([ta * 2, b.to("tpu")])
    assert_same(x.detach(), (a * 2).detach())
    assert_same(y, b)
    x.sin().sum().backward()
    (a * 2).sin().sum().backward()
    assert_same(ta.grad, a.grad)
    assert torch.tpu.ops.optimization_barrier([]) == []
    with pytest.raises(RuntimeError, match="expected tpu tensors"):
        torch.tpu.ops.optimization_barrier([a])


def test_optimization_barrier_is_in_the_program(tmp_path):
    from helpers import run_python

    out = run_python(
        "import torch, torch_tpu\n"
        "x = torch.arange(4.).to('tpu')\n"
        "print(torch.tpu.ops.optimization_barrier([x + 1])[0].cpu().tolist())\n",
        env={"TORCH_TPU_DUMP_DIR": str(tmp_path), "TORCH_TPU_DISK_CACHE": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"
    texts = [p.read_text() for p in tmp_path.glob("*.mlir")]
    assert sum("stablehlo.optimization_barrier" in t for t in texts) == 1
