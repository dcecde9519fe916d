"""tpu_dist's in-program transport, in one process over 4 virtual devices: ranks are
threads, rank r on tpu:r (see dist_inprogram_workers.py). One subprocess runs every
scenario (the device count is fixed when the runtime starts); each test checks its own."""

import json
import os
import subprocess
import sys

import pytest
import torch.distributed as dist

pytestmark = [pytest.mark.distributed,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is required")]

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ["collectives_2", "collectives_4", "subgroups", "mismatch", "missing", "ddp",
             "fused", "pipelined", "coalescing"]


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4", PYTHONPATH=HERE)
    env.pop("TORCH_TPU_DIST_TRANSPORT", None)
    proc = subprocess.run([sys.executable, "-P", os.path.join(HERE, "dist_inprogram_workers.py"),
                           *SCENARIOS], capture_output=True, text=True, env=env, timeout=240,
                          cwd=HERE)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")]
    assert lines, f"rc={proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULTS "):])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_in_program(results, scenario):
    assert results[scenario] == "ok", results[scenario]


def test_transport_override_host():
    """TORCH_TPU_DIST_TRANSPORT=host keeps threaded ranks on the host-staged transport."""
    code = (
        "import dist_inprogram_workers as w, torch, torch_tpu\n"
        "import torch.distributed as dist\n"
        "def f(rank, world):\n"
        "    t = torch.ones(3).to(f'tpu:{rank}')\n"
        "    dist.all_reduce(t)\n"
        "    w.exact(t, torch.full((3,), 2.0))\n"
        "    return torch_tpu.metrics.dist_transport()\n"
        "print('TRANSPORT', w.all_ok(w.run_ranks(2, f)))\n")
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2", PYTHONPATH=HERE,
               TORCH_TPU_DIST_TRANSPORT="host")
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, cwd=HERE)
    assert "TRANSPORT {0: 'host_staged', 1: 'host_staged'}" in proc.stdout or \
        "TRANSPORT {1: 'host_staged', 0: 'host_staged'}" in proc.stdout, proc.stdout + proc.stderr
