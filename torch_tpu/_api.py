"""The public API: one table of the `torch.tpu` modules, their names and each name's
stage (stable, experimental, deprecated).

`install()` (run when torch.tpu is set up) makes each public module list exactly its
table names (and its public submodules) in `__all__` and `dir()`, and replaces each
deprecated name by a wrapper that warns once per process (FutureWarning) and calls it.
Other attributes (imports, private helpers, what PyTorch looks up on a device module)
still resolve; they are just not the module's API. `markdown()` is docs/api.md
(tools/api_docs.py writes it; tests/python/test_api_table.py checks it is current).

TorchTPU 0.2.0's names carry TorchTPU's stages; the names this engine adds to
`torch.tpu` follow `torch.cuda` and are stable. Experimental names do not warn: the
stage is documentation (and `stage()`), not a runtime nag."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
import warnings
from typing import Mapping, Optional

STABLE, EXPERIMENTAL, DEPRECATED = "stable", "experimental", "deprecated"
STAGES = (STABLE, EXPERIMENTAL, DEPRECATED)

S, E = STABLE, EXPERIMENTAL


@dataclasses.dataclass(frozen=True)
class Deprecated:
    """A deprecated name: since which TorchTPU version, and what to use instead."""

    since: str
    instead: str


# public module -> (the torch_tpu module that implements it, {name: stage or Deprecated})
TABLE: Mapping[str, tuple] = {
    "torch.tpu": (
        "torch_tpu.tpu",
        {
            "EagerMode": E,
            "Event": S,
            "Precision": E,
            "Stream": S,
            "StreamContext": S,
            "allow_excess_precision": E,
            "cache_stats": S,
            "clear_cache": S,
            "current_device": S,
            "current_stream": S,
            "default_generators": E,
            "default_stream": S,
            "device": S,
            "device_count": S,
            "device_of": E,
            "eager_mode": E,
            "empty_cache": S,
            "get_amp_supported_dtype": S,
            "get_device_capability": S,
            "get_device_name": S,
            "get_device_properties": S,
            "get_rng_state": S,
            "get_rng_state_all": S,
            "host_memory_stats": S,
            "init": S,
            "initial_seed": S,
            "is_available": S,
            "is_bf16_supported": S,
            "is_initialized": S,
            "manual_seed": S,
            "manual_seed_all": S,
            "max_memory_allocated": S,
            "max_memory_reserved": S,
            "memory_allocated": S,
            "memory_reserved": S,
            "memory_stats": S,
            "precision": E,
            "reset_accumulated_host_memory_stats": S,
            "reset_peak_host_memory_stats": S,
            "reset_peak_memory_stats": S,
            "seed": S,
            "seed_all": S,
            "set_device": S,
            "set_eager_mode": E,
            "set_rng_state": S,
            "set_rng_state_all": S,
            "set_stream": S,
            "stream": E,
            "synchronize": S,
            "topology_aware_mesh": Deprecated(
                "0.2.0", "torch.tpu.distributed.topology_aware_mesh"
            ),
        },
    ),
    "torch.tpu.compiler": ("torch_tpu.compiler", {"custom_compiler_options": E}),
    "torch.tpu.distributed": (
        "torch_tpu.distributed",
        {
            "set_tpu_launch_env": E,
            "spmd_safe": E,
            "topology_aware_mesh": E,
            "window_num_stripes": E,
            "window_stripe_chunk_mb": E,
        },
    ),
    "torch.tpu.ops": (
        "torch_tpu.ops",
        {
            "align_jagged_to_multiple": E,
            "all_gather_dim": E,
            "max_pool1d": S,
            "max_pool1d_backward": S,
            "max_pool2d": S,
            "max_pool2d_backward": S,
            "max_pool3d": S,
            "max_pool3d_backward": S,
            "optimization_barrier": E,
            "ragged_all_to_all": E,
            "ragged_dot": E,
            "ragged_dot_weight_grad": E,
            "recv": E,
            "reduce_scatter_dim": E,
            "send": E,
            "splash_sdpa": E,
            "strip_jagged_padding": E,
        },
    ),
    "torch.tpu.optimizers": (
        "torch_tpu.optimizers",
        {"AdamW": E, "Muon": E, "Optimizer": E, "Sgd": E, "SingleTraceTrainer": E},
    ),
    "torch.tpu.pallas": ("torch_tpu.pallas", {"jax_op": E}),
    "torch.tpu.profiler": ("torch_tpu.profiler", {"TpuProfilerConfig": E}),
}

# What each module says about itself on docs/api.md.
_MODULE_DOCS = {
    "torch.tpu": "the device module, `torch.cuda`'s names and TorchTPU's",
    "torch.tpu.compiler": "XLA compile options",
    "torch.tpu.distributed": "launch environment, device meshes, SPMD regions",
    "torch.tpu.ops": "custom ops",
    "torch.tpu.optimizers": "functional optimizers and a one-program training step",
    "torch.tpu.pallas": "JAX functions and Pallas kernels as PyTorch ops",
    "torch.tpu.profiler": "profiler options",
}


def stage(module: str, name: str) -> str:
    """`name`'s stage in public module `module`; KeyError if it is not public."""
    entry = TABLE[module][1][name]
    return DEPRECATED if isinstance(entry, Deprecated) else entry


def children(module: str) -> list:
    """The public submodules of `module`, by attribute name."""
    prefix = module + "."
    leaves = (m[len(prefix) :] for m in TABLE if m.startswith(prefix))
    return sorted(leaf for leaf in leaves if "." not in leaf)


def public_names(module: str) -> list:
    """`dir()` of the public module: its table names and public submodules, sorted."""
    return sorted(set(TABLE[module][1]) | set(children(module)))


def _deprecated(fn, public: str, entry: Deprecated):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not wrapper.warned:
            wrapper.warned = True
            warnings.warn(
                f"{public} is deprecated as of TorchTPU {entry.since}: use {entry.instead} "
                "instead",
                FutureWarning,
                stacklevel=2,
            )
        return fn(*args, **kwargs)

    wrapper.warned = False  # once per process (a test may reset it)
    wrapper.__wrapped_deprecated__ = fn
    return wrapper


def install() -> None:
    """Sets `__all__` and `dir()` of every public module from the table and wraps its
    deprecated names (once: installing again changes nothing)."""
    for public, (impl, names) in TABLE.items():
        module = importlib.import_module(impl)
        listed = public_names(public)
        module.__all__ = listed
        module.__dir__ = functools.partial(list, listed)
        for name, entry in names.items():
            if isinstance(entry, Deprecated):
                fn = getattr(module, name)
                if not hasattr(fn, "__wrapped_deprecated__"):
                    setattr(module, name, _deprecated(fn, f"{public}.{name}", entry))


def _described(module, name: str) -> Optional[str]:
    """The object (or, for a property of the module's class, the property) `name`
    names: what its documentation comes from."""
    attr = inspect.getattr_static(type(module), name, None)
    return attr if isinstance(attr, property) else getattr(module, name)


def summary(module: str, name: str) -> str:
    """The first sentence of `name`'s docstring, on one line."""
    obj = _described(importlib.import_module(TABLE[module][0]), name)
    doc = inspect.getdoc(obj) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0]


def markdown() -> str:
    """docs/api.md: every public module's names with their stage and summary."""
    lines = [
        "# Public API",
        "",
        "Generated from the table in `torch_tpu/_api.py` by `tools/api_docs.py`; do not edit.",
        "`dir()` of each module lists exactly these names (and its public submodules).",
        "Stages: **stable** (kept compatible), **experimental** (may change),",
        "**deprecated** (warns once per process; its replacement is named).",
        "",
    ]
    for public in TABLE:
        lines += [f"## `{public}`: {_MODULE_DOCS[public]}", "", "| name | stage | summary |"]
        lines.append("|---|---|---|")
        for name in sorted(TABLE[public][1]):
            entry = TABLE[public][1][name]
            text = summary(public, name).replace("|", "\\|")
            if isinstance(entry, Deprecated):
                text = f"use `{entry.instead}` (deprecated since TorchTPU {entry.since}). {text}"
            lines.append(f"| `{name}` | {stage(public, name)} | {text} |")
        lines.append("")
    return "\n".join(lines)
