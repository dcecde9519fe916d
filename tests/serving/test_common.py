"""What both serving plugins share (torch_tpu/serving/common.py), without an engine: the
bucket rules, the switches and refusals, the layout of linear weights, the base buffer of
a staged input, and compiles after warm-up: with TORCH_TPU_NO_COMPILE=1 a process may
compile while an engine starts, and a compiled step after warm-up runs in its bucket or
raises naming the program that would compile."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the device)
from torch_tpu.serving import common
from torch_tpu.serving import paged_attention as pa


def test_width_buckets_of_both_engines():
    # vLLM: 16-token blocks, max_model_len 64 -> 4 blocks, smallest width one block.
    assert common.width_buckets(4, 4) == [1, 2, 4]
    assert common.width_buckets(5, 5) == [1, 2, 4, 5]
    # SGLang: one-token blocks, context 128 (table of 130 slots), smallest width 64.
    assert common.width_buckets(128, 130, 64) == [64, 128]
    assert common.width_buckets(100, 100, 64) == [64, 100]
    assert common.width_buckets(40, 40, 40) == [40]


def test_token_buckets_and_pairs():
    assert common.token_buckets(64) == [16, 32, 64]
    assert common.token_buckets(40) == [16, 32, 40]
    assert list(common.bucket_pairs([16, 32], [1, 2], (1,))) == [
        (32, 1),
        (16, 1),
        (1, 1),
        (32, 2),
        (16, 2),
        (1, 2),
    ]


class _Plain:
    """Stands for an engine's unquantized linear method."""


class _Quantized:
    pass


def test_linear_weights_are_laid_out_for_the_dot():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.Linear(32, 8), torch.nn.Linear(8, 4)
    ).to("tpu")
    model[0].quant_method = model[1].quant_method = _Plain()
    model[2].quant_method = _Quantized()
    weights = [(m.weight.detach().cpu(), m.bias.detach().cpu()) for m in model]
    assert common.lay_out_linear_weights(model, _Plain) == 2
    assert [m.weight.stride() for m in model] == [(1, 32), (1, 8), (8, 1)]
    for m, (w, _) in zip(model, weights):
        assert isinstance(m.weight, torch.nn.Parameter)
        assert torch.equal(m.weight.detach().cpu(), w)
    assert common.lay_out_linear_weights(model, _Plain) == 0  # done once
    x = torch.randn(3, 16)
    ref = x
    for w, b in weights:
        ref = torch.nn.functional.linear(ref, w, b)
    with torch.no_grad():
        out = model(x.to("tpu")).cpu()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_switches_and_refusals(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_SGLANG_EAGER", "1")
    monkeypatch.setenv("TORCH_TPU_VLLM_EAGER", "0")
    assert common.eager_requested("sglang") and not common.eager_requested("vllm")
    monkeypatch.setenv("TORCH_TPU_VLLM_EAGER", "maybe")
    with pytest.raises(ValueError, match="TORCH_TPU_VLLM_EAGER"):
        common.eager_requested("vllm")
    common.refuse_pipeline_parallel(1)
    with pytest.raises(NotImplementedError, match="pipeline parallel"):
        common.refuse_pipeline_parallel(2)


def test_base_buffer():
    buf = torch.arange(16)
    assert pa.base_buffer(buf[:5]) is buf
    assert pa.base_buffer(buf) is buf
    assert pa.base_buffer(buf[3:8]) is not buf  # not a leading slice
    assert pa.base_buffer(buf.view(4, 4)[:, :2]) is not buf


def test_steady_state_without_the_variable(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_NO_COMPILE", raising=False)
    steady = common.SteadyState()
    steady.warmed_up()
    assert not steady.forbidding()
    monkeypatch.setenv("TORCH_TPU_NO_COMPILE", "1")
    assert steady.forbidding()
    eager = common.SteadyState()
    eager.warmed_up(compiled=False)
    assert not eager.forbidding()


# Runs in a process of its own with TORCH_TPU_NO_COMPILE=1 from the start and empty
# caches, so that every program below is a compile (a disk hit would be allowed).
STEPS = """
import torch, torch_tpu
from torch_tpu.serving import common
from torch_tpu.serving.precompile import SavedSteps

x = torch.ones(16, 4)
try:
    x.to("tpu") * 2
    print("start: compiled")
except RuntimeError as e:
    print("start: forbidden:", e)
common.start_up()

def step(x):
    return (x * 2 + 1).sum(0)

steps = SavedSteps(step, {dir!r}, lambda args, kwargs: args[0].shape[0], dynamic=False)
steps.arm()
print("warm-up:", steps(torch.ones(16, 4, device="tpu")).tolist())
steps.steady.warmed_up()
print("bucket:", steps(torch.full((16, 4), 3.0, device="tpu")).tolist())
try:
    steps(torch.ones(24, 4, device="tpu"))
    print("outside: ran")
except Exception as e:
    print("outside: raised:", " ".join(str(e).split()))
"""


def test_no_compile_after_warm_up(tmp_path):
    env = {
        **os.environ,
        "TORCH_TPU_NO_COMPILE": "1",
        "TORCH_TPU_CACHE_DIR": str(tmp_path / "tpu"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(STEPS.format(dir=str(tmp_path / "steps")))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-5000:]
    out = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    # The variable forbids compiles from the start; start_up() lifts that for the engine.
    assert out["start"].startswith("forbidden:") and "needs an XLA compile" in out["start"]
    assert out["warm-up"] == str([16.0 * 3] * 4)
    assert out["bucket"] == str([16.0 * 7] * 4)  # the warmed bucket runs
    # A step outside the warmed buckets raises before Dynamo traces it, naming its bucket.
    assert out["outside"].startswith("raised:"), out["outside"]
    assert "the model step of bucket 24 needs a Dynamo trace after warm-up" in out["outside"]
