"""What one small op program costs to compile, and what the fast compile options cost at
run time: eight op programs (matmul, softmax, layer_norm, gelu, sum, cat, index_select,
an in-place add) compiled at --sizes fresh sizes each with an empty cache, then each run
warm; once with the fast options off (TORCH_TPU_FAST_COMPILE_ELEMENTS=0, the old
behaviour), once with the default rule, once with tiered compilation on top
(TORCH_TPU_TIERED_COMPILE=8: compiles at the first tier, warm runs once tiered up), and CPU eager for the same calls, each in its own
subprocess, in one run. Times are CPU time of the process (compiles and runs happen in
it), which other work on the machine disturbs far less than wall time.

    python benchmarks/compile_time.py [--sizes 6] [--rows 32] [--reps 200]

--rows sets the tensors' size (rows x 64 elements): at the default 32 every program is
under the rule's 65536-element limit; at 2048 none is, so both tpu columns compile alike.
"""

import argparse
import tempfile

from _timing import run_script

CHILD = r"""
import json, resource, sys, torch
def cpu_seconds():  # this process's CPU time: robust on a machine other work shares
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
sizes, rows, reps, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if device == "tpu":
    import torch_tpu
    sync = torch.tpu.synchronize
else:
    sync = lambda: None
torch.manual_seed(0)
w = torch.randn(64, 64).to(device)
ln = torch.nn.LayerNorm(64).to(device)
OPS = {
    "matmul": lambda x: x @ w,
    "softmax": lambda x: torch.softmax(x, -1),
    "layer_norm": lambda x: ln(x),
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "sum": lambda x: x.sum(0),
    "cat": lambda x: torch.cat([x, x]),
    "index_select": lambda x: x.index_select(0, torch.arange(0, x.shape[0], 2, device=device)),
    "add_": lambda x: x.add_(1.0),
}
out = {}
with torch.no_grad():
    if device == "tpu":
        start, cpu0 = torch_tpu.metrics.snapshot(), cpu_seconds()
        for i in range(sizes):
            x = torch.randn(rows + i, 64, device=device)
            for fn in OPS.values():
                fn(x)
            sync()
        m = torch_tpu.metrics.snapshot()
        compiles = m["compiles"] - start["compiles"]
        out["compiles"] = compiles
        out["compile_ms"] = 1000 * (m["compile_seconds"] - start["compile_seconds"]) / compiles
        out["compile_cpu_ms"] = 1000 * (cpu_seconds() - cpu0) / compiles
    x = torch.randn(rows, 64, device=device)
    if device == "tpu":  # hot: every program tiered up (where tiering is on)
        for _ in range(16):
            for fn in OPS.values():
                fn(x)
        sync()
        torch_tpu._C._wait_for_tier_ups()
        out["tier_ups"] = torch_tpu.metrics.snapshot()["tier_ups"]
    for name, fn in OPS.items():
        fn(x); sync()
        t = cpu_seconds()
        for _ in range(reps):
            fn(x)
        sync()
        out[name] = 1e6 * (cpu_seconds() - t) / reps
print("RESULT " + json.dumps(out))
"""


def run(args, device, env):
    return run_script(CHILD, [args.sizes, args.rows, args.reps, device], env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, default=6, help="fresh sizes per op (compiles)")
    p.add_argument("--rows", type=int, default=32, help="rows of the [rows, 64] inputs")
    p.add_argument("--reps", type=int, default=200, help="warm calls timed per op")
    args = p.parse_args()
    r = {}
    # XLA's default options everywhere, the small-program rule (compile_policy.h), and
    # tiered compilation on top (tiered_compile.h: the compile column is its first tier,
    # the run columns are hot programs, tiered up).
    configs = {
        "default options": {
            "TORCH_TPU_FAST_COMPILE_ELEMENTS": "0",
            "TORCH_TPU_TIERED_COMPILE": "0",
        },
        "fast options": {"TORCH_TPU_FAST_COMPILE_ELEMENTS": "", "TORCH_TPU_TIERED_COMPILE": "0"},
        "tiered": {"TORCH_TPU_FAST_COMPILE_ELEMENTS": "", "TORCH_TPU_TIERED_COMPILE": "8"},
    }
    for name, env in configs.items():
        with tempfile.TemporaryDirectory() as cache:
            r[name] = run(args, "tpu", dict(env, TORCH_TPU_CACHE_DIR=cache))
    r["CPU eager"] = run(args, "cpu", {})
    cols = list(r)
    print(f"inputs [{args.rows}..{args.rows + args.sizes - 1}, 64], {args.sizes} sizes per op")
    print(f"{'':<14}" + "".join(f"{c:>17}" for c in cols))
    print(f"{'compiles':<14}" + "".join(f"{r[c].get('compiles', '-'):>17}" for c in cols))
    for key, label in (("compile_ms", "ms / compile"), ("compile_cpu_ms", "CPU ms / comp.")):
        print(
            f"{label:<14}"
            + "".join(f"{r[c][key]:>17.1f}" if key in r[c] else f"{'-':>17}" for c in cols)
        )
    print("warm run, CPU us per call:")
    for op in r["CPU eager"]:
        print(f"  {op:<12}" + "".join(f"{r[c][op]:>17.1f}" for c in cols))
    print(f"{'tier-ups':<14}" + "".join(f"{r[c].get('tier_ups', '-'):>17}" for c in cols))
    before = r["default options"]
    ops = list(r["CPU eager"])
    for name in ("fast options", "tiered"):
        after = r[name]
        compile_ratio = after["compile_cpu_ms"] / before["compile_cpu_ms"]
        run_ratio = sum(after[o] for o in ops) / sum(before[o] for o in ops)
        print(
            f"{name} / default options: compile CPU time {compile_ratio:.2f}, "
            f"warm run time (sum over ops) {run_ratio:.2f}"
        )


if __name__ == "__main__":
    main()
