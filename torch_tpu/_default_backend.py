"""Compiles that name Inductor, or no backend, compile tpu tensors with backend "tpu".

PyTorch's default backend is Inductor, which cannot generate code for tpu tensors. Its
wrapper (`torch._TorchCompileInductorWrapper`, what `torch.compile` makes of no backend
and of backend="inductor") is replaced by a subclass that looks at the graph's inputs
when Dynamo calls it: tpu tensors go to backend "tpu"; everything else is Inductor's,
exactly as before (the subclass passes every isinstance check PyTorch makes on the
wrapper). So code written for CUDA that names Inductor, its `mode=` or its `options=`
(torchtitan, for one) runs unchanged on tpu. Inductor's options mean nothing to backend
"tpu": the first graph that carries them warns once per process, naming them.

Whether "inductor" was named is only visible in the `torch.compile` call itself, so
`torch.compile` is wrapped too, to note it while the wrapper is made: Dynamo must not
reuse code compiled for the default backend as code for a named "inductor".
"""

import functools
import threading
import warnings

import torch

_state = threading.local()  # .explicit: the torch.compile call being made names "inductor"
_warned = set()  # what was warned of, once per process: "inductor", "options"


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(message, stacklevel=3)


def _on_tpu(inputs) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in inputs)


class _InductorUnlessTpu(torch._TorchCompileInductorWrapper):
    def __init__(self, mode, options, dynamic, name=None):
        super().__init__(mode, options, dynamic, name)
        self.tpu_mode = mode
        self.inductor_options = dict(options or {})
        self.explicit = getattr(_state, "explicit", False)

    # Dynamo reuses code compiled by an equal backend: a named "inductor" is not the default.
    def __eq__(self, other):
        return super().__eq__(other) and self.explicit == getattr(other, "explicit", False)

    __hash__ = None

    def __call__(self, model_, inputs_):
        if not _on_tpu(inputs_):
            return super().__call__(model_, inputs_)
        if self.explicit:
            _warn_once(
                "inductor",
                "torch.compile(backend='inductor'): Inductor generates CPU and GPU code; "
                "graphs of tpu tensors are compiled by backend 'tpu' instead",
            )
        if self.inductor_options:
            _warn_once(
                "options",
                f"torch.compile: Inductor's options {sorted(self.inductor_options)} do not "
                "apply to tpu tensors, which backend 'tpu' compiles: they are ignored "
                "(backend='tpu' takes options of its own: docs/compiles.md)",
            )
        from torch_tpu._dynamo import tpu_backend

        return tpu_backend(model_, inputs_, mode=self.tpu_mode)


def install() -> None:
    """Makes `torch.compile` pick backend "tpu" for tpu tensors when none is named."""
    if isinstance(torch.compile, _Compile):
        return
    torch._TorchCompileInductorWrapper = _InductorUnlessTpu
    torch.compile = _Compile(torch.compile)


class _Compile:
    """`torch.compile`, noting whether backend "inductor" is named explicitly."""

    def __init__(self, compile_fn):
        self.compile_fn = compile_fn
        functools.update_wrapper(self, compile_fn)

    def __call__(self, model=None, **kwargs):
        if model is None:  # used as @torch.compile(...): the same call, later
            return lambda m: self(m, **kwargs)
        _state.explicit = kwargs.get("backend") == "inductor"
        try:
            return self.compile_fn(model, **kwargs)
        finally:
            _state.explicit = False
