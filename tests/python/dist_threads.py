"""Ranks as threads of one process, for tpu_dist's in-program transport: the shared
collectives suite (dist_collectives.py, test_distributed_collectives.py) and the
transport's own scenarios (test_distributed_inprogram.py).

They run in one process with TORCH_TPU_NUM_DEVICES=4: the ranks are threads (the c10d
world is made thread-local as torch's multi_threaded_pg does), rank r on tpu:r, all ranks
on one HashStore. `main` runs the scenarios named on the command line and prints one JSON
line: {scenario: "ok" or the error}."""

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
import dist_collectives as c
from dist_collectives import exact

torch_tpu._distributed.install_threaded_world()


def run_ranks(world, fn, *args, timeout=30.0, join=60.0, ranks=None):
    """Runs fn(rank, world, *args) on `world` threaded ranks (or only on `ranks`); returns
    {rank: result or the exception}."""
    store = dist.HashStore()
    out = {}

    def body(rank):
        try:
            torch.tpu.set_device(rank)
            dist.init_process_group(
                "tpu_dist",
                store=store,
                rank=rank,
                world_size=world,
                timeout=datetime.timedelta(seconds=timeout),
            )
            out[rank] = fn(rank, world, *args)
        except BaseException as e:  # noqa: BLE001
            out[rank] = e
            e.trace = traceback.format_exc()

    threads = [
        threading.Thread(target=body, args=(r,), daemon=True)
        for r in (ranks if ranks is not None else range(world))
    ]
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


def _collectives(rank, W):
    c.collectives(rank, W, f"tpu:{rank}", "in_program")


def collectives(world):
    before = torch_tpu.metrics.snapshot()
    all_ok(run_ranks(world, _collectives))
    after = torch_tpu.metrics.snapshot()
    assert after["in_program_groups"] - before["in_program_groups"] >= world


def coalescing():
    for world in (2, 4):
        all_ok(run_ranks(world, lambda rank, W: c.coalescing(rank, W, f"tpu:{rank}")))


def sends_waited_first():
    all_ok(run_ranks(2, lambda rank, W: c.sends_waited_first(rank, W, f"tpu:{rank}")))


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
        x = full_x[rank * n : (rank + 1) * n].to(dev)
        y = full_y[rank * n : (rank + 1) * n].to(dev)
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
    "sends_waited_first": sends_waited_first,
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
