"""Tensor parallel SGLang on tpu: `sgl.Engine(..., tp_size=2)` runs two scheduler
processes, rank r on tpu:r (virtual XLA:CPU devices), whose layers all-reduce through
SGLang's collective ops on tpu_dist (host-staged between the processes). With compiled
steps (the default; each step graph split around the collectives), greedy tokens equal
Hugging Face `generate` on the CPU, and no step program compiles after warm-up.
Pipeline parallel is refused."""

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


@pytest.fixture
def own_devices(monkeypatch):
    """The platform raises TORCH_TPU_NUM_DEVICES for the schedulers it spawns; put the
    test process's value back afterwards (a server started later by this process
    would otherwise see two devices). setenv records the value to restore, absent
    included; delenv of an absent variable records nothing."""
    monkeypatch.setenv("TORCH_TPU_NUM_DEVICES", "1")


def test_tensor_parallel_greedy_matches_hf(model_dir, tmp_path, own_devices):
    path = model_dir("llama")
    stats = tmp_path / "tp.json"
    llm = make_engine(path, stats, tp_size=2)
    try:
        got = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params())]
    finally:
        llm.shutdown()
    assert got == hf_greedy(path, PROMPTS, MAX_TOKENS)
    counts = read_stats(stats)
    assert counts["compiled"] and counts["steps"] > 0 and counts["eager_steps"] == 0
    assert counts["step_graphs_after_warmup"] == 0


def test_pipeline_parallel_is_refused(model_dir, tmp_path, own_devices):
    with pytest.raises(NotImplementedError, match="pipeline parallel"):
        make_engine(model_dir("llama"), tmp_path / "pp.json", pp_size=2)
