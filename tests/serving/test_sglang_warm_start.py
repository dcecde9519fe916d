"""A compiled SGLang engine started again with the same configuration loads each bucket
pair's saved step (torch_tpu/serving/precompile.py): its warm-up traces no step and
compiles no program, and it gives the same tokens as Hugging Face on the CPU. The test
starts its engines one at a time (see sglang_engine.py), with cache directories of its
own. (Qwen3's steps, split by graph breaks, cannot be saved yet: Dynamo cannot store
the guards of a frame that resumes inside a generator; they are traced on every start,
with a warning.)"""

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


def run_engine(path, stats, cache):
    """Starts an engine whose scheduler uses `cache` for PyTorch's and torch_tpu's
    caches, runs the greedy prompts, shuts it down; returns (tokens, stats)."""
    llm = make_engine(
        path,
        stats,
        env={
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TORCH_TPU_CACHE_DIR": str(cache / "tpu"),
        },
    )
    try:
        tokens = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params())]
    finally:
        llm.shutdown()
    return tokens, read_stats(stats)


def test_second_engine_loads_its_steps(model_dir, tmp_path):
    path = model_dir("llama")
    cold_tokens, cold = run_engine(path, tmp_path / "cold.json", tmp_path)
    assert cold["compiled"] and cold["warmup_loaded_steps"] == 0
    assert cold["warmup_saved_steps"] == cold["bucket_pairs"]
    warm_tokens, warm = run_engine(path, tmp_path / "warm.json", tmp_path)
    assert warm["warmup_loaded_steps"] == cold["bucket_pairs"]
    assert cold["warmup_traced_frames"] >= cold["bucket_pairs"]
    assert (warm["warmup_traced_frames"], warm["warmup_saved_steps"], warm["warmup_compiles"]) == (
        0,
        0,
        0,
    )
    assert warm["step_compiles_after_warmup"] == 0
    expected = hf_greedy(path, PROMPTS, MAX_TOKENS)
    assert cold_tokens == expected and warm_tokens == expected
