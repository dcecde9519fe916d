"""`torch.tpu.compiler`: XLA compile options for the programs compiled inside a block."""

from __future__ import annotations

import contextlib

import torch

from torch_tpu import _C


@contextlib.contextmanager
def custom_compiler_options(options: dict):
    """Compiles the programs materialized inside the block with these XLA options, e.g.
    ``{"xla_dump_to": "/tmp/xla"}`` or ``{"xla_cpu_enable_fast_math": False}``: names of
    XLA's debug options (`XLA_FLAGS` without the dashes) and the build options XLA accepts
    by name. Values are str, bool, int or float, passed to XLA as given. Nested blocks
    merge, the inner value winning. The options are part of each program's key: a program
    compiled without them is not reused inside, nor one compiled with them outside. A
    fused group runs with the options in effect when it is flushed. An option XLA does
    not know makes the compile fail with XLA's message."""
    if torch.compiler.is_compiling():
        raise RuntimeError(
            "torch.tpu.compiler.custom_compiler_options cannot be used inside "
            "a compiled region: a compiled graph is one program with one set "
            "of options; enter the block around the compiled call instead"
        )
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise TypeError("custom_compiler_options expects a dict of option name -> value")
    for name, value in options.items():
        if not isinstance(value, (str, bool, int, float)):
            raise TypeError(
                f"custom_compiler_options: {name}={value!r}: values are str, bool, int or float"
            )
    _C._push_compiler_options(dict(options))
    try:
        yield
    finally:
        _C._pop_compiler_options()
