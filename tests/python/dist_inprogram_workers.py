"""Scenarios for tpu_dist's in-program transport (tests/python/test_distributed_inprogram.py).

They run in one process with TORCH_TPU_NUM_DEVICES=4: the ranks are threads (the c10d
world is made thread-local as torch's multi_threaded_pg does), rank r on tpu:r, all ranks
on one HashStore. Every collective's values are checked exactly against the same
collective computed on CPU tensors. `main` runs the scenarios named on the command line
and prints one JSON line: {scenario: "ok" or the error}."""

from __future__ import annotations

import copy
import datetime
import json
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_tpu

torch_tpu._distributed.install_threaded_world()


def run_ranks(world, fn, *args, timeout=30.0, join=60.0, ranks=None):
    """Runs fn(rank, world, *args) on `world` threaded ranks (or only on `ranks`); returns
    {rank: result or the exception}."""
    store = dist.HashStore()
    out = {}

    def body(rank):
        try:
            torch.tpu.set_device(rank)
            dist.init_process_group("tpu_dist", store=store, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=timeout))
            out[rank] = fn(rank, world, *args)
        except BaseException as e:  # noqa: BLE001
            out[rank] = e
            e.trace = traceback.format_exc()

    threads = [threading.Thread(target=body, args=(r,), daemon=True)
               for r in (ranks if ranks is not None else range(world))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join)
        assert not t.is_alive(), "a rank hung"
    return out


def all_ok(out):
    for rank, value in sorted(out.items()):
        if isinstance(value, BaseException):
            raise AssertionError(f"rank {rank} failed:\n{value.trace}")
    return out


def exact(tpu_tensor, cpu_tensor):
    torch.testing.assert_close(tpu_tensor.cpu(), cpu_tensor, rtol=0, atol=0)


def per_rank(rank, n=6, dtype=torch.float32, scale=1):
    # Distinct per rank and element, exact in every dtype used.
    return (torch.arange(n, dtype=torch.int64) * scale + 10 * (rank + 1)).to(dtype)


def _collectives(rank, W):
    dev = f"tpu:{rank}"
    assert torch_tpu.metrics.dist_transport() == "in_program"
    all_in = [per_rank(r) for r in range(W)]
    mine = all_in[rank]

    # all_reduce: every op, floating, integer and bool
    for op, ref in [(dist.ReduceOp.SUM, sum(all_in)),
                    (dist.ReduceOp.AVG, sum(all_in) / W),
                    (dist.ReduceOp.MIN, torch.stack(all_in).min(0).values),
                    (dist.ReduceOp.MAX, torch.stack(all_in).max(0).values),
                    (dist.ReduceOp.PRODUCT, torch.stack(all_in).prod(0))]:
        t = mine.to(dev)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    ints = [per_rank(r, dtype=torch.int32, scale=3) for r in range(W)]
    for op, fold in [(dist.ReduceOp.SUM, torch.add),
                     (dist.ReduceOp.BAND, torch.bitwise_and),
                     (dist.ReduceOp.BOR, torch.bitwise_or),
                     (dist.ReduceOp.BXOR, torch.bitwise_xor)]:
        ref = ints[0]
        for x in ints[1:]:
            ref = fold(ref, x)
        t = ints[rank].to(dev)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    t = ints[rank].to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    exact(t, torch.div(sum(ints), W, rounding_mode="trunc").to(torch.int32))
    b = torch.tensor([rank == 0, False, True]).to(dev)
    dist.all_reduce(b, op=dist.ReduceOp.MAX)
    exact(b, torch.tensor([True, False, True]))
    h = mine.to(torch.bfloat16).to(dev)
    dist.all_reduce(h)
    exact(h, sum(x.to(torch.bfloat16) for x in all_in))
    # a non-contiguous view is reduced in place; the rest of its storage is untouched
    base = torch.arange(12.0).reshape(3, 4) + rank
    t = base.to(dev)
    dist.all_reduce(t[:, 1])
    ref = base.clone()
    ref[:, 1] = sum(torch.arange(12.0).reshape(3, 4)[:, 1] + r for r in range(W))
    exact(t, ref)
    # async: the Work completes and its future carries the tensors
    t = mine.to(dev)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    exact(fut.value()[0], sum(all_in))
    # premul sum (what DDP's gradient averaging can use)
    t = mine.to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    exact(t, sum(all_in) * 0.5)

    # coalesced: several tensors, one program (DDP's buckets)
    ts = [per_rank(rank, 5).to(dev), per_rank(rank, 3).reshape(3, 1).to(dev)]
    dist.all_reduce_coalesced(ts)
    exact(ts[0], sum(per_rank(r, 5) for r in range(W)))
    exact(ts[1], sum(per_rank(r, 3) for r in range(W)).reshape(3, 1))

    # broadcast from every root, bit-exact (negative zero, NaN, bf16, int64, bool)
    for root in range(W):
        t = (per_rank(rank, 4) * (-1) ** rank).to(dev)
        dist.broadcast(t, src=root)
        exact(t, per_rank(root, 4) * (-1) ** root)
    special = torch.tensor([-0.0, float("nan"), float("inf"), 1.5]) if rank == 1 else torch.zeros(4)
    t = special.to(torch.bfloat16).to(dev)
    dist.broadcast(t, src=1)
    got = t.cpu()
    assert torch.equal(got.view(torch.int16), torch.tensor(
        [-0.0, float("nan"), float("inf"), 1.5]).to(torch.bfloat16).view(torch.int16))
    for dtype in (torch.int64, torch.bool, torch.uint8):
        t = per_rank(rank, 4, dtype=dtype).to(dev)
        dist.broadcast(t, src=W - 1)
        exact(t, per_rank(W - 1, 4, dtype=dtype))

    # all_gather: list, into_tensor, coalesced
    out = [torch.empty(2, 3, device=dev) for _ in range(W)]
    dist.all_gather(out, mine.reshape(2, 3).to(dev))
    for r in range(W):
        exact(out[r], all_in[r].reshape(2, 3))
    whole = torch.empty(W * 6, device=dev)
    dist.all_gather_into_tensor(whole, mine.to(dev))
    exact(whole, torch.cat(all_in))
    whole = torch.empty(W, 6, device=dev)
    dist.all_gather_into_tensor(whole, mine.to(dev))
    exact(whole, torch.stack(all_in))
    obj = [None] * W
    dist.all_gather_object(obj, {"rank": rank})
    assert obj == [{"rank": r} for r in range(W)], obj

    # reduce_scatter: list and tensor, sum and avg
    chunks = [per_rank(rank * W + j, 4) for j in range(W)]
    out = torch.empty(4, device=dev)
    dist.reduce_scatter(out, [c.to(dev) for c in chunks])
    exact(out, sum(per_rank(r * W + rank, 4) for r in range(W)))
    full = torch.cat(chunks)
    out = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(out, full.to(dev), op=dist.ReduceOp.AVG)
    exact(out, sum(per_rank(r * W + rank, 4) for r in range(W)) / W)

    # all_to_all: single (even) and list
    inp = torch.arange(W * 2, dtype=torch.float32) + 100 * rank
    out = torch.empty(W * 2, device=dev)
    dist.all_to_all_single(out, inp.to(dev))
    exact(out, torch.cat([torch.arange(rank * 2, rank * 2 + 2, dtype=torch.float32) + 100 * r
                          for r in range(W)]))
    outs = [torch.empty(3, device=dev) for _ in range(W)]
    dist.all_to_all(outs, [per_rank(rank * W + j, 3).to(dev) for j in range(W)])
    for r in range(W):
        exact(outs[r], per_rank(r * W + rank, 3))
    # uneven splits go through the host-staged fallback, still exact
    in_splits = [r + 1 for r in range(W)]
    out_splits = [rank + 1] * W
    inp = torch.cat([torch.full((j + 1,), float(rank * 10 + j)) for j in range(W)])
    out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(out, inp.to(dev), out_splits, in_splits)
    exact(out, torch.cat([torch.full((rank + 1,), float(r * 10 + rank)) for r in range(W)]))

    # ops the transport delegates to the host-staged fallback
    t = mine.to(dev)
    dist.reduce(t, dst=0)
    if rank == 0:
        exact(t, sum(all_in))
    dist.barrier()
    return torch_tpu.metrics.snapshot()["in_program_collectives"]


def collectives(world):
    before = torch_tpu.metrics.snapshot()
    out = all_ok(run_ranks(world, _collectives))
    after = torch_tpu.metrics.snapshot()
    assert after["in_program_groups"] - before["in_program_groups"] == world
    # (all_gather_object and barrier go to the group's gloo: a group serves CPU tensors)
    assert after["in_program_collectives"] - before["in_program_collectives"] > 25


def _subgroups(rank, W):
    # The odd ranks' group runs on tpu:1 and tpu:3 (a device assignment other than 0..n-1).
    odd = dist.new_group([1, 3])
    even = dist.new_group([0, 2])
    mine = odd if rank % 2 else even
    t = torch.tensor([float(rank)]).to(f"tpu:{rank}")
    dist.all_reduce(t, group=mine)
    exact(t, torch.tensor([float(rank % 2 + rank % 2 + 2)]))
    assert torch_tpu.metrics.dist_transport(mine) == "in_program"


def subgroups():
    all_ok(run_ranks(4, _subgroups))


def _mismatch(rank, W):
    t = torch.ones(3 + rank).to(f"tpu:{rank}")
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "disagree" in str(e) and "rank 1" in str(e), str(e)
        # the group still works afterwards
        t = torch.ones(2).to(f"tpu:{rank}")
        dist.all_reduce(t)
        exact(t, torch.full((2,), float(W)))
        return "raised"
    return "no error"


def mismatch():
    out = all_ok(run_ranks(2, _mismatch))
    assert out == {0: "raised", 1: "raised"}, out


def _missing(rank, W):
    t = torch.ones(2).to(f"tpu:{rank}")
    if rank == 1:
        return "skipped"
    start = time.monotonic()
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "timed out" in str(e) and "rank(s) 1 never joined" in str(e), str(e)
        return time.monotonic() - start
    return "no error"


def missing():
    out = all_ok(run_ranks(2, _missing, timeout=2.0))
    assert isinstance(out[0], float) and 1.5 < out[0] < 10, out


def _ddp(rank, W, full_x, full_y, init_state):
    dev = f"tpu:{rank}"
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    model.load_state_dict(init_state)
    ddp = nn.parallel.DistributedDataParallel(model.to(dev))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    n = full_x.shape[0] // W
    for _ in range(3):
        x = full_x[rank * n:(rank + 1) * n].to(dev)
        y = full_y[rank * n:(rank + 1) * n].to(dev)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return {k: v.cpu() for k, v in ddp.module.state_dict().items()}


def ddp():
    torch.manual_seed(0)
    full_x, full_y = torch.randn(8, 4), torch.randn(8, 2)
    ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    init_state = copy.deepcopy(ref.state_dict())
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(ref(full_x), full_y).backward()
        opt.step()
    out = all_ok(run_ranks(2, _ddp, full_x, full_y, init_state))
    for rank in (0, 1):
        for k, v in ref.state_dict().items():
            torch.testing.assert_close(out[rank][k], v, rtol=1e-5, atol=1e-5)


def fused():
    # Threaded ranks turn recording off: fused mode is refused with a clear error (its
    # process-wide group cannot serve several recording threads).
    assert torch_tpu.get_eager_mode() == "op"
    try:
        torch_tpu.set_eager_mode("fused")
    except RuntimeError as e:
        assert "ranks running as threads" in str(e), e
    else:
        raise AssertionError("fused mode was accepted with threaded ranks")


def _coalescing(rank, W):
    from torch.distributed.distributed_c10d import _coalescing_manager

    import dist_workers as w

    want = w.coalesced_reference(rank, W)
    device = torch.device(f"tpu:{rank}")
    for manager in (_coalescing_manager,
                    lambda: _coalescing_manager(device=device, async_ops=False)):
        got = w.coalesced_calls(rank, W, device, manager)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # A fallback op (send/recv go host-staged) inside the device manager is in its Work.
    t = torch.full((3,), float(rank), device=device)
    with _coalescing_manager(device=device, async_ops=True) as cm:
        dist.all_reduce(t)
        dist.reduce(torch.ones(2, device=device), dst=0)
    cm.wait()
    exact(t, torch.full((3,), float(sum(range(W)))))
    recv = w.ring_exchange(rank, W, device, True)
    exact(recv, torch.arange(7, dtype=torch.float32) + 10 * ((rank - 1) % W))
    return True


def coalescing():
    all_ok(run_ranks(2, _coalescing))
    all_ok(run_ranks(4, _coalescing))


def _pipelined(rank, W):
    # Many collectives issued back to back with device work between them, no host sync:
    # queued replicated launches on XLA:CPU can deadlock (and the plugin aborts the
    # process), which the transport must prevent.
    dev = f"tpu:{rank}"
    x = torch.full((512, 512), 1.0 / 512).to(dev)
    for _ in range(30):
        y = torch.full((1 << 18,), float(rank + 1), device=dev)
        dist.all_reduce(y)
        x = x @ x
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
    exact(y, torch.full((1 << 18,), float(W * (W + 1) // 2)))


def pipelined():
    all_ok(run_ranks(2, _pipelined))


SCENARIOS = {
    "collectives_2": lambda: collectives(2),
    "collectives_4": lambda: collectives(4),
    "subgroups": subgroups,
    "mismatch": mismatch,
    "missing": missing,
    "ddp": ddp,
    "fused": fused,
    "pipelined": pipelined,
    "coalescing": coalescing,
}


def main(names):
    results = {}
    for name in names:
        start = time.monotonic()
        try:
            SCENARIOS[name]()
            results[name] = "ok"
        except BaseException as e:  # noqa: BLE001
            results[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
        results[name + ".seconds"] = round(time.monotonic() - start, 2)
    print("RESULTS " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SCENARIOS))
