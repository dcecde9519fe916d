"""`torch.tpu.profiler`: tpu options for `torch.profiler.profile(experimental_config=...)`.

Device and host events come from torch_tpu's Kineto child profiler (docs/architecture.md,
"Profiler"); this config chooses which of them a session records, and with `run_dir`
where each stopped session's trace goes (`_KinetoProfile.stop_trace` is wrapped for
that: PyTorch offers no hook at the end of a session)."""

from __future__ import annotations

import functools
import os
import socket
import time

import torch
import torch.profiler.profiler as _torch_profiler

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
    run_dir: every session stopped with this config writes its trace there, as
    `run_dir/plugins/profile/<date_time>/<host>[_<worker_rank>].pt.trace.json.gz`: Kineto's
    Chrome trace JSON, gzipped, which TensorBoard's profile plugins (the trace viewer,
    torch-tb-profiler) and Perfetto open. TorchTPU writes an XPlane protobuf
    (`.xplane.pb`) at that place instead.
    python_tracer_level and experimental_options are accepted and checked for TorchTPU
    compatibility; they change nothing here."""

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
        self.run_dir = None if run_dir is None else os.fspath(run_dir)
        self.worker_rank = worker_rank
        if run_dir is not None:
            parts.append(f"run_dir:{self.run_dir}")
        if worker_rank is not None:
            parts.append(f"worker_rank:{_text(worker_rank)}")
        if experimental_options:
            parts += [f"{k}:{_text(v)}" for k, v in experimental_options.items()]
            parts.append(f"check_experimental_options:{_text(bool(check_experimental_options))}")
        super().__init__(custom_profiler_config=",".join(parts))

    def _trace_path(self) -> str:
        """Where the next stopped session's trace goes: a new directory per session."""
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S") + f"_{time.time_ns() % 10**9:09d}"
        host = socket.gethostname() + (f"_{self.worker_rank}" if self.worker_rank else "")
        folder = os.path.join(self.run_dir, "plugins", "profile", stamp)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"{host}.pt.trace.json.gz")


def _install_run_dir_traces() -> None:
    kineto = _torch_profiler._KinetoProfile
    if getattr(kineto.stop_trace, "__tpu_run_dir__", False):
        return
    stop_trace = kineto.stop_trace

    @functools.wraps(stop_trace)
    def stop_and_write(self) -> None:
        stop_trace(self)
        config = getattr(self, "experimental_config", None)
        if isinstance(config, TpuProfilerConfig) and config.run_dir is not None:
            self.export_chrome_trace(config._trace_path())

    stop_and_write.__tpu_run_dir__ = True
    kineto.stop_trace = stop_and_write


_install_run_dir_traces()
