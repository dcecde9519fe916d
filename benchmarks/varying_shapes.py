"""A loop whose shapes change every step, cold: a decode-like step (one attention layer
over a context that grows by one token per step, the token read back on the host) for
--steps steps with an empty compilation cache, in tpu op mode, tpu fused mode, compiled
(`torch.compile(backend="tpu")` with the context marked dynamic: one program per bucket,
and with TORCH_TPU_SHAPE_BUCKETS=off: one per shape) and CPU eager, each in its own
subprocess, in one run. Every step is a new shape, so this measures what each mode pays
in compiles when nothing repeats; the compiled step also runs at one fixed context
length for comparison.

    python benchmarks/varying_shapes.py [--steps 40] [--dim 64]
"""

import argparse
import tempfile

from _timing import run_script

CHILD = r"""
import json, sys, time, torch
steps, d, device, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if device == "tpu":
    import torch_tpu
torch.manual_seed(0)
w = [torch.randn(d, d).to(device) for _ in range(4)]

def layer(x):
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    a = torch.softmax(q @ k.T / d ** 0.5, -1) @ v
    return torch.nn.functional.gelu(a @ w[3]) + x

if how == "eager":
    step = lambda x: layer(x)[-1:]
else:  # compiled: the layer is the graph, its context length dynamic
    compiled = torch.compile(layer, backend="tpu")
    def step(x):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)[-1:]

ctx = torch.randn(1 if how != "fixed" else steps, d).to(device)
start = time.perf_counter()
for _ in range(steps):
    nxt = step(ctx)
    if how != "fixed":
        ctx = torch.cat([ctx, nxt])
    nxt.sum().item()  # the new token goes back to the host
seconds = time.perf_counter() - start
out = {"seconds": seconds, "last": ctx[-1].cpu().tolist()}
if device == "tpu":
    m = torch_tpu.metrics.snapshot()
    out.update(compiles=m["compiles"], compile_seconds=m["compile_seconds"])
print("RESULT " + json.dumps(out))
"""


def run(steps, dim, device, env, how="eager"):
    return run_script(CHILD, [steps, dim, device, how], env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--dim", type=int, default=64)
    args = p.parse_args()
    r = {}
    runs = {
        "op": ({"TORCH_TPU_EAGER_MODE": "op"}, "eager"),
        "fused": ({"TORCH_TPU_EAGER_MODE": "fused"}, "eager"),
        "compiled": ({}, "compiled"),
        "per_shape": ({"TORCH_TPU_SHAPE_BUCKETS": "off"}, "compiled"),
        "fixed": ({}, "fixed"),
    }
    for key, (env, how) in runs.items():
        with tempfile.TemporaryDirectory() as cache:  # cold: no program on disk either
            r[key] = run(args.steps, args.dim, "tpu", {**env, "TORCH_TPU_CACHE_DIR": cache}, how)
    r["cpu"] = run(args.steps, args.dim, "cpu", {})
    print(f"{args.steps} steps, context 1..{args.steps}, d={args.dim}, cold caches")
    print(f"{'':<30} {'total s':>8} {'compiles':>9} {'compile s':>10} {'vs CPU':>8}")
    for name, key in (
        ("tpu op mode", "op"),
        ("tpu fused mode", "fused"),
        ("tpu compiled, buckets", "compiled"),
        ("tpu compiled, per shape", "per_shape"),
        (f"tpu compiled, fixed {args.steps}", "fixed"),
        ("CPU eager", "cpu"),
    ):
        x = r[key]
        print(
            f"{name:<30} {x['seconds']:>8.2f} {x.get('compiles', '-'):>9} "
            f"{x.get('compile_seconds', 0):>10.2f} {x['seconds'] / r['cpu']['seconds']:>7.0f}x"
        )
    print(
        f"op / fused: {r['op']['seconds'] / r['fused']['seconds']:.2f}; compiled buckets / "
        f"fixed shape: {r['compiled']['seconds'] / r['fixed']['seconds']:.2f}"
    )
    for key in ("per_shape", "op"):  # the context feeds back 40 times: rounding compounds
        diff = max(abs(a - b) for a, b in zip(r["compiled"]["last"], r[key]["last"]))
        scale = max(abs(a) for a in r[key]["last"])
        print(
            f"last token, compiled with buckets vs {key}: max diff {diff:.1e} (values up to {scale:.1f})"
        )


if __name__ == "__main__":
    main()
