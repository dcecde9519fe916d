"""The c10d backend `tpu_dist` for tpu tensors.

`init_process_group("tpu_dist")`, `init_process_group()` on a tpu machine and
`"cpu:gloo,tpu:tpu_dist"` all reach `_create`. The transport is host-staged
(csrc/distributed/host_staged_backend.h): XLA:CPU's client cannot span processes, so tpu
tensors go to the host, through a gloo group built on the same store, and back."""

from __future__ import annotations

import torch.distributed as dist

from torch_tpu import _C


def _create(options, backend_options=None):
    # The store is already prefixed for this group and device, so this gloo group's keys
    # never meet those of a "cpu:gloo" backend of the same process group.
    host = dist.ProcessGroupGloo(options.store, options.group_rank, options.group_size,
                                 options.timeout)
    return _C._host_staged_backend(host)


def register() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        return
    if "TPU_DIST" not in dist.Backend._plugins:
        dist.Backend.register_backend("tpu_dist", _create, extended_api=True, devices=["tpu"])
