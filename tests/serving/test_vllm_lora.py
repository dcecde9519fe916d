"""vLLM's LoRA on tpu (torch_tpu/serving/vllm/lora.py: the platform's punica wrapper,
whose token-to-adapter mapping has the step's padded bucket size): two adapters and the
base model in one batch give Hugging Face's tokens for the merged weights on the CPU,
compiled and eager; with TORCH_TPU_NO_COMPILE=1 after warm-up, a third adapter (evicting
one of `max_loras=2`) serves with its own HF tokens and no step traced or built."""

import pytest

vllm = pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)

import torch_tpu  # noqa: E402
import vllm_engine  # noqa: E402
from conftest import PROMPTS  # noqa: E402
from lora_adapters import hf_greedy_lora, make_adapter  # noqa: E402

MAX_TOKENS = 12


def make_llm(path, eager):
    return vllm_engine.make_llm(path, eager, enable_lora=True, max_lora_rank=8, max_loras=2)


@pytest.fixture(scope="module")
def adapters(model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-lora")
    path = model_dir("llama")
    seeds = {"a": 1, "b": 2, "c": 3}
    return path, {n: make_adapter(path, root / n, seed) for n, seed in seeds.items()}


def generate(llm, adapters, names, prompts):
    from vllm.lora.request import LoRARequest

    ids = {"a": 1, "b": 2, "c": 3}
    requests = [LoRARequest(n, ids[n], adapters[n]) if n else None for n in names]
    params = vllm.SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, min_tokens=MAX_TOKENS)
    outs = llm.generate(prompts, params, lora_request=requests, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def expected(path, adapters, names, prompts):
    want = {n: hf_greedy_lora(path, adapters.get(n), prompts, MAX_TOKENS) for n in set(names)}
    return [want[n][i] for i, n in enumerate(names)]


@pytest.fixture(scope="module")
def compiled(adapters):
    llm = make_llm(adapters[0], eager=False)
    yield llm
    del llm


def test_multi_lora_batch_matches_hf(adapters, compiled):
    path, paths = adapters
    names = ["a", "b", None, "a", "b"]
    want = expected(path, paths, names, PROMPTS)
    base = expected(path, paths, [None] * 5, PROMPTS)
    assert want[0] != base[0] and want[1] != base[1]  # the adapters change the tokens
    assert generate(compiled, paths, names, PROMPTS) == want


def test_new_adapter_compiles_no_step(adapters, compiled, monkeypatch):
    from torch._dynamo.utils import counters

    path, paths = adapters
    monkeypatch.setenv("TORCH_TPU_NO_COMPILE", "1")  # a trace or compile in a step raises
    core = compiled.llm_engine.engine_core.engine_core  # in this process
    assert core.model_executor.driver_worker.worker.model_runner.steady.forbidding()
    before = torch_tpu.metrics.snapshot()["graphs"], counters["stats"]["unique_graphs"]
    names = ["c", None, "a"]
    assert generate(compiled, paths, names, PROMPTS[:3]) == expected(
        path, paths, names, PROMPTS[:3]
    )
    assert (torch_tpu.metrics.snapshot()["graphs"], counters["stats"]["unique_graphs"]) == before


def test_eager_lora_matches_hf(adapters):
    path, paths = adapters
    llm = make_llm(path, eager=True)
    names = ["b", None]
    got = generate(llm, paths, names, PROMPTS[:2])
    del llm
    assert got == expected(path, paths, names, PROMPTS[:2])
