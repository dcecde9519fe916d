"""vLLM's offline API on tpu: nothing tpu-specific in the code, the torch_tpu plugin
makes `tpu` vLLM's device. Run it in a venv with vLLM (see README, "Serving"):

    python examples/serving/offline.py [MODEL_DIR]

Without MODEL_DIR it writes a tiny random-weight Llama first (no downloads)."""

import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from vllm import LLM, SamplingParams  # noqa: E402

from tiny_model import make_tiny_model  # noqa: E402


def main() -> None:
    path = (
        sys.argv[1]
        if len(sys.argv) > 1
        else str(make_tiny_model(tempfile.mkdtemp(prefix="tiny-llama-")))
    )
    # The warm-up compiles one step program per (token bucket, block-table width
    # bucket): small limits keep it to 20 programs.
    llm = LLM(
        model=path,
        dtype="float32",
        max_model_len=128,
        max_num_batched_tokens=128,
        kv_cache_memory_bytes=64 << 20,
    )
    prompts = ["Hello, how are you?", "The quick brown fox"]
    for out in llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=16)):
        print(repr(out.prompt), "->", repr(out.outputs[0].text))
    chat = llm.chat(
        [{"role": "user", "content": "Hello!"}],
        SamplingParams(temperature=0.8, top_p=0.9, seed=0, max_tokens=16),
    )
    print("chat ->", repr(chat[0].outputs[0].text))


if __name__ == "__main__":
    main()
