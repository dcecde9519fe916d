"""all_reduce latency and bandwidth across 2 processes, 4 KiB to 64 MiB: tpu_dist
(host-staged: device -> host, gloo, host -> device) on tpu tensors against gloo on CPU
tensors, in the same process group and the same run, and tpu_dist again without its
cross-rank shape check (TORCH_TPU_DIST_CHECKS=0).

    python benchmarks/collectives.py [--ranks 2] [--max-mib 64]
    python benchmarks/collectives.py --in-program 2 4 [--max-mib 64]

--in-program N...: tpu_dist's in-program transport instead, one process per device count N
with TORCH_TPU_NUM_DEVICES=N: N ranks as threads, rank r on tpu:r, each all_reduce one
replicated program over the N virtual devices.

Each rank uses one intra-op thread. Each size: a warm-up, then the median of 9 rounds of
`reps` all_reduces (fewer for large sizes), gloo and tpu_dist rounds taking turns; a tpu
round ends when the results are back on the device (torch.tpu.synchronize). The "no
check" run has its own gloo column, and its ratio is against that.
"""

import argparse
import multiprocessing
import os
import socket
import statistics
import time

ROUNDS = 9  # the shared machine is noisy: the median of more rounds


def worker(rank, world, port, sizes, queue):
    import torch
    import torch.distributed as dist

    # One intra-op thread per rank: the ranks share the cores, and the host copies of
    # staging otherwise wait on each other's OpenMP threads.
    torch.set_num_threads(1)
    dist.init_process_group(
        "cpu:gloo,tpu:tpu_dist", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    results = {}
    for nbytes in sizes:
        reps = max(2, min(50, (8 << 20) // nbytes))
        tensors = {
            "gloo": torch.zeros(nbytes // 4),
            "tpu_dist": torch.zeros(nbytes // 4, device="tpu"),
        }
        syncs = {"gloo": lambda: None, "tpu_dist": torch.tpu.synchronize}
        times = {k: [] for k in tensors}
        for name, t in tensors.items():  # warm-up: compiles, connections
            dist.all_reduce(t)
            syncs[name]()
        for _ in range(ROUNDS):
            for name, t in tensors.items():
                dist.barrier()
                start = time.perf_counter()
                for _ in range(reps):
                    dist.all_reduce(t)
                syncs[name]()
                times[name].append((time.perf_counter() - start) / reps)
        results[nbytes] = {k: statistics.median(v) for k, v in times.items()}
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def measure(world, sizes, checks):
    os.environ["TORCH_TPU_DIST_CHECKS"] = "1" if checks else "0"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, sizes, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = queue.get(timeout=900)
    for p in procs:
        p.join()
    return results


def in_program_worker(world, sizes):
    """Runs in a process with TORCH_TPU_NUM_DEVICES=world; prints one JSON line."""
    import json

    import torch
    import torch.distributed as dist
    import torch_tpu

    from _timing import run_threaded_ranks

    results = {}

    def rank_body(rank):
        assert torch_tpu.metrics.dist_transport() == "in_program"
        for nbytes in sizes:
            reps = max(2, min(50, (8 << 20) // nbytes))
            t = torch.zeros(nbytes // 4, device=f"tpu:{rank}")
            dist.all_reduce(t)  # warm-up: compile
            torch.tpu.synchronize(rank)
            times = []
            for _ in range(5):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(reps):
                    dist.all_reduce(t)
                torch.tpu.synchronize(rank)
                dist.barrier()
                times.append((time.perf_counter() - start) / reps)
            if rank == 0:
                results[nbytes] = statistics.median(times)

    run_threaded_ranks(world, rank_body)
    print("RESULT " + json.dumps(results), flush=True)


def measure_in_program(world, sizes):
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import run_file

    max_mib = sizes[-1] >> 20 if sizes[-1] >= 1 << 20 else 1
    results = run_file(
        os.path.abspath(__file__),
        ["--_worker", world, "--max-mib", max_mib],
        dict(TORCH_TPU_NUM_DEVICES=str(world)),
    )
    return {int(k): v for k, v in results.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--max-mib", type=int, default=64)
    p.add_argument("--in-program", type=int, nargs="+", metavar="N")
    p.add_argument("--_worker", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes, n = [], 4 << 10
    while n <= args.max_mib << 20:
        sizes.append(n)
        n *= 4
    if args._worker:
        in_program_worker(args._worker, sizes)
        return
    if args.in_program:
        per_world = {w: measure_in_program(w, sizes) for w in args.in_program}
        print(
            "all_reduce (sum, float32), tpu_dist in-program over N virtual devices in one "
            "process; median time per call; bus GB/s = 2(N-1)/N * size / time"
        )
        print(f"{'size':>8}" + "".join(f" {f'N={w}':>10} {'bus GB/s':>9}" for w in per_world))
        for nbytes in sizes:
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            row = f"{size:>8}"
            for w, res in per_world.items():
                t = res[nbytes]
                row += f" {t * 1e6:>8.0f}us {2 * (w - 1) / w * nbytes / t / 1e9:>9.2f}"
            print(row)
        return
    checked = measure(args.ranks, sizes, checks=True)
    unchecked = measure(args.ranks, sizes, checks=False)
    print(
        f"all_reduce (sum, float32) over {args.ranks} processes; median time per call; "
        "each ratio against the gloo column of its own run (load: "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        + ")"
    )
    print(
        f"{'size':>8} {'gloo cpu':>10} {'tpu_dist':>10} {'ratio':>6} {'gloo cpu':>10} "
        f"{'no check':>10} {'ratio':>6} {'tpu_dist GB/s':>14}"
    )
    for nbytes in sizes:
        g, t = checked[nbytes]["gloo"], checked[nbytes]["tpu_dist"]
        g2, u = unchecked[nbytes]["gloo"], unchecked[nbytes]["tpu_dist"]
        size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
        print(
            f"{size:>8} {g * 1e6:>8.0f}us {t * 1e6:>8.0f}us {t / g:>6.2f} {g2 * 1e6:>8.0f}us "
            f"{u * 1e6:>8.0f}us {u / g2:>6.2f} {nbytes / t / 1e9:>14.2f}"
        )


if __name__ == "__main__":
    main()
