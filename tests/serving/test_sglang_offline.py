"""SGLang's offline API (`sgl.Engine(..., device="tpu")`) on tpu, selected through the
`sglang.srt.platforms` entry point: greedy tokens equal Hugging Face `generate` on the
CPU for a batch of prompts of different lengths (prefills, then decodes of different
context lengths), with compiled steps (the default) for a tiny Llama; a second round hits
SGLang's radix (prefix) cache and still gives the same tokens; prompts longer than one
prefill chunk (chunked prefill) do too. A compiled session compiles every step program
during warm-up and none in a run of mixed request sizes; a KV cache too small for the
batch retracts (preempts) requests and still finishes every one with HF's tokens. The
engine runs with TORCH_TPU_NO_COMPILE=1: its start-up compiles, and every compiled step
after the warm-up runs under torch_tpu.no_compile() (a compile there would raise in the
scheduler and stop the engine).

The engine lives for the whole module; the eager tests, which start engines of their
own, are in test_sglang_eager.py (one engine at a time: see sglang_engine.py)."""

import random

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


@pytest.fixture(scope="module")
def engine(model_dir, tmp_path_factory):
    """A compiled Llama engine with a KV pool of 256 tokens: enough for the greedy
    batch, too small for eight requests of 63-70 tokens at once. A low
    schedule_conservativeness makes the scheduler admit requests on a small estimate
    of their new tokens, so running requests outgrow the pool and get retracted.
    TORCH_TPU_NO_COMPILE=1 in the scheduler's environment: steps after warm-up may not
    compile."""
    path = model_dir("llama")
    stats = tmp_path_factory.mktemp("sglang-stats") / "compiled.json"
    llm = make_engine(
        path,
        stats,
        env={"TORCH_TPU_NO_COMPILE": "1"},
        max_total_tokens=256,
        schedule_conservativeness=0.05,
    )
    yield llm, path, stats
    llm.shutdown()


def test_platform_is_tpu(engine):
    from sglang.srt.platforms import current_platform

    assert current_platform.device_type == "tpu"
    assert type(current_platform).__module__ == "torch_tpu.serving.sglang.platform"


def test_compiled_warm_up(engine):
    """Warm-up compiled the body once per (token bucket, width bucket): buckets 16 and
    32 (the 32-token chunk budget) by widths 64 and 128 (the 128-token context)."""
    stats = read_stats(engine[2])
    assert stats["compiled"]
    assert stats["token_buckets"] == [16, 32]
    assert stats["width_buckets"] == [64, 128]
    assert stats["bucket_pairs"] == 4
    assert stats["warmup_graphs"] >= 4  # one Dynamo graph per pair (more on graph breaks)


def test_greedy_matches_hf(engine):
    llm, path, stats = engine
    before = read_stats(stats)["steps"]
    want = hf_greedy(path, PROMPTS, MAX_TOKENS)
    got = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params())]
    assert got == want
    # The same prompts again: their prefixes now come from the radix cache.
    again = [o["output_ids"] for o in llm.generate(PROMPTS[::-1], greedy_params())]
    assert again == want[::-1]
    after = read_stats(stats)
    assert after["steps"] > before  # the steps ran compiled
    assert after["eager_steps"] == 0


def test_no_step_compile_after_warmup(engine):
    """Batches of 1..8 requests, prompts of 1..20 words, 1..20 new tokens, served under
    TORCH_TPU_NO_COMPILE=1: every step runs a program compiled at warm-up (a new Dynamo
    graph or XLA program inside a step would raise; the counts say none was made). The
    eager ops around the body (input staging, logits of the last tokens, sampling) are
    outside the steps: they may compile once per new request or token count."""
    llm, _, stats = engine
    rng = random.Random(0)
    words = "the quick brown fox jumps over a lazy dog while tensors flow".split()
    before = read_stats(stats)
    for _ in range(2):
        prompts = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 20)))
            for _ in range(rng.randint(1, 8))
        ]
        params = [{"temperature": 0.0, "max_new_tokens": rng.randint(1, 20)} for _ in prompts]
        outs = llm.generate(prompts, params)
        assert all(1 <= len(o["output_ids"]) <= p["max_new_tokens"] for o, p in zip(outs, params))
    after = read_stats(stats)
    assert after["steps"] > before["steps"]
    assert after["step_graphs_after_warmup"] == 0
    assert after["step_compiles_after_warmup"] == 0


def test_kv_cache_exhaustion_retracts_and_finishes(engine):
    """Eight requests, four copies each of a 30- and a 23-token prompt, 40 new tokens
    each: 53 slots for the two prompts (the copies share them through the radix
    cache) and 320 for the new tokens; the pool has 256. The scheduler retracts running requests when decode runs
    out of slots and recomputes them later; every request still gets HF's tokens."""
    llm, path, stats = engine
    prompts = [PROMPTS[2], PROMPTS[4]] * 4
    outs = llm.generate(prompts, greedy_params(40))
    assert sum(o["meta_info"]["num_retractions"] for o in outs) > 0
    want = hf_greedy(path, PROMPTS, 40)
    assert [o["output_ids"] for o in outs] == [want[2], want[4]] * 4
    assert read_stats(stats)["step_graphs_after_warmup"] == 0
