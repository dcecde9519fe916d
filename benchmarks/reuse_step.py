"""A training step in one process, alternating round by round between tpu op mode, fused
mode recorded the full way (trace reuse off), fused mode reusing its trace, and tpu
compiled, so that load on a shared machine moves every variant alike (eager_step.py runs
each mode in its own process, one after another).

    python benchmarks/reuse_step.py [--model llama] [--rounds 7] [--steps 5]

The step and the models are compile_step.py's; the compiled variant is a second copy of
the model. Reports the median step time of each variant and the ratios fused mode is
judged by, with and without reuse.
"""

import argparse
import statistics

import torch

import torch_tpu
from _timing import timed_rounds
from compile_step import CONFIGS, build, make_step

VARIANTS = ("op", "fused, full record", "fused, reused trace", "compiled")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=tuple(CONFIGS), default="llama")
    p.add_argument("--warmup", type=int, default=4, help="untimed steps per variant")
    p.add_argument("--rounds", type=int, default=7, help="rounds; the median is reported")
    p.add_argument("--steps", type=int, default=5, help="steps per variant per round")
    args = p.parse_args()

    model, optimizers, batch, loss_of = build(args.model, "tpu")
    model.train()
    eager = make_step(model, model, optimizers, batch, loss_of)
    copy, copy_optimizers, copy_batch, copy_loss_of = build(args.model, "tpu")
    copy.train()
    compiled = make_step(
        torch.compile(copy, backend="tpu"), copy, copy_optimizers, copy_batch, copy_loss_of
    )

    def use(variant):
        fused = variant.startswith("fused")
        torch_tpu.set_eager_mode("fused" if fused else "op")
        torch_tpu._C._set_trace_reuse(variant != "fused, full record")
        return compiled if variant == "compiled" else eager

    for variant in VARIANTS:
        step = use(variant)
        for _ in range(args.warmup):
            step()
        step().item()
    times = {variant: [] for variant in VARIANTS}
    reuses = torch_tpu.metrics.snapshot()["fused_reuses"]
    for _ in range(args.rounds):
        for variant in VARIANTS:
            step = use(variant)
            step().item()  # the first step after a switch records its trace again
            times[variant] += timed_rounds(step, torch.tpu.synchronize, 1, args.steps)[0]
    reuses = torch_tpu.metrics.snapshot()["fused_reuses"] - reuses
    torch_tpu.set_eager_mode("op")
    torch_tpu._C._set_trace_reuse(True)

    ms = {variant: statistics.median(t) * 1e3 for variant, t in times.items()}
    print(
        f"{args.model} {CONFIGS[args.model]}: {torch.tpu.get_device_name(0)}, median of "
        f"{args.rounds} rounds x {args.steps} steps per variant; {reuses} fused groups "
        f"reused their trace"
    )
    for variant in VARIANTS:
        print(f"{variant:<22} {ms[variant]:>9.2f} ms")
    for fused in ("fused, full record", "fused, reused trace"):
        print(
            f"{fused:<22} / compiled {ms[fused] / ms['compiled']:>5.2f}, "
            f"op / it {ms['op'] / ms[fused]:>5.2f}"
        )


if __name__ == "__main__":
    main()
