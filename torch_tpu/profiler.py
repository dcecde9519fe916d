"""`torch.tpu.profiler`: tpu options for `torch.profiler.profile(experimental_config=...)`.

Device and host events come from torch_tpu's Kineto child profiler (docs/architecture.md,
"Profiler"); this config chooses which of them a session records."""

from __future__ import annotations

import os

import torch

_STABLE = (
    "check_experimental_options",
    "device_tracer_level",
    "host_tracer_level",
    "python_tracer_level",
    "run_dir",
    "worker_rank",
)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"TpuProfilerConfig: option values are int, bool or str, got {value!r}")


class TpuProfilerConfig(torch.profiler._ExperimentalConfig):
    """TorchTPU's profiler options, passed to Kineto as its custom config string.

    device_tracer_level: 0 records no device events (program executions), 1 does.
    host_tracer_level: 0 records none of torch_tpu's host events (compiles, transfers,
    fused flushes), 1 or more does. PyTorch's own host ops are recorded either way.
    python_tracer_level, run_dir, worker_rank and experimental_options are accepted and
    checked for TorchTPU compatibility; this backend writes no XPlane files, so they
    change nothing here (use `export_chrome_trace` or `tensorboard_trace_handler`)."""

    def __init__(
        self,
        *,
        host_tracer_level: int = 2,
        device_tracer_level: int = 1,
        python_tracer_level: int = 0,
        run_dir=None,
        worker_rank: str | None = None,
        experimental_options: dict | None = None,
        check_experimental_options: bool = True,
    ):
        if worker_rank is not None:
            if not isinstance(worker_rank, str):
                raise TypeError(f"worker_rank must be a string, got {type(worker_rank)}")
            if ":" in worker_rank or "," in worker_rank:
                raise ValueError(f"worker_rank cannot contain ':' or ',': {worker_rank!r}")
        for key in experimental_options or {}:
            if key in _STABLE:
                raise ValueError(f"experimental option {key!r} clashes with a stable option")
            if ":" in key or "," in key:
                raise ValueError(f"experimental option keys cannot contain ':' or ',': {key!r}")
        parts = [
            f"host_tracer_level:{int(host_tracer_level)}",
            f"device_tracer_level:{int(device_tracer_level)}",
            f"python_tracer_level:{int(python_tracer_level)}",
        ]
        if run_dir is not None:
            parts.append(f"run_dir:{os.fspath(run_dir)}")
        if worker_rank is not None:
            parts.append(f"worker_rank:{_text(worker_rank)}")
        if experimental_options:
            parts += [f"{k}:{_text(v)}" for k, v in experimental_options.items()]
            parts.append(f"check_experimental_options:{_text(bool(check_experimental_options))}")
        super().__init__(custom_profiler_config=",".join(parts))
