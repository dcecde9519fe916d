"""`torch.tpu.distributed`: launching a job on tpu devices, device meshes, SPMD regions.

The c10d backend itself is `tpu_dist` (torch_tpu/_distributed.py); this module holds
TorchTPU 0.2's helpers around it, with the meaning they have on any PJRT device:

- `set_tpu_launch_env` sets, in a launcher's parent process, what the workers need to
  find their device and each other (our device-count and rendezvous rules).
- `topology_aware_mesh` lays the global ranks out as a mesh. These devices have no
  physical links to follow, so it is the row-major mesh.
- `spmd_safe` marks a function that runs identically on every rank.
- `window_num_stripes` and `window_stripe_chunk_mb` are the settings of TorchTPU's
  windowed peer transfers, kept and checked here (see their docs).
"""

from __future__ import annotations

import functools
import math
import os
import socket
import sys
import types
from typing import Any, Callable, Optional, TypeVar

import torch

from torch_tpu import _settings

_F = TypeVar("_F", bound=Callable[..., Any])

# What the annotated nodes of a compiled region carry in `node.meta["custom"]`.
SPMD_SAFE_METADATA_KEY = "spmd_safe"


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"set_tpu_launch_env(): {name} must be an integer, got {value!r}"
        ) from None


def _set_once(name: str, value: Callable[[], Any]) -> None:
    """Sets `name` to `value()` unless the environment already has it (then `value` is
    not even called, so an operator's setting also skips its checks)."""
    if os.environ.get(name, "") == "":
        os.environ[name] = str(value())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _local_device_count() -> int:
    """The devices each process of this host has: the running runtime's count, else the
    rule a fresh process applies (TORCH_TPU_NUM_DEVICES, LOCAL_WORLD_SIZE, 1), without
    starting the plugin (a parent process must not claim a real device)."""
    from torch_tpu import _C, _plugin

    if _C._is_initialized():
        return _C._device_count()
    return _plugin.num_devices()


def set_tpu_launch_env(
    *, nnodes: Optional[int] = None, nproc_per_node: Optional[int] = None
) -> None:
    """Sets the environment variables the workers of a tpu job need, before they spawn.

    Call it once in the parent process, before handing anything to a launcher
    (`torch.multiprocessing.spawn`, `torchrun`'s API). It is idempotent and never
    overwrites a variable that is already set, so an operator can pin any of them.

    On one host it sets `TORCH_TPU_NUM_DEVICES` to `nproc_per_node` (default: this
    host's device count), so that every worker presents that many devices and owns
    `tpu:LOCAL_RANK`, `MASTER_ADDR` to 127.0.0.1 and `MASTER_PORT` to a free port. On
    several hosts (`nnodes` > 1, more than one name in `TPU_WORKER_HOSTNAMES`, or
    `JOB_COMPLETION_INDEX` set, as an indexed Kubernetes job does) it sets `NNODES`,
    `NODE_RANK` (from `JOB_COMPLETION_INDEX`), `MASTER_ADDR` (the first of
    `TPU_WORKER_HOSTNAMES`), `MASTER_PORT` (29500) and `TORCH_TPU_NUM_DEVICES`
    (`nproc_per_node`, else `TORCH_TPU_DEVICES_PER_HOST`, else this host's count).

    TorchTPU also derives slice-builder addresses and a host's rank from the TPU's
    physical coordinates; PJRT devices in general have neither, so the rank comes from
    `NODE_RANK` or `JOB_COMPLETION_INDEX` only.

    Raises ValueError if `nnodes` disagrees with `TPU_WORKER_HOSTNAMES`, if a count is
    not positive, or on several hosts when `TPU_WORKER_HOSTNAMES` is needed and unset,
    or `NODE_RANK` is unset and `JOB_COMPLETION_INDEX` too.
    """
    for name, value in (("nnodes", nnodes), ("nproc_per_node", nproc_per_node)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"set_tpu_launch_env(): {name} must be a positive int, got {value!r}")
    hosts_text = os.environ.get("TPU_WORKER_HOSTNAMES", "")
    hosts = [h for h in hosts_text.split(",") if h]
    if nnodes is not None and hosts and nnodes != len(hosts):
        raise ValueError(
            "set_tpu_launch_env(): expected nnodes to match the number of hosts in "
            f"TPU_WORKER_HOSTNAMES ({len(hosts)}: {hosts_text!r}), got {nnodes}"
        )
    completion_index = os.environ.get("JOB_COMPLETION_INDEX")
    multihost = (nnodes or 1) > 1 or len(hosts) > 1 or completion_index is not None

    def need_hosts() -> list:
        if not hosts:
            raise ValueError(
                "set_tpu_launch_env(): on several hosts TPU_WORKER_HOSTNAMES must list "
                "the workers' host names or addresses, comma-separated; it is unset"
            )
        return hosts

    def per_host() -> int:
        count = nproc_per_node
        if count is None and multihost:
            count = _settings.get("TORCH_TPU_DEVICES_PER_HOST")
        count = _local_device_count() if count is None else count
        if count < 1:
            raise ValueError(f"set_tpu_launch_env(): expected tpu devices, got {count}")
        return count

    _set_once("TORCH_TPU_NUM_DEVICES", per_host)
    if not multihost:
        _set_once("MASTER_ADDR", lambda: "127.0.0.1")
        _set_once("MASTER_PORT", _free_port)
        return

    def node_rank() -> int:
        if completion_index is None:
            raise ValueError(
                "set_tpu_launch_env(): NODE_RANK is unset and cannot be derived: set it, "
                "or JOB_COMPLETION_INDEX"
            )
        return int(completion_index)

    _set_once("NNODES", lambda: nnodes if nnodes is not None else len(need_hosts()))
    _set_once("NODE_RANK", node_rank)
    _set_once("MASTER_ADDR", lambda: need_hosts()[0])
    _set_once("MASTER_PORT", lambda: 29500)


def topology_aware_mesh(
    mesh_shape: tuple,
    *,
    dcn_mesh_shape: Optional[tuple] = None,
    allow_split_physical_axes: bool = False,
    contiguous_submeshes: bool = False,
) -> torch.Tensor:
    """The global ranks laid out as `mesh_shape`: an int64 tensor for
    `DeviceMesh("tpu", mesh)`, logically adjacent positions on physically adjacent
    devices. The product of `mesh_shape` is the world size (the default process group's,
    else this process's device count).

    TorchTPU orders ranks by the TPU's interconnect; PJRT devices in general have no
    topology to follow, so this is the row-major mesh of ranks. `dcn_mesh_shape` (the axes
    split across slices) must describe a single slice: its product is 1.
    `allow_split_physical_axes` and `contiguous_submeshes` are accepted for
    compatibility: there are no physical axes to split."""
    shape = tuple(int(d) for d in mesh_shape)
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(
            f"topology_aware_mesh: mesh_shape must be positive sizes, got {mesh_shape}"
        )
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        world = dist.get_world_size()
    else:
        from torch_tpu import _C

        world = _C._device_count()
    if math.prod(shape) != world:
        raise ValueError(
            f"topology_aware_mesh: mesh_shape {shape} holds {math.prod(shape)} ranks, "
            f"the world has {world}"
        )
    if dcn_mesh_shape is not None:
        dcn = tuple(int(d) for d in dcn_mesh_shape)
        if len(dcn) != len(shape) or math.prod(dcn) != 1:
            raise ValueError(
                f"topology_aware_mesh: dcn_mesh_shape {dcn_mesh_shape} must have "
                f"{len(shape)} sizes whose product is the number of slices, and this "
                "engine has a single slice"
            )
    return torch.arange(world, dtype=torch.int64).reshape(shape)


def _tpu_tensors(tree) -> bool:
    from torch.utils import _pytree

    return any(
        isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in _pytree.tree_leaves(tree)
    )


def spmd_safe(func: _F) -> _F:
    """Marks `func` as SPMD-safe: every rank runs it identically (the same tpu ops,
    collectives included, in the same order with the same shapes). Do not decorate code
    whose control flow depends on the rank.

    Eagerly, the work recorded before the call is flushed first and the work of the
    call when it returns (fused eager mode; a no-op in op mode), so that no operation
    from outside the function joins the programs it produces, on any rank. Under
    `torch.compile` the traced nodes are annotated instead
    (`node.meta["custom"]["spmd_safe"]`).

    TorchTPU fuses a marked region's eager collectives with the compute around them.
    Here an eager collective always runs on its own (it is a flush point); collectives
    in compiled graphs already lower into the graph's program where the in-program
    transport serves the group, marked or not."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            with torch.fx.traceback.annotate({SPMD_SAFE_METADATA_KEY: True}):
                return func(*args, **kwargs)
        from torch_tpu import _eager

        if _tpu_tensors((args, kwargs)):
            _eager.flush()
        result = func(*args, **kwargs)
        if _tpu_tensors(result):
            _eager.flush()
        return result

    return wrapper  # type: ignore[return-value]


# TorchTPU's defaults would matter only to its windowed transfers; these are the sizes the
# host-staged all_reduce of tpu_dist uses for a large tensor (4 pieces of at least 4 MiB).
_window = {"window_num_stripes": 4, "window_stripe_chunk_mb": 4}


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"torch.tpu.distributed.{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"torch.tpu.distributed.{name} must be positive, got {value}")
    return value


class _DistributedModule(types.ModuleType):
    """`torch.tpu.distributed`'s settable properties."""

    @property
    def window_num_stripes(self) -> int:
        """The most concurrent stripes (DMA transfers) one windowed peer transfer is split
        into (experimental). TorchTPU's WindowTpu transfers use it; PJRT devices have no
        such transfers, so here it is only kept and checked (a positive int): nothing
        reads it yet."""
        return _window["window_num_stripes"]

    @window_num_stripes.setter
    def window_num_stripes(self, value: int) -> None:
        _window["window_num_stripes"] = _positive("window_num_stripes", value)

    @property
    def window_stripe_chunk_mb(self) -> int:
        """The smallest payload, in MB, of one stripe of a windowed peer transfer
        (experimental). As `window_num_stripes`: kept and checked (a positive int), read
        by nothing on this engine."""
        return _window["window_stripe_chunk_mb"]

    @window_stripe_chunk_mb.setter
    def window_stripe_chunk_mb(self, value: int) -> None:
        _window["window_stripe_chunk_mb"] = _positive("window_stripe_chunk_mb", value)


sys.modules[__name__].__class__ = _DistributedModule
