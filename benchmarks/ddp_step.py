"""minGPT DDP training step on 2 processes: tpu (tpu_dist) against CPU (gloo), in the
same process group and the same run, next to the same model's single-process step on
each device, so that the DDP ratio can be read against the single-device one.

    python benchmarks/ddp_step.py [--ranks 2] [--warmup 3] [--rounds 5] [--steps 5]

Model as benchmarks/eager_step.py (batch 8 per rank, block 64, 4 layers, d=128, AdamW).
Each rank times its own steps; rank 0's medians are printed. A tpu round ends with
torch.tpu.synchronize().
"""

import argparse
import multiprocessing
import socket
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed_rounds  # noqa: E402

MINGPT = Path(__file__).resolve().parents[1] / "examples" / "mingpt"
CONFIG = dict(batch=8, block=64, layers=4, heads=4, d=128)


def worker(rank, world, port, args, queue):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, str(MINGPT))
    from data import CharDataset, make_text
    from train import build, make_optimizer, train_step

    dist.init_process_group(
        "cpu:gloo,tpu:tpu_dist", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    dataset = CharDataset(make_text())
    syncs = {"tpu": torch.tpu.synchronize, "cpu": lambda: None}
    results = {}
    for device in ("tpu", "cpu"):
        for mode in ("single", "ddp"):
            model = build(
                dataset.vocab_size,
                CONFIG["block"],
                CONFIG["layers"],
                CONFIG["heads"],
                CONFIG["d"],
                seed=0,
            ).to(device)
            if mode == "ddp":
                model = DDP(model)
            optimizer = make_optimizer(model, 1e-3)
            g = torch.Generator().manual_seed(rank)

            def step():
                x, y = dataset.batch(CONFIG["batch"], CONFIG["block"], g)
                return train_step(model, optimizer, x.to(device), y.to(device))

            for _ in range(args.warmup):
                step()
            dist.barrier()
            times, _ = timed_rounds(step, syncs[device], args.rounds, args.steps)
            results[(device, mode)] = statistics.median(times)
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(r, args.ranks, port, args, queue))
        for r in range(args.ranks)
    ]
    for proc in procs:
        proc.start()
    r = queue.get(timeout=1800)
    for proc in procs:
        proc.join()
    print(
        f"minGPT step, batch {CONFIG['batch']} per rank, {args.ranks} processes, median of "
        f"{args.rounds} rounds x {args.steps} steps (ms)"
    )
    print(f"{'':<16} {'tpu':>8} {'cpu':>8} {'tpu/cpu':>8}")
    for mode, label in (("single", "one process"), ("ddp", f"DDP x{args.ranks}")):
        t, c = r[("tpu", mode)], r[("cpu", mode)]
        print(f"{label:<16} {t * 1e3:>8.1f} {c * 1e3:>8.1f} {t / c:>8.2f}")
    single = r[("tpu", "single")] / r[("cpu", "single")]
    ddp = r[("tpu", "ddp")] / r[("cpu", "ddp")]
    print(f"DDP ratio / single-device ratio: {ddp / single:.2f} (target <= 1.10)")


if __name__ == "__main__":
    main()
