"""Host time per op: 1,000 tiny ops of mixed kinds (binary, scalar, unary, reduction,
broadcast, transpose view, matmul, in-place, max) on 4x4 f32 tensors, in tpu op mode,
tpu fused mode recorded the full way (trace reuse off), fused mode reusing the previous
step's trace, and CPU eager, all in one process and one run.

    python benchmarks/host_overhead.py [--rounds 7] [--steps 5]

The figures are the host time a step takes to return, per ATen call and per op that
runs on the device (recorded, in fused mode): tpu work is asynchronous, so each
timed round starts and ends with a synchronize outside the timer, and the device's work
is not counted (on XLA:CPU it shares the host's cores, so it can still slow the host).
Fused mode's figure includes its flush, which launches the step's one program. Also
printed: the first fused step (recording plus compiling that program), and each figure
as a ratio against CPU eager's. Median of the rounds.
"""

import argparse
import statistics
import time

import torch

import torch_tpu
from _timing import timed_rounds
from torch_tpu import _C

BLOCKS = 100  # ten ops each


def step(a, b, w, acc):
    """1,000 ATen calls; 900 of them run on the device (the transpose is a view)."""
    for _ in range(BLOCKS):
        t = a + b  # binary
        t = t * 0.5  # with a Python scalar
        t = t.tanh()  # unary
        s = t.sum(0)  # reduction
        t = t - s  # broadcast
        t = t.t()  # view
        t = t.mm(w)  # matmul, reading the transposed view
        t = t.relu()
        acc.add_(t, alpha=0.25)  # in-place
        a = t.amax(1, keepdim=True)  # the next block's a + b broadcasts it
    return a


def host_seconds(fn, sync, rounds, steps):
    return statistics.median(timed_rounds(fn, sync, rounds, steps, host_only=True)[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5, help="steps per timed round")
    args = p.parse_args()
    ops = BLOCKS * 10

    torch.manual_seed(0)
    host = [torch.randn(4, 4) for _ in range(4)]

    def run(device):
        a, b, w, acc = (t.to(device) for t in host)
        return lambda: step(a, b, w, acc)

    cpu = host_seconds(run("cpu"), lambda: None, args.rounds, args.steps)
    sync = torch.tpu.synchronize
    results = {}

    torch_tpu.set_eager_mode("op")
    fn = run("tpu")
    fn()
    results["tpu op mode"] = host_seconds(fn, sync, args.rounds, args.steps)

    torch_tpu.set_eager_mode("fused")
    flush = torch_tpu.flush

    def fused_step(fn):
        fn()
        flush()

    fn = run("tpu")
    sync()
    start = time.perf_counter()
    fused_step(fn)
    first = time.perf_counter() - start
    sync()
    _C._set_trace_reuse(False)
    results["tpu fused, full record"] = host_seconds(
        lambda: fused_step(fn), sync, args.rounds, args.steps
    )
    _C._set_trace_reuse(True)
    fused_step(fn)  # records the trace the timed steps repeat
    before = torch_tpu.metrics.snapshot()
    results["tpu fused, reused trace"] = host_seconds(
        lambda: fused_step(fn), sync, args.rounds, args.steps
    )
    after = torch_tpu.metrics.snapshot()
    torch_tpu.set_eager_mode("op")

    timed = args.rounds * args.steps
    recorded = (after["fused_ops"] - before["fused_ops"]) / timed
    print(
        f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, "
        f"{torch.tpu.get_device_name(0)}, CPU threads {torch.get_num_threads()}"
    )
    print(
        f"{ops} ATen calls per step, {recorded:.0f} "
        f"of them recorded ops in fused mode, "
        f"{(after['fused_groups'] - before['fused_groups']) / timed:.1f} program(s) per fused "
        f"step; {after['fused_reuses'] - before['fused_reuses']} of the {timed} timed "
        f"reuse steps repeated the trace; median of {args.rounds} rounds x {args.steps} steps"
    )
    print(f"{'':<26} {'us/call':>8} {'us/recorded op':>15} {'x CPU':>7}")
    print(f"{'CPU eager':<26} {cpu / ops * 1e6:>8.2f} {'':>15} {1:>7.2f}")
    for name, seconds in results.items():
        print(
            f"{name:<26} {seconds / ops * 1e6:>8.2f} {seconds / recorded * 1e6:>15.2f} "
            f"{seconds / cpu:>7.2f}"
        )
    print(f"first fused step (records and compiles its program): {first * 1e3:.0f} ms")
    return results


if __name__ == "__main__":
    main()
