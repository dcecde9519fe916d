"""Tensor parallel vLLM on tpu: `LLM(tensor_parallel_size=2)` runs two worker processes
(vLLM's multiprocessing executor), worker r on tpu:r, their collectives over tpu_dist
(host-staged between processes), and its greedy tokens for a tiny Llama (4 attention
heads, 2 KV heads: 2 and 1 per rank) equal Hugging Face `generate` on the CPU. Eager
steps only: compiled TP (the step graph split around the collectives) works too but
its warm-up in two processes takes minutes on a small host (docs/serving.md).
Pipeline parallel is refused with a clear error."""

import os

import pytest

vllm = pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402

MAX_TOKENS = 12


@pytest.fixture
def restore_num_devices():
    """The platform raises TORCH_TPU_NUM_DEVICES for the workers it spawns; later
    tests' subprocesses get this process's value back."""
    saved = os.environ.get("TORCH_TPU_NUM_DEVICES")
    yield
    if saved is None:
        os.environ.pop("TORCH_TPU_NUM_DEVICES", None)
    else:
        os.environ["TORCH_TPU_NUM_DEVICES"] = saved


def test_tp2_greedy_matches_hf(model_dir, restore_num_devices):
    path = model_dir("llama")
    llm = vllm.LLM(
        model=path,
        dtype="float32",
        enforce_eager=True,
        tensor_parallel_size=2,
        max_model_len=64,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        kv_cache_memory_bytes=16 << 20,
        seed=0,
    )
    try:
        config = llm.llm_engine.vllm_config
        assert config.parallel_config.tensor_parallel_size == 2
        assert config.parallel_config.distributed_executor_backend == "mp"
        params = vllm.SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, min_tokens=MAX_TOKENS)
        got = [list(o.outputs[0].token_ids) for o in llm.generate(PROMPTS, params)]
    finally:
        llm.llm_engine.engine_core.shutdown()
        del llm
    assert got == hf_greedy(path, PROMPTS, MAX_TOKENS)


def test_host_backed_memory_is_split_between_workers():
    """Two workers on one XLA:CPU host each budget half of the host's share, so the
    default KV caches of both fit together."""
    import torch

    from torch_tpu.serving.device import device_total_memory

    if torch.tpu.get_device_properties(0).platform.lower() not in ("cpu", "host"):
        pytest.skip("a device with its own memory is not split")
    one = device_total_memory(0)
    assert device_total_memory(0, devices_on_host=2) == one // 2


def test_pipeline_parallel_is_refused(model_dir):
    with pytest.raises(NotImplementedError, match="pipeline parallel"):
        vllm.LLM(
            model=model_dir("llama"),
            dtype="float32",
            enforce_eager=True,
            pipeline_parallel_size=2,
            max_model_len=64,
            kv_cache_memory_bytes=16 << 20,
        )
