"""`torch_tpu.no_compile()`: a region where nothing may compile.

Inside it (and in a whole process with TORCH_TPU_NO_COMPILE=1) any XLA compile raises
a RuntimeError naming the program, its types and why it was not cached, and
so does a Dynamo recompile (Dynamo's `error_on_recompile`, which names the failed
guard). Programs loaded from the disk cache are not compiles: a warm process may load
them. The process is left as it was: the op or graph that would have compiled raises,
nothing else changes.
"""

import contextlib

from torch_tpu import _C, _settings


def forbidden_by_env() -> bool:
    return _settings.get("TORCH_TPU_NO_COMPILE")


class no_compile(contextlib.ContextDecorator):
    """`with torch_tpu.no_compile():` (or as a decorator): raise instead of compiling.

    For a serving loop after warm-up, or a test that a warm process compiles nothing.
    Nests; compiles are forbidden for every thread while any region is open."""

    def __enter__(self):
        import torch._dynamo

        self._dynamo = torch._dynamo.config.patch(error_on_recompile=True)
        self._dynamo.__enter__()
        _C._forbid_compiles()
        return self

    def __exit__(self, *exc):
        _C._allow_compiles()
        self._dynamo.__exit__(*exc)
        return False
