"""`torch.tpu`: the device module, following `torch.cuda`'s names and semantics."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any, Optional

import torch

from torch_tpu import (  # noqa: F401
    _C,
    _api,
    _eager,
    _precision,
    compiler,
    distributed,
    ops,
    optimizers,
    pallas,
    profiler,
)
from torch_tpu._eager import EagerMode  # noqa: F401
from torch_tpu._eager import set_tpu_eager_mode as set_eager_mode  # noqa: F401
from torch_tpu._precision import Precision, precision  # noqa: F401
from torch_tpu._device import _DeviceLike, _index
from torch_tpu._streams import (  # noqa: F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def is_available() -> bool:
    """True if a PJRT plugin loads and has at least one device."""
    return _C._device_count() > 0


def is_initialized() -> bool:
    """True once the PJRT plugin is loaded and its devices exist."""
    return _C._is_initialized()


def init() -> None:
    """Loads the PJRT plugin now; raises its error if it cannot."""
    _C._init()


def device_count() -> int:
    """The number of tpu devices (TORCH_TPU_NUM_DEVICES virtual ones on XLA:CPU)."""
    return _C._device_count()


def current_device() -> int:
    """The index of the current tpu device."""
    return _C._current_device()


def set_device(device: _DeviceLike) -> None:
    """Makes `device` (an index, a tpu device or its name) the current tpu device."""
    _C._set_device(_index(device))


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device: _DeviceLike):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)

    def __exit__(self, *args: Any) -> None:
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.prev_idx)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work enqueued on the device."""
    _C._synchronize(_index(device))


# --- random --------------------------------------------------------------------


def _is_in_bad_fork() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    seed = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    if not is_initialized():
        manual_seed_all(seed)  # generators are created seeded
        return
    _C._manual_seed(current_device(), seed)


def manual_seed_all(seed: int) -> None:
    """Seeds every device's generator."""
    _C._manual_seed_all(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    """Seeds the current device's generator with a random number."""
    _C._seed(current_device())


def seed_all() -> None:
    """Seeds every device's generator with a random number."""
    for i in range(device_count()):
        _C._seed(i)


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return _C._initial_seed(current_device())


def get_rng_state(device: _DeviceLike = "tpu") -> torch.Tensor:
    """A device generator's state, a uint8 CPU tensor for `set_rng_state`."""
    return _C._get_rng_state(_index(device))


def get_rng_state_all() -> list:
    """Every device generator's state, by device."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "tpu") -> None:
    """Restores a device generator's state from `get_rng_state`."""
    _C._set_rng_state(_index(device), new_state.contiguous())


def set_rng_state_all(new_states) -> None:
    """Restores every device generator's state from `get_rng_state_all`."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# --- memory --------------------------------------------------------------------


def memory_stats(device: _DeviceLike = None) -> dict:
    """A device's memory counters, `torch.cuda.memory_stats`'s names (empty before the
    plugin loads)."""
    if not is_initialized():
        return {}
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes held by live tensors on the device now."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """The peak of `memory_allocated` since the start or the last reset."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes the device holds for tensors now (no cache: as allocated)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """The peak of `memory_reserved` since the start or the last reset."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Starts the peak counters of a device's memory afresh."""
    if is_initialized():
        _C._reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Buffers are freed when their last tensor dies; there is no cache to empty."""


def host_memory_stats() -> dict:
    """Pinned host memory (`pin_memory()`), as `torch.cuda.host_memory_stats`: for
    active_requests, active_bytes, allocations and allocated_bytes their current, peak,
    allocated and freed counts; num_host_alloc and num_host_free. Nothing is cached, so
    allocations equal active requests."""
    return dict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    """Starts the peak counters of pinned host memory afresh."""
    _C._reset_host_memory_stats(False)


def reset_accumulated_host_memory_stats() -> None:
    """Zeroes the accumulated (allocated, freed) counters of pinned host memory."""
    _C._reset_host_memory_stats(True)


# --- compilation cache ---------------------------------------------------------


def cache_stats(entries: bool = False) -> dict:
    """The compilation cache: entries and hits/misses in memory, compiles and their
    seconds, and the disk tier's directory, hits, misses, writes, bad (corrupt or
    incompatible) entries, evictions, programs the plugin could not serialize (they run
    from memory only) and bytes on disk.

    With ``entries=True`` it also lists every program in memory, most recently used
    first: its label (op name, or "graph (N ops)" for a compiled graph), fingerprint,
    hits, compile seconds and whether it came from the disk tier."""
    init()
    stats = _C._cache_stats()
    if entries:
        stats["entries"] = _C._cache_entries()
    return stats


def clear_cache(memory: bool = True, disk: bool = False) -> None:
    """Drops compiled programs from memory and, with ``disk=True``, deletes the disk
    entries (under ``TORCH_TPU_CACHE_DIR``) as well."""
    init()
    _C._clear_cache(memory, disk)


# --- properties ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _TpuDeviceProperties:
    name: str
    platform: str
    platform_version: str
    plugin: str
    pjrt_api_version: str
    total_memory: int
    type: str = "tpu"


def get_device_properties(device: _DeviceLike = None) -> _TpuDeviceProperties:
    """The device's name, platform, plugin, PJRT API version and total memory."""
    idx = _index(device)
    init()
    platform, version, plugin, major, minor = _C._platform()
    return _TpuDeviceProperties(
        name=get_device_name(idx),
        platform=platform,
        platform_version=version,
        plugin=plugin,
        pjrt_api_version=f"{major}.{minor}",
        total_memory=_C._memory_capacity(idx),
    )


def get_device_name(device: _DeviceLike = None) -> str:
    """The device's kind and the PJRT platform that runs it."""
    idx = _index(device)
    init()
    platform = _C._platform()[0]
    return f"{_C._device_kind(idx)} ({platform} PJRT)"


def get_device_capability(device: _DeviceLike = None) -> tuple:
    """(0, 0): PJRT devices have no CUDA compute capability."""
    return (0, 0)


# --- amp -----------------------------------------------------------------------


def get_amp_supported_dtype() -> list:
    """The dtypes autocast may use on tpu: bfloat16 and float16."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported() -> bool:
    """True: every PJRT device computes in bfloat16."""
    return True


def _lazy_init() -> None:
    init()


# --- TorchTPU 0.2 names --------------------------------------------------------

_generators: Optional[tuple] = None


def _default_generators() -> tuple:
    """One torch.Generator per device, the same objects every time (as torch.cuda's)."""
    global _generators
    if _generators is None:
        init()
        _generators = tuple(_C._default_generator(i) for i in range(device_count()))
    return _generators


# Deprecated in TorchTPU 0.2.0: torch_tpu/_api.py's table wraps it to warn once.
topology_aware_mesh = distributed.topology_aware_mesh


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor or storage) current; a
    no-op for an object that is not on a tpu device."""

    def __init__(self, obj: Any):
        on_tpu = getattr(getattr(obj, "device", None), "type", None) == "tpu"
        super().__init__(obj.get_device() if on_tpu else None)


class _TpuModule(types.ModuleType):
    """`torch.tpu`'s settable properties (TorchTPU's `torch.tpu.eager_mode = ...`)."""

    @property
    def eager_mode(self) -> EagerMode:
        """The eager mode (a torch.tpu.EagerMode); assigning one switches to it."""
        return _eager.eager_mode()

    @eager_mode.setter
    def eager_mode(self, mode) -> None:
        _eager._apply(mode)

    @property
    def allow_excess_precision(self) -> bool:
        """Whether XLA may keep values in more precision than their type (e.g. bf16
        chains in f32); assignable."""
        return _precision.allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: bool) -> None:
        _precision.set_allow_excess_precision(value)

    @property
    def default_generators(self) -> tuple:
        """One torch.Generator per device, the same objects every time."""
        return _default_generators()


sys.modules[__name__].__class__ = _TpuModule
sys.modules.setdefault("torch.tpu.compiler", compiler)
sys.modules.setdefault("torch.tpu.distributed", distributed)
sys.modules.setdefault("torch.tpu.profiler", profiler)
sys.modules.setdefault("torch.tpu.ops", ops)
sys.modules.setdefault("torch.tpu.optimizers", optimizers)
sys.modules.setdefault("torch.tpu.pallas", pallas)
_api.install()
