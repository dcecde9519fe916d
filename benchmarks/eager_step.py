"""minGPT training step (batch 8, block 64, 4 layers, d=128, AdamW) on tpu eager and on CPU
eager, each in its own subprocess, in one run: per-step time after warm-up, the ratio
tpu / CPU, and each process's peak RSS (ru_maxrss from wait4) with their ratio.

    python benchmarks/eager_step.py [--warmup 5] [--rounds 5] [--steps 10]

The CPU process does not load torch_tpu (TORCH_DEVICE_BACKEND_AUTOLOAD=0), so its RSS is
plain PyTorch's. tpu steps are asynchronous: each timed round ends with one synchronize.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _timing import timed_rounds

MINGPT = Path(__file__).resolve().parents[1] / "examples" / "mingpt"
CONFIG = dict(batch=8, block=64, layers=4, heads=4, d=128)


def child(args) -> None:
    """Runs in the subprocess: trains and prints one JSON line of results."""
    import torch

    sys.path.insert(0, str(MINGPT))
    from data import CharDataset, make_text
    from train import build, make_optimizer, train_step

    device = args.child
    if device == "tpu":
        import torch_tpu
        torch_tpu.set_cpu_fallback(args.cpu_fallback)
        sync = torch.tpu.synchronize
    else:
        def sync():
            pass

    dataset = CharDataset(make_text())
    model = build(dataset.vocab_size, CONFIG["block"], CONFIG["layers"], CONFIG["heads"],
                  CONFIG["d"], seed=0).to(device)
    optimizer = make_optimizer(model, 1e-3)
    batches = torch.Generator().manual_seed(0)

    def step():
        x, y = dataset.batch(CONFIG["batch"], CONFIG["block"], batches)
        return train_step(model, optimizer, x.to(device), y.to(device))

    for _ in range(args.warmup):
        loss = step()
    first_loss = loss.item()
    if device == "tpu":
        torch_tpu.metrics.reset()
    rounds, loss = timed_rounds(step, sync, args.rounds, args.steps)
    result = {"step_s": statistics.median(rounds), "rounds_s": rounds,
              "loss_after_warmup": first_loss, "final_loss": loss.item(),
              "threads": torch.get_num_threads()}
    if device == "tpu":
        m = torch_tpu.metrics.snapshot()
        result.update(timed_compiles=m["compiles"], timed_fallbacks=sum(m["fallbacks"].values()),
                      device_name=torch.tpu.get_device_name(0))
    print(json.dumps(result))


def run_child(device: str, args) -> tuple[dict, int]:
    """Runs one device's measurement; returns its results and its peak RSS in bytes."""
    env = dict(os.environ)
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    cmd = [sys.executable, __file__, "--child", device, "--warmup", str(args.warmup),
           "--rounds", str(args.rounds), "--steps", str(args.steps)]
    if args.cpu_fallback:
        cmd.append("--cpu-fallback")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{device} run failed with exit code {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss * 1024  # Linux: KiB


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--warmup", type=int, default=5, help="untimed steps (compiles happen here)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds; the median is reported")
    p.add_argument("--steps", type=int, default=10, help="steps per timed round")
    p.add_argument("--cpu-fallback", action="store_true",
                   help="let tpu run ops it has no lowering for on the CPU (counted)")
    p.add_argument("--child", choices=("tpu", "cpu"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return

    results = {device: run_child(device, args) for device in ("tpu", "cpu")}
    (tpu, tpu_rss), (cpu, cpu_rss) = results["tpu"], results["cpu"]
    print(f"minGPT step: batch {CONFIG['batch']}, block {CONFIG['block']}, "
          f"{CONFIG['layers']} layers, d={CONFIG['d']}, AdamW; {args.warmup} warm-up steps, "
          f"median of {args.rounds} rounds x {args.steps} steps; {tpu['device_name']}, "
          f"CPU threads {cpu['threads']}")
    print(f"{'':<10} {'step ms':>9} {'peak RSS MiB':>13} {'loss':>8}")
    for name, r, rss in (("tpu", tpu, tpu_rss), ("cpu", cpu, cpu_rss)):
        print(f"{name:<10} {r['step_s'] * 1e3:>9.2f} {rss / 2**20:>13.0f} {r['final_loss']:>8.4f}")
    print(f"{'tpu / cpu':<10} {tpu['step_s'] / cpu['step_s']:>9.2f} {tpu_rss / cpu_rss:>13.2f}")
    print(f"tpu during timed steps: {tpu['timed_compiles']} compiles, "
          f"{tpu['timed_fallbacks']} CPU fallbacks")


if __name__ == "__main__":
    main()
