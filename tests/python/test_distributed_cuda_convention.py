"""Distributed code written for CUDA runs unmodified: dist_cuda_convention.py under plain
`torchrun --nproc-per-node 2` (no TORCH_TPU_* variable exported) trains with FSDP2 on the
default mesh, DDP, FSDP2 in bf16 with a DCP round trip, tensor and sequence parallelism,
and every part's losses equal one CPU process training on the full batch. A rank may exit
with a collective still in flight (dist_exit_in_flight.py)."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.distributed

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is required", allow_module_level=True)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dist_cuda_convention as script  # noqa: E402

# bf16 parameters: each step's loss carries a few roundings of bf16 (eps 2^-8) relative
# to the f32 reference; the f32 parts differ from CPU only in summation order.
TOLERANCE = {"fsdp": 1e-5, "ddp": 1e-5, "tp": 1e-5, "sp": 1e-5, "fsdp_bf16": 4 * 2.0**-8}


def torchrun(script, *args, timeout=300):
    """`torchrun --standalone --nproc-per-node 2 script args` as a user would run it."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TORCH_TPU_")
        and k not in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE")
    }
    env["OMP_NUM_THREADS"] = "1"
    # The compile cache is the one setting kept: it only saves time.
    if "TORCH_TPU_CACHE_DIR" in os.environ:
        env["TORCH_TPU_CACHE_DIR"] = os.environ["TORCH_TPU_CACHE_DIR"]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(HERE / script),
        *args,
    ]
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir()
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return run


def test_cuda_convention_script_under_torchrun(tmp_path):
    run = torchrun("dist_cuda_convention.py", str(tmp_path / "ckpt"))
    assert "dcp ok" in run.stdout, run.stdout
    reference = torch.tensor(script.reference(), dtype=torch.float64)
    for part, tol in TOLERANCE.items():
        found = re.findall(rf"^{part} (\d+) ([0-9.e+-]+)$", run.stdout, re.M)
        assert [int(s) for s, _ in found] == list(range(script.STEPS)), (part, run.stdout)
        losses = torch.tensor([float(v) for _, v in found], dtype=torch.float64)
        torch.testing.assert_close(losses, reference, rtol=tol, atol=tol, msg=part)


def test_rank_exits_with_a_collective_in_flight():
    run = torchrun("dist_exit_in_flight.py", timeout=120)
    assert "rank 0 leaves" in run.stdout and "rank 1 ok" in run.stdout, run.stdout
    assert "terminate called" not in run.stderr, run.stderr[-3000:]
