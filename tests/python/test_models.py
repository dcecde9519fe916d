"""Acceptance models: minGPT (examples/mingpt) and Hugging Face Llama / Qwen3 from tiny
configs (examples/hf_tiny.py) train on tpu with the same per-step losses as on the CPU,
generate the same greedy tokens, and run every op natively (no CPU fallback); the
transformers Trainer fine-tunes the tiny Llama on tpu as it does on the CPU
(examples/hf_trainer.py)."""

import copy
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path[:0] = [str(EXAMPLES), str(EXAMPLES / "mingpt")]

import data as mingpt_data  # noqa: E402
import hf_tiny  # noqa: E402
import hf_trainer  # noqa: E402
import train as mingpt_train  # noqa: E402

# f32 on both devices; the tolerance is the acceptance bar for per-step losses.
LOSS_TOL = dict(rtol=1e-4, atol=1e-5)


def assert_native():
    """Fails if any op fell back to the CPU (conftest turns the fallback off, so a missing
    lowering raises already; this also catches fallbacks counted any other way)."""
    assert torch_tpu.metrics.snapshot()["fallbacks"] == {}


def losses_match(tpu_losses, cpu_losses):
    torch.testing.assert_close(torch.stack(tpu_losses).cpu(), torch.stack(cpu_losses), **LOSS_TOL)


def test_mingpt_trains_and_generates_like_cpu():
    dataset = mingpt_data.CharDataset(mingpt_data.make_text(lines=500))
    cpu_model = mingpt_train.build(dataset.vocab_size, block=32, layers=2, heads=4, d=64, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    assert tpu_model.lm_head.weight is tpu_model.wte.weight
    torch_tpu.metrics.reset()

    steps, batch = 3, 4
    cpu_losses = mingpt_train.train(cpu_model, dataset, "cpu", steps, batch)
    tpu_losses = mingpt_train.train(tpu_model, dataset, "tpu", steps, batch)
    losses_match(tpu_losses, cpu_losses)
    assert cpu_losses[-1] < cpu_losses[0]

    prompt = dataset.encode("12+34=").unsqueeze(0)
    cpu_model.eval()
    tpu_model.eval()
    expected = cpu_model.generate(prompt, 6)
    assert torch.equal(tpu_model.generate(prompt.to("tpu"), 6).cpu(), expected)
    assert_native()


@pytest.mark.parametrize("name", ["llama", "qwen3", "qwen3_moe"])
def test_hf_tiny_trains_and_generates_like_cpu(name):
    cpu_model = hf_tiny.build(name, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    assert len(list(tpu_model.parameters())) == len(list(cpu_model.parameters()))
    torch_tpu.metrics.reset()

    data = hf_tiny.batches(steps=3, batch=2, seq=16)
    cpu_losses = hf_tiny.train(cpu_model, data, "cpu")
    tpu_losses = hf_tiny.train(tpu_model, data, "tpu")
    losses_match(tpu_losses, cpu_losses)

    prompt = hf_tiny.batches(steps=1, batch=2, seq=8, seed=1)[0]
    expected = hf_tiny.greedy(cpu_model, prompt, 5)
    assert torch.equal(hf_tiny.greedy(tpu_model, prompt.to("tpu"), 5).cpu(), expected)
    assert_native()


def test_hf_llama_steady_steps_ask_no_meta_kernel():
    # A training step seen before (same shapes) finds every output shape in the lowered
    # ops' caches: PyTorch's meta kernels for add and arange are Python (tens of µs to 0.2
    # ms a call). Two of them ran every step until 2026-12-07: a GQA layer's key
    # rotate_half was taken for a growing cache, and arange asked for its length.
    model = hf_tiny.build("llama", seed=0).to("tpu")
    data = hf_tiny.batches(steps=3, batch=2, seq=16)
    hf_tiny.train(model, data, "tpu")
    before = torch_tpu.metrics.snapshot()["meta_calls"]
    losses = hf_tiny.train(model, data[:2], "tpu")
    assert torch_tpu.metrics.snapshot()["meta_calls"] == before
    assert all(torch.isfinite(loss).item() for loss in losses)


def assert_compiled_whole():
    m = torch_tpu.metrics.snapshot()
    assert m["graphs"] >= 2 and m["graph_runs"] > 0  # forward and backward programs
    assert m["graph_fallbacks"] == 0 and m["fallbacks"] == {}


def test_compiled_mingpt_trains_with_the_losses_of_eager_and_cpu():
    torch._dynamo.reset()
    dataset = mingpt_data.CharDataset(mingpt_data.make_text(lines=500))
    cpu_model = mingpt_train.build(dataset.vocab_size, block=32, layers=2, heads=4, d=64, seed=0)
    eager_model = copy.deepcopy(cpu_model).to("tpu")
    compiled_model = copy.deepcopy(cpu_model).to("tpu")
    steps, batch = 4, 4
    cpu_losses = mingpt_train.train(cpu_model, dataset, "cpu", steps, batch)
    eager_losses = mingpt_train.train(eager_model, dataset, "tpu", steps, batch)
    torch_tpu.metrics.reset()
    compiled_losses = mingpt_train.train(
        compiled_model, dataset, "tpu", steps, batch, compile="tpu"
    )
    losses_match(compiled_losses, cpu_losses)
    torch.testing.assert_close(
        torch.stack(compiled_losses).cpu(), torch.stack(eager_losses).cpu(), **LOSS_TOL
    )
    # AdamW's normalised updates turn gradient rounding on near-zero entries into
    # differences of a fraction of lr (1e-3).
    for p, q in zip(compiled_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-4)
    assert_compiled_whole()


@pytest.mark.parametrize("name", ["llama", "qwen3", "qwen3_moe"])
def test_compiled_hf_tiny_trains_like_cpu(name):
    torch._dynamo.reset()
    cpu_model = hf_tiny.build(name, seed=0)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    data = hf_tiny.batches(steps=3, batch=2, seq=16)
    cpu_losses = hf_tiny.train(cpu_model, data, "cpu")
    torch_tpu.metrics.reset()
    tpu_losses = hf_tiny.train(tpu_model, data, "tpu", compile="tpu")
    losses_match(tpu_losses, cpu_losses)
    assert_compiled_whole()


def test_module_to_tpu_and_back_keeps_shared_parameters():
    head, embedding = torch.nn.Linear(4, 3, bias=False), torch.nn.Embedding(3, 4)
    head.weight = embedding.weight
    modules = torch.nn.ModuleList([head, embedding])
    assert modules.to("tpu") is modules
    assert head.weight is embedding.weight and head.weight.device.type == "tpu"
    modules.to("cpu")
    assert head.weight is embedding.weight and head.weight.device.type == "cpu"


def test_hf_trainer_fine_tunes_on_tpu_like_cpu(monkeypatch, tmp_path):
    from accelerate.state import AcceleratorState

    # The device selection Hugging Face documents for devices Accelerate does not detect.
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "tpu")
    AcceleratorState._reset_state(reset_partial_state=True)
    torch_tpu.metrics.reset()
    trainer, tpu_losses = hf_trainer.fine_tune("tpu", steps=6, output_dir=str(tmp_path / "tpu"))
    assert trainer.args.device.type == "tpu"
    assert {p.device.type for p in trainer.model.parameters()} == {"tpu"}
    assert_native()
    assert torch_tpu.metrics.snapshot()["executions"] > 0
    assert tpu_losses[-1] < tpu_losses[0] - 0.3

    monkeypatch.delenv("ACCELERATE_TORCH_DEVICE")
    AcceleratorState._reset_state(reset_partial_state=True)
    _, cpu_losses = hf_trainer.fine_tune("cpu", steps=6, output_dir=str(tmp_path / "cpu"))
    AcceleratorState._reset_state(reset_partial_state=True)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), **LOSS_TOL)
