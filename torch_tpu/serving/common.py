"""What the vLLM and SGLang plugins share (engine-free): the eager switch, the refusals,
the layout of linear weights, the bucket rules and the (token, width) pairs a warm-up
runs, compile counting, and compiles after warm-up.

Compiles after warm-up. A compiled engine's warm-up runs its model step once per
(token bucket, block-table width bucket) pair, so every step program exists before the
first request. With TORCH_TPU_NO_COMPILE=1 an engine keeps that promise or fails loudly:
- its start-up (model loading, memory profiling, warm-up) may compile: `start_up()`
  lifts the process-wide ban that TORCH_TPU_NO_COMPILE=1 sets (and Dynamo's
  `error_on_recompile`) where the engine's process starts building it;
- every compiled model step after warm-up (`precompile.SavedSteps`, the step of both
  plugins) runs under `torch_tpu.no_compile()` and Dynamo's "fail_on_recompile" stance
  (`SteadyState.step()`): an XLA compile inside raises a RuntimeError naming the
  program, its types and why it was not cached, and a Dynamo trace (even one whose
  programs load from the disk cache) raises naming the function and its failed
  guards. Programs loaded from the disk cache are not compiles.
The engines' small per-batch eager ops around the step (input staging, the logits of
the sampled rows, sampling, the allocator's bookkeeping) are outside it: they still
compile once per new request or token count (docs/serving.md lists them). An eager
engine (op by op) has no per-bucket warm-up, so nothing is forbidden there (a warning
says so). Without the variable nothing is forbidden; `CompileCount` counts.
"""

from __future__ import annotations

import contextlib
import logging
import time

import torch

from torch_tpu import _settings
from torch_tpu.serving.buckets import MIN_TOKENS, bucket, buckets_up_to

logger = logging.getLogger(__name__)

NO_COMPILE = "TORCH_TPU_NO_COMPILE"


# --- switches and refusals -----------------------------------------------------


def eager_requested(engine: str) -> bool:
    """TORCH_TPU_<ENGINE>_EAGER (`engine`: "vllm" or "sglang"): run the engine's model
    steps op by op instead of compiled."""
    return bool(_settings.get(f"TORCH_TPU_{engine.upper()}_EAGER"))


def refuse_pipeline_parallel(size: int) -> None:
    """Pipeline stages exchange tensor dicts by send/recv on the device group, which
    tensor parallel serving does not use: not validated on tpu."""
    if size > 1:
        raise NotImplementedError(
            "pipeline parallel serving on tpu is not supported yet (tensor parallel is)"
        )


def raise_recompile_limits() -> None:
    """Dynamo sees each bucket pair's step as a recompile of the same forward; its
    default limit (8) is far below that bounded count."""
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, 512)
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, 4096)


# --- weights -------------------------------------------------------------------


def lay_out_linear_weights(model: torch.nn.Module, quant_method: type) -> int:
    """Stores the weight of every plain linear layer of `model` (whose `quant_method` is
    the engine's unquantized one) transposed in memory: the same [out, in] tensor and
    values, its buffer laid out [in, out] (`w.t().contiguous().t()`, as vLLM does on XPU).
    `F.linear(x, w)` then reads the weight as a row-major [in, out] operand, op by op and
    in compiled steps (which take such an input as laid out): XLA:CPU runs that dot
    2-4x faster than against a row-major [out, in] weight for the few rows of a decode
    step (docs/performance.md). Serving's weights do not change after loading. Returns
    how many weights it moved."""
    moved = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if (
            isinstance(getattr(module, "quant_method", None), quant_method)
            and isinstance(weight, torch.Tensor)
            and weight.dim() == 2
            and weight.device.type == "tpu"
            and weight.is_contiguous()
            and min(weight.shape) > 1
        ):
            weight.data = weight.data.t().contiguous().t()
            moved += 1
    return moved


# --- buckets -------------------------------------------------------------------


def token_buckets(max_tokens: int) -> list[int]:
    """Every padded token count of a step of at most `max_tokens` tokens (the
    engine's per-step token budget): powers of two from MIN_TOKENS."""
    return buckets_up_to(max_tokens, MIN_TOKENS)


def width_buckets(max_blocks: int, table_width: int, min_blocks: int = 1) -> list[int]:
    """Every block-table width (in blocks) that `paged_attention.build_batch` picks for
    contexts of up to `max_blocks` blocks, read from a table `table_width` blocks wide
    with `min_blocks` as the smallest width.

    The engines differ in `min_blocks` only, because their blocks differ: vLLM's blocks
    hold 16 tokens (its block size), so its smallest width, one block, is 16 tokens;
    SGLang's pages hold one token (its paged allocator is a Triton kernel, see
    sglang/platform.py), where powers of two from 1 would give a program per width of
    1, 2, 4, ... 32 tokens, so its smallest width is 64 tokens (`sglang.attention.
    MIN_WIDTH`)."""
    lengths = [*buckets_up_to(max_blocks, min_blocks), max_blocks]
    return sorted(
        {bucket(max(n, min_blocks), maximum=table_width) for n in lengths if n <= table_width}
    )


def bucket_pairs(tokens: list[int], widths: list[int], extra_tokens: tuple = ()):
    """The (token count, width) steps a warm-up runs: per width, the token buckets from
    the largest down (the largest step's memory first), then `extra_tokens`."""
    for width in widths:
        for num_tokens in [*reversed(tokens), *extra_tokens]:
            yield num_tokens, width


# --- compiles --------------------------------------------------------------------


class CompileCount:
    """What compiled since it was made: frames Dynamo traced, graph programs built (from
    a trace or a saved step; each is an XLA compile or a disk-cache load), XLA programs
    compiled, programs loaded from the disk cache, and the seconds."""

    def __init__(self):
        import torch_tpu

        self._metrics = torch_tpu.metrics
        self.start = time.perf_counter()
        self.before = self._metrics.snapshot()
        self.frames = _traced_frames()

    def counts(self) -> dict:
        now = self._metrics.snapshot()
        return {
            "frames": _traced_frames() - self.frames,
            "graphs": now["graphs"] - self.before["graphs"],
            "compiles": now["compiles"] - self.before["compiles"],
            "disk_hits": now["disk_hits"] - self.before["disk_hits"],
            "seconds": round(time.perf_counter() - self.start, 2),
        }


def _traced_frames() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


# Whether start_up() lifted TORCH_TPU_NO_COMPILE's process-wide ban in this process.
_lifted = False


def start_up() -> None:
    """Called where an engine's process starts building the engine (before its first
    device op): with TORCH_TPU_NO_COMPILE=1, lifts the ban it set on the whole process,
    so the engine can load, profile and warm up; its steps are forbidden to compile
    again once it has warmed up (SteadyState). Idempotent."""
    global _lifted
    from torch_tpu import _C

    if _lifted or not _settings.get(NO_COMPILE):
        return
    if _C._compiles_forbidden():
        _C._allow_compiles()
    torch._dynamo.config.error_on_recompile = False
    _lifted = True


def runs_eagerly() -> None:
    """Called when an engine's model will run eagerly: says that TORCH_TPU_NO_COMPILE=1,
    if set, forbids nothing there."""
    if _settings.get(NO_COMPILE):
        logger.warning(
            "tpu: TORCH_TPU_NO_COMPILE=1 forbids compiles in compiled model "
            "steps after warm-up; this engine runs its model eagerly, op by "
            "op, so its steps may compile"
        )


class SteadyState:
    """An engine's serving after its warm-up: `warmed_up()` marks its end, `step()` is
    the context every serving step runs in (`torch_tpu.no_compile()` once warmed up,
    when TORCH_TPU_NO_COMPILE=1 is set; nothing otherwise)."""

    def __init__(self):
        self.warm = False

    def warmed_up(self, compiled: bool = True) -> None:
        """The warm-up is over; `compiled`: whether the engine's model steps are
        compiled per bucket (an eager engine's run op by op, at every size they meet, so
        nothing is forbidden there)."""
        self.warm = compiled
        if not compiled:
            runs_eagerly()

    def forbidding(self) -> bool:
        return self.warm and bool(_settings.get(NO_COMPILE))

    def step(self):
        """Forbids, once warmed up with TORCH_TPU_NO_COMPILE=1, both an XLA compile
        (`torch_tpu.no_compile()`) and a Dynamo trace (the stance "fail_on_recompile":
        a frame that misses Dynamo's cache raises naming the function and the guards
        that failed). A warm start loads its programs from the disk cache, so a trace
        there compiles nothing and only the stance catches it."""
        if not self.forbidding():
            return contextlib.nullcontext()
        import torch_tpu

        stack = contextlib.ExitStack()
        stack.enter_context(torch_tpu.no_compile())
        stack.enter_context(torch.compiler.set_stance("fail_on_recompile"))
        return stack
