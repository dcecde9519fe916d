"""What only tpu_dist's in-program transport has, in one process over 4 virtual devices:
ranks are threads, rank r on tpu:r (see dist_threads.py). One subprocess runs every
scenario (the device count is fixed when the runtime starts); each test checks its own.
The collectives themselves: test_distributed_collectives.py."""

import os
import subprocess
import sys

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

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ["subgroups", "mismatch", "missing", "ddp", "fused", "pipelined"]


@pytest.fixture(scope="module")
def results():
    return run_threads(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_in_program(results, scenario):
    assert results[scenario] == "ok", results[scenario]


def test_transport_override_host():
    """TORCH_TPU_DIST_TRANSPORT=host keeps threaded ranks on the host-staged transport."""
    code = (
        "import dist_threads as w, torch, torch_tpu\n"
        "import torch.distributed as dist\n"
        "def f(rank, world):\n"
        "    t = torch.ones(3).to(f'tpu:{rank}')\n"
        "    dist.all_reduce(t)\n"
        "    w.exact(t, torch.full((3,), 2.0))\n"
        "    return torch_tpu.metrics.dist_transport()\n"
        "print('TRANSPORT', w.all_ok(w.run_ranks(2, f)))\n"
    )
    env = dict(
        os.environ, TORCH_TPU_NUM_DEVICES="2", PYTHONPATH=HERE, TORCH_TPU_DIST_TRANSPORT="host"
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=HERE,
    )
    assert (
        "TRANSPORT {0: 'host_staged', 1: 'host_staged'}" in proc.stdout
        or "TRANSPORT {1: 'host_staged', 0: 'host_staged'}" in proc.stdout
    ), proc.stdout + proc.stderr
