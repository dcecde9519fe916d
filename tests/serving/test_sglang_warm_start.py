"""A compiled SGLang engine started again with the same configuration loads each bucket
pair's saved step (torch_tpu/serving/precompile.py): its warm-up traces no step and
compiles no program, its steps after warm-up trace nothing either (it runs with
TORCH_TPU_NO_COMPILE=1, where a Dynamo trace raises), and it gives the same tokens as
Hugging Face on the CPU. The test
starts its engines one at a time (see sglang_engine.py), with cache directories of its
own. (Qwen3's steps, split by graph breaks, cannot be saved yet: Dynamo cannot store
the guards of a frame that resumes inside a generator; they are traced on every start,
with a warning.)"""

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


def run_engine(path, stats, cache, **env):
    """Starts an engine whose scheduler uses `cache` for PyTorch's and torch_tpu's
    caches (and `env`), runs the greedy prompts, shuts it down; returns (tokens,
    stats)."""
    llm = make_engine(
        path,
        stats,
        env={
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TORCH_TPU_CACHE_DIR": str(cache / "tpu"),
            **env,
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
    warm_tokens, warm = run_engine(path, tmp_path / "warm.json", tmp_path, TORCH_TPU_NO_COMPILE="1")
    assert warm["warmup_loaded_steps"] == cold["bucket_pairs"]
    assert cold["warmup_traced_frames"] >= cold["bucket_pairs"]
    assert (warm["warmup_traced_frames"], warm["warmup_saved_steps"], warm["warmup_compiles"]) == (
        0,
        0,
        0,
    )
    # After warm-up no step traced or built a program, in either engine; the warm one
    # ran under TORCH_TPU_NO_COMPILE=1, where a trace raises in its scheduler.
    for stats in (cold, warm):
        assert (
            stats["step_frames_after_warmup"],
            stats["step_graphs_after_warmup"],
            stats["step_compiles_after_warmup"],
        ) == (0, 0, 0)
    expected = hf_greedy(path, PROMPTS, MAX_TOKENS)
    assert cold_tokens == expected and warm_tokens == expected


def test_saved_step_key_covers_what_changes_the_step(model_dir):
    """Engines whose steps differ save them apart (`compiled._step_config`): LoRA on, its
    largest rank and layers, quantization and speculative decoding each give another
    key; the same configuration (LoRA's layers named in any order) gives the same."""
    from types import SimpleNamespace

    import torch
    from sglang.srt.server_args import ServerArgs
    from transformers import AutoConfig

    from torch_tpu.serving.sglang.compiled import _step_config

    path = model_dir("llama")
    hf_config = AutoConfig.from_pretrained(path)

    def key(**kw):
        runner = SimpleNamespace(
            model=torch.nn.Linear(1, 1),
            model_config=SimpleNamespace(hf_config=hf_config),
            dtype=torch.float32,
            kv_cache_dtype=torch.float32,
            tp_size=1,
            server_args=ServerArgs(model_path=path, **kw),
        )
        return _step_config(runner, [16, 32], [64, 128])

    lora = dict(enable_lora=True, max_lora_rank=8, lora_target_modules={"q_proj", "v_proj"})
    keys = [
        key(),
        key(**lora),
        key(**{**lora, "max_lora_rank": 16}),
        key(**{**lora, "lora_target_modules": {"q_proj"}}),
        key(quantization="fp8"),
        key(speculative_algorithm="NGRAM"),
    ]
    assert len(set(keys)) == len(keys)
    assert key(**{**lora, "lora_target_modules": ["v_proj", "q_proj"]}) == keys[1]
