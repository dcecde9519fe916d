"""Compiled graphs with functional collectives inside, ranks as threads of one process
(rank r on tpu:r, see dist_threads.py): on a group of tpu_dist's in-program transport the
collectives are part of the graph's program, one launch over the group's devices; on a
host-staged group the graph is split around them and they run eagerly. Each scenario
compares the compiled results with the same functional collectives run eagerly and with
a CPU reference. `main` prints one JSON line: {scenario: "ok" or the error}."""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import torch_tpu
import dist_threads as t
from dist_collectives import exact

WORLD = 2


def _inputs(rank, shape=(4, 6), dtype=torch.float32):
    """Rank r's input, the same on every run: distinct values per rank."""
    g = torch.Generator().manual_seed(100 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def _all(shape=(4, 6), dtype=torch.float32, world=WORLD):
    return [_inputs(r, shape, dtype) for r in range(world)]


def _metrics():
    m = torch_tpu.metrics.snapshot()
    return m["graph_splits"], m["in_program_graph_runs"]


def _reduce(xs, op):
    stacked = torch.stack(xs)
    if op == "sum":
        return stacked.sum(0)
    if op == "avg":
        return stacked.sum(0) / len(xs)
    if op == "product":
        return stacked.prod(0)
    if op == "min":
        return stacked.amin(0)
    return stacked.amax(0)


def _run(fn, expect_program=True, world=WORLD):
    """Runs fn(rank) on `world` threaded ranks; checks that each compiled call was one
    program over the group (or, with expect_program=False, a split graph)."""
    splits0, runs0 = _metrics()
    out = t.all_ok(t.run_ranks(world, lambda rank, world: fn(rank)))
    splits1, runs1 = _metrics()
    if expect_program:
        assert splits1 == splits0, "the graph was split around its collectives"
        assert runs1 > runs0, "no compiled graph ran over the group's devices"
    else:
        assert runs1 == runs0 and splits1 > splits0, (splits0, splits1, runs0, runs1)
    return out


def all_reduce():
    """all_reduce with every reduce op inside compiled code between other ops (and sum
    on 4 ranks)."""
    for op, world in (("sum", 2), ("avg", 2), ("min", 2), ("max", 2), ("product", 2), ("sum", 4)):
        torch._dynamo.reset()

        def body(x, op=op):
            y = funcol.all_reduce(x * 2 + 1, op, dist.group.WORLD)
            return y.sin() + x

        compiled = torch.compile(body, backend="tpu", fullgraph=True)

        def fn(rank):
            x = _inputs(rank).to(f"tpu:{rank}")
            got = compiled(x)
            eager = body(x)
            return got.cpu(), eager.cpu()

        out = _run(fn, world=world)
        xs = _all(world=world)
        for rank, (got, eager) in out.items():
            ref = _reduce([x * 2 + 1 for x in xs], op).sin() + xs[rank]
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got, eager, rtol=1e-6, atol=1e-6)


def integer_all_reduce():
    """Integer sums are exact; a bitwise reduce op folds a gather in the program."""
    for op in ("sum", "bor", "band"):
        torch._dynamo.reset()

        def body(x, op=op):
            return funcol.all_reduce(x + 1, op, dist.group.WORLD) * 3

        compiled = torch.compile(body, backend="tpu", fullgraph=True)

        def fn(rank):
            x = _inputs(rank, dtype=torch.int32).to(f"tpu:{rank}")
            return compiled(x).cpu(), body(x).cpu()

        out = _run(fn)
        xs = [x + 1 for x in _all(dtype=torch.int32)]
        ref = {
            "sum": xs[0] + xs[1],
            "bor": xs[0] | xs[1],
            "band": xs[0] & xs[1],
        }[op] * 3
        for got, eager in out.values():
            exact(got, ref)
            exact(eager, ref)


def gather_scatter_exchange():
    """all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single (even splits)
    in one compiled function (gathered along dimension 1: the rest is ops of the graph)."""
    torch._dynamo.reset()

    def body(x):
        g = funcol.all_gather_single(x, 1, dist.group.WORLD)
        s = funcol.reduce_scatter_single(x * 3, "avg", 0, dist.group.WORLD)
        a = funcol.all_to_all_single(x - 1, None, None, dist.group.WORLD)
        return g.cos(), s + 1, a * 2

    compiled = torch.compile(body, backend="tpu", fullgraph=True)

    def fn(rank):
        x = _inputs(rank).to(f"tpu:{rank}")
        return [v.cpu() for v in compiled(x)], [v.cpu() for v in body(x)]

    out = _run(fn)
    xs = _all()
    half = xs[0].shape[0] // WORLD
    for rank, (got, eager) in out.items():
        ref_g = torch.cat(xs, 1).cos()
        ref_s = (sum(x * 3 for x in xs) / WORLD)[rank * half : (rank + 1) * half] + 1
        ref_a = torch.cat([(x - 1)[rank * half : (rank + 1) * half] for x in xs]) * 2
        for g, e, ref in zip(got, eager, (ref_g, ref_s, ref_a)):
            torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


def interleaved():
    """Eager collectives and compiled graphs on the same group take their turns in one
    sequence: a compiled call between two eager all_reduces, repeated."""
    torch._dynamo.reset()

    def body(x):
        return funcol.all_reduce(x.exp(), "max", dist.group.WORLD) - x

    compiled = torch.compile(body, backend="tpu", fullgraph=True)

    def fn(rank):
        x = _inputs(rank).to(f"tpu:{rank}")
        results = []
        for _ in range(3):
            dist.all_reduce(x)
            y = compiled(x)
            dist.all_reduce(y)
            results.append(y.cpu())
            x = x / 4
        return results

    out = _run(fn)
    x0, x1 = _all()
    refs = []
    for _ in range(3):
        s = x0 + x1  # the eager all_reduce, in place on both ranks
        refs.append(WORLD * (s.exp() - s))
        x0 = x1 = s / 4
    for results in out.values():
        for got, ref in zip(results, refs):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def mismatch():
    """A rank that runs something else than the compiled graph fails every rank."""
    torch._dynamo.reset()

    def body(x):
        return funcol.all_reduce(x, "sum", dist.group.WORLD)

    compiled = torch.compile(body, backend="tpu", fullgraph=True)

    def fn(rank):
        x = _inputs(rank).to(f"tpu:{rank}")
        compiled(x)  # compiles on both ranks and runs once
        try:
            if rank == 0:
                compiled(x)
            else:
                dist.all_reduce(x)
        except Exception as e:  # noqa: BLE001
            return str(e)
        return "no error"

    out = t.run_ranks(WORLD, lambda rank, world: fn(rank))
    for rank in range(WORLD):
        assert "the ranks of the group disagree" in str(out[rank]), out
        assert "Exception raised from" not in str(out[rank]), out


def host_staged():
    """On a host-staged group the graph is split around its collectives, which run
    eagerly; results are the same."""
    os.environ["TORCH_TPU_DIST_TRANSPORT"] = "host"
    try:
        torch._dynamo.reset()

        def body(x):
            return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

        compiled = torch.compile(body, backend="tpu")

        def fn(rank):
            x = _inputs(rank).to(f"tpu:{rank}")
            return compiled(x).cpu()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _run(fn, expect_program=False)
    finally:
        del os.environ["TORCH_TPU_DIST_TRANSPORT"]
    xs = _all()
    ref = xs[0] * 2 + xs[1] * 2 + 1
    for got in out.values():
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    from torch_tpu import _dynamo

    said = [m for m in _dynamo._warned if "_c10d_functional.all_reduce" in m]
    assert said and all("in-program transport" in m for m in said), _dynamo._warned


SCENARIOS = {
    "all_reduce": all_reduce,
    "integer_all_reduce": integer_all_reduce,
    "gather_scatter_exchange": gather_scatter_exchange,
    "interleaved": interleaved,
    "mismatch": mismatch,
    "host_staged": host_staged,
}

if __name__ == "__main__":
    t.SCENARIOS = SCENARIOS
    t.main(sys.argv[1:] or list(SCENARIOS))
