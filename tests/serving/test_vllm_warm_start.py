"""A compiled vLLM engine started again with the same configuration loads each bucket's
model step saved by the first (torch_tpu/serving/precompile.py): no Dynamo frame, no
AOTAutograd trace and no XLA compile in the second engine's start and first requests,
the same tokens as Hugging Face on the CPU; a corrupt saved step is ignored with a
warning and traced again. Each engine runs in a fresh process with the test's own
cache directories."""

import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS, hf_greedy  # noqa: E402

MAX_TOKENS = 8

ENGINE = """
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
import torch, torch_tpu, vllm
from torch._dynamo.utils import counters
llm = vllm.LLM(model={path!r}, dtype="float32", max_model_len=64, max_num_seqs=8,
               max_num_batched_tokens=64, kv_cache_memory_bytes=16 << 20, seed=0)
params = vllm.SamplingParams(temperature=0.0, max_tokens={n}, min_tokens={n})
out = llm.generate({prompts!r}, params, use_tqdm=False)
print(json.dumps(dict(tokens=[list(o.outputs[0].token_ids) for o in out],
                      frames=counters["stats"]["unique_graphs"],
                      aot_traces=counters["aot_autograd"]["total"],
                      compiles=torch_tpu.metrics.snapshot()["compiles"])))
"""


def start_engine(path, cache):
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "TORCH_TPU_CACHE_DIR": str(cache / "tpu"),
        "HF_HUB_OFFLINE": "1",
    }
    r = subprocess.run(
        [sys.executable, "-c", ENGINE.format(path=path, n=MAX_TOKENS, prompts=PROMPTS[:3])],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-5000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # The runner's log line after warm-up: "tpu warm start: L step buckets loaded, S saved"
    found = re.search(
        r"tpu warm start: (\d+) step buckets loaded, (\d+) saved", r.stdout + r.stderr
    )
    assert found, r.stderr[-5000:]
    out["loaded"], out["saved"] = int(found[1]), int(found[2])
    return out, r.stderr


def test_second_engine_traces_nothing(model_dir, tmp_path):
    path = model_dir("llama")
    cold, _ = start_engine(path, tmp_path)
    assert cold["saved"] > 0 and cold["loaded"] == 0
    warm, _ = start_engine(path, tmp_path)
    assert (warm["loaded"], warm["saved"]) == (cold["saved"], 0)
    assert (warm["frames"], warm["aot_traces"], warm["compiles"]) == (0, 0, 0)
    expected = hf_greedy(path, PROMPTS[:3], MAX_TOKENS)
    assert cold["tokens"] == expected and warm["tokens"] == expected

    # A saved step that cannot be read is ignored with a warning, the rest load; its
    # bucket is traced again (or runs a loaded entry whose dynamic shapes cover it).
    entries = sorted((tmp_path / "inductor" / "tpu_steps").rglob("entry"))
    assert len(entries) == cold["saved"]
    entries[0].write_bytes(b"not a saved step")
    again, log = start_engine(path, tmp_path)
    assert "cannot be used" in log
    assert again["loaded"] == cold["saved"] - 1 and again["frames"] == again["saved"] <= 1
    assert again["tokens"] == expected


def test_saved_step_key_covers_what_changes_the_step(model_dir, monkeypatch):
    """Engines whose steps differ save them apart (`model_runner.steps_dir`): LoRA on
    and its largest rank, quantization, speculative decoding and the pooling runner
    each give another directory; the same configuration gives the same one. (The
    platform refuses quantization and speculative decoding for now: let through here.)"""
    from vllm.engine.arg_utils import EngineArgs

    from torch_tpu.serving.vllm import platform
    from torch_tpu.serving.vllm.model_runner import steps_dir

    monkeypatch.setattr(platform, "refuse_unsupported", lambda config: None)
    monkeypatch.setattr(
        platform.TpuPlatform, "verify_quantization", classmethod(lambda cls, quant: None)
    )

    def key(**kw):
        args = dict(model=model_dir("llama"), dtype="float32", max_model_len=64)
        return steps_dir(EngineArgs(**{**args, **kw}).create_engine_config())

    ngram = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}
    keys = [
        key(),
        key(enable_lora=True),
        key(enable_lora=True, max_lora_rank=32),
        key(speculative_config=ngram),
        key(runner="pooling"),
        key(dtype="bfloat16"),
        key(dtype="bfloat16", quantization="fp8"),
    ]
    assert len(set(keys)) == len(keys)
    assert key() == keys[0]

