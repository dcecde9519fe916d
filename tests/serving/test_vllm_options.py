"""vLLM options the tpu platform cannot serve yet are refused when the engine's
configuration is built (`LLM(...)`, `vllm serve`: vLLM's config validation runs the
platform's hooks), with an error naming the option, instead of failing while the
engine builds its model or in its first steps (torch_tpu/serving/vllm/platform.py)."""

import re

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)


@pytest.mark.parametrize(
    "options,message",
    [
        (
            {"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}},
            "speculative decoding (method='ngram') is not supported on tpu yet",
        ),
        (
            {"dtype": "bfloat16", "quantization": "fp8"},
            "quantization='fp8' is not supported on tpu yet; serve an unquantized checkpoint",
        ),
    ],
    ids=["speculative", "quantization"],
)
def test_refused_when_configured(model_dir, options, message):
    """What the platform cannot serve yet is refused when the engine's configuration
    is built (LLM(...), vllm serve), naming the option."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=model_dir("llama"), dtype="float32", max_model_len=64)
    for name, value in options.items():
        setattr(args, name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        args.create_engine_config()
