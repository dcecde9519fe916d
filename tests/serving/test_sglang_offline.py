"""SGLang's offline API (`sgl.Engine(..., device="tpu")`) on tpu, selected through the
`sglang.srt.platforms` entry point: greedy tokens equal Hugging Face `generate` on the
CPU for a batch of prompts of different lengths (prefills, then decodes of different
context lengths); a second round hits SGLang's radix (prefix) cache and still gives
the same tokens; a prompt longer than one prefill chunk (chunked prefill) does too."""

import os

import pytest

sgl = pytest.importorskip("sglang")

from conftest import PROMPTS, hf_greedy  # noqa: E402

os.environ.setdefault("SGLANG_PLATFORM", "tpu")

MAX_TOKENS = 12


def greedy_params(max_tokens=MAX_TOKENS):
    return {"temperature": 0.0, "max_new_tokens": max_tokens, "min_new_tokens": max_tokens}


@pytest.fixture(scope="module")
def engine(model_dir):
    path = model_dir("llama")
    # chunked_prefill_size 16: the prompts of 23 and 30 tokens prefill in chunks.
    llm = sgl.Engine(model_path=path, device="tpu", dtype="float32", random_seed=0,
                     context_length=128, max_total_tokens=2048, chunked_prefill_size=16,
                     max_running_requests=8, log_level="warning")
    yield llm, path
    llm.shutdown()


def test_platform_is_tpu(engine):
    from sglang.srt.platforms import current_platform

    assert current_platform.device_type == "tpu"
    assert type(current_platform).__module__ == "torch_tpu.serving.sglang.platform"


def test_greedy_matches_hf(engine):
    llm, path = engine
    want = hf_greedy(path, PROMPTS, MAX_TOKENS)
    got = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params())]
    assert got == want
    # The same prompts again: their prefixes now come from the radix cache.
    again = [o["output_ids"] for o in llm.generate(PROMPTS[::-1], greedy_params())]
    assert again == want[::-1]
