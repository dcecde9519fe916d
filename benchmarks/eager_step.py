"""Eager training steps in both eager modes: minGPT and Hugging Face Llama-tiny, each on
tpu in op mode, tpu in fused mode, tpu compiled (backend "tpu") and CPU eager, every one
in its own subprocess, in one run. Reports the step times, the ratios the fused mode is
judged by (fused / compiled, op / fused, fused / CPU eager), and what fused mode did
after warm-up (compiles, programs per step, groups that reused their trace).

    python benchmarks/eager_step.py [--models mingpt llama] [--warmup 5] [--rounds 5]
                                    [--repeats 1]

The step and the models are compile_step.py's (forward, loss, backward, clip_grad_norm_,
AdamW; minGPT batch 8, block 64, 4 layers, d=128; Llama-tiny 2 layers, hidden 64). Times
are the median of the rounds after warm-up; tpu rounds end with one synchronize. The CPU
process does not load torch_tpu. With --repeats N the four processes run N times, one
after the other each time, and each ratio is taken within a repeat: the table shows the
median step times, the ratio lines each repeat's ratio (on a machine whose speed drifts
between runs, ratios of neighbouring runs scatter less than separate runs do).
"""

import argparse
import statistics
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
    p.add_argument(
        "--repeats", type=int, default=1, help="runs of the four processes; ratios per run"
    )
    args = p.parse_args()

    print(f"warm-up {args.warmup} steps, median of {args.rounds} rounds x {args.steps} steps")
    for model in args.models:
        runs = []
        with tempfile.TemporaryDirectory() as cache:
            env = {"TORCH_TPU_CACHE_DIR": cache}
            for _ in range(args.repeats):
                runs.append({mode: run_child(mode, model, args, env) for mode in MODES})
        r = runs[-1]
        print(
            f"\n{model} {CONFIGS[model]}: {r['tpu-fused']['device_name']}, "
            f"CPU threads {r['cpu-eager']['threads']}"
        )
        if args.repeats > 1:
            print(f"median step of {args.repeats} runs; ratios: each run's")
        print(f"{'':<16} {'step ms':>9} {'programs/step':>14} {'final loss':>11}")
        steps = args.rounds * args.steps
        for mode in MODES:
            step_s = statistics.median(run[mode]["step_s"] for run in runs)
            per_step = f"{r[mode]['executions'] / steps:.1f}" if "executions" in r[mode] else "-"
            print(
                f"{NAMES[mode]:<16} {step_s * 1e3:>9.2f} {per_step:>14} "
                f"{r[mode]['final_loss']:>11.4f}"
            )

        def ratios(a, b):
            return " ".join(f"{run[a]['step_s'] / run[b]['step_s']:.2f}" for run in runs)

        print(f"fused / compiled {ratios('tpu-fused', 'tpu-compiled')}")
        print(f"op / fused       {ratios('tpu-eager', 'tpu-fused')}")
        print(f"fused / CPU      {ratios('tpu-fused', 'cpu-eager')}")
        f = r["tpu-fused"]
        print(
            f"fused mode after warm-up: {f['timed_compiles']} compiles, {f['fused_reuses']} "
            f"of {f['fused_groups']} groups reused their trace"
        )


if __name__ == "__main__":
    main()
