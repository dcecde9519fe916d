"""The c10d backend `tpu_dist` for tpu tensors.

`init_process_group("tpu_dist")`, `init_process_group()` on a tpu machine and
`"cpu:gloo,tpu:tpu_dist"` all reach `_create`, which picks one of two transports per
process group:

- *in-program* (csrc/distributed/in_program_backend.h): when every rank of the group lives
  in this process (ranks as threads, rank r on tpu:r) and the ranks' devices are distinct
  devices of this process's client, each collective is one StableHLO program run over the
  group's devices.
- *host-staged* (csrc/distributed/host_staged_backend.h) otherwise: XLA:CPU's client cannot
  span processes, so tpu tensors go to the host, through a gloo group built on the same
  store, and back. The in-program transport also uses one for the ops it does not run in a
  program (reduce, gather, scatter, send/recv, uneven all_to_all).

TORCH_TPU_DIST_TRANSPORT=auto (the default) | host | in_program overrides the choice;
`in_program` raises where that transport cannot serve the group.
`torch_tpu.metrics.dist_transport(group)` says which one a group uses."""

from __future__ import annotations

import atexit
import os
import uuid
from datetime import timedelta

import torch
import torch.distributed as dist

from torch_tpu import _C, _settings

# Equal on two ranks exactly when they live in the same process.
_PROCESS_TOKEN = f"{os.getpid()}-{uuid.uuid4().hex}"


def _transport_setting() -> str:
    return _settings.get("TORCH_TPU_DIST_TRANSPORT")


def _host_staged(options):
    # The store is already prefixed for this group and device, so this gloo group's keys
    # never meet those of a "cpu:gloo" backend of the same process group.
    gloo = dist.ProcessGroupGloo(
        options.store, options.group_rank, options.group_size, options.timeout
    )
    # gloo's split maps the split's ranks through these (only the process's first gloo
    # group may leave them empty).
    gloo.options.global_ranks_in_group = list(
        options.global_ranks_in_group or range(options.group_size)
    )
    return gloo


def _in_program_plan(options):
    """(devices, group key) when all ranks of the group live in this process on distinct
    devices of its client; otherwise (None, reason)."""
    store, rank, size = options.store, options.group_rank, options.group_size
    if size < 2:
        # Nothing crosses devices; the host-staged backend serves any device.
        return None, "the group has one rank"
    store.set(f"tpu_dist/process/{rank}", _PROCESS_TOKEN)
    if rank == 0:
        store.set("tpu_dist/group", uuid.uuid4().hex)
    tokens = [store.get(f"tpu_dist/process/{r}").decode() for r in range(size)]
    key = store.get("tpu_dist/group").decode()
    if any(t != _PROCESS_TOKEN for t in tokens):
        return None, "the ranks of the group live in different processes"
    ranks = list(options.global_ranks_in_group or range(size))
    count = torch.tpu.device_count()
    if len(set(ranks)) != size or any(r >= count for r in ranks):
        return None, (
            f"the in-program transport runs rank r on tpu:r, and this process has "
            f"{count} tpu device(s) for global ranks {ranks} "
            f"(set TORCH_TPU_NUM_DEVICES)"
        )
    return (ranks, key), None


def _quiesce_at_exit() -> None:
    # A collective nobody waited for (a rank's last all_reduce, an async DTensor one)
    # completes on a gloo worker that still holds the caller's tensors; dropping them
    # while the interpreter finalizes would abort the process. Wait for them first.
    _C._quiesce_host_staged(timedelta(seconds=30))


def _create(options, backend_options=None):
    from torch_tpu import _sharding

    _sharding.register()
    if not getattr(_quiesce_at_exit, "registered", False):
        atexit.register(_quiesce_at_exit)
        _quiesce_at_exit.registered = True
    setting = _transport_setting()
    if setting != "host":
        plan, reason = _in_program_plan(options)
        if plan is not None:
            devices, key = plan
            fallback = _C._host_staged_backend(_host_staged(options))
            timeout = options.timeout
            if not isinstance(timeout, timedelta):
                timeout = timedelta(seconds=float(timeout))
            return _C._in_program_backend(
                options.group_rank, options.group_size, devices, key, timeout, fallback
            )
        if setting == "in_program":
            raise RuntimeError(
                "tpu_dist: TORCH_TPU_DIST_TRANSPORT=in_program, but the "
                f"in-program transport cannot serve this group: {reason}"
            )
    return _C._host_staged_backend(_host_staged(options))


def transport(group=None) -> str:
    """ "in_program" or "host_staged": the transport of `group`'s (default: the default
    group's) tpu_dist backend; "" if its tpu backend is not tpu_dist."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        backend = pg._get_backend(torch.device("tpu"))
    except RuntimeError:
        return ""
    return _C._tpu_dist_transport(backend)


def install_threaded_world() -> None:
    """Makes the c10d world thread-local, so threads of this process can be the ranks of
    process groups (rank r on tpu:r: the in-program transport), as torch's
    multi_threaded_pg does. c10d's C++ registry of group names (used by functional
    collectives) is made thread-local too, so a name resolves to the calling rank's group;
    a name registered twice on one thread keeps the first. Eager work is not recorded from then on (op mode; see torch_tpu._eager)."""
    from torch.testing._internal.distributed.multi_threaded_pg import _install_threaded_pg

    from torch_tpu import _eager

    _eager._disable_recording_for_threaded_ranks()

    c10d = dist.distributed_c10d
    if getattr(c10d._register_process_group, "_tpu_threaded", False):
        return
    # Group names resolve per thread (functional collectives, and compiled graphs with
    # collectives inside, find the calling rank's group by name).
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    _install_threaded_pg()
    register_group = c10d._register_process_group

    def register_once(name, pg):
        try:
            register_group(name, pg)
        except RuntimeError as e:
            if "already registered" not in str(e):
                raise

    register_once._tpu_threaded = True
    c10d._register_process_group = register_once


def _serve_both_devices(device_backend_map: dict) -> None:
    """A group that names one of gloo (CPU) and tpu_dist (tpu) also gets the other for
    the other device type, as gloo serves cuda tensors on a GPU host: CPU-only code whose
    default mesh or device becomes tpu once torch_tpu is installed, and tpu code that puts
    a CPU tensor through the group, keep working. A device type the user named explicitly
    ("cpu:gloo", "tpu:tpu_dist") keeps just its backend."""
    gloo, tpu_dist = dist.Backend.GLOO, dist.Backend("tpu_dist")
    if device_backend_map.get("cpu") == gloo:
        device_backend_map.setdefault("tpu", tpu_dist)
    elif device_backend_map.get("tpu") == tpu_dist and "cpu" not in device_backend_map:
        # CPU first: c10d creates the backends in this order, and gloo's split of the
        # default group works only for the process's first gloo group (the default
        # group's gloo leaves its global ranks empty).
        rest = dict(device_backend_map)
        device_backend_map.clear()
        device_backend_map.update({"cpu": gloo, **rest})


def _extend_backend_config() -> None:
    config = dist.distributed_c10d.BackendConfig
    if getattr(config.__init__, "_tpu_both_devices", False):
        return
    init = config.__init__

    def __init__(self, backend):
        init(self, backend)
        if ":" not in str(backend):  # "gloo", "tpu_dist" or none: not a device:backend list
            _serve_both_devices(self.device_backend_map)

    __init__._tpu_both_devices = True
    config.__init__ = __init__


def _expose_backend_options() -> None:
    """DeviceMesh splits a group bound to a device (`init_process_group(device_id=...)`)
    with `split_group`, which reads `backend.options` and passes a deep copy of it to the
    split; PyTorch's Python binding has that attribute only for its own backends. None
    (the generic binding's value here) makes the split take each backend's own options
    in C++ (tpu_dist: its gloo's), which is also what gloo's own split needs: its
    Python options object cannot be deep-copied."""
    backend_type = torch._C._distributed_c10d.Backend
    if "options" not in backend_type.__dict__:
        backend_type.options = property(lambda backend: None)


def register() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        return
    if "TPU_DIST" not in dist.Backend._plugins:
        dist.Backend.register_backend("tpu_dist", _create, extended_api=True, devices=["tpu"])
    _extend_backend_config()
    _expose_backend_options()
