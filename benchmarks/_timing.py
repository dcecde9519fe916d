"""Timing shared by the benchmark scripts."""

import time


def timed_rounds(step, sync, rounds: int, steps: int, host_only: bool = False):
    """Runs `rounds` rounds of `steps` calls of `step`, each round between two `sync()`s
    (tpu work is asynchronous); returns the seconds per step of each round and the last
    step's result. With `host_only`, the closing sync is outside the timer: the time the
    host takes to issue the steps."""
    times, result = [], None
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            result = step()
        if host_only:
            times.append((time.perf_counter() - start) / steps)
            sync()
            continue
        sync()
        times.append((time.perf_counter() - start) / steps)
    return times, result


def run_script(code: str, args, env: dict) -> dict:
    """Runs `code` in a fresh interpreter with `args` as sys.argv[1:] and the environment
    plus `env`; returns the JSON it printed on a line starting with "RESULT "."""
    return _run_for_result(["-c", code, *map(str, args)], env, args)


def run_file(path: str, args, env: dict) -> dict:
    """run_script for a script file (a benchmark running itself as a worker)."""
    return _run_for_result([path, *map(str, args)], env, args)


def _run_for_result(argv, env: dict, args) -> dict:
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=dict(os.environ, **env)
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{args} {env}: {proc.stderr[-2000:]}")
    return json.loads(lines[0][len("RESULT ") :])


def run_threaded_ranks(world: int, body, timeout_s: int = 300) -> None:
    """Runs body(rank) on `world` ranks as threads of this process, rank r on tpu:r, each
    in a tpu_dist group (the in-program transport unless TORCH_TPU_DIST_TRANSPORT says
    otherwise). The process must have TORCH_TPU_NUM_DEVICES >= world."""
    import datetime
    import threading

    import torch
    import torch.distributed as dist
    import torch_tpu

    torch_tpu._distributed.install_threaded_world()
    store = dist.HashStore()

    def rank_body(rank):
        torch.tpu.set_device(rank)
        dist.init_process_group(
            "tpu_dist",
            store=store,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        body(rank)

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
