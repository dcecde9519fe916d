"""Precision of f32 matrix products (dot_general, convolution) in tpu programs.

By default it follows `torch.get_float32_matmul_precision()`: "highest" -> HIGHEST,
"high" -> HIGH, "medium" -> DEFAULT, StableHLO's `precision_config`, which lets a TPU use
fewer bf16 passes and a GPU use TF32. `torch.tpu.precision(mode)` overrides it on this
thread for the block. bf16/f16 products always use DEFAULT. The precision is part of each
program's key: changing it compiles the products again, it never reuses a program built
for another precision."""

from __future__ import annotations

import contextlib
import enum
import os

import torch

from torch_tpu import _C


class Precision(enum.Enum):
    """StableHLO's precision of matrix products (https://openxla.org/stablehlo/spec)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


@contextlib.contextmanager
def precision(mode: Precision):
    """Runs the block with f32 matmuls and convolutions at `mode`, whatever
    `torch.set_float32_matmul_precision` says; restores the previous setting on exit."""
    # Dynamo cannot trace the switch: the frame around it runs eagerly (a graph break),
    # and graphs compiled inside are lowered at the precision in effect when they run.
    torch._dynamo.graph_break()
    if not isinstance(mode, Precision):
        raise ValueError(
            f"torch.tpu.precision: expected a torch.tpu.Precision "
            f"(DEFAULT, HIGH or HIGHEST), got {mode!r}"
        )
    _C._push_precision(mode.value)
    try:
        yield
    finally:
        _C._pop_precision()


def current() -> Precision:
    """The precision f32 products get now."""
    return Precision(_C._matmul_precision())


_excess_precision = None  # None: not set here, XLA_FLAGS or XLA's default decides


def allow_excess_precision() -> bool:
    """Whether XLA may keep values in more precision than their type (e.g. bf16 chains in
    f32): the setting made here, else `--xla_allow_excess_precision` in XLA_FLAGS, else
    XLA's default (true)."""
    if _excess_precision is not None:
        return _excess_precision
    for flag in os.environ.get("XLA_FLAGS", "").split():
        name, _, value = flag.lstrip("-").partition("=")
        if name == "xla_allow_excess_precision":
            return value.lower() not in ("false", "0")
    return True


def set_allow_excess_precision(value: bool) -> None:
    """Compiles every later program with `xla_allow_excess_precision` = `value` (part of
    the program key: programs compiled with the other setting are not reused)."""
    global _excess_precision
    if not isinstance(value, bool):
        raise TypeError(f"torch.tpu.allow_excess_precision must be a bool, got {value!r}")
    _excess_precision = value
    _C._set_global_compiler_option("xla_allow_excess_precision", value, True)
