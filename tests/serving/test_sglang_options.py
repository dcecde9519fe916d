"""SGLang options on tpu: every backend option either works or is refused when the
server's arguments are resolved (before any process starts), with an error naming the
option and what works (torch_tpu/serving/sglang/platform.py). No option a user can set
stops a running server.

- Refusals and defaults: SGLang's own argument resolution (`ServerArgs.resolve_once`,
  what `sgl.Engine` and `launch_server` run first), no engine.
- What works, in one compiled engine under TORCH_TPU_NO_COMPILE=1 (one engine at a
  time: see sglang_engine.py): LoRA with SGLang's default backend (csgmv, a Triton
  kernel, becomes torch_native on tpu: torch_tpu's per-token backend, sglang/lora.py),
  two adapters and the base model in one batch, each with HF's tokens for the merged
  weights, and no step traced after warm-up; structured output with
  `grammar_backend="xgrammar"` (its token bitmask applied with tensor ops on tpu,
  grammar.py): outputs match their regexes and equal HF's greedy tokens under
  xgrammar's own mask on the CPU. LoRA on the LM head is refused by name."""

import importlib.util
import re

import pytest
import torch

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)

from conftest import PROMPTS  # noqa: E402
from lora_adapters import hf_greedy_lora, make_adapter  # noqa: E402
from sglang_engine import MAX_TOKENS, greedy_params, make_engine, read_stats  # noqa: E402


def resolve(model, **kw):
    """The resolved value of each option SGLang's resolution sets on tpu."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(model_path=model, device="tpu", **kw)
    args.resolve_once()
    return {
        f: resolution_result(args, f)
        for f in ("attention_backend", "sampling_backend", "grammar_backend", "lora_backend")
    }


def test_defaults_on_tpu(model_dir):
    assert resolve(model_dir("llama"), lora_paths=["unused=/nonexistent"]) == {
        "attention_backend": "torch_native",
        "sampling_backend": "pytorch",
        "grammar_backend": "none",
        "lora_backend": "torch_native",  # SGLang's default, csgmv, is a Triton kernel
    }
    chosen = resolve(model_dir("llama"), grammar_backend="xgrammar", lora_backend="torch_native")
    assert (chosen["grammar_backend"], chosen["lora_backend"]) == ("xgrammar", "torch_native")


NOT_ON_TPU = "{}={!r} is not supported on tpu; use {!r}"
REFUSED = [
    ({o: v}, NOT_ON_TPU.format(o, v, works))
    for o, v, works in (
        ("attention_backend", "triton", "torch_native"),
        ("prefill_attention_backend", "flashinfer", "torch_native"),
        ("decode_attention_backend", "fa3", "torch_native"),
        ("sampling_backend", "flashinfer", "pytorch"),
        ("lora_backend", "triton", "torch_native"),
    )
] + [
    ({"speculative_algorithm": "NGRAM"}, "speculative_algorithm='NGRAM' is not supported on tpu"),
    (
        {"grammar_backend": "xgrammar", "reasoning_parser": "qwen3"},
        "grammar_backend='xgrammar' with reasoning_parser is not supported on tpu; "
        "use grammar_backend='llguidance'",
    ),
]
if importlib.util.find_spec("outlines") is None:
    REFUSED.append(
        ({"grammar_backend": "outlines"}, "grammar_backend='outlines' needs the outlines package")
    )


@pytest.mark.parametrize("options,message", REFUSED, ids=[",".join(o) for o, _ in REFUSED])
def test_refused_at_start_up(model_dir, options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve(model_dir("llama"), **options)


@pytest.fixture(scope="module")
def engine(model_dir, tmp_path_factory):
    """LoRA (SGLang's default backend, two adapters) and xgrammar in one engine."""
    path = model_dir("llama")
    root = tmp_path_factory.mktemp("sglang-options")
    adapters = {n: make_adapter(path, root / n, seed) for n, seed in (("a", 1), ("b", 2))}
    llm = make_engine(
        path,
        root / "stats.json",
        env={"TORCH_TPU_NO_COMPILE": "1"},  # a trace or compile after warm-up raises
        lora_paths=[f"{name}={p}" for name, p in adapters.items()],
        max_lora_rank=8,
        max_loras_per_batch=3,
        grammar_backend="xgrammar",
    )
    yield llm, path, adapters, root / "stats.json"
    llm.shutdown()


def test_lora_default_backend_multi_adapter(engine):
    """Five prompts in one batch: adapter a, adapter b, the base model, a, b."""
    llm, path, adapters, stats = engine
    names = ["a", "b", None, "a", "b"]
    got = [o["output_ids"] for o in llm.generate(PROMPTS, greedy_params(), lora_path=names)]
    want = {
        n: hf_greedy_lora(path, adapters.get(n), PROMPTS, MAX_TOKENS) for n in set(names)
    }
    assert want["a"] != want[None] and want["b"] != want[None]  # the adapters matter
    assert got == [want[name][i] for i, name in enumerate(names)]
    # The steps ran compiled (LoRA per token, sglang/lora.py), none traced after warm-up.
    after = read_stats(stats)
    assert after["compiled"] and after["steps"] > 0 and after["eager_steps"] == 0
    assert (after["step_frames_after_warmup"], after["step_graphs_after_warmup"]) == (0, 0)


def test_lora_on_lm_head_is_refused():
    """The tpu LoRA backend refuses layers it has no per-token path for, by name."""
    import torch

    from torch_tpu.serving.sglang.lora import TpuLoRABackend

    backend = TpuLoRABackend(max_loras_per_batch=2, device=torch.device("tpu"))
    backend.validate_lora_targets(None, {"q_proj", "down_proj"})
    with pytest.raises(ValueError, match="LoRA on lm_head is not supported on tpu"):
        backend.validate_lora_targets(None, {"lm_head", "q_proj"})


def hf_constrained(path, prompt, regex, max_new_tokens):
    """HF greedy tokens on the CPU with xgrammar's own mask for `regex` (its matcher
    and CPU kernel), up to the end of the match (EOS not included)."""
    import xgrammar as xgr
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    info = xgr.TokenizerInfo.from_huggingface(
        tok, vocab_size=vocab, stop_token_ids=[tok.eos_token_id]
    )
    matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_regex(regex))
    ids, out = tok(prompt).input_ids, []
    for _ in range(max_new_tokens):
        mask = xgr.allocate_token_bitmask(1, vocab)
        matcher.fill_next_token_bitmask(mask)
        with torch.no_grad():
            logits = model(torch.tensor([ids + out])).logits[:, -1].clone()
        xgr.apply_token_bitmask_inplace(logits, mask)
        token = int(logits.argmax())
        if token == tok.eos_token_id:
            break
        assert matcher.accept_token(token)
        out.append(token)
    return out


def test_xgrammar_regex(engine):
    """Two regexes (three choices; three digits): the output matches, and its tokens
    equal HF's greedy tokens under xgrammar's mask computed on the CPU."""
    llm, path, _, _ = engine
    prompt = PROMPTS[1]
    regexes = ["(red apple|green pear|blue plum)", "[0-9]{3}"]
    params = [{"temperature": 0.0, "max_new_tokens": 16, "regex": r} for r in regexes]
    out = llm.generate([prompt] * len(regexes), params)
    for o, regex in zip(out, regexes):
        assert re.fullmatch(regex, o["text"]), o["text"]
        want = hf_constrained(path, prompt, regex, 16)
        assert o["output_ids"][: len(want)] == want
