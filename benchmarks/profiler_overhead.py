"""What torch.profiler costs on tpu: the minGPT eager training step (compile_step.py's
model and step) timed with no profiler, then inside `torch.profiler.profile` with CPU and
tpu activities (device events on), then with CPU activities only, alternating round by
round in one process so that drift on a shared machine hits every variant alike.

    python benchmarks/profiler_overhead.py [--rounds 7] [--steps 5] [--mode op|fused]

Prints the median step time of each variant and its ratio to the unprofiled step, and the
device events one profiled step records (which must equal the programs it ran).
"""

import argparse
import statistics
import time

from compile_step import build, make_step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5, help="steps per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--mode", choices=("op", "fused"), default="op")
    args = p.parse_args()

    import torch
    import torch_tpu
    from torch.profiler import ProfilerActivity, profile

    torch_tpu.set_eager_mode(args.mode)
    model, optimizers, batch, loss_of = build("mingpt", "tpu")
    model.train()

    step = make_step(model, model, optimizers, batch, loss_of)

    def rounds_of(activities):
        torch.tpu.synchronize()
        start = time.perf_counter()
        if activities is None:
            for _ in range(args.steps):
                step()
            torch.tpu.synchronize()
        else:
            with profile(activities=activities):
                for _ in range(args.steps):
                    step()
                torch.tpu.synchronize()
        return (time.perf_counter() - start) / args.steps

    for _ in range(args.warmup):
        step().item()
    variants = {
        "no profiler": None,
        "profiler CPU + tpu": [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        "profiler CPU only": [ProfilerActivity.CPU],
    }
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, activities in variants.items():
            times[name].append(rounds_of(activities))

    torch_tpu.metrics.reset()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step()
        torch.tpu.synchronize()
    executions = torch_tpu.metrics.snapshot()["executions"]
    device_events = [
        e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
    ]

    base = statistics.median(times["no profiler"])
    print(
        f"minGPT eager step ({args.mode} mode), median of {args.rounds} rounds x "
        f"{args.steps} steps"
    )
    for name in variants:
        t = statistics.median(times[name])
        print(f"  {name:<22} {t * 1e3:8.2f} ms   {t / base:5.3f}x")
    print(
        f"  one profiled step: {executions} programs run, {len(device_events)} device "
        f"events, {sum(e.device_time for e in device_events) / 1e3:.2f} ms device time"
    )


if __name__ == "__main__":
    main()
