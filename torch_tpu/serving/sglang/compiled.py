"""Compiled model steps for SGLang on tpu, with a bounded program count.

SGLang's eager runner calls the model's forward once per step; its transformer body
(`model.model`: embeddings, decoder layers, final norm) is where the work is. On tpu
that body runs as one compiled graph per (token bucket, block-table width bucket), or
a few where the model's code breaks Dynamo's graph (Qwen3's layer boundaries):

- the step's tokens are padded to a token bucket (`buckets.token_bucket`, up to the
  most tokens a step can hold) and its attention metadata to a width bucket; the
  attention backend (`attention.py`) describes the padded batch, padding rows write
  to the pool's padding slot and attend to nothing;
- the body runs compiled with backend "tpu", one static step per bucket pair
  (`precompile.SavedSteps`: a server started again with the same configuration loads
  each pair's step instead of tracing it), with a
  stand-in for SGLang's per-step `ForwardBatch`: the same Python object state for
  every step (an extend batch with no per-request fields), so the compiled graph
  depends only on the padded input ids and positions, the batch description and the
  KV cache, never on per-step host data. Decode, prefill and chunked-prefill steps
  of one bucket pair share their program;
- every pair compiles at start-up (or loads from torch_tpu's disk cache), while
  SGLang starts its scheduler, so serving compiles no step program.

The logits of each request's last token and the sampling stay eager ops (their sizes
follow the request count; they compile once per new count and live in the disk cache).

`TORCH_TPU_SGLANG_EAGER=1` keeps the whole model eager (op by op). With
`TORCH_TPU_SGLANG_STATS=<file>`, the scheduler writes its compile counts there (JSON)
after warm-up and after every step, for tests and benchmarks: SGLang runs the model in
a subprocess, out of reach of the caller's `torch_tpu.metrics`."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import logging
import os

import torch
from torch._dynamo.utils import counters
from sglang.srt.model_executor import forward_context as fc
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

from torch_tpu import _settings
from torch_tpu.serving import common
from torch_tpu.serving import paged_attention as pa
from torch_tpu.serving.precompile import SavedSteps, package_dir

logger = logging.getLogger(__name__)

ENV_STATS = "TORCH_TPU_SGLANG_STATS"


def _stand_in_batch() -> ForwardBatch:
    """A ForwardBatch of an extend step with every per-request field unset (None or
    its default): what the compiled body sees instead of the step's own batch."""
    values = {}
    for f in dataclasses.fields(ForwardBatch):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
        else:
            values[f.name] = None
    batch = ForwardBatch(**values)
    batch.forward_mode = ForwardMode.EXTEND
    return batch


def _constant_platform_probes() -> None:
    """SGLang's platform probes (`is_hip()`, `is_musa()`, ...: no arguments, cached with
    lru_cache) are constants for a process. Dynamo ignores lru_cache and traces them,
    and one of them imports a module that is not installed: a graph break in every
    layer. Marked constant, Dynamo calls them once while tracing instead."""
    from sglang.srt.utils import common

    for name, fn in vars(common).items():
        wrapped = getattr(fn, "__wrapped__", None)
        if (
            name.startswith("is_")
            and hasattr(fn, "cache_info")
            and callable(wrapped)
            and not inspect.signature(wrapped).parameters
        ):
            torch.compiler.assume_constant_result(wrapped)


# Server options that change what a step computes, besides the model and the buckets:
# LoRA (on/off, its largest rank and its layers), quantization, speculative decoding.
STEP_OPTIONS = (
    "enable_lora",
    "max_lora_rank",
    "lora_target_modules",
    "quantization",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
)


def _step_config(model_runner, token_buckets, width_buckets) -> str:
    """What shapes a compiled step: the model and its configuration, dtypes, tensor
    parallel size, the buckets and STEP_OPTIONS (not the server's address or other run
    settings)."""
    from sglang.srt.arg_groups.overrides import resolution_result

    args = model_runner.server_args
    return repr(
        (
            "sglang",
            type(model_runner.model).__qualname__,
            model_runner.model_config.hf_config.to_json_string(),
            str(model_runner.dtype),
            str(getattr(model_runner, "kv_cache_dtype", None)),
            model_runner.tp_size,
            token_buckets,
            width_buckets,
            [_canonical(resolution_result(args, name)) for name in STEP_OPTIONS],
        )
    )


def _canonical(value) -> str:
    """`value`'s repr, the same in every process (a set's order is not) and for a set
    or list of the same names (LoRA's layers)."""
    if isinstance(value, (set, frozenset, list)):
        value = sorted(map(str, value))
    return repr(value)


def _bucket_of(args: tuple, kwargs: dict) -> tuple:
    """A compiled step's bucket pair: the padded token count (of the ids) and the
    block-table width of the batch the attention backend describes."""
    return args[0].shape[0], fc.get_attn_backend().batch.token_blocks.shape[1]


class _Placeholder:
    """What a stored step keeps instead of CompiledSteps (see its __reduce__)."""


class _Body:
    """What a compiled step runs: the body's own forward with the stand-in batch."""

    def __init__(self, forward):
        self.forward = forward
        self.template = _stand_in_batch()

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        step = copy.copy(self.template)
        step.input_ids, step.positions = input_ids, positions
        return self.forward(input_ids, positions, step)


class CompiledSteps:
    """Replaces the forward of a model's transformer body with padded, compiled steps
    (see the module docstring); `warm_up()` compiles every bucket pair."""

    def __init__(self, model_runner, backend):
        self.model_runner = model_runner
        self.body = model_runner.model.model
        self.eager_forward = self.body.forward
        self.backend = backend
        self.token_buckets = common.token_buckets(backend.max_tokens)
        self.width_buckets = backend.width_buckets()
        self.context = fc.ForwardContext(attn_backend=backend)
        self._body = _Body(self.eager_forward).run
        # One compiled step per bucket pair, saved for the next server of the same
        # configuration, which loads it instead of tracing (serving/precompile.py).
        self.compiled = SavedSteps(
            self._body,
            package_dir(
                _step_config(model_runner, self.token_buckets, self.width_buckets),
                model_runner.tp_rank,
            ),
            _bucket_of,
            fullgraph=False,
            dynamic=False,
            steady=common.SteadyState(),
        )
        self.compiled.arm()
        self.stats_path = _settings.get(ENV_STATS)
        self.stats = {
            "compiled": True,
            "token_buckets": self.token_buckets,
            "width_buckets": self.width_buckets,
            "steps": 0,
            "eager_steps": 0,
            "step_frames_after_warmup": 0,
            "step_graphs_after_warmup": 0,
            "step_compiles_after_warmup": 0,
        }
        self._after_warmup = None
        _constant_platform_probes()
        common.raise_recompile_limits()

    def _run(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        with fc.forward_context(self.context):
            out = self.compiled(input_ids, positions)
        if not isinstance(out, torch.Tensor):
            raise NotImplementedError(
                f"the model body returns {type(out).__name__}, not one tensor of hidden states"
            )
        return out

    def __reduce__(self):
        # A saved step stores the objects its guards read (serving/precompile.py); the
        # body module is one, and its `forward` attribute is this object, whose compiled
        # callables cannot be stored and which no guard reads: stored as a placeholder.
        return (_Placeholder, ())

    # --- start-up ---------------------------------------------------------------

    def warm_up(self) -> None:
        """Runs the compiled body once per (token bucket, width bucket): a batch of
        padding tokens only (they write to the padding slot and attend to nothing)."""
        from sglang.srt.utils import DynamicGradMode

        count = common.CompileCount()
        frames = counters["stats"]["unique_graphs"]
        device = self.backend.device

        def padding_step(tokens, width, run):
            def zeros(*shape):
                return torch.zeros(*shape, dtype=torch.int64, device=device)

            self.backend.batch = pa.PagedBatch(
                slot_mapping=zeros(tokens),
                token_pos=zeros(tokens) - 1,
                token_blocks=zeros(tokens, width),
                num_tokens=tokens,
                num_actual_tokens=0,
            )
            run(zeros(tokens), zeros(tokens))  # ids and positions: distinct tensors

        # With LoRA, the padding steps apply no adapter (serving/sglang/lora.py).
        lora = getattr(getattr(self.model_runner, "lora_manager", None), "lora_backend", None)
        if hasattr(lora, "prepare_padding"):
            lora.prepare_padding()
        with DynamicGradMode():
            # One eager step first: SGLang's layers resolve their implementation on
            # their first call and cache it, which a compiled graph would guard on.
            with fc.forward_context(self.context):
                padding_step(self.token_buckets[0], self.width_buckets[0], self._body)
            for tokens, width in common.bucket_pairs(self.token_buckets, self.width_buckets):
                padding_step(tokens, width, self._run)
            torch.tpu.synchronize()
        self.backend.batch = None
        counts = count.counts()
        saved = self.compiled.save()
        self.stats.update(
            warmup_loaded_steps=self.compiled.loaded,
            warmup_saved_steps=saved,
            warmup_traced_frames=counters["stats"]["unique_graphs"] - frames,
            warmup_seconds=counts["seconds"],
            warmup_graphs=counts["graphs"],
            warmup_compiles=counts["compiles"],
            warmup_disk_hits=counts["disk_hits"],
            bucket_pairs=len(self.token_buckets) * len(self.width_buckets),
        )
        self._after_warmup = common.CompileCount()
        self.compiled.steady.warmed_up()
        logger.info(
            "tpu warm-up: token buckets %s x block-table widths %s: %d step "
            "graphs; %d programs compiled, %d loaded from the disk cache, in %.1f s",
            self.token_buckets,
            self.width_buckets,
            self.stats["warmup_graphs"],
            self.stats["warmup_compiles"],
            self.stats["warmup_disk_hits"],
            self.stats["warmup_seconds"],
        )
        self._write_stats()

    # --- steps ------------------------------------------------------------------

    def __call__(self, input_ids, positions, forward_batch, *args, **kwargs):
        batch = self.backend.batch
        # input_embeds, pp_proxy_tensors and the like: the eager body handles them.
        if (
            any(a is not None for a in (*args, *kwargs.values()))
            or batch is None
            or fc.get_attn_backend() is not self.backend
            or forward_batch.forward_mode.is_idle()
            or input_ids.shape[0] != batch.num_actual_tokens
        ):
            self.stats["eager_steps"] += 1
            self._write_stats()
            return self.eager_forward(input_ids, positions, forward_batch, *args, **kwargs)
        n, tokens = input_ids.shape[0], batch.num_tokens
        # Input staging (the bucket's slice of SGLang's input buffers) is an eager op,
        # compiled once per token bucket; the step program is what runs in _run.
        ids, pos = _padded(input_ids, tokens), _padded(positions, tokens)
        count = common.CompileCount()
        out = self._run(ids, pos)
        step = count.counts()
        self.stats["steps"] += 1
        if step["frames"] or step["graphs"] or step["compiles"]:
            self.stats["step_frames_after_warmup"] += step["frames"]
            self.stats["step_graphs_after_warmup"] += step["graphs"]
            self.stats["step_compiles_after_warmup"] += step["compiles"]
            logger.warning(
                "tpu: a step of %d tokens (bucket %d, width %d) compiled after warm-up",
                n,
                tokens,
                batch.token_blocks.shape[1],
            )
        if self.stats_path:
            self.stats["compiles_after_warmup"] = self._after_warmup.counts()["compiles"]
            self._write_stats()
        return out[:n]

    def _write_stats(self) -> None:
        if not self.stats_path:
            return
        tmp = f"{self.stats_path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats, f)
        os.replace(tmp, self.stats_path)


def _padded(t: torch.Tensor, rows: int) -> torch.Tensor:
    """`t` ([n] int64) padded to `rows`: when it is a prefix of a longer buffer (SGLang
    stages inputs in fixed buffers), a copy of the buffer's first `rows` entries (one
    program per bucket, not per size); else zero-padded. Padding rows are masked by the
    batch description. Either way a tensor of its own: a slice of a larger buffer would
    be cut by the step program's own input handling, inside the step, with a program
    of its own that warm-up (fresh tensors) never compiles."""
    t = t.to(torch.int64)
    base = pa.base_buffer(t)
    if base.shape[0] >= rows:
        return base[:rows].clone()
    return torch.nn.functional.pad(t, (0, rows - t.shape[0]))


def install(model_runner, backend) -> CompiledSteps | None:
    """Compiles `model_runner`'s model steps (once per runner) unless eager mode is
    asked for; returns the steps, or None when the model stays eager."""
    if common.eager_requested("sglang"):
        _write_eager_stats()
        return None
    existing = getattr(model_runner, "_tpu_compiled_steps", None)
    if existing is not None:
        return existing
    body = getattr(model_runner.model, "model", None)
    if not isinstance(body, torch.nn.Module):
        logger.warning(
            "tpu: %s has no transformer body (`model.model`); it runs eagerly",
            type(model_runner.model).__name__,
        )
        _write_eager_stats()
        return None
    steps = CompiledSteps(model_runner, backend)
    body.forward = steps
    try:
        steps.warm_up()
    except Exception:
        logger.exception(
            "tpu: compiling the steps of %s failed; the model runs eagerly",
            type(model_runner.model).__name__,
        )
        body.forward = steps.eager_forward
        backend.batch = None
        _write_eager_stats()
        return None
    model_runner._tpu_compiled_steps = steps
    return steps


def _write_eager_stats() -> None:
    common.runs_eagerly()
    path = _settings.get(ENV_STATS)
    if path:
        with open(path, "w") as f:
            json.dump({"compiled": False}, f)
