"""A loop whose shapes change every step, cold: a decode-like step (one attention layer
over a context that grows by one token per step, the token read back on the host) for
--steps steps with an empty compilation cache, in tpu op mode, tpu fused mode and CPU
eager, each in its own subprocess, in one run. Every step is a new shape, so this
measures what each eager mode pays in compiles when nothing repeats.

    python benchmarks/varying_shapes.py [--steps 40] [--dim 64]
"""

import argparse
import tempfile

from _timing import run_script

CHILD = r"""
import json, sys, time, torch
steps, d, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if device == "tpu":
    import torch_tpu
torch.manual_seed(0)
w = [torch.randn(d, d).to(device) for _ in range(4)]

def step(x):
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    a = torch.softmax(q @ k.T / d ** 0.5, -1) @ v
    return (torch.nn.functional.gelu(a @ w[3]) + x)[-1:]

ctx = torch.randn(1, d).to(device)
start = time.perf_counter()
for _ in range(steps):
    nxt = step(ctx)
    ctx = torch.cat([ctx, nxt])
    nxt.sum().item()  # the new token goes back to the host
seconds = time.perf_counter() - start
out = {"seconds": seconds, "last": ctx[-1].cpu().tolist()}
if device == "tpu":
    m = torch_tpu.metrics.snapshot()
    out.update(compiles=m["compiles"], compile_seconds=m["compile_seconds"])
print("RESULT " + json.dumps(out))
"""


def run(steps, dim, device, env):
    return run_script(CHILD, [steps, dim, device], env)



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--dim", type=int, default=64)
    args = p.parse_args()
    r = {}
    for mode in ("op", "fused"):
        with tempfile.TemporaryDirectory() as cache:  # cold: no program on disk either
            r[mode] = run(args.steps, args.dim, "tpu",
                          {"TORCH_TPU_EAGER_MODE": mode, "TORCH_TPU_CACHE_DIR": cache})
    r["cpu"] = run(args.steps, args.dim, "cpu", {})
    print(f"{args.steps} steps, context 1..{args.steps}, d={args.dim}, cold caches")
    print(f"{'':<14} {'total s':>8} {'compiles':>9} {'compile s':>10} {'vs CPU':>8}")
    for name, key in (("tpu op mode", "op"), ("tpu fused mode", "fused"), ("CPU eager", "cpu")):
        x = r[key]
        print(f"{name:<14} {x['seconds']:>8.2f} {x.get('compiles', '-'):>9} "
              f"{x.get('compile_seconds', 0):>10.2f} {x['seconds'] / r['cpu']['seconds']:>7.0f}x")
    print(f"op / fused: {r['op']['seconds'] / r['fused']['seconds']:.2f}")


if __name__ == "__main__":
    main()
