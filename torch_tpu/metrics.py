"""Counters of what the tpu runtime did: compiles, cache hits, executions, fallbacks, transfers."""

from torch_tpu import _C


def snapshot() -> dict:
    """All counters as a dict, by name (the C++ core names each once, with what it
    counts: runtime/metrics.h, runtime/disk_cache.h):
    """
    return _C._metrics()


snapshot.__doc__ += "\n".join(f"    {name}: {doc}" for name, doc in _C._metric_docs().items())


def reset() -> None:
    """Zeroes the counters and empties compile_log()."""
    _C._reset_metrics()


def compile_log() -> list:
    """One dict per program the compilation cache had to produce since the last reset()
    (the latest 10,000), oldest first: `what` (the op, "fused (N ops)" or "graph (N
    ops)"), `signature` (argument and result types, "f32[3,4], f32[] -> f32[3,4]"), `reason` (why it was not in
    memory: "new program", "new shape", "new bucket" (a bucketed compiled graph), "new dtype",
    "new attributes" or "evicted"; "tier-up after N runs" for the background recompile of
    a hot program, TORCH_TPU_TIERED_COMPILE),
    `disk` (what the disk cache had: "hit", "miss", "corrupt entry" or "off"),
    `from_disk` (loaded, not compiled), `first_tier` (compiled at the cheap first tier, to
    be recompiled once hot) and `ms` (lowering, compiling or loading).
    TORCH_TPU_LOG=compiles prints each as it happens."""
    return _C._compile_log()


def fallback_count() -> int:
    return sum(_C._metrics()["fallbacks"].values())


def dist_transport(group=None) -> str:
    """The transport of `group`'s tpu_dist backend (default: the default process group):
    "in_program" or "host_staged"; "" if its tpu backend is not tpu_dist."""
    from torch_tpu import _distributed

    return _distributed.transport(group)


def report() -> str:
    m = snapshot()
    lines = [
        "torch_tpu metrics",
        f"  compiles:          {m['compiles']} ({m['compile_seconds']:.3f} s)",
        f"  cache hits/misses: {m['cache_hits']} / {m['cache_misses']} (memory), "
        f"{m['disk_hits']} / {m['disk_misses']} (disk)",
        f"  executions:        {m['executions']}",
        f"  compiled graphs:   {m['graphs']} ({m['graph_runs']} runs, "
        f"{m['graph_fallbacks']} run op by op, {m['graph_splits']} split around unlowered "
        f"ops, {m['graph_build_seconds']:.3f} s lowering "
        f"and compiling or loading)",
        f"  host->device:      {m['host_to_device_bytes']} bytes",
        f"  device->host:      {m['device_to_host_bytes']} bytes",
        f"  tpu_dist:          {m['host_staged_collectives']} collectives host-staged "
        f"({m['host_staged_bytes']} bytes), {m['in_program_collectives']} in-program",
        f"  cpu fallbacks:     {sum(m['fallbacks'].values())}",
    ]
    for op, count in sorted(m["fallbacks"].items()):
        lines.append(f"    {op}: {count}")
    return "\n".join(lines)
