"""vLLM's device communicator on `tpu`: its collectives run on the device group
(`tpu_dist`), as vLLM's base communicator does, outside inference mode.

Why: between processes tpu_dist stages tensors through the host and writes each
result back into its tensor on the gloo thread that completes the collective. That
thread does not share the caller's inference mode, and an inference tensor (what vLLM's
model step creates) cannot be updated in place outside inference mode. So the tensors a
collective writes are ordinary tensors here: outputs are allocated with inference mode
off, and an in-place collective works on an ordinary copy of its input."""

from __future__ import annotations

import functools

import torch
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase)


def _outside_inference_mode(method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with torch.inference_mode(False):
            return method(self, *args, **kwargs)
    return run


def _writable(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, or an ordinary copy of it if it is an inference tensor."""
    if not tensor.is_inference():
        return tensor
    with torch.inference_mode(False):
        return tensor.clone()


class TpuCommunicator(DeviceCommunicatorBase):
    def all_reduce(self, input_: torch.Tensor) -> torch.Tensor:
        # vLLM uses the returned tensor (its all-reduce is out of place).
        return _outside_inference_mode(DeviceCommunicatorBase.all_reduce)(
            self, _writable(input_))

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        if self.world_size == 1:
            return tensor
        staged = _writable(tensor)
        _outside_inference_mode(DeviceCommunicatorBase.broadcast)(self, staged, src)
        if staged is not tensor:
            tensor.copy_(staged)  # in the caller's mode, where the write is allowed
        return tensor

    # These allocate their outputs: with inference mode off, ordinary tensors.
    all_gather = _outside_inference_mode(DeviceCommunicatorBase.all_gather)
    reduce_scatter = _outside_inference_mode(DeviceCommunicatorBase.reduce_scatter)
    gather = _outside_inference_mode(DeviceCommunicatorBase.gather)
    recv = _outside_inference_mode(DeviceCommunicatorBase.recv)
