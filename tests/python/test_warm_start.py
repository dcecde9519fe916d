"""Warm starts: a process that finds its compiled graphs in PyTorch's AOTAutograd cache
and their programs in torch_tpu's disk cache traces nothing and compiles nothing.

Each run is a fresh process with the cache directories of its test (PyTorch's under
TORCHINDUCTOR_CACHE_DIR, torch_tpu's under TORCH_TPU_CACHE_DIR)."""

import json
import pickle

import pytest
import torch

from helpers import run_python

pytestmark = pytest.mark.single_mode

# Two training steps of a small MLP, its forward and backward compiled by BACKEND; prints
# the losses, how many graphs backend "tpu" traced (its compiler calls), AOTAutograd's
# cache counters and the XLA compiles of the whole process (eager ops included).
STEP = """
import json, torch, torch_tpu
import torch_tpu._dynamo as backend
from torch._dynamo.utils import counters
BACKEND = {backend!r}
if BACKEND == "other":
    # An AOTAutograd backend with the same settings as "tpu" but another compiler (its
    # graphs run eagerly): AOTAutograd's key sees no difference but the tag.
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import AOTEagerOutputCode, boxed_nop
    from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler

    def BACKEND(gm, inputs):
        with torch._functorch.config.patch(bundled_autograd_cache=True,
                                           force_non_lazy_backward_lowering=True):
            make = lambda: SerializableAOTDispatchCompiler(AOTEagerOutputCode, boxed_nop)
            return aot_autograd(fw_compiler=make(), bw_compiler=make(),
                                inference_compiler=make(),
                                keep_inference_input_mutations=True)(gm, inputs)
{prelude}
traced = []
compiler = backend._output_code_for
backend._output_code_for = lambda *a, **k: traced.append(1) or compiler(*a, **k)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.Linear(16, 4))
x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
model = model.to("tpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step_model = torch.compile(model, backend=BACKEND)
torch_tpu.metrics.reset()
losses = []
for _ in range(2):
    loss = torch.nn.functional.cross_entropy(step_model(x.to("tpu")), y.to("tpu"))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(json.dumps({{"losses": losses, "traced": len(traced), "aot": dict(counters["aot_autograd"]),
                  "compiles": torch_tpu.metrics.snapshot()["compiles"]}}))
"""


def expected_losses():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def run(tmp_path, backend="tpu", prelude=""):
    r = run_python(
        STEP.format(backend=backend, prelude=prelude),
        env={
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
            "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
        },
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    torch.testing.assert_close(out["losses"], expected_losses(), rtol=1e-5, atol=1e-5)
    return out


def aot_entries(tmp_path):
    return [
        p for p in (tmp_path / "inductor" / "aotautograd").glob("*/*") if not p.name.startswith(".")
    ]


def test_warm_process_traces_and_compiles_nothing(tmp_path):
    cold = run(tmp_path)
    assert cold["traced"] == 2  # forward and backward
    assert cold["aot"].get("autograd_cache_saved") == 1
    assert cold["compiles"] > 0
    warm = run(tmp_path)
    assert warm["traced"] == 0
    assert warm["aot"].get("autograd_cache_hit") == 1
    assert warm["aot"].get("autograd_cache_miss", 0) == 0
    assert warm["compiles"] == 0
    assert warm["losses"] == cold["losses"]


def test_two_backends_never_share_an_entry(tmp_path):
    run(tmp_path)
    other = run(tmp_path, backend="other")
    assert other["aot"].get("autograd_cache_hit", 0) == 0
    assert other["aot"].get("autograd_cache_saved") == 1
    assert len(aot_entries(tmp_path)) == 2
    again = run(tmp_path)  # and each finds its own
    assert again["traced"] == 0 and again["aot"].get("autograd_cache_hit") == 1


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_entries_are_ignored(tmp_path, damage):
    run(tmp_path)
    for entry in aot_entries(tmp_path):
        data = entry.read_bytes()
        if damage == "truncate":
            entry.write_bytes(data[: len(data) // 2])
        else:  # inside the stored graph: unpickles, fails its checksum
            middle = len(data) // 2
            entry.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    again = run(tmp_path)
    assert again["aot"].get("autograd_cache_hit", 0) == 0
    assert again["traced"] == 2
    assert again["compiles"] == 0  # the programs are still on disk
    assert run(tmp_path)["traced"] == 0  # the rewritten entry is found


def test_entries_of_another_version_are_ignored(tmp_path):
    run(tmp_path, prelude="torch_tpu.__version__ = '0.0.1'")
    again = run(tmp_path)
    assert again["aot"].get("autograd_cache_hit", 0) == 0
    assert again["traced"] == 2


def test_a_stored_graph_checks_its_identity():
    from torch_tpu import _output_code

    code = _output_code.TpuOutputCode()
    code._payload = b"graph"
    code._checksum = __import__("hashlib").sha256(b"graph").hexdigest()
    code._identity = _output_code.identity()
    data = pickle.dumps(code)
    assert pickle.loads(data)._payload == b"graph"
    code._identity = "torch_tpu 0.0.1 format 1 lowerings x plugin y"
    with pytest.raises(_output_code.EntryRejected, match="torch_tpu 0.0.1"):
        pickle.loads(pickle.dumps(code))
    code._identity = _output_code.identity()
    code._payload = b"grapH"
    with pytest.raises(_output_code.EntryRejected, match="corrupt"):
        pickle.loads(pickle.dumps(code))


# A graph traced with symbolic sizes runs one program per concrete shape: its cache entry
# holds the graph itself, not one program's description.
DYNAMIC = """
import json, torch, torch_tpu
import torch_tpu._dynamo as backend
from torch._dynamo.utils import counters
traced = []
compiler = backend._output_code_for
backend._output_code_for = lambda *a, **k: traced.append(1) or compiler(*a, **k)
f = torch.compile(lambda x: (x.sin() * x.shape[0]).sum(0), backend="tpu", dynamic=True)
outs = [f(torch.arange(n * 3, dtype=torch.float32).reshape(n, 3).to("tpu")).cpu().tolist()
        for n in (2, 5)]
print(json.dumps({"outs": outs, "traced": len(traced), "aot": dict(counters["aot_autograd"])}))
"""


def test_a_graph_with_symbolic_sizes_is_stored_whole(tmp_path):
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
    }
    runs = []
    for _ in range(2):
        r = run_python(DYNAMIC, env=env)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    for out in runs:
        for n, got in zip((2, 5), out["outs"]):
            x = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
            torch.testing.assert_close(torch.tensor(got), (x.sin() * n).sum(0))
    assert runs[0]["traced"] == 1
    assert runs[1]["traced"] == 0 and runs[1]["aot"].get("autograd_cache_hit") == 1
