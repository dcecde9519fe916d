"""vLLM's offline API (`LLM`) on tpu: greedy tokens equal Hugging Face `generate` on the
CPU for a tiny Llama and a tiny Qwen3, eager and compiled, with vLLM's async scheduling
(the default) and without; a compiled session serves a
run of mixed request sizes with TORCH_TPU_NO_COMPILE=1 after its warm-up, and a step
outside its buckets raises naming the compile; seeded random sampling is
reproducible; a KV cache too small for the batch preempts and still finishes every
request with the right tokens."""

import random

import pytest

vllm = pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)

import torch_tpu  # noqa: E402
from conftest import PROMPTS, hf_greedy  # noqa: E402
from vllm_engine import make_llm  # noqa: E402

MAX_TOKENS = 12


def greedy(llm, prompts, max_tokens=MAX_TOKENS):
    params = vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens, min_tokens=max_tokens)
    return [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params)]


@pytest.fixture(scope="module")
def compiled_llama(model_dir):
    llm = make_llm(model_dir("llama"), eager=False)
    yield llm
    del llm


def test_compiled_llama_matches_hf(model_dir, compiled_llama):
    assert compiled_llama.llm_engine.vllm_config.device_config.device_type == "tpu"
    # vLLM's default, async scheduling, holds on tpu: each step's inputs take the previous
    # step's sampled tokens on the device, and its host work overlaps that step.
    assert runner_of(compiled_llama).use_async_scheduling
    assert greedy(compiled_llama, PROMPTS) == hf_greedy(model_dir("llama"), PROMPTS, MAX_TOKENS)


def mixed_batches(llm, rounds=3):
    """Batches of 1..8 requests, prompts of 1..20 words, 1..20 new tokens."""
    rng = random.Random(0)
    words = "the quick brown fox jumps over a lazy dog while tensors flow".split()
    for _ in range(rounds):
        prompts = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 20)))
            for _ in range(rng.randint(1, 8))
        ]
        params = [
            vllm.SamplingParams(temperature=0.0, max_tokens=rng.randint(1, 20)) for _ in prompts
        ]
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert all(1 <= len(o.outputs[0].token_ids) <= p.max_tokens for o, p in zip(outs, params))


def runner_of(llm):
    """The engine's model runner (the engine core runs in this process)."""
    return llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner


def test_no_step_compile_after_warmup(compiled_llama, monkeypatch):
    """The model steps (one Dynamo graph, one XLA program per token and width bucket)
    all compiled during warm-up: with TORCH_TPU_NO_COMPILE=1 every step after it runs
    under torch_tpu.no_compile() (common.SteadyState), where a compile or a Dynamo
    recompile would raise, and a run of mixed request sizes serves without error. The
    runner's small per-batch-size eager ops around the step (input staging, logits of
    the sampled rows, argmax) are outside it (docs/serving.md)."""
    monkeypatch.setenv("TORCH_TPU_NO_COMPILE", "1")
    assert runner_of(compiled_llama).steady.forbidding()
    before = torch_tpu.metrics.snapshot()["graph_runs"]
    mixed_batches(compiled_llama)
    assert torch_tpu.metrics.snapshot()["graph_runs"] > before  # the steps ran compiled


def test_slot_mapping_takes_the_runners_host_inputs(compiled_llama, monkeypatch):
    """Inside input preparation the slot-mapping stand-in takes the query offsets and
    positions from the runner's host arrays (with async scheduling, reading them back
    would wait for the step the device is running); they equal the device values."""
    import numpy as np

    from torch_tpu.serving.vllm import slot_mapping

    runner = runner_of(compiled_llama)
    seen = []
    original = slot_mapping._read_inputs

    def checked(query_start_loc, positions, num_reqs, n):
        assert slot_mapping._preparing.get() is runner
        assert slot_mapping.base_buffer(query_start_loc) is runner.query_start_loc.gpu
        assert slot_mapping.base_buffer(positions) is runner.positions
        qsl, pos = original(query_start_loc, positions, num_reqs, n)
        np.testing.assert_array_equal(qsl, query_start_loc.cpu().numpy())
        np.testing.assert_array_equal(pos, positions.cpu().numpy()[:n])
        seen.append((num_reqs, n))
        return qsl, pos

    monkeypatch.setattr(slot_mapping, "_read_inputs", checked)
    mixed_batches(compiled_llama, rounds=2)
    assert any(n > reqs for reqs, n in seen) and any(
        n == reqs for reqs, n in seen
    )  # prefill, decode


def test_step_outside_the_buckets_raises(compiled_llama, monkeypatch):
    """A model step of 17 tokens (not a token bucket: the runner pads every step to
    one) after warm-up with TORCH_TPU_NO_COMPILE=1: Dynamo would trace it (its program
    never compiled), and the error names its bucket."""
    import torch
    from vllm.forward_context import set_forward_context

    monkeypatch.setenv("TORCH_TPU_NO_COMPILE", "1")
    runner = runner_of(compiled_llama)
    ids = torch.zeros(17, dtype=torch.int32, device=runner.device)
    with torch.inference_mode(), set_forward_context(None, runner.vllm_config):
        with pytest.raises(
            RuntimeError, match=r"model step of bucket \(\(\(17,\).*needs a Dynamo trace"
        ):
            runner.model(input_ids=ids, positions=ids.long())
    mixed_batches(compiled_llama, rounds=1)  # the engine still serves


def test_seeded_sampling_is_reproducible(compiled_llama):
    params = vllm.SamplingParams(
        temperature=0.8, top_p=0.9, top_k=20, seed=1234, max_tokens=10, min_tokens=10
    )
    first = [o.outputs[0].token_ids for o in compiled_llama.generate(PROMPTS[:3], params)]
    again = [o.outputs[0].token_ids for o in compiled_llama.generate(PROMPTS[:3], params)]
    assert first == again
    assert all(len(t) == 10 for t in first)


@pytest.mark.parametrize(
    "arch,eager,async_scheduling",
    [("llama", True, False), ("qwen3", True, True), ("qwen3", False, True)],
)
def test_greedy_matches_hf(model_dir, arch, eager, async_scheduling):
    path = model_dir(arch)
    llm = make_llm(path, eager, async_scheduling=async_scheduling)
    try:
        assert runner_of(llm).use_async_scheduling == async_scheduling
        got = greedy(llm, PROMPTS)
    finally:
        del llm
    assert got == hf_greedy(path, PROMPTS, MAX_TOKENS)


def test_kv_cache_exhaustion_preempts_and_finishes(model_dir):
    """A cache of 12 blocks of 16 tokens cannot hold 8 requests of ~50 tokens at once:
    the scheduler preempts and recomputes, and every request still gets HF's tokens."""
    path = model_dir("llama")
    prompts = [PROMPTS[2], PROMPTS[4]] * 4
    # 2 layers x 16 tokens x 2 kv heads x 2 x 16 dims x 4 bytes = 8 KiB per block
    llm = make_llm(path, eager=True, kv_bytes=12 * 8192, disable_log_stats=False)
    try:
        got = greedy(llm, prompts, max_tokens=20)
        metrics = {m.name: m for m in llm.get_metrics()}
    finally:
        del llm
    assert metrics["vllm:num_preemptions"].value > 0
    want = hf_greedy(path, PROMPTS, 20)
    assert got == [want[2], want[4]] * 4


def test_prefix_caching_and_chunked_prefill(model_dir):
    """Greedy tokens with prefix caching and chunked prefill (16-token steps split the
    longer prompts; a second round, and a prompt extending another, read cached
    prefixes) equal those with both off, and HF's."""
    path = model_dir("llama")
    prompts = PROMPTS + [PROMPTS[2] + " The quick brown fox."]

    def run(**kw):
        llm = make_llm(path, eager=True, disable_log_stats=False, **kw)
        try:
            first = greedy(llm, prompts)
            second = greedy(llm, prompts[::-1])[::-1]
            metrics = {m.name: m for m in llm.get_metrics()}
        finally:
            del llm
        return first, second, metrics

    plain, plain_again, _ = run(enable_prefix_caching=False, enable_chunked_prefill=False)
    cached, cached_again, metrics = run(
        enable_prefix_caching=True, enable_chunked_prefill=True, max_num_batched_tokens=16
    )
    assert metrics["vllm:prefix_cache_hits"].value > 0
    assert plain == plain_again == cached == cached_again
    assert plain == hf_greedy(path, prompts, MAX_TOKENS)
