"""Warm engine starts without Dynamo: a serving engine's compiled model step is saved per
bucket with what Dynamo traced for it (its guarded bytecode and its AOTAutograd graphs),
and the next engine of the same configuration loads each bucket's step at the bucket's
first call instead of tracing the model again.

This is PyTorch's precompile machinery (`torch._dynamo.package`: a `CompilePackage` per
compiled function, stored with a `DiskDynamoStore`; `caching_precompile` drives the same
one), used per bucket because serving needs three things it does not do itself:
- Our key. An engine compiles `nn.Module._call_impl`, the same function for every model,
  so Dynamo's own key (the function's name) would let one model load another's steps. The
  directory is keyed by the engine's configuration hash and torch_tpu's identity
  (backend, plugin, lowering table).
- Guards built in the right context. A saved guard on a global reached through a module
  (vLLM's forward context: the attention metadata's tensors) is rebuilt at load time from
  the module's state at that moment; loaded for another bucket's call it would expect that
  bucket's shapes and never match. Each bucket's package is loaded at that bucket's first
  call, so the guards describe the tensors they will see.
- Buckets chosen by the engine: `key_fn(args, kwargs)` names the bucket of a call (for
  vLLM the token count and the block-table width).
The executables come from torch_tpu's disk cache (TORCH_TPU_CACHE_DIR), as in every warm
start.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import shutil
import sys
from typing import Any, Callable, Hashable

import torch

from torch_tpu.serving.common import SteadyState

logger = logging.getLogger(__name__)


def package_dir(config: str, rank: int = 0) -> str:
    """The directory of one engine configuration's saved steps, beside PyTorch's
    AOTAutograd cache (TORCHINDUCTOR_CACHE_DIR): keyed by `config` (the engine's own
    description of everything that shapes its model step), torch's version and
    torch_tpu's identity; one per rank."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from torch_tpu import _output_code

    key = hashlib.sha256(
        f"{config}|torch {torch.__version__}|{_output_code.identity()}".encode()
    ).hexdigest()[:32]
    return os.path.join(cache_dir(), "tpu_steps", key, f"rank_{rank}")


# Guards on object identity (of modules, functions, classes, nn.Modules) and dict versions
# cannot be stored: the objects are another process's. Dynamo lists them; a stored step
# keeps every other guard (shapes, dtypes, types, values) and the key (the engine's
# configuration and the bucket) stands in for these.
def _storable_guards(entries) -> list[bool]:
    from torch._dynamo.guards import CheckFunctionManager

    identity = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES
    return [
        e.guard_type not in identity and not any(t in identity for t in e.derived_guard_types)
        for e in entries
    ]


def _skip_installed_names(package) -> None:
    """A loaded package puts its globals (`__builtins_dict___0`, ...) into the modules of
    the frames it holds, under the names Dynamo's counter gave them in the saving
    process; a step traced afresh in this process would draw the same names from its own
    counter and fail ("already exists in scope"). Moves the counter past them."""
    from torch._dynamo import bytecode_transformation as bt

    used = [
        int(m.group(1))
        for module in {entry.python_module for entry in package._codes.values()}
        for name in sys.modules[module].__dict__
        if (m := re.fullmatch(r"__\w+?_(\d+)", name))
    ]
    if used:
        bt._unique_id_counter = itertools.count(max(next(bt._unique_id_counter), max(used) + 1))


# Every loaded step's precompiled entries (guards, Dynamo's bytecode) per code object:
# a package's install first drops every precompiled entry of its function's code (its
# `uninstall`), those of the buckets installed before it included, and all buckets
# share that code (torch 2.13, torch/_dynamo/package.py). Without them put back, every
# bucket but the last one installed missed its saved step after warm-up and was traced
# again (its programs loaded from the disk cache: no compile, only the trace).
_LOADED: dict[Any, list[tuple]] = {}


def _install(package, backends, fn) -> None:
    """Installs a loaded package, keeping the precompiled entries of the packages
    installed before it for the same function."""
    from torch._C._dynamo import eval_frame

    load = eval_frame._load_precompile_entry
    mine = []

    def recording(code, guard_manager, dynamo_code):
        mine.append((code, guard_manager, dynamo_code))
        load(code, guard_manager, dynamo_code)

    # torch._dynamo.package imports it at each install.
    eval_frame._load_precompile_entry = recording
    try:
        package.install(backends)
    except Exception:
        package.uninstall()  # a partial install leaves globals behind
        mine = []
        raise
    finally:
        eval_frame._load_precompile_entry = load
        # Only the function's own code is cleared (not the codes of its resumptions
        # after graph breaks, whose entries stay).
        for entry in _LOADED.get(fn.__code__, []):
            load(*entry)
        for entry in mine:
            _LOADED.setdefault(entry[0], []).append(entry)


def _storing_failed(e: BaseException) -> bool:
    """Whether `e` came from storing a frame's guards (Dynamo traced the frame, then
    could not serialize what its guards read)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "serialize_guards":
            return True
        tb = tb.tb_next
    return e.__cause__ is not None and _storing_failed(e.__cause__)


class _Step:
    """One bucket's compiled step and its package (loaded, or new and to be saved)."""

    def __init__(
        self, fn: Callable[..., Any], directory: str, options: dict, storable: bool = True
    ):
        from torch._dynamo.package import CompilePackage, DiskDynamoStore

        self.dir = directory
        self.loaded = False
        self.package = None
        if not storable:  # as torch.compile would
            self.call = torch._dynamo.optimize("tpu", isolate_recompiles=True, **options)(fn)
            return
        package = None
        if os.path.exists(os.path.join(directory, "entry")):
            try:
                package, backends = DiskDynamoStore().load_package(fn, directory)
                _install(package, backends, fn)
                _skip_installed_names(package)
                self.loaded = True
            except Exception as e:  # noqa: BLE001: any bad entry means trace again
                logger.warning(
                    "torch_tpu: the saved compiled step in %s cannot be used "
                    "(%s: %s); tracing it again",
                    directory,
                    type(e).__name__,
                    e,
                )
                shutil.rmtree(directory, ignore_errors=True)
                package = None
        self.package = package or CompilePackage(fn)
        # isolate_recompiles: what this bucket traces stays in its own Dynamo cache
        # region (and so in its package); it still finds loaded entries.
        self.call = torch._dynamo.optimize(
            "tpu",
            package=self.package,
            guard_filter_fn=_storable_guards,
            isolate_recompiles=True,
            **options,
        )(fn)


class SavedSteps:
    """`fn` compiled with backend "tpu" (`fullgraph` and `dynamic` as in torch.compile),
    one package per bucket under `directory`: a bucket's first call loads its package if
    an earlier engine saved one, else traces; `save()` writes the packages traced in this
    process.

    Before `arm()`, `fn` runs eagerly (an engine's memory-profiling run has no attention
    metadata yet: it is not a step that serving runs again). A package that cannot be
    loaded (corrupt, written by other code) is removed with a warning and traced again.
    Every compiled call runs in `steady.step()` (common.SteadyState): after the engine's
    warm-up, with TORCH_TPU_NO_COMPILE=1, a step that would trace or compile raises,
    naming its bucket."""

    def __init__(
        self,
        fn: Callable[..., Any],
        directory: str,
        key_fn: Callable[[tuple, dict], Hashable],
        fullgraph: bool = True,
        dynamic: bool | None = None,
        steady: SteadyState | None = None,
    ):
        self._fn = fn
        self.steady = steady or SteadyState()
        self._options = dict(nopython=fullgraph, dynamic=dynamic)
        self._dir = directory
        self._key_fn = key_fn
        self._armed = False
        self._storable = True
        self._steps: dict[Hashable, _Step] = {}

    def arm(self) -> None:
        """Calls from now on are compiled."""
        self._armed = True

    @property
    def loaded(self) -> int:
        """How many buckets came from saved packages."""
        return sum(step.loaded for step in self._steps.values())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._armed:
            return self._fn(*args, **kwargs)
        key = self._key_fn(args, kwargs)
        with self.steady.step():
            try:
                return self._call(key, args, kwargs)
            except RuntimeError as e:
                if "fail_on_recompile" not in str(e):
                    raise
                raise RuntimeError(
                    f"torch_tpu: the model step of bucket {key} needs a Dynamo trace after "
                    "warm-up, where TORCH_TPU_NO_COMPILE=1 forbids it: "
                    + " ".join(str(e).split())
                ) from e

    def _call(self, key: Hashable, args: tuple, kwargs: dict) -> Any:
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = self._step(key)
        if step.package is None:
            return step.call(*args, **kwargs)
        try:
            return step.call(*args, **kwargs)
        except Exception as e:
            if not _storing_failed(e):
                raise
            # Some frames keep state Dynamo cannot store with their guards (a Python
            # generator across a graph break, for one). The step is run again from the
            # start, unstored; its writes (the KV cache) are the same the second time.
            logger.warning(
                "torch_tpu: the compiled steps of this model cannot be saved "
                "for the next start (%s); they are traced on every start",
                e,
            )
            self._storable = False
            step = self._steps[key] = self._step(key)
            return step.call(*args, **kwargs)

    def _step(self, key: Hashable) -> _Step:
        name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        return _Step(self._fn, os.path.join(self._dir, name), self._options, self._storable)

    def save(self) -> int:
        """Writes the packages of the buckets traced in this process; returns how many.
        (A bucket whose calls all ran an entry traced for another one, which Dynamo
        allows when that entry's shapes are dynamic, traced nothing: no package.)"""
        from torch._dynamo.package import DiskDynamoStore

        if not self._storable:  # a package without the frames that failed: none
            return 0
        written = 0
        for step in self._steps.values():
            traced = any(code.guarded_codes for code in step.package._codes.values())
            if not step.loaded and traced:
                DiskDynamoStore().save_package(step.package, step.dir)
                written += 1
        return written
