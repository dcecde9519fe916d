"""`torch.tpu.Stream`, `Event` and the current-stream functions, as `torch.cuda` has them.

They are the generic `torch.Stream` / `torch.Event` on device `tpu`; the C++ device guard
gives them their meaning (csrc/aten/event.h): one ordered queue per device, so every
stream names that queue, and an event really captures and waits for the device work
enqueued before it was recorded."""

from __future__ import annotations

from typing import Any, Optional

import torch

from torch_tpu._device import _index

# c10::DeviceType::PrivateUse1 (tpu's device type), which torch.Stream takes as an int.
_DEVICE_TYPE = int(torch._C._autograd.DeviceType.PrivateUse1.value)


def _device(device: Any) -> torch.device:
    return torch.device("tpu", _index(device))


class _TpuKind(type):
    """`isinstance(x, torch.tpu.Stream)` holds for every torch.Stream on tpu."""

    _base: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._base) and obj.device.type == "tpu"


class Stream(metaclass=_TpuKind):
    """A tpu stream: ``Stream(device=None, priority=0)`` makes a new one; all streams of
    a device share its one in-order queue. The object is a plain ``torch.Stream``:
    PyTorch's C++ methods accept nothing else as their argument (a subclass of
    torch.Stream or torch.Event is rejected by ``wait_stream``, ``elapsed_time``...)."""

    _base = torch.Stream

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> torch.Stream:
        if kwargs:  # stream_id / device_index / device_type: wrap an existing stream
            return torch.Stream(**kwargs)
        return torch.Stream(device=_device(device), priority=priority)


class Event(metaclass=_TpuKind):
    """A tpu event (a plain ``torch.Event``, see Stream): ``record()`` captures the work
    enqueued so far, ``synchronize()`` waits for it, ``query()`` tells whether it is done,
    ``elapsed_time()`` gives the milliseconds between two timing events' completions."""

    _base = torch.Event

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(
            device=_device(None),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: Any = None) -> torch.Stream:
    """The current stream of a device (default: the current device)."""
    return torch.accelerator.current_stream(_device(device))


def default_stream(device: Any = None) -> torch.Stream:
    """The default stream of a device (default: the current device)."""
    return torch.Stream(stream_id=0, device_index=_device(device).index, device_type=_DEVICE_TYPE)


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Makes `stream` current on its device (None: no change)."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes ``stream`` (and its device) current inside a ``with`` block."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev: Optional[torch.Stream] = None
        self.prev_device: Optional[int] = None

    def __enter__(self) -> None:
        if self.stream is None:
            return
        from torch_tpu import _C

        self.prev_device = _C._current_device()
        if self.stream.device_index != self.prev_device:
            _C._set_device(self.stream.device_index)
        self.prev = torch.accelerator.current_stream(_device(self.stream.device_index))
        torch.accelerator.set_stream(self.stream)

    def __exit__(self, *args: Any) -> None:
        if self.stream is None:
            return
        from torch_tpu import _C

        torch.accelerator.set_stream(self.prev)
        if self.prev_device != self.stream.device_index:
            _C._set_device(self.prev_device)


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """A context manager that makes `stream` current inside its block (None: no change)."""
    return StreamContext(stream)
