"""Which tpu device a `torch.cuda`-style device argument names (None: the current one;
an index; a `torch.device` or string of type tpu): shared by torch.tpu and its streams."""

from __future__ import annotations

from typing import Union

import torch

from torch_tpu import _C

_DeviceLike = Union[torch.device, str, int, None]


def _index(device: _DeviceLike = None) -> int:
    if device is None:
        return _C._current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {device}")
    return _C._current_device() if device.index is None else device.index
