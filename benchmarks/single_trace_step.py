"""torch.tpu.optimizers.SingleTraceTrainer's training step (forward, loss, backward and
AdamW as one compiled program) against the same step run as an eager loop (op and fused
mode, torch.optim.AdamW) and with the model compiled by torch.compile (backend "tpu",
the optimizer eager), all on tpu, in one process and one run.

    python benchmarks/single_trace_step.py [--width 512] [--layers 4] [--batch 64]

The model is an MLP (Linear + GELU layers, MSE loss). Times are the median seconds per
step of the rounds after warm-up, each round ending with one synchronize; ratios are
against the eager op-mode loop, and every mode's losses are checked against the first's.
"""

import argparse
import statistics

import torch
import torch.nn.functional as F

import torch_tpu
from _timing import timed_rounds


def build(width: int, layers: int):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*mods, torch.nn.Linear(width, 16)).to("tpu")


def eager_step(model, opt, x, y, forward=None):
    forward = forward or model

    def step():
        loss = F.mse_loss(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(a.batch, a.width, generator=g).to("tpu")
    y = torch.randn(a.batch, 16, generator=g).to("tpu")
    adamw = dict(lr=1e-3, weight_decay=1e-2)

    def make(mode):
        model = build(a.width, a.layers)
        if mode == "single-trace":
            opt = torch.tpu.optimizers.AdamW(**adamw, use_bfloat16_moments=False)
            trainer = torch.tpu.optimizers.SingleTraceTrainer(model, opt)
            compiled = trainer.make_compiled_train_step(x, y)
            return lambda: compiled(x, y)
        opt = torch.optim.AdamW(model.parameters(), **adamw)
        if mode == "compiled":
            return eager_step(model, opt, x, y, torch.compile(model, backend="tpu"))
        return eager_step(model, opt, x, y)

    modes = ("eager-op", "eager-fused", "compiled", "single-trace")
    results, losses = {}, {}
    for mode in modes:
        torch_tpu.set_eager_mode("fused" if mode == "eager-fused" else "op")
        step = make(mode)
        timed_rounds(step, torch.tpu.synchronize, 1, a.warmup)
        times, loss = timed_rounds(step, torch.tpu.synchronize, a.rounds, a.steps)
        results[mode] = statistics.median(times)
        # Every mode trains the same model from the same start: compare the first losses.
        check = make(mode)
        losses[mode] = [check().item() for _ in range(3)]
    torch_tpu.set_eager_mode("op")
    base = results["eager-op"]
    print(f"MLP {a.layers}x{a.width}, batch {a.batch}, AdamW; ms per step (ratio to eager op)")
    for mode in modes:
        close = all(
            abs(u - v) <= 1e-4 * abs(v) for u, v in zip(losses[mode], losses["eager-op"])
        )
        print(
            f"  {mode:13s} {results[mode] * 1e3:8.2f} ms  {base / results[mode]:5.2f}x"
            f"  losses {'match' if close else 'DIFFER'}"
        )


if __name__ == "__main__":
    main()
