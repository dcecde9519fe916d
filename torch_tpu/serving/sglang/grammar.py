"""SGLang's xgrammar backend (structured output) on tpu.

SGLang's xgrammar grammars apply their token bitmask with a Triton kernel (CUDA, XPU,
MUSA), an NPU op or xgrammar's CPU kernel, and raise "Unsupported device" for any
other device: a constrained request on tpu would stop the scheduler. Here the same
backend (xgrammar's compiler and matchers, SGLang's dispatch) applies the mask with
plain tensor ops on the device, and enters SGLang through its public registry of
custom grammar backends (`register_grammar_backend`, consulted before the built-in
names) under the name `xgrammar`, in the processes where the tpu platform is active.

The bitmask is xgrammar's: int32 words, bit j of word i allows token 32 * i + j."""

from __future__ import annotations

import torch

_SHIFTS: dict[torch.device, torch.Tensor] = {}


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Sets to -inf, in place, every logit whose token the bitmask does not allow
    (rows: requests; tokens past the bitmask's width or the logits' are left alone,
    as xgrammar's own kernels do)."""
    shifts = _SHIFTS.get(logits.device)
    if shifts is None:
        shifts = _SHIFTS[logits.device] = torch.arange(32, dtype=torch.int32, device=logits.device)
    rows = bitmask.shape[0]
    n = min(logits.shape[-1], bitmask.shape[-1] * 32)
    bits = (bitmask.to(logits.device, torch.int32).unsqueeze(-1) >> shifts) & 1
    allowed = bits.reshape(rows, -1)[:, :n].bool()
    logits[:rows, :n].masked_fill_(~allowed, float("-inf"))


def register_backend() -> None:
    """Makes the tpu xgrammar backend SGLang's `xgrammar` grammar backend;
    idempotent."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend("xgrammar", _make_backend)


def _classes():
    from sglang.srt.constrained.xgrammar_backend import (
        XGrammarGrammar,
        XGrammarGrammarBackend,
    )

    class TpuXGrammarGrammar(XGrammarGrammar):
        def apply_vocab_mask(self, logits, vocab_mask) -> None:
            apply_token_bitmask(logits, vocab_mask)

        def copy(self):
            grammar = super().copy()
            grammar.__class__ = TpuXGrammarGrammar
            return grammar

    class TpuXGrammarBackend(XGrammarGrammarBackend):
        @staticmethod
        def apply_vocab_mask(logits, vocab_mask) -> None:
            apply_token_bitmask(logits, vocab_mask)

        def _from_context(self, ctx, key_string, grammar_stats):
            grammar = super()._from_context(ctx, key_string, grammar_stats)
            grammar.__class__ = TpuXGrammarGrammar
            return grammar

    return TpuXGrammarBackend


def _make_backend(server_args, tokenizer, vocab_size, eos_token_ids):
    """What SGLang builds for `xgrammar` (its settings from the serving context), with
    the mask applied on tpu. A tokenizer xgrammar cannot read is refused here, at
    start-up, as SGLang's own strict mode does (not silently turned into `none`)."""
    from sglang.srt.runtime_context import get_serving

    serving = get_serving()
    return _classes()(
        tokenizer,
        vocab_size=vocab_size,
        model_eos_token_ids=list(eos_token_ids) if eos_token_ids else None,
        any_whitespace=not serving.constrained_json_disable_any_whitespace,
        max_whitespace_cnt=serving.constrained_json_max_whitespace_cnt,
    )
