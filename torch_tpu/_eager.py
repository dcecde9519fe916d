"""Eager modes: `op` runs one cached program per op; `fused` records ops and runs each
pending group as one program when a result is needed (see csrc/runtime/fused_group.h).

In both modes an optimizer step on tpu parameters is recorded and runs as one program:
a pre-hook on every `torch.optim.Optimizer.step` opens a recording scope and a post-hook
closes it (which flushes). `torch.nn.utils.clip_grad_norm_` on tpu gradients is recorded
the same way (PyTorch has no hook there, so the function is wrapped)."""

from __future__ import annotations

import enum
import functools

import torch

from torch_tpu import _C, _settings

_MODES = ("op", "fused")
_mode = "op"
_step_scopes = 0  # optimizer steps whose recording scope is open (a step that raised leaves one)
# Set by torch_tpu._distributed.install_threaded_world(): ranks are threads of this process.
# The fused group is process-wide and records one thread's ops at a time, so nothing is
# recorded then (op mode, optimizer steps and clip_grad_norm_ op by op).
_threaded_ranks = False


def _disable_recording_for_threaded_ranks() -> None:
    global _threaded_ranks
    set_eager_mode("op")
    _threaded_ranks = True


def set_eager_mode(mode: str) -> None:
    """`"op"` (the default) or `"fused"`. Switching flushes the work recorded so far."""
    global _mode
    if mode not in _MODES:
        raise ValueError(
            f"torch_tpu.set_eager_mode: unknown mode {mode!r}; expected one of {_MODES}"
        )
    if mode == _mode:
        return
    if mode == "fused" and _threaded_ranks:
        raise RuntimeError(
            "torch_tpu.set_eager_mode: fused mode records into one process-wide "
            "group and cannot serve process-group ranks running as threads "
            "(install_threaded_world); use op mode"
        )
    if mode == "fused":
        _C._fused_begin()
    else:
        _C._fused_end()
    _mode = mode


def get_eager_mode() -> str:
    return _mode


class EagerMode(enum.Enum):
    """TorchTPU's names for the eager modes: DEFER_AND_FUSE is `"fused"`, DEFER_NEVER is
    `"op"`, DEFER_NEVER_AND_LAUNCH_BLOCKING is `"op"` waiting for every program
    (TORCH_TPU_LAUNCH_BLOCKING=1)."""

    DEFER_AND_FUSE = "fused"
    DEFER_NEVER = "op"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "op, launch blocking"


def eager_mode() -> EagerMode:
    if _mode == "fused":
        return EagerMode.DEFER_AND_FUSE
    if _C._launch_blocking():
        return EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    return EagerMode.DEFER_NEVER


def _apply(mode) -> None:
    """Switches to `mode`: an EagerMode, or its alias "op" / "fused"."""
    if isinstance(mode, str) and mode in _MODES:
        mode = EagerMode(mode)
    if not isinstance(mode, EagerMode):
        raise ValueError(
            f"torch.tpu.set_eager_mode: unknown mode {mode!r}; expected a "
            f"torch.tpu.EagerMode or one of {_MODES}"
        )
    set_eager_mode("fused" if mode is EagerMode.DEFER_AND_FUSE else "op")
    _C._set_launch_blocking(mode is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING)


class set_tpu_eager_mode:
    """`torch.tpu.set_eager_mode(mode)`: switches now; used as a context manager, the
    previous mode comes back at the end of the block."""

    def __init__(self, mode):
        if torch.compiler.is_compiling():
            raise RuntimeError(
                "torch.tpu.set_eager_mode cannot be used inside a compiled "
                "region: a compiled graph does not dispatch eager ops"
            )
        self._previous = eager_mode()
        _apply(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        _apply(self._previous)


def flush() -> None:
    """Runs the ops recorded so far (fused mode) now; results stay on the device."""
    _C._flush()


def _on_tpu(optimizer: torch.optim.Optimizer) -> bool:
    for group in optimizer.param_groups:
        for p in group["params"]:
            return p.device.type == "tpu"
    return False


def _step_pre_hook(optimizer, args, kwargs) -> None:
    global _step_scopes
    if _threaded_ranks or not _on_tpu(optimizer):
        return
    while _step_scopes > 0:  # a step that raised never closed its scope
        _step_scopes -= 1
        _C._fused_end()
    _C._fused_begin()
    _step_scopes += 1


def _step_post_hook(optimizer, args, kwargs) -> None:
    global _step_scopes
    if _step_scopes == 0:
        return
    _step_scopes -= 1
    _C._fused_end()
    _C._flush()


def _recorded(fn):
    """`fn(parameters, ...)` as one program when the parameters are on tpu."""

    @functools.wraps(fn)
    def wrapper(parameters, *args, **kwargs):
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        if _threaded_ranks or not any(p.device.type == "tpu" for p in params):
            return fn(params, *args, **kwargs)
        _C._fused_begin()
        try:
            return fn(params, *args, **kwargs)
        finally:
            _C._fused_end()  # flushes unless fused mode keeps recording

    wrapper.__wrapped_by_torch_tpu__ = True
    return wrapper


def _wrap_clip_grad_norm() -> None:
    import torch.nn.utils
    import torch.nn.utils.clip_grad as clip_grad

    if getattr(clip_grad.clip_grad_norm_, "__wrapped_by_torch_tpu__", False):
        return
    wrapped = _recorded(clip_grad.clip_grad_norm_)
    clip_grad.clip_grad_norm_ = wrapped
    torch.nn.utils.clip_grad_norm_ = wrapped


def register() -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    register_optimizer_step_pre_hook(_step_pre_hook)
    register_optimizer_step_post_hook(_step_post_hook)
    _wrap_clip_grad_norm()
    mode = _settings.get("TORCH_TPU_EAGER_MODE") or (
        "fused" if _settings.get("TORCH_TPU_DEFER_AND_FUSE") else "op"
    )
    set_eager_mode(mode)
