"""What PyTorch's caches store for a graph compiled by backend "tpu", so a warm process
skips tracing.

AOTAutograd consults its cache, and `aot_compile` / `caching_precompile` serialize a
compiled function, only when the backend's compilers return a picklable `OutputCode`.
Ours keeps what the graph is lowered from (the description `_C._Graph` takes, or the
graph AOTAutograd produced, pickled with its fake values), not an executable: on a hit
it is lowered again and its program comes from torch_tpu's own executable cache
(memory, else disk). A warm process thus runs no AOTAutograd trace and no XLA compile,
only the lowering.

Entries are keyed with `cache_key_tag()` (AOTAutograd's key ignores the backend and its
decompositions, so without it another backend could read ours), and each entry checks
its contents and its identity when unpickled: a corrupt or foreign entry fails to load
and PyTorch skips it.
"""

import dataclasses
import functools
import hashlib
import os
import pickle
from typing import Any, Callable

import torch
from torch import fx
from torch._inductor.output_code import OutputCode

import torch_tpu
from torch_tpu import _C

# Bumped when what an entry holds changes meaning.
_FORMAT = 1


@functools.cache
def _lowering_table_hash() -> str:
    # Which ops lower decides which ones AOTAutograd decomposes, so the graphs it stores.
    return hashlib.sha256("\n".join(sorted(_C._graph_lowerings())).encode()).hexdigest()[:16]


@functools.cache
def _build_hash() -> str:
    # What stored entries mean is decided by the extension (which lowers them) and by the
    # Python that describes graphs to it: a rebuilt checkout with the same version number
    # must not read its predecessor's entries. Contents, not paths or times, so artifacts
    # move between installs of one build.
    h = hashlib.sha256()
    for path in (_C.__file__, __file__, os.path.join(os.path.dirname(__file__), "_dynamo.py")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


@functools.cache
def identity() -> str:
    """torch_tpu's version, build and entry format, the lowering table and the plugin."""
    # The plugin by what it is (platform, version, PJRT API), not where it is installed.
    name, version, _, major, minor = _C._platform()
    plugin = f"{name} {version} pjrt {major}.{minor}".replace(" ", "_")
    return (
        f"torch_tpu {torch_tpu.__version__} build {_build_hash()} format {_FORMAT} "
        f"lowerings {_lowering_table_hash()} plugin {plugin}"
    )


def cache_key_tag(options: dict) -> str:
    """`torch.compiler.config.cache_key_tag` for graphs compiled by backend "tpu" with
    `options`: the user's own tag, if any, then ours."""
    user = torch.compiler.config.cache_key_tag
    ours = identity() + (f" options {sorted(options.items())}" if options else "")
    return f"{user}|{ours}" if user else ours


class EntryRejected(RuntimeError):
    """A stored graph that is corrupt or from another torch_tpu, plugin or lowering table."""


def _effect_tokens(gm: fx.GraphModule) -> int:
    """How many leading inputs of `gm` are effect tokens (of ops with side effects, such
    as linalg's error checks, which the graph runs eagerly between its programs)."""
    n = 0
    for node in gm.graph.nodes:
        if node.op != "placeholder" or not any(
            u.target is torch.ops.higher_order.with_effects and u.args[0] is node
            for u in node.users
        ):
            break
        n += 1
    return n


def _with_effect_tokens(runner, n: int):
    """`runner` as AOTAutograd calls a graph with `n` effect tokens that it loaded from
    its cache: without the tokens, expecting outputs without them. (A graph it compiled
    gets its EffectTokensWrapper instead, which a loaded entry does not.)"""
    if n == 0:
        return runner

    def call(args):
        inputs = [None] * n + list(args)
        args.clear()
        outs = runner(inputs)
        return None if outs is None else outs[n:]

    call._boxed_call = True
    return call


@dataclasses.dataclass
class TpuOutputCode(OutputCode):
    """One AOTAutograd graph (forward, backward or inference) compiled by backend "tpu".

    `build(gm)` makes the boxed callable when the graph is compiled. A callable that is
    one program keeps its `recipe` (what `_C._Graph` lowers): stored, `rebuild(recipe)`
    makes it again. Others (graphs split around unlowered ops, specialised per shape, run
    op by op) store the graph itself, pickled with its fake values, and `build` it again.
    Both run in `post_compile` after the entry was loaded from a cache."""

    gm: fx.GraphModule | None = None
    build: Callable[[fx.GraphModule], Callable] | None = None
    rebuild: Callable[[tuple], Callable] | None = None
    _runner: Any = dataclasses.field(default=None, init=False, repr=False)
    _payload: bytes | None = dataclasses.field(default=None, init=False, repr=False)
    _identity: str = dataclasses.field(default="", init=False)
    _checksum: str = dataclasses.field(default="", init=False)

    def __post_init__(self):
        self._boxed_call = True
        if self.gm is not None:
            self._runner = self.build(self.gm)

    def __call__(self, inputs):
        return self._runner(inputs)

    def prepare_for_serialization(self) -> None:
        # AOTAutograd calls this on a shallow copy of the entry it returned.
        recipe = getattr(self._runner, "recipe", None)
        if recipe is not None:
            self._payload = pickle.dumps(("program", recipe))
        else:
            from torch.fx._graph_pickler import GraphPickler, Options

            for node in self.gm.graph.nodes:
                node.meta.pop("example_value", None)
            self._payload = pickle.dumps(
                ("graph", GraphPickler.dumps(self.gm, Options(ops_filter=None)))
            )
        self._identity = identity()
        self._checksum = hashlib.sha256(self._payload).hexdigest()
        self.gm = None
        self._runner = None

    def __setstate__(self, state):
        if state.get("gm") is None:  # a stored entry, not a copy of a live one
            payload = state.get("_payload")
            if payload is None or hashlib.sha256(payload).hexdigest() != state.get("_checksum"):
                raise EntryRejected("torch_tpu: a stored compiled graph is corrupt")
            if state.get("_identity") != identity():
                raise EntryRejected(
                    f"torch_tpu: a stored compiled graph is from {state.get('_identity')!r}, "
                    f"not {identity()!r}"
                )
        self.__dict__.update(state)

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self._runner is not None:
            return
        kind, data = pickle.loads(self._payload)
        if kind == "program":
            self._runner = self.rebuild(data)
            return
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        gm = GraphPickler.loads(data, FakeTensorMode(shape_env=ShapeEnv()))
        gm.recompile()  # its Python code, for graphs that run op by op
        self._runner = _with_effect_tokens(self.build(gm), _effect_tokens(gm))

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass
