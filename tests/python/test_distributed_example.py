"""examples/distributed/train.py under torchrun: every parallelism gives the losses of
one process training on the full batch."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

pytestmark = pytest.mark.distributed

pytest.importorskip("transformers")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is required", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import hf_tiny  # noqa: E402

STEPS = 3


@pytest.fixture(scope="module")
def reference_losses():
    model = hf_tiny.build("llama", 0).to("tpu")
    losses = hf_tiny.train(model, hf_tiny.batches(STEPS, 4, 16, 0), "tpu")
    return [loss.item() for loss in losses]


# --fsdp and --tp 2 alone are covered on a small model by test_distributed.py; each
# torchrun here costs 25-50 s on two cores, so they run with TORCH_TPU_SLOW_TESTS=1.
_SLOW = pytest.mark.skipif(
    os.environ.get("TORCH_TPU_SLOW_TESTS") != "1", reason="set TORCH_TPU_SLOW_TESTS=1"
)


@pytest.mark.parametrize(
    "nproc,args",
    [
        (2, ["--dp", "2"]),
        pytest.param(2, ["--fsdp"], marks=_SLOW),
        pytest.param(2, ["--tp", "2"], marks=_SLOW),
        (4, ["--dp", "2", "--tp", "2"]),
    ],
    ids=["dp2", "fsdp", "tp2", "dp2-tp2"],
)
def test_torchrun_losses_equal_one_process(nproc, args, reference_losses):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        str(EXAMPLES / "distributed" / "train.py"),
        "--steps",
        str(STEPS),
        *args,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tempfile.gettempdir()
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    losses = [float(x) for x in re.findall(r"^step \d+ loss ([0-9.]+)$", run.stdout, re.M)]
    assert len(losses) == STEPS, run.stdout
    torch.testing.assert_close(
        torch.tensor(losses), torch.tensor(reference_losses), rtol=0, atol=2e-6
    )
