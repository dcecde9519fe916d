"""Runs distributed test code with a bounded lifetime: ranks as real processes (the
host-staged transport) or as threads of one process (the in-program transport).

`launch(fn, world_size, *args)` starts `fn(rank, world_size, init_method, *args)` in
`world_size` fresh interpreters and returns their return values by rank. A worker's
exception fails the caller with the worker's traceback; a worker that has not finished
by the deadline is killed, and so are all the others, so no test leaves processes
behind. `fn` must be importable by name from a module on sys.path (this directory is
added to the children's PYTHONPATH).

`run_threads(scenarios)` runs dist_threads.py's scenarios in one subprocess with 4
virtual devices (the device count is fixed when the runtime starts) and returns
{scenario: "ok" or the error}."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import queue
import subprocess
import sys
import time
import traceback

from helpers import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def _child(fn, rank, world_size, init_method, args, results, env):
    os.environ.update(env)
    try:
        import torch

        torch.set_num_threads(1)
        # Plain pickle bytes: a queue would share tensors' memory with a process that
        # is about to exit.
        results.put((rank, True, pickle.dumps(fn(rank, world_size, init_method, *args))))
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put((rank, False, traceback.format_exc()))
    finally:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except BaseException:  # noqa: BLE001
            pass


def launch(
    fn,
    world_size: int,
    *args,
    timeout: float = 120,
    env: dict | None = None,
    allow_failures: bool = False,
) -> dict:
    """Returns {rank: value}. With allow_failures, a worker's error is returned as
    ("error", traceback) and a worker that died as ("died", exit code) instead of
    failing."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    init_method = f"tcp://127.0.0.1:{free_port()}"
    child_env = {
        "PYTHONPATH": os.pathsep.join(p for p in [HERE, os.environ.get("PYTHONPATH", "")] if p)
    }
    child_env.update(env or {})
    # The children inherit the environment at start; PYTHONPATH lets them import `fn`.
    saved = dict(os.environ)
    os.environ.update(child_env)
    try:
        procs = [
            ctx.Process(
                target=_child,
                daemon=True,
                args=(fn, r, world_size, init_method, args, results, child_env),
            )
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out: dict = {}
    deadline = time.monotonic() + timeout
    try:
        while len(out) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{fn.__name__}: ranks {sorted(set(range(world_size)) - set(out))} "
                    f"did not finish within {timeout} s"
                )
            try:
                rank, ok, value = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [
                    r
                    for r, p in enumerate(procs)
                    if r not in out and not p.is_alive() and p.exitcode not in (0, None)
                ]
                if dead and results.empty():
                    time.sleep(0.5)
                    if results.empty():
                        if not allow_failures:
                            raise AssertionError(
                                f"{fn.__name__}: rank {dead[0]} died with "
                                f"exit code {procs[dead[0]].exitcode}"
                            ) from None
                        for r in dead:
                            out[r] = ("died", procs[r].exitcode)
                continue
            if not ok and not allow_failures:
                raise AssertionError(f"{fn.__name__} failed on rank {rank}:\n{value}")
            out[rank] = pickle.loads(value) if ok else ("error", value)
        return out
    finally:
        for p in procs:
            p.join(timeout=max(0.0, min(10.0, deadline - time.monotonic() + 10)))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


def run_threads(scenarios, timeout: float = 240, script: str = "dist_threads.py") -> dict:
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4", PYTHONPATH=HERE)
    env.pop("TORCH_TPU_DIST_TRANSPORT", None)
    proc = subprocess.run(
        [sys.executable, "-P", os.path.join(HERE, script), *scenarios],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=HERE,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, f"rc={proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULTS ") :])
