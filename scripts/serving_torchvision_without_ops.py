"""Test-environment shim for the SGLang serving venv (installed there by
scripts/serving_venvs.sh as a .pth hook; never part of torch_tpu).

SGLang imports transformers' image processors, which need torchvision. PyPI's
torchvision 0.28.0 (the release paired with torch 2.13.0) is a CUDA build: with the CPU
torch of these machines its compiled ops (`torchvision._C`) cannot load. torchvision
runs without them (its `_has_ops()` is then False) except that its import registers
fake kernels for `torchvision::nms` and `torchvision::qnms` unconditionally, which fails
when no such operators exist. Right before torchvision is first imported, this defines
those two operator schemas, with no kernels: torchvision's Python code then imports,
and calling one of the two ops raises (no kernel), as any missing op would. With a
CUDA torch, or PyTorch's CPU torchvision build, the ops load and this does nothing.
"""

import importlib.abc
import sys

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_library = None  # kept alive: dropping the Library object would undefine the ops


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        global _library
        import glob
        import importlib.util
        import os

        import torch

        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            return None
        for lib in glob.glob(os.path.join(spec.submodule_search_locations[0], "_C*.so")):
            try:
                torch.ops.load_library(lib)  # what torchvision's import does first
                return None
            except (ImportError, OSError):
                pass
        _library = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS.values():
            _library.define(schema)
        return None  # the regular finders import torchvision itself


def install() -> None:
    if not any(isinstance(f, _BeforeTorchvision) for f in sys.meta_path):
        sys.meta_path.insert(0, _BeforeTorchvision())
