"""SGLang's offline API on tpu with the model run eagerly (`TORCH_TPU_SGLANG_EAGER=1`):
greedy tokens equal Hugging Face `generate` on the CPU for a tiny Llama and a tiny
Qwen3, a batch of prompts of different lengths. Each test starts and shuts down its
own engine (one engine at a time: see sglang_engine.py)."""

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_eager_greedy_matches_hf(model_dir, tmp_path, arch):
    path = model_dir(arch)
    stats = tmp_path / "eager.json"
    llm = make_engine(path, stats, eager=True)
    try:
        got = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params())]
    finally:
        llm.shutdown()
    assert read_stats(stats) == {"compiled": False}
    assert got == hf_greedy(path, PROMPTS, MAX_TOKENS)
