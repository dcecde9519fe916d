"""Hugging Face `generate` with its default (dynamic) KV cache, the way a new user calls
it: Llama-tiny and Qwen3-tiny (examples/hf_tiny.py, random weights), greedy, 32 new
tokens, a prompt of 16 tokens and then one of 23, with empty caches; tpu in op mode, tpu
in fused mode and CPU, each in its own subprocess, in one run. Every step of a dynamic
cache has a new shape, so this measures the compile tax of varying shapes: seconds and
XLA compiles for the first prompt and for the second prompt length.

    python benchmarks/generate.py [--models llama qwen3] [--new-tokens 32]

Targets (issue 20): first call <= 20x CPU; the second prompt length <= 5 new compiles.
"""

import argparse
import os
import tempfile

from _timing import run_script

CHILD = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[4])
import hf_tiny
name, new_tokens, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if device == "tpu":
    import torch_tpu
model = hf_tiny.build(name).to(device).eval()
g = torch.Generator().manual_seed(0)
out = {}
for label, length in (("first", 16), ("second", 23)):
    ids = torch.randint(3, hf_tiny.VOCAB, (1, length), generator=g).to(device)
    before = torch_tpu.metrics.snapshot() if device == "tpu" else None
    start = time.perf_counter()
    with torch.no_grad():
        tokens = model.generate(ids, max_new_tokens=new_tokens, do_sample=False,
                                min_new_tokens=new_tokens)
    tokens = tokens.cpu()
    r = {"seconds": time.perf_counter() - start, "tokens": tokens[0, length:].tolist()}
    if before is not None:
        m = torch_tpu.metrics.snapshot()
        r["compiles"] = m["compiles"] - before["compiles"]
        r["compile_seconds"] = m["compile_seconds"] - before["compile_seconds"]
        r["tier_ups"] = m["tier_ups"] - before["tier_ups"]
    out[label] = r
print("RESULT " + json.dumps(out))
"""

# Each tpu mode with tiered compilation off and on (runtime/tiered_compile.h).
MODES = {
    "op": ("tpu", {"TORCH_TPU_EAGER_MODE": "op", "TORCH_TPU_TIERED_COMPILE": "0"}),
    "op tiered": ("tpu", {"TORCH_TPU_EAGER_MODE": "op", "TORCH_TPU_TIERED_COMPILE": "8"}),
    "fused": ("tpu", {"TORCH_TPU_EAGER_MODE": "fused", "TORCH_TPU_TIERED_COMPILE": "0"}),
    "fused tiered": ("tpu", {"TORCH_TPU_EAGER_MODE": "fused", "TORCH_TPU_TIERED_COMPILE": "8"}),
    "CPU": ("cpu", {}),
}


def run(model, new_tokens, device, env):
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    with tempfile.TemporaryDirectory() as cache:
        return run_script(
            CHILD, [model, new_tokens, device, examples], dict(env, TORCH_TPU_CACHE_DIR=cache)
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["llama", "qwen3"])
    p.add_argument("--new-tokens", type=int, default=32)
    args = p.parse_args()
    for model in args.models:
        r = {mode: run(model, args.new_tokens, *spec) for mode, spec in MODES.items()}
        cpu = r["CPU"]
        print(f"\n{model}-tiny, generate {args.new_tokens} new tokens, empty caches")
        print(
            f"{'':<13} {'1st s':>8} {'x CPU':>8} {'compiles':>9} {'compile s':>10} {'tier-ups':>9}"
            f" {'2nd s':>8} {'x CPU':>8} {'compiles':>9}  same tokens as CPU"
        )
        for mode, x in r.items():
            a, b = x["first"], x["second"]
            same = a["tokens"] == cpu["first"]["tokens"] and b["tokens"] == cpu["second"]["tokens"]
            print(
                f"{mode:<13} {a['seconds']:>8.2f} {a['seconds'] / cpu['first']['seconds']:>8.1f}"
                f" {a.get('compiles', '-'):>9} {a.get('compile_seconds', 0):>10.1f}"
                f" {a.get('tier_ups', '-'):>9}"
                f" {b['seconds']:>8.2f} {b['seconds'] / cpu['second']['seconds']:>8.1f}"
                f" {b.get('compiles', '-'):>9}  {same}"
            )


if __name__ == "__main__":
    main()
