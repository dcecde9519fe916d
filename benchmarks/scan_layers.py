"""A stack of identical layers compiled as a `scan` over stacked weights against the same
layers unrolled, and against one layer: compile time (first training step, and XLA's
compile seconds) and warm step time (forward + backward), with CPU eager for the same
step (one layer and all layers), in one run. Each variant runs in its own subprocess with an empty compile cache.

    python benchmarks/scan_layers.py [--layers 16] [--dim 256] [--batch 64] [--steps 20]

The layer is a small MLP block with a residual: h + W2 relu(W1 h + b1).
"""

import argparse
import tempfile

from _timing import run_script

CHILD = r"""
import json, resource, sys, time, torch
from torch._higher_order_ops.scan import scan
variant, layers, dim, batch, steps, rounds = sys.argv[1], *map(int, sys.argv[2:7])
device = "cpu" if variant.startswith("cpu") else "tpu"
if device == "tpu":
    import torch_tpu
    sync = torch.tpu.synchronize
else:
    sync = lambda: None
sys.path.insert(0, sys.argv[7])
from _timing import timed_rounds
n = 1 if variant in ("one", "cpu one") else layers
g = torch.Generator().manual_seed(0)
w1 = (torch.randn(n, dim, 4 * dim, generator=g) / dim ** 0.5).to(device).requires_grad_()
b1 = torch.zeros(n, 4 * dim).to(device).requires_grad_()
w2 = (torch.randn(n, 4 * dim, dim, generator=g) / (4 * dim) ** 0.5 / n).to(device).requires_grad_()
x = torch.randn(batch, dim, generator=g).to(device)

def layer(h, w1, b1, w2):
    return h + torch.relu(h @ w1 + b1) @ w2

def unrolled(x, w1, b1, w2):
    for i in range(w1.shape[0]):
        x = layer(x, w1[i], b1[i], w2[i])
    return x

def scanned(x, w1, b1, w2):
    return scan(lambda h, p: (layer(h, *p), ()), x, (w1, b1, w2))[0]

fn = scanned if variant == "scan" else unrolled
if device == "tpu":
    fn = torch.compile(fn, backend="tpu", fullgraph=True)

def step():
    w1.grad = b1.grad = w2.grad = None
    loss = fn(x, w1, b1, w2).square().mean()
    loss.backward()
    return loss

def cpu_seconds():  # this process's CPU time: robust on a machine other work shares
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

out = {}
if device == "tpu":
    m0 = torch_tpu.metrics.snapshot()
start, cpu0 = time.perf_counter(), cpu_seconds()
step(); sync()
out["first_step_s"] = time.perf_counter() - start
out["first_step_cpu_s"] = cpu_seconds() - cpu0
if device == "tpu":
    m = torch_tpu.metrics.snapshot()
    out["xla_compile_s"] = m["compile_seconds"] - m0["compile_seconds"]
    out["graphs"] = m["graphs"] - m0["graphs"]
times, loss = timed_rounds(step, sync, rounds, steps)
out["step_ms"] = 1000 * min(times)
out["loss"] = float(loss.detach().cpu())
print("RESULT " + json.dumps(out))
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="warm steps per timed round")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (the best is kept)")
    args = p.parse_args()
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    rows = {}
    for variant in ("one", "unrolled", "scan", "cpu one", "cpu"):
        steps = max(1, args.steps // 10) if variant == "cpu" else args.steps
        with tempfile.TemporaryDirectory() as cache:
            env = {"TORCH_TPU_CACHE_DIR": cache, "TORCHINDUCTOR_CACHE_DIR": cache}
            rows[variant] = run_script(
                CHILD, [variant, args.layers, args.dim, args.batch, steps, args.rounds, here], env
            )
    print(
        f"{args.layers} layers of h + W2 relu(W1 h + b1), dim {args.dim}, batch {args.batch}; "
        "training step (forward + backward)"
    )
    print(
        f"{'variant':<10}{'first step s':>14}{'(CPU s)':>9}{'XLA compile s':>15}{'step ms':>10}"
        f"{'vs CPU eager':>14}"
    )
    for variant, r in rows.items():
        cpu = rows["cpu one" if variant in ("one", "cpu one") else "cpu"]["step_ms"]
        print(
            f"{variant:<10}{r['first_step_s']:>14.2f}{r['first_step_cpu_s']:>9.2f}"
            f"{r.get('xla_compile_s', float('nan')):>15.2f}"
            f"{r['step_ms']:>10.2f}{cpu / r['step_ms']:>13.2f}x"
        )
    one, unrolled, scanned = rows["one"], rows["unrolled"], rows["scan"]

    def vs_one(r):
        return (
            f"first step {r['first_step_s'] / one['first_step_s']:.2f}x "
            f"(CPU time {r['first_step_cpu_s'] / one['first_step_cpu_s']:.2f}x), "
            f"XLA {r['xla_compile_s'] / one['xla_compile_s']:.2f}x"
        )

    print(f"compile vs one layer: scan {vs_one(scanned)}; unrolled {vs_one(unrolled)}")
    print(
        f"scan step vs unrolled: {scanned['step_ms'] / unrolled['step_ms']:.2f}x; "
        f"losses scan {scanned['loss']:.6f} unrolled {unrolled['loss']:.6f} "
        f"cpu {rows['cpu']['loss']:.6f}"
    )


if __name__ == "__main__":
    main()
