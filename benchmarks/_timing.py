"""Timing shared by the benchmark scripts."""

import time


def timed_rounds(step, sync, rounds: int, steps: int):
    """Runs `rounds` rounds of `steps` calls of `step`, each round between two `sync()`s
    (tpu work is asynchronous); returns the seconds per step of each round and the last
    step's result."""
    times, result = [], None
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            result = step()
        sync()
        times.append((time.perf_counter() - start) / steps)
    return times, result
