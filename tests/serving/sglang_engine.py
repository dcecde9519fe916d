"""Helpers for the tests of SGLang's offline API (`sgl.Engine(..., device="tpu")`).

One engine at a time per test process: SGLang's `Engine.shutdown()` kills every child
process of the calling process (`kill_process_tree(os.getpid(), include_parent=False)`),
so it also kills the scheduler of any other live engine; that engine's subprocess
watchdog then sends SIGQUIT, whose handler SIGKILLs the whole test process. A
module-scoped engine therefore lives in a module of its own
(test_sglang_offline.py), and tests that start their own engines live in another
(test_sglang_eager.py).

SGLang runs the model in a scheduler subprocess: its compile counts come back through
the file named by `TORCH_TPU_SGLANG_STATS` (see torch_tpu/serving/sglang/compiled.py)."""

import json
import os

import sglang as sgl

os.environ.setdefault("SGLANG_PLATFORM", "tpu")

MAX_TOKENS = 12


def greedy_params(max_tokens=MAX_TOKENS):
    return {"temperature": 0.0, "max_new_tokens": max_tokens, "min_new_tokens": max_tokens}


def make_engine(path, stats, eager=False, env=None, **kw):
    """An engine on tpu whose scheduler writes its compile counts to `stats`, with `env`
    added to its environment (the scheduler is a subprocess started here; the caller's
    environment is restored after)."""
    env = {
        "TORCH_TPU_SGLANG_STATS": str(stats),
        "TORCH_TPU_SGLANG_EAGER": "1" if eager else "0",
        **(env or {}),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        # chunked_prefill_size 32: the step budget, so token buckets 16 and 32; the
        # prompts of 23 and 30 tokens prefill in chunks when batched with others.
        args = dict(
            model_path=path,
            device="tpu",
            dtype="float32",
            random_seed=0,
            context_length=128,
            max_total_tokens=2048,
            chunked_prefill_size=32,
            max_running_requests=8,
            log_level="warning",
        )
        return sgl.Engine(**{**args, **kw})
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read_stats(path):
    with open(path) as f:
        return json.load(f)
