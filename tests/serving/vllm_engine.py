"""The tiny engine of vLLM's offline tests (`vllm.LLM` on tpu, its engine core in the
test's process): small buckets keep the warm-up short (token buckets 16, 32, 64;
widths of 1, 2, 4 blocks) and a 16 MiB KV cache keeps it small."""

import os

import vllm

# The engine core runs in this process, so torch_tpu.metrics sees its compiles.
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

def make_llm(path, eager, kv_bytes=16 << 20, **kw):
    args = dict(
        model=path,
        dtype="float32",
        enforce_eager=eager,
        max_model_len=64,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        kv_cache_memory_bytes=kv_bytes,
        seed=0,
    )
    return vllm.LLM(**{**args, **kw})
