"""torchtitan 0.3.0's llama3 debugmodel trains on tpu as its README launches it (torchrun,
command-line overrides only, no TORCH_TPU_* variable), with the losses of the same
training on CPU PyTorch from the same seed checkpoint (examples/torchtitan/compare.py).
Runs in a stage of its own, in the venv examples/torchtitan/setup.sh builds."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "torchtitan", reason="torchtitan is not installed (bash examples/torchtitan/setup.sh)"
)

pytestmark = [pytest.mark.torchtitan, pytest.mark.single_mode]

COMPARE = Path(__file__).resolve().parents[2] / "examples" / "torchtitan" / "compare.py"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("torchtitan")


@pytest.mark.parametrize("config", ["single", "fsdp2"])
def test_torchtitan_trains_like_cpu(work, config):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    done = subprocess.run(
        [sys.executable, str(COMPARE), config, "--steps", "2", "--work", str(work)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{config}: largest difference" in done.stdout and "(ok 0.001)" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line[:5].strip().isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2]  # both steps trained and compared
