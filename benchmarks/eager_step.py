"""Eager training steps in both eager modes: minGPT and Hugging Face Llama-tiny, each on
tpu in op mode, tpu in fused mode, tpu compiled (backend "tpu") and CPU eager, every one
in its own subprocess, in one run. Reports the step times, the ratios the fused mode is
judged by (fused / compiled, op / fused, fused / CPU eager), and what fused mode did
after warm-up (compiles, programs per step, groups that reused their trace).

    python benchmarks/eager_step.py [--models mingpt llama] [--warmup 5] [--rounds 5]

The step and the models are compile_step.py's (forward, loss, backward, clip_grad_norm_,
AdamW; minGPT batch 8, block 64, 4 layers, d=128; Llama-tiny 2 layers, hidden 64). Times
are the median of the rounds after warm-up; tpu rounds end with one synchronize. The CPU
process does not load torch_tpu.
"""

import argparse
import tempfile

from compile_step import CONFIGS, run_child

MODES = ("tpu-eager", "tpu-fused", "tpu-compiled", "cpu-eager")
NAMES = {
    "tpu-eager": "tpu op mode",
    "tpu-fused": "tpu fused mode",
    "tpu-compiled": "tpu compiled",
    "cpu-eager": "CPU eager",
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=tuple(CONFIGS), default=list(CONFIGS))
    p.add_argument("--warmup", type=int, default=5, help="untimed steps (compiles happen here)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds; the median is reported")
    p.add_argument("--steps", type=int, default=10, help="steps per timed round")
    args = p.parse_args()

    print(f"warm-up {args.warmup} steps, median of {args.rounds} rounds x {args.steps} steps")
    for model in args.models:
        with tempfile.TemporaryDirectory() as cache:
            r = {
                mode: run_child(mode, model, args, {"TORCH_TPU_CACHE_DIR": cache}) for mode in MODES
            }
        print(
            f"\n{model} {CONFIGS[model]}: {r['tpu-fused']['device_name']}, "
            f"CPU threads {r['cpu-eager']['threads']}"
        )
        print(f"{'':<16} {'step ms':>9} {'programs/step':>14} {'final loss':>11}")
        steps = args.rounds * args.steps
        for mode in MODES:
            per_step = f"{r[mode]['executions'] / steps:.1f}" if "executions" in r[mode] else "-"
            print(
                f"{NAMES[mode]:<16} {r[mode]['step_s'] * 1e3:>9.2f} {per_step:>14} "
                f"{r[mode]['final_loss']:>11.4f}"
            )
        fused = r["tpu-fused"]["step_s"]
        print(f"fused / compiled {fused / r['tpu-compiled']['step_s']:>6.2f}")
        print(f"op / fused       {r['tpu-eager']['step_s'] / fused:>6.2f}")
        print(f"fused / CPU      {fused / r['cpu-eager']['step_s']:>6.2f}")
        f = r["tpu-fused"]
        print(
            f"fused mode after warm-up: {f['timed_compiles']} compiles, {f['fused_reuses']} "
            f"of {f['fused_groups']} groups reused their trace"
        )


if __name__ == "__main__":
    main()
