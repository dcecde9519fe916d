"""PyTorch's precompile paths with backend "tpu": a process that loads what another one
saved runs its compiled training step without a Dynamo frame, an AOTAutograd trace or
an XLA compile.

- `torch.compile(fn, fullgraph=True, backend="tpu").aot_compile(...)`, saved with
  `save_compiled_function` and loaded with `torch.compiler.load_compiled_function`;
- `torch.compiler.save_cache_artifacts()` / `load_cache_artifacts()`, with and without
  `torch._dynamo.config.caching_precompile`.

Each run is a fresh process; torch_tpu's disk cache is shared by a test's runs, PyTorch's
cache directory is not (what crosses over is the saved file)."""

import json

import pytest
import torch

from helpers import run_python

pytestmark = pytest.mark.single_mode

# A small MLP's loss and the gradient of its first weight, compiled one of three ways;
# prints them with the Dynamo frames traced, the graphs backend "tpu" traced (its
# compiler calls), AOTAutograd's cache counters and the process's XLA compiles.
STEP = """
import json, torch, torch_tpu
import torch_tpu._dynamo as backend
from torch._dynamo.utils import counters
WAY, SAVE, PATH = {way!r}, {save!r}, {path!r}
{prelude}
torch._dynamo.config.caching_precompile = WAY == "precompile"
traced = []
compiler = backend._output_code_for
backend._output_code_for = lambda *a, **k: traced.append(1) or compiler(*a, **k)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
x = torch.randn(6, 8)
model, x = model.to("tpu"), x.to("tpu")

def step(model, x):
    return torch.nn.functional.log_softmax(model(x), -1).mean()

if WAY == "aot_compile":
    if SAVE:
        compiled = torch.compile(step, fullgraph=True, backend="tpu").aot_compile(((model, x), {{}}))
        compiled.save_compiled_function(PATH)
    else:
        with open(PATH, "rb") as f:
            compiled = torch.compiler.load_compiled_function(f)
else:
    if not SAVE:
        with open(PATH, "rb") as f:
            torch.compiler.load_cache_artifacts(f.read())
    compiled = torch.compile(step, backend="tpu")
torch_tpu.metrics.reset()
loss = compiled(model, x)
loss.backward()
if SAVE and WAY != "aot_compile":
    with open(PATH, "wb") as f:
        f.write(torch.compiler.save_cache_artifacts()[0])
print(json.dumps({{"loss": loss.item(), "grad": model[0].weight.grad.cpu().tolist(),
                  "frames": counters["stats"]["unique_graphs"], "traced": len(traced),
                  "aot": dict(counters["aot_autograd"]),
                  "compiles": torch_tpu.metrics.snapshot()["compiles"]}}))
"""


def expected():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(6, 8)
    loss = torch.nn.functional.log_softmax(model(x), -1).mean()
    loss.backward()
    return loss.item(), model[0].weight.grad


def run(tmp_path, way, save, name, prelude="", ok=True):
    r = run_python(
        STEP.format(way=way, save=save, path=str(tmp_path / "saved.bin"), prelude=prelude),
        env={
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / name),
            "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
        },
    )
    if not ok:
        return r
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    loss, grad = expected()
    assert out["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)
    torch.testing.assert_close(torch.tensor(out["grad"]), grad, rtol=1e-5, atol=1e-6)
    return out


@pytest.mark.parametrize("way", ["aot_compile", "precompile"])
def test_loaded_step_skips_dynamo(tmp_path, way):
    cold = run(tmp_path, way, True, "a")
    assert cold["traced"] == 2 and cold["compiles"] > 0
    warm = run(tmp_path, way, False, "b")  # an empty PyTorch cache: only the saved file
    assert warm["frames"] == 0
    assert warm["traced"] == 0
    assert warm["compiles"] == 0


def test_cache_artifacts_skip_aot_autograd(tmp_path):
    run(tmp_path, "artifacts", True, "a")
    warm = run(tmp_path, "artifacts", False, "b")
    assert warm["frames"] == 1  # Dynamo still traces: caching_precompile is off
    assert warm["aot"].get("autograd_cache_hit") == 1
    assert warm["traced"] == 0 and warm["compiles"] == 0


def test_artifacts_of_another_version_are_not_used(tmp_path):
    run(tmp_path, "precompile", True, "a", prelude="torch_tpu.__version__ = '0.0.1'")
    warm = run(tmp_path, "precompile", False, "b")
    assert warm["traced"] == 2  # traced again, nothing stale ran


def test_aot_compiled_function_of_another_version_is_refused(tmp_path):
    run(tmp_path, "aot_compile", True, "a", prelude="torch_tpu.__version__ = '0.0.1'")
    r = run(tmp_path, "aot_compile", False, "b", ok=False)
    assert r.returncode != 0
    assert "stored compiled graph is from 'torch_tpu 0.0.1" in r.stderr
