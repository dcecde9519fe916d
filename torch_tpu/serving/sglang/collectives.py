"""Tensor parallel collectives of SGLang on `tpu`.

SGLang's layers reach their process group through custom ops (`torch.ops.sglang.
inplace_all_reduce`, ...), which it registers for the CUDA dispatch key only. Each op
looks its group coordinator up by name (SGLang's registry of groups, the one lookup
its own kernels do too) and runs the collective on the group; on tpu that is the
`torch.distributed` collective on the group's device group, whose backend is tpu_dist
(see platform.py). This registers those kernels for PrivateUse1, one line per op."""

from __future__ import annotations

import torch
import torch.distributed as dist


def _device_group(group_name: str):
    from sglang.srt.distributed.parallel_state import _groups

    if group_name not in _groups:
        raise ValueError(f"SGLang process group {group_name!r} is not found")
    group = _groups[group_name]()
    if group is None:
        raise ValueError(f"SGLang process group {group_name!r} is destroyed")
    return group.device_group


def _inplace_all_reduce(tensor, group_name):
    dist.all_reduce(tensor, group=_device_group(group_name))


def _outplace_all_reduce(tensor, group_name, outplace_all_reduce_method):
    # No out-of-place communicator on tpu: reduce a copy in place.
    out = tensor.clone()
    dist.all_reduce(out, group=_device_group(group_name))
    return out


def _all_gather_into_tensor(output, input, group_name):
    dist.all_gather_into_tensor(output, input, group=_device_group(group_name))


def _reduce_scatter_tensor(output, input, group_name):
    dist.reduce_scatter_tensor(output, input, group=_device_group(group_name))


def _all_to_all_single(output, input, group_name):
    dist.all_to_all_single(output, input, group=_device_group(group_name))


# SGLang op name -> the tpu kernel.
KERNELS = {
    "inplace_all_reduce": _inplace_all_reduce,
    "outplace_all_reduce": _outplace_all_reduce,
    "reg_all_gather_into_tensor": _all_gather_into_tensor,
    "reg_reduce_scatter_tensor": _reduce_scatter_tensor,
    "reg_all_to_all_single": _all_to_all_single,
}


def register_collective_kernels() -> None:
    """Gives SGLang's collective ops a PrivateUse1 kernel (once per process; an op
    this SGLang does not define is skipped)."""
    import sglang.srt.distributed.parallel_state  # noqa: F401  (defines the ops)
    from sglang.srt.utils.common import sglang_lib

    for name, kernel in KERNELS.items():
        if not hasattr(torch.ops.sglang, name):
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"sglang::{name}", "PrivateUse1"):
            continue
        sglang_lib.impl(name, kernel, "PrivateUse1")
