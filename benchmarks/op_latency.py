"""Median per-op latency of small ops through the lowering table's kernel (`add`, `mul`,
in-place `add_`, `mul` by a Python number, `max`, `mm`, `exp`, `sum`) and a 512x512 `mm`, tpu
vs CPU eager, one run.

tpu results stay on the device inside the timed loop; the loop ends with one
synchronize, so the figure is the amortised cost of enqueueing and running each op.

    python benchmarks/op_latency.py [--floor build/cpp-tests/torch_tpu_pjrt_floor]

`--floor` also runs `benchmarks/pjrt_floor.cpp` (built with the C++ suites) on the same
plugin: one PJRT execute of the same 4x4 program, timed the same way, with nothing above
it. It is the least a per-op PJRT backend can cost, PyTorch and Python not counted.
"""

import argparse
import statistics
import subprocess
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


def pjrt_floor(binary: str) -> dict:
    """{op name: µs per execute, completion event requested} from pjrt_floor.cpp."""
    from torch_tpu._plugin import find_plugin

    out = subprocess.run([binary, find_plugin()], capture_output=True, text=True, check=True)
    floor = {}
    for line in out.stdout.splitlines()[2:]:
        *name, with_event, _without = line.split()
        floor[" ".join(name)] = float(with_event)
    return floor


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--floor", metavar="BINARY", help="torch_tpu_pjrt_floor to run beside")
    args = p.parse_args()
    floor = pjrt_floor(args.floor) if args.floor else {}
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
        "mm 4x4": (
            lambda d: (torch.randn(4, 4).to(d), torch.randn(4, 4).to(d)),
            torch.mm,
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
    header = f"{'op':<12} {'tpu us':>10} {'cpu us':>10} {'tpu/cpu':>8}"
    if floor:
        header += f" {'PJRT alone':>11} {'PJRT/cpu':>9}"
    print(header)
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
        row = f"{name:<12} {times['tpu'] * 1e6:>10.1f} {times['cpu'] * 1e6:>10.1f} {ratio:>8.2f}"
        if name in floor:
            row += f" {floor[name]:>11.2f} {floor[name] / (times['cpu'] * 1e6):>9.2f}"
        print(row)
    print(torch_tpu.metrics.report())
    return results


if __name__ == "__main__":
    main()
