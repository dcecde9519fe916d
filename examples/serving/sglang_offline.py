"""SGLang's offline API on tpu: `device="tpu"` is the only tpu-specific word, the
torch_tpu plugin makes `tpu` SGLang's device. Run it in a venv with SGLang (see
docs/serving.md):

    python examples/serving/sglang_offline.py [MODEL_DIR]

Without MODEL_DIR it writes a tiny random-weight Llama first (no downloads)."""

import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("SGLANG_PLATFORM", "tpu")

from tiny_model import make_tiny_model  # noqa: E402


def main() -> None:
    import sglang as sgl

    path = (
        sys.argv[1]
        if len(sys.argv) > 1
        else str(make_tiny_model(tempfile.mkdtemp(prefix="tiny-llama-")))
    )
    llm = sgl.Engine(
        model_path=path,
        device="tpu",
        dtype="float32",
        context_length=128,
        max_total_tokens=4096,
        log_level="warning",
    )
    prompts = ["Hello, how are you?", "The quick brown fox"]
    greedy = {"temperature": 0.0, "max_new_tokens": 16}
    for prompt, out in zip(prompts, llm.generate(prompts, greedy)):
        print(repr(prompt), "->", repr(out["text"]))
    sampled = llm.generate(
        "Once upon a time", {"temperature": 0.8, "top_p": 0.9, "max_new_tokens": 16}
    )
    print("sampled ->", repr(sampled["text"]))
    llm.shutdown()


if __name__ == "__main__":  # SGLang starts its processes by spawn
    main()
