"""`F.linear(x, w)` on tpu with the weight row-major ([out, in], as `nn.Linear` keeps it)
against the same weight laid out transposed in memory (`w.t().contiguous().t()`: still
[out, in], its buffer [in, out], as the serving plugins store their linear weights), op
by op and compiled, with CPU PyTorch's `F.linear` in the same run. Shapes: the linear
layers of the serving benchmark's 30M Llama (hidden 512, MLP 1536, K/V heads 4 x 64) for
the rows of a decode step (8, 32), a small batch (128) and a prefill chunk (512).

    python benchmarks/linear_layout.py [--rows 8 32 128 512]

Each figure is the median of 7 rounds of back-to-back calls ending with one synchronize
(tpu results stay on the device), µs per call.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import torch_tpu

LAYERS = {  # name: (in, out)
    "qkv 512->1024": (512, 1024),
    "gate_up 512->3072": (512, 3072),
    "down 1536->512": (1536, 512),
}


def per_call_us(fn, args, sync, calls):
    for _ in range(3):
        fn(*args)
    sync()
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        sync()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 32, 128, 512])
    args = parser.parse_args()
    props = torch.tpu.get_device_properties()
    print(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, {props.name}")
    print(
        f"{'layer':20s} {'rows':>5s} {'cpu':>8s} {'op row':>8s} {'op T':>8s} "
        f"{'cmp row':>8s} {'cmp T':>8s}  row/T op, compiled; T/cpu compiled"
    )
    g = torch.Generator().manual_seed(0)
    for name, (k, n) in LAYERS.items():
        for m in args.rows:
            x, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
            calls = max(10, 20000 // m)
            cpu = per_call_us(F.linear, (x, w), lambda: None, calls)
            tx, rw = x.to("tpu"), w.to("tpu")
            tw = w.t().contiguous().to("tpu").t()
            torch._dynamo.reset()  # two graphs per shape, whatever came before
            compiled = torch.compile(F.linear, backend="tpu")
            for weight in (rw, tw):  # the same values either way
                out = compiled(tx, weight).cpu()
                torch.testing.assert_close(out, F.linear(x, w), rtol=1e-4, atol=1e-4)
            sync = torch.tpu.synchronize
            op_row = per_call_us(F.linear, (tx, rw), sync, calls)
            op_t = per_call_us(F.linear, (tx, tw), sync, calls)
            c_row = per_call_us(compiled, (tx, rw), sync, calls)
            c_t = per_call_us(compiled, (tx, tw), sync, calls)
            print(
                f"{name:20s} {m:5d} {cpu:8.1f} {op_row:8.1f} {op_t:8.1f} {c_row:8.1f} "
                f"{c_t:8.1f}  {op_row / op_t:4.2f}x {c_row / c_t:4.2f}x; {c_t / cpu:4.2f}x"
            )


if __name__ == "__main__":
    main()
