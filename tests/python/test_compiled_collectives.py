"""Functional collectives inside compiled graphs (TorchTPU's spmd_safe): on a group of
tpu_dist's in-program transport they are part of the graph's program, run once over the
group's devices; on a host-staged group the graph is split around them. The ranks are
threads of one subprocess over 4 virtual devices (dist_compiled.py runs the scenarios;
each test checks its own)."""

import pytest
import torch.distributed as dist

from dist_launch import run_threads

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="torch.distributed with gloo is required",
    ),
]

SCENARIOS = [
    "all_reduce",
    "integer_all_reduce",
    "gather_scatter_exchange",
    "interleaved",
    "mismatch",
    "host_staged",
]


@pytest.fixture(scope="module")
def results():
    return run_threads(SCENARIOS, timeout=400, script="dist_compiled.py")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_compiled_collectives(results, scenario):
    assert results[scenario] == "ok", results[scenario]
