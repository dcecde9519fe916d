"""The public API table (torch_tpu/_api.py) against TorchTPU 0.2.0's public names (listed
here from its torch_tpu/_internal/public_api.py), what `dir()` and `__all__` of each
public module show, the deprecated name's single warning, and docs/api.md being current."""

import importlib
import os
import sys
import warnings

import pytest
import torch

from torch_tpu import _api

pytestmark = pytest.mark.single_mode  # the namespace does not depend on the eager mode

TORCHTPU_VERSION = "0.2.0"
# TorchTPU 0.2.0's `_PUBLIC_MODULES`: every public name, by module (71 in all).
TORCHTPU_NAMES = {
    "torch.tpu": [
        "EagerMode",
        "Event",
        "Precision",
        "Stream",
        "allow_excess_precision",
        "current_device",
        "current_stream",
        "default_generators",
        "default_stream",
        "device",
        "device_count",
        "device_of",
        "eager_mode",
        "get_amp_supported_dtype",
        "get_device_name",
        "get_device_properties",
        "get_rng_state",
        "initial_seed",
        "is_available",
        "is_initialized",
        "manual_seed",
        "manual_seed_all",
        "precision",
        "set_device",
        "set_eager_mode",
        "set_rng_state",
        "set_stream",
        "stream",
        "synchronize",
        "topology_aware_mesh",
    ],
    "torch.tpu.compiler": ["custom_compiler_options"],
    "torch.tpu.distributed": [
        "set_tpu_launch_env",
        "spmd_safe",
        "topology_aware_mesh",
        "window_num_stripes",
        "window_stripe_chunk_mb",
    ],
    "torch.tpu.ops": [
        "align_jagged_to_multiple",
        "all_gather_dim",
        "max_pool1d",
        "max_pool1d_backward",
        "max_pool2d",
        "max_pool2d_backward",
        "max_pool3d",
        "max_pool3d_backward",
        "optimization_barrier",
        "ragged_all_to_all",
        "ragged_dot",
        "ragged_dot_weight_grad",
        "recv",
        "reduce_scatter_dim",
        "send",
        "sparse_dense_matmul",
        "sparse_dense_matmul_activation_unstack",
        "sparse_dense_matmul_grad_with_adagrad",
        "sparse_dense_matmul_grad_with_adam",
        "sparse_dense_matmul_grad_with_sgd",
        "sparse_dense_matmul_gradient_stack",
        "sparse_gather",
        "sparse_gather_backward",
        "sparse_iota",
        "sparse_map_row",
        "splash_sdpa",
        "strip_jagged_padding",
    ],
    "torch.tpu.optimizers": ["AdamW", "Muon", "Optimizer", "Sgd", "SingleTraceTrainer"],
    "torch.tpu.pallas": ["get_pallas_mesh", "jax_op"],
    "torch.tpu.profiler": ["TpuProfilerConfig"],
}
# TorchTPU's stages where they are not experimental (its @stable and @deprecated names).
TORCHTPU_STABLE_OPS = [f"max_pool{n}d{b}" for n in (1, 2, 3) for b in ("", "_backward")]
TORCHTPU_DEPRECATED = [("torch.tpu", "topology_aware_mesh")]
# Issue 47's names this engine does not have yet: absent from the table and the modules.
NOT_YET = {
    "torch.tpu.ops": [n for n in TORCHTPU_NAMES["torch.tpu.ops"] if n.startswith("sparse_")],
    "torch.tpu.pallas": ["get_pallas_mesh"],
}


def _module(public: str):
    return sys.modules[public] if public in sys.modules else importlib.import_module(public)


def test_torchtpu_names_are_the_tables():
    assert sum(len(v) for v in TORCHTPU_NAMES.values()) == 71  # TorchTPU 0.2.0's count
    assert set(TORCHTPU_NAMES) == set(_api.TABLE)  # the same public modules
    for public, names in TORCHTPU_NAMES.items():
        table, module = _api.TABLE[public][1], _module(public)
        for name in names:
            if name in NOT_YET.get(public, ()):
                assert name not in table and not hasattr(module, name), f"{public}.{name}"
            else:
                assert name in table, f"{public}.{name} (TorchTPU {TORCHTPU_VERSION})"
    missing = sum(len(v) for v in NOT_YET.values())
    assert missing == 11  # 60 of 71 exist


def test_dir_and_all_show_only_the_table():
    for public in _api.TABLE:
        module = _module(public)
        expected = sorted(set(_api.TABLE[public][1]) | set(_api.children(public)))
        assert dir(module) == expected, public
        assert module.__all__ == expected
        for name in expected:
            assert getattr(module, name) is not None, f"{public}.{name}"
    assert _api.children("torch.tpu") == [
        "compiler",
        "distributed",
        "ops",
        "optimizers",
        "pallas",
        "profiler",
    ]
    # What leaked before: imports and helpers are not the API.
    for public, leaked in (("torch.tpu.ops", "torch"), ("torch.tpu.pallas", "hashlib")):
        assert leaked not in dir(_module(public))
    assert "dataclasses" not in dir(torch.tpu) and "Optional" not in dir(torch.tpu)
    from torch.tpu.optimizers import SingleTraceTrainer  # noqa: F401  importable by name


def test_stages():
    for public, (_, names) in _api.TABLE.items():
        for name in names:
            assert _api.stage(public, name) in _api.STAGES
    for name in TORCHTPU_STABLE_OPS:
        assert _api.stage("torch.tpu.ops", name) == _api.STABLE
    deprecated = [
        (public, name)
        for public, (_, names) in _api.TABLE.items()
        for name in names
        if _api.stage(public, name) == _api.DEPRECATED
    ]
    assert deprecated == TORCHTPU_DEPRECATED
    assert _api.stage("torch.tpu.optimizers", "Muon") == _api.EXPERIMENTAL
    with pytest.raises(KeyError):
        _api.stage("torch.tpu.ops", "torch")


def test_deprecated_name_warns_once(monkeypatch):
    alias = torch.tpu.topology_aware_mesh
    monkeypatch.setattr(alias, "warned", False)
    n = torch.tpu.device_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = alias((n,))
        second = torch.tpu.topology_aware_mesh((n, 1))
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert messages == [
        "torch.tpu.topology_aware_mesh is deprecated as of TorchTPU 0.2.0: use "
        "torch.tpu.distributed.topology_aware_mesh instead"
    ]
    assert first.tolist() == list(range(n)) and second.tolist() == [[r] for r in range(n)]
    _api.install()  # again: the name is not wrapped twice
    assert torch.tpu.topology_aware_mesh is alias


def test_api_docs_are_current():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "api.md")) as f:
        text = f.read()
    assert text == _api.markdown(), "docs/api.md is stale: run python tools/api_docs.py"
    for public, (_, names) in _api.TABLE.items():
        for name in names:
            assert _api.summary(public, name), f"{public}.{name} has no docstring"
            assert f"| `{name}` | {_api.stage(public, name)} |" in text
