"""Median per-op latency of small ops through the lowering table's kernel (`add`, `mul`,
in-place `add_`, `mul` by a Python number, `max`, `exp`, `sum`) and a 512x512 `mm`, tpu
vs CPU eager, one run.

tpu results stay on the device inside the timed loop; the loop ends with one
synchronize, so the figure is the amortised cost of enqueueing and running each op.
"""

import statistics
import time

import torch

import torch_tpu


def per_op_seconds(fn, sync, iters, repeats=7):
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


def main():
    torch.manual_seed(0)
    cases = {
        "add 4x4": (
            lambda d: (torch.randn(4, 4).to(d), torch.randn(4, 4).to(d)),
            lambda a, b: a + b,
            2000,
        ),
        "mul 4x4": (
            lambda d: (torch.randn(4, 4).to(d), torch.randn(4, 4).to(d)),
            lambda a, b: a * b,
            2000,
        ),
        "add_ 4x4": (
            lambda d: (torch.randn(4, 4).to(d), torch.randn(4, 4).to(d)),
            lambda a, b: a.add_(b, alpha=1e-6),
            2000,
        ),
        "mul 4x4 2.5": (lambda d: (torch.randn(4, 4).to(d),), lambda a: a * 2.5, 2000),
        "max 4x4": (
            lambda d: (torch.randn(4, 4).to(d), torch.randn(4, 4).to(d)),
            torch.maximum,
            2000,
        ),
        "exp 4x4": (lambda d: (torch.randn(4, 4).to(d),), torch.exp, 2000),
        "sum 4x4": (lambda d: (torch.randn(4, 4).to(d),), lambda a: a.sum(0), 2000),
        "mm 512x512": (
            lambda d: (torch.randn(512, 512).to(d), torch.randn(512, 512).to(d)),
            torch.mm,
            50,
        ),
    }
    print(
        f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, "
        f"{torch.tpu.get_device_name(0)}, CPU threads {torch.get_num_threads()}"
    )
    print(f"{'op':<12} {'tpu us':>10} {'cpu us':>10} {'tpu/cpu':>8}")
    results = {}
    for name, (make, fn, iters) in cases.items():
        times = {}
        for device, sync in (("tpu", torch.tpu.synchronize), ("cpu", lambda: None)):
            args = make(device)
            for _ in range(5):
                fn(*args)  # warm up: compile once
            times[device] = per_op_seconds(lambda: fn(*args), sync, iters)
        ratio = times["tpu"] / times["cpu"]
        results[name] = ratio
        print(f"{name:<12} {times['tpu'] * 1e6:>10.1f} {times['cpu'] * 1e6:>10.1f} {ratio:>8.2f}")
    print(torch_tpu.metrics.report())
    return results


if __name__ == "__main__":
    main()
