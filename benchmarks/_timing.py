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
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ, **env),
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{args} {env}: {proc.stderr[-2000:]}")
    return json.loads(lines[0][len("RESULT ") :])
