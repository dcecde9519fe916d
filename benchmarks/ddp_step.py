"""minGPT training step on 2 processes, DDP and FSDP2: tpu (tpu_dist) against CPU (gloo),
in the same process group and the same run, next to the same model's single-process step
on each device, so that the distributed ratios can be read against the single-device one.
Then compiled tensor parallelism: the same compiled function with its collectives inside
the graph's program (tpu_dist's in-program transport) and with the graph split around them
(host-staged).

    python benchmarks/ddp_step.py [--ranks 2] [--warmup 3] [--rounds 5] [--steps 5]

Model as benchmarks/eager_step.py (batch 8 per rank, block 64, 4 layers, d=128, AdamW);
FSDP2 shards each block and the root (`fully_shard`, a mesh over the ranks). Each rank
times its own steps; rank 0's medians are printed. A tpu round ends with
torch.tpu.synchronize().

Compiled tensor parallelism: ranks as threads of one process, rank r on tpu:r
(TORCH_TPU_NUM_DEVICES=ranks), a 4-layer MLP stack split Megatron-style (first weight by
columns, second by rows, a functional all_reduce per layer; d=256, 64 tokens per call),
`torch.compile(backend="tpu", fullgraph=True)`, forward only (functional collectives have
no autograd); in-program: one program per call, host-staged
(TORCH_TPU_DIST_TRANSPORT=host): the graph split at each all_reduce.
"""

import argparse
import multiprocessing
import socket
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import run_file, run_threaded_ranks, timed_rounds  # noqa: E402

MINGPT = Path(__file__).resolve().parents[1] / "examples" / "mingpt"
CONFIG = dict(batch=8, block=64, layers=4, heads=4, d=128)


def worker(rank, world, port, args, queue):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
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
        for mode in ("single", "ddp", "fsdp"):
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
            elif mode == "fsdp":
                mesh = init_device_mesh(device, (world,))
                for block in model.blocks:
                    fully_shard(block, mesh=mesh)
                fully_shard(model, mesh=mesh)
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


TP = dict(layers=4, d=256, tokens=64)


def compiled_tp_worker(world, args):
    """In a process with TORCH_TPU_NUM_DEVICES=world (and the transport chosen by the
    environment): times the compiled TP stack on threaded ranks; prints one JSON line."""
    import json

    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    import torch_tpu

    d, layers = TP["d"], TP["layers"]
    shard = 4 * d // world
    results = {}

    def stack(x, w1, w2):
        for a, b in zip(w1, w2):
            h = torch.nn.functional.gelu(x @ a)  # columns of the first weight
            x = x + funcol.all_reduce(h @ b, "sum", dist.group.WORLD)  # rows of the second
        return x

    compiled = torch.compile(stack, backend="tpu", fullgraph=True)

    def rank_body(rank):
        dev = f"tpu:{rank}"
        g = torch.Generator().manual_seed(rank)
        w1 = [(torch.randn(d, shard, generator=g) / d**0.5).to(dev) for _ in range(layers)]
        w2 = [(torch.randn(shard, d, generator=g) / d**0.5).to(dev) for _ in range(layers)]
        x = torch.randn(TP["tokens"], d, generator=torch.Generator().manual_seed(9)).to(dev)
        sync = lambda: torch.tpu.synchronize(rank)  # noqa: E731
        for _ in range(args.warmup):
            compiled(x, w1, w2)
        dist.barrier()
        times, _ = timed_rounds(lambda: compiled(x, w1, w2), sync, args.rounds, args.steps)
        if rank == 0:
            results["step"] = statistics.median(times)
            results["transport"] = torch_tpu.metrics.dist_transport()

    run_threaded_ranks(world, rank_body)
    m = torch_tpu.metrics.snapshot()
    results.update(splits=m["graph_splits"], program_runs=m["in_program_graph_runs"])
    print("RESULT " + json.dumps(results), flush=True)


def measure_compiled_tp(args, transport):
    env = dict(TORCH_TPU_NUM_DEVICES=str(args.ranks), TORCH_TPU_DIST_TRANSPORT=transport)
    argv = ["--_tp-worker", args.ranks]
    for name in ("warmup", "rounds", "steps"):
        argv += [f"--{name}", getattr(args, name)]
    return run_file(__file__, argv, env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--_tp-worker", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._tp_worker:
        compiled_tp_worker(args._tp_worker, args)
        return
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
    labels = (("single", "one process"), ("ddp", f"DDP x{args.ranks}"))
    for mode, label in labels + (("fsdp", f"FSDP2 x{args.ranks}"),):
        t, c = r[("tpu", mode)], r[("cpu", mode)]
        print(f"{label:<16} {t * 1e3:>8.1f} {c * 1e3:>8.1f} {t / c:>8.2f}")
    single = r[("tpu", "single")] / r[("cpu", "single")]
    ddp = r[("tpu", "ddp")] / r[("cpu", "ddp")]
    fsdp = r[("tpu", "fsdp")] / r[("cpu", "fsdp")]
    print(f"DDP ratio / single-device ratio: {ddp / single:.2f} (target <= 1.10)")
    print(f"FSDP2 ratio / single-device ratio: {fsdp / single:.2f}")
    print(f"FSDP2 step / DDP step on tpu: {r[('tpu', 'fsdp')] / r[('tpu', 'ddp')]:.2f}")

    inside = measure_compiled_tp(args, "in_program")
    split = measure_compiled_tp(args, "host")
    print(
        f"\ncompiled tensor parallel MLP stack, {TP['layers']} layers, d={TP['d']}, "
        f"{TP['tokens']} tokens, {args.ranks} threaded ranks (ms per call)"
    )
    for label, res in (("in-program", inside), ("split graphs", split)):
        print(
            f"{label:<16} {res['step'] * 1e3:>8.2f}  ({res['transport']}, graph splits "
            f"{res['splits']}, in-program graph runs {res['program_runs']})"
        )
    print(f"split / in-program: {split['step'] / inside['step']:.2f}")


if __name__ == "__main__":
    main()
