"""Peak memory of an AdamW step with and without buffer donation: a 100M-parameter stack
of Linear layers on tpu (XLA:CPU: device memory is host memory, so it shows in RSS), in
both eager modes, each run in its own subprocess.

    python benchmarks/optimizer_memory.py [--params 100e6] [--layers 10]

Each subprocess records its RSS before building anything (the baseline), builds the
model, runs two forward/backward/AdamW steps (the first creates the optimizer state, the
second compiles the steady step), runs backward again, returns freed heap memory to the
OS (malloc_trim: XLA's compiler leaves much behind), resets the kernel's peak-RSS mark
(/proc/self/clear_refs), runs the measured AdamW step, synchronizes and reads the peak
(VmHWM). Reported: the
peak above the baseline divided by the bytes of parameters + gradients + AdamW states
(4x the parameters). Target: <= 1.15 with donation.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def trim() -> None:
    """Returns freed heap memory to the OS (glibc keeps it otherwise, e.g. what XLA's
    compiler used), so RSS counts live memory."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def child(args) -> None:
    import torch
    import torch_tpu

    torch.ones(1, device="tpu").add(1).cpu()  # loads the plugin: part of the baseline
    trim()
    baseline = rss_kib("VmRSS")
    width = int((args.params / args.layers) ** 0.5)
    with torch.device("tpu"):
        model = torch.nn.Sequential(
            *[torch.nn.Linear(width, width, bias=False) for _ in range(args.layers)]
        )
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, width, device="tpu")
    for _ in range(2):  # the first step creates the state; the second compiles the steady step
        model(x).sum().backward()
        opt.step()
    model(x).sum().backward()
    torch.tpu.synchronize()
    trim()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before_step = rss_kib("VmRSS")
    opt.step()
    torch.tpu.synchronize()
    peak = rss_kib("VmHWM")
    state_bytes = 4 * n_params * 4  # parameters, gradients, exp_avg, exp_avg_sq in f32
    print(
        json.dumps(
            {
                "params": n_params,
                "baseline_mib": baseline / 1024,
                "before_step_mib": before_step / 1024,
                "peak_mib": peak / 1024,
                "ratio": (peak - baseline) * 1024 / state_bytes,
                "mode": torch_tpu.get_eager_mode(),
            }
        )
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--params", type=float, default=100e6)
    p.add_argument("--layers", type=int, default=10)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    print(
        f"AdamW step, {args.params / 1e6:.0f}M parameters in {args.layers} Linear layers; "
        "peak RSS above the process baseline / (parameters + gradients + states)"
    )
    print(
        f"{'mode':<8} {'donation':<9} {'state MiB':>10} {'before MiB':>12} {'peak MiB':>9} "
        f"{'ratio':>6}"
    )
    for mode in ("op", "fused"):
        for donate in ("1", "0"):
            env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_DONATE=donate)
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    "--params",
                    str(args.params),
                    "--layers",
                    str(args.layers),
                ],
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            state = 16 * r["params"] / 2**20
            print(
                f"{mode:<8} {'on' if donate == '1' else 'off':<9} {state:>10.0f} "
                f"{r['before_step_mib'] - r['baseline_mib']:>12.0f} "
                f"{r['peak_mib'] - r['baseline_mib']:>9.0f} {r['ratio']:>6.2f}"
            )


if __name__ == "__main__":
    main()
