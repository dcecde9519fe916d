#!/usr/bin/env python3
"""OpInfo conformance of the `tpu` device against CPU PyTorch.

For every selected OpInfo of `torch.testing._internal.common_methods_invocations.op_db`
and every sample input (`op.sample_inputs('cpu', dtype)`) over the dtypes both the device
and the op support on CPU, the op runs on CPU and on tpu (the same sample moved with
`.to('tpu')`), the outputs are compared, and each sample gets one status:

  match     outputs equal within the dtype's tolerance (TOLERANCES)
  mismatch  tpu ran but its output differs (value, shape, dtype, structure or device)
  error     tpu raised while CPU worked
  crash     the worker process died (or the op exceeded its timeout) on this sample
  skip      CPU itself raised: the sample is not valid, so it is not counted

The CPU fallback is on, and the fallback counters of `torch_tpu.metrics` are read before
and after each sample: a match with no fallback is a *native* match. Headline numbers,
over the samples that are not skipped:

  match rate        = match / samples
  native match rate = native match / samples

With --compile, tpu runs each sample through `torch.compile(lambda *a, **k: op(*a, **k),
backend="tpu", dynamic=False)` (a fresh Dynamo cache per sample), still against CPU eager.
A sample during which a graph ran op by op (`graph_fallbacks` of `torch_tpu.metrics`) is
not native; the backend's reasons are recorded per op, and `no_graph` counts samples that
ran no compiled program. --write-docs keeps these runs in the page's "Compiled mode"
section, apart from the eager ones.

Ops run in worker subprocesses, one op after another; when a worker dies the parent
counts a crash for the sample in progress, starts a fresh worker and resumes the op after
that sample. Sample generation is seeded per (op, dtype) so a fresh worker regenerates
the same samples.

Usage (from the repository root, with a built torch_tpu importable):
  python tools/opinfo_conformance.py                  # the issue set
  python tools/opinfo_conformance.py --subset ci      # the pinned CI subset
  python tools/opinfo_conformance.py --all            # the whole op_db
  python tools/opinfo_conformance.py --ops sum,nn.functional.gelu --dtypes float32
  python tools/opinfo_conformance.py --subset ci --compile --max-samples 5
  ... --json report.json --write-docs docs/conformance.md --grad --timeout 300
"""

import argparse
import collections
import contextlib
import datetime
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
import warnings

import torch
import torch_tpu

# Families of issue 3 ("Native eager mode") mapped to OpInfo names (name.variant).
ISSUE_FAMILIES = {
    "unary": [
        "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
        "erf", "abs", "neg", "sign", "floor", "ceil", "round", "reciprocal",
    ],
    "binary": [
        "add", "sub", "mul", "div.no_rounding_mode", "div.trunc_rounding",
        "div.floor_rounding", "pow", "remainder", "fmod", "maximum", "minimum", "atan2",
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
        "bitwise_right_shift", "logical_and", "logical_or", "logical_xor", "logical_not",
    ],
    "comparison": ["eq", "ne", "lt", "le", "gt", "ge"],
    "ternary": ["where", "clamp", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv"],
    "activation": [
        "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
        "nn.functional.softplus", "nn.functional.leaky_relu", "nn.functional.elu",
        "nn.functional.hardtanh", "nn.functional.mish",
    ],
    "reduction": [
        "sum", "mean", "prod", "max.reduction_no_dim", "max.reduction_with_dim",
        "min.reduction_no_dim", "min.reduction_with_dim", "argmax", "argmin", "amax",
        "amin", "var", "std", "logsumexp", "norm", "linalg.vector_norm", "cumsum",
        "cumprod", "any", "all",
    ],
    "softmax": ["softmax", "log_softmax", "_softmax_backward_data"],
    "loss": [
        "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
        "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits", "nn.functional.smooth_l1_loss",
    ],
    "matmul": [
        "mm", "bmm", "addmm", "baddbmm", "addmv", "matmul", "nn.functional.linear", "einsum",
    ],
    "conv_pool_upsample": [
        "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
        "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
        "nn.functional.conv_transpose3d", "nn.functional.max_pool1d",
        "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.avg_pool1d",
        "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
        "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d",
        "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d",
        "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d",
        "nn.functional.interpolate.nearest", "nn.functional.interpolate.bilinear",
        "nn.functional.upsample_nearest", "nn.functional.upsample_bilinear",
    ],
    "norm": [
        "native_batch_norm", "nn.functional.batch_norm", "native_layer_norm",
        "nn.functional.layer_norm", "native_group_norm", "nn.functional.group_norm",
        "nn.functional.rms_norm",
    ],
    "indexing": [
        "nn.functional.embedding", "nn.functional.embedding_bag", "index_select", "gather",
        "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod",
        "scatter_reduce.mean", "scatter_reduce.amax", "scatter_reduce.amin", "__getitem__",
        "index_put", "masked_fill", "masked_select", "nonzero",
    ],
    "shape": [
        "cat", "stack", "split", "chunk", "narrow", "nn.functional.pad.constant",
        "nn.functional.pad.reflect", "nn.functional.pad.replicate", "repeat", "expand",
        "permute", "transpose", "flip", "roll", "tril", "triu", "unfold",
    ],
    "factory": [
        "arange", "full", "zeros", "ones", "eye", "linspace", "zeros_like", "ones_like",
        "full_like", "scalar_tensor",
    ],
    "sort": ["sort", "argsort", "topk"],
    "attention": ["nn.functional.scaled_dot_product_attention"],
    "random": [
        "rand_like", "randn", "randn_like", "randint", "randint_like", "uniform", "normal",
        "bernoulli", "multinomial", "nn.functional.dropout",
    ],
}
ISSUE_SET = [name for names in ISSUE_FAMILIES.values() for name in names]

# Pinned CI subset: ops from most families with few samples each, so the sweep is quick.
CI_SUBSET = [
    "exp", "sqrt", "sigmoid", "abs", "floor", "add", "mul", "div.no_rounding_mode",
    "maximum", "eq", "lt", "logical_not", "where", "clamp", "lerp", "nn.functional.relu",
    "nn.functional.silu", "sum", "mean", "amax", "argmax", "any", "cumsum", "softmax",
    "nn.functional.mse_loss", "mm", "bmm", "addmm", "nn.functional.linear",
    "nn.functional.layer_norm", "index_select", "gather", "masked_fill", "cat",
    "permute", "transpose", "flip", "zeros", "full", "sort",
]

# Outputs that cannot be compared with CPU: random numbers from another generator, and
# uninitialized memory. Their samples are compared by structure, shape and dtype only, as
# are samples of any op with a positive `dropout_p` keyword.
NONDETERMINISTIC = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
    "normal", "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn",
    "randn_like", "randint", "randint_like", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank", "empty", "empty_like", "empty_strided",
    "empty_permuted", "new_empty", "new_empty_strided", "resize_", "resize_as_",
}

DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "bool"]

# (rtol, atol) by output dtype: torch.testing.assert_close's defaults, except the atol of
# the half types, raised as OpInfo tests' toleranceOverride usually does: the device and
# CPU round intermediate results at different points, which shows near zero (cancellation).
# Integer and bool outputs must be equal.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "complex128": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
}

STATUSES = ("match", "mismatch", "error", "crash", "skip")
MAX_CRASHES_PER_OP = 3
DETAIL_CHARS = 300


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# --------------------------------------------------------------------------- worker side

def _to_tpu(value, grad_leaves, pinned=frozenset(), path=()):
    """A copy of a sample's argument with every tensor on tpu and every 'cpu' device on
    tpu; CPU leaves that require grad get tpu leaves that do, paired in grad_leaves.
    Tensors at the paths in `pinned` (see _cpu_pinned) stay on CPU, as a user passes
    them."""
    if isinstance(value, torch.Tensor):
        if path in pinned:
            return value
        if value.requires_grad and value.is_leaf:
            moved = value.detach().to("tpu").requires_grad_(True)
            grad_leaves.append((value, moved))
            return moved
        return value.to("tpu")
    if isinstance(value, torch.device) and value.type == "cpu":
        return torch.device("tpu")
    if isinstance(value, list):
        return [_to_tpu(v, grad_leaves, pinned, path + (i,)) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(_to_tpu(v, grad_leaves, pinned, path + (i,)) for i, v in enumerate(value))
    if isinstance(value, dict):
        return {k: ("tpu" if k == "device" and isinstance(v, str) and v == "cpu"
                    else _to_tpu(v, grad_leaves, pinned, path + (k,))) for k, v in value.items()}
    return value


def _tensor_paths(value, path=()):
    """{path: tensor} of the tensors in a sample argument (paths as _to_tpu builds them)."""
    if isinstance(value, torch.Tensor):
        return {path: value}
    items = (enumerate(value) if isinstance(value, (list, tuple))
             else value.items() if isinstance(value, dict) else ())
    found = {}
    for k, v in items:
        found.update(_tensor_paths(v, path + (k,)))
    return found


def _sample_tensors(sample):
    return _tensor_paths({"input": sample.input, "args": sample.args, "kwargs": sample.kwargs})


def _cpu_pinned(cpu_sample, meta_sample):
    """The paths of the tensors the sample generator puts on CPU even when asked for
    another device (tensor_split's `tensor_indices_or_sections`, which PyTorch requires on
    CPU): the device copy keeps them there. Found by generating the same samples for the
    meta device; empty where the two samples do not line up, and where the generator
    leaves the input itself on CPU (it ignores the device: nothing is pinned then)."""
    if meta_sample is None:
        return frozenset()
    cpu, meta = _sample_tensors(cpu_sample), _sample_tensors(meta_sample)
    if cpu.keys() != meta.keys():
        return frozenset()
    inputs = [t for path, t in meta.items() if path[0] == "input"]
    if not inputs or any(t.device.type != "meta" for t in inputs):
        return frozenset()
    return frozenset(path for path, t in meta.items()
                     if t.device.type == "cpu" and cpu[path].shape == t.shape)


def _has_tpu_tensor(value) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == "tpu"
    if isinstance(value, (list, tuple)):
        return any(_has_tpu_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tpu_tensor(v) for v in value.values())
    if isinstance(value, torch.device):
        return value.type == "tpu"
    return isinstance(value, str) and value == "tpu"


class Mismatch(Exception):
    pass


def _compare(actual, expected, path, values, want_tpu):
    """Raises Mismatch naming the first difference between the tpu output and CPU's."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: tpu gave {type(actual).__name__}, CPU a tensor")
        if want_tpu and actual.device.type != "tpu":
            raise Mismatch(f"{path}: output on {actual.device}, not tpu")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{path}: dtype {actual.dtype} vs CPU {expected.dtype}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{path}: shape {tuple(actual.shape)} vs CPU "
                           f"{tuple(expected.shape)}")
        if not values:
            return
        host = actual.detach().cpu()
        exp = expected.detach()
        if exp.layout != torch.strided:
            exp, host = exp.to_dense(), host.to_dense()
        name = str(exp.dtype).replace("torch.", "")
        rtol, atol = TOLERANCES.get(name, (0.0, 0.0))
        try:
            torch.testing.assert_close(host, exp, rtol=rtol, atol=atol, equal_nan=True,
                                       check_device=False, check_stride=False)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            raise Mismatch(f"{path}: " + "; ".join(lines[:4])) from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: structure {type(actual).__name__} vs CPU "
                           f"{type(expected).__name__}[{len(expected)}]")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", values, want_tpu)
        return
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or actual.keys() != expected.keys():
            raise Mismatch(f"{path}: dict keys differ")
        for k in expected:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", values, want_tpu)
        return
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        if values and not (math.isclose(actual, expected, rel_tol=1e-5, abs_tol=1e-5)
                           or (math.isnan(actual) and math.isnan(expected))):
            raise Mismatch(f"{path}: {actual!r} vs CPU {expected!r}")
        return
    if type(actual) is not type(expected) or (values and actual != expected):
        raise Mismatch(f"{path}: {actual!r} vs CPU {expected!r}")


def _float_tensors(value):
    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad and value.dtype.is_floating_point else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _float_tensors(v)]
    return []


def _short(exc) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return text[:DETAIL_CHARS]


GRAPH_WARNING = "torch_tpu: a compiled graph runs op by op: "


@contextlib.contextmanager
def _watch(into, compiled):
    """Records in `into` what left the native path meanwhile: "fallback", {aten op: count}
    of the ops that ran on CPU; with `compiled` also "graph_fallback", the graphs that ran
    op by op, the backend's reasons ("graph_reasons") and "graph_runs", the compiled
    programs run."""
    before = torch_tpu.metrics.snapshot()
    with warnings.catch_warnings(record=True) as caught:
        if compiled:
            from torch_tpu import _dynamo as backend  # the compile stack only when used

            # The backend warns once per reason and process; each sample wants its own.
            backend._warned.clear()
            warnings.simplefilter("always")
        try:
            yield
        finally:
            after = torch_tpu.metrics.snapshot()
            old = before["fallbacks"]
            into["fallback"] = {op: n - old.get(op, 0) for op, n in after["fallbacks"].items()
                                if n != old.get(op, 0)}
            if compiled:
                into["graph_fallback"] = after["graph_fallbacks"] - before["graph_fallbacks"]
                into["graph_runs"] = after["graph_runs"] - before["graph_runs"]
                reasons = {str(w.message)[len(GRAPH_WARNING):] for w in caught
                           if str(w.message).startswith(GRAPH_WARNING)}
                if reasons:
                    into["graph_reasons"] = sorted(reasons)


def _compiled(op):
    """--compile: the op as Dynamo captures a call of it, for the tpu backend. Python
    scalars and sizes are constants of the graph (dynamic=False)."""
    # Every sample compiles afresh: no recompile limit to reach, and a graph an earlier
    # sample compiled cannot hide this sample's op-by-op fallback (counted at compile).
    torch._dynamo.reset()
    return torch.compile(lambda *a, **k: op(*a, **k), backend="tpu", fullgraph=False,
                         dynamic=False)


def _run_sample(op, sample, values, grad, compiled, pinned=frozenset()):
    """One sample on CPU and tpu: {status, fallback: {aten op: count}, detail}, and with
    `compiled` (tpu runs the op through torch.compile) what _watch adds."""
    result = {}
    with _watch(result, compiled):
        # The tpu copy comes first: the CPU call may modify its arguments in place.
        grad_pairs = []
        try:
            tpu_input = _to_tpu(sample.input, grad_pairs, pinned, ("input",))
            tpu_args = _to_tpu(sample.args, grad_pairs, pinned, ("args",))
            tpu_kwargs = _to_tpu(sample.kwargs, grad_pairs, pinned, ("kwargs",))
            copy_error = None
        except Exception as e:  # noqa: BLE001 — any failure to move the sample is the device's
            copy_error = e
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception as e:  # noqa: BLE001
            return {"status": "skip", "detail": "CPU: " + _short(e)}
        try:
            if copy_error is not None:
                raise copy_error
            actual = (_compiled(op) if compiled else op)(tpu_input, *tpu_args, **tpu_kwargs)
            want_tpu = _has_tpu_tensor((tpu_input, tpu_args, tpu_kwargs))
            _compare(actual, expected, "out", values, want_tpu)
            result["status"] = "match"
        except Mismatch as e:
            result.update(status="mismatch", detail=str(e)[:DETAIL_CHARS])
        except Exception as e:  # noqa: BLE001
            result.update(status="error", detail=_short(e))
    if grad and result["status"] == "match" and grad_pairs:
        result["grad"] = {}
        with _watch(result["grad"], compiled):
            result["grad"].update(_run_grad(expected, actual, grad_pairs, values))
    return result


def _run_grad(expected, actual, grad_pairs, values):
    """Backward through both outputs with the same random cotangents; compares the
    gradients of the inputs. Returns a status ('match', 'mismatch', 'error', or 'skip'
    when CPU has nothing to differentiate or fails)."""
    cpu_outs, tpu_outs = _float_tensors(expected), _float_tensors(actual)
    if not cpu_outs:
        return {"status": "skip"}
    generator = torch.Generator().manual_seed(0)
    seeds = [torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in cpu_outs]
    try:
        cpu_grads = torch.autograd.grad(cpu_outs, [c for c, _ in grad_pairs], seeds,
                                        allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "detail": "CPU: " + _short(e)}
    try:
        if len(tpu_outs) != len(cpu_outs):
            raise Mismatch("differentiable outputs differ")
        tpu_grads = torch.autograd.grad(tpu_outs, [t for _, t in grad_pairs],
                                        [s.to("tpu") for s in seeds], allow_unused=True)
        _compare(list(tpu_grads), list(cpu_grads), "grad", values, True)
        return {"status": "match"}
    except Mismatch as e:
        return {"status": "mismatch", "detail": str(e)[:DETAIL_CHARS]}
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "detail": _short(e)}


def _samples(op, dtypes, grad, max_samples):
    """[(dtype name, SampleInput, CPU-pinned paths)] in a fixed order, seeded per dtype."""
    supported = op.supported_dtypes("cpu")
    out = []
    for name in dtypes:
        dtype = getattr(torch, name)
        if dtype not in supported:
            continue
        requires_grad = grad and op.supports_autograd and (
            dtype.is_floating_point or dtype.is_complex)

        def generate(device):
            torch.manual_seed(0)
            samples = list(op.sample_inputs(device, dtype, requires_grad=requires_grad))
            if max_samples and len(samples) > max_samples:
                # Evenly spaced, so every kind of sample the generator makes keeps a share.
                samples = [samples[i * len(samples) // max_samples] for i in range(max_samples)]
            return samples

        try:
            samples = generate("cpu")
        except Exception:  # noqa: BLE001 — an op_db generator that fails has no samples
            continue
        # The same samples for the meta device show what the generator keeps on CPU.
        try:
            meta = generate("meta")
            if len(meta) != len(samples):
                meta = [None] * len(samples)
        except Exception:  # noqa: BLE001 — generators that read values cannot run on meta
            meta = [None] * len(samples)
        out.extend((name, s, _cpu_pinned(s, m)) for s, m in zip(samples, meta))
    return out


def worker_main(dtypes, grad, max_samples, compiled):
    """Reads {"op", "from"} lines on stdin; writes JSON events to the original stdout."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # ops and libraries that print must not corrupt the channel

    from torch.testing._internal.common_methods_invocations import op_db

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch_tpu.set_cpu_fallback(True)
    ops = {op_key(op): op for op in op_db}
    # "op:k": the worker dies at that sample, so tests can check that a crash is counted.
    crash_at = os.environ.get("TORCH_TPU_CONFORMANCE_CRASH_AT")

    def send(**event):
        channel.write(json.dumps(event) + "\n")

    send(ev="ready")
    for line in sys.stdin:
        request = json.loads(line)
        op = ops[request["op"]]
        samples = _samples(op, dtypes, grad, max_samples)
        values = request["op"] not in NONDETERMINISTIC
        send(ev="begin", n=len(samples))
        for k in range(request["from"], len(samples)):
            dtype, sample, pinned = samples[k]
            send(ev="start", k=k, dtype=dtype)
            if crash_at == f"{request['op']}:{k}":
                os._exit(3)
            start = time.perf_counter()
            # A sample that draws dropout (SDPA's dropout_p) is random too.
            random_sample = float(sample.kwargs.get("dropout_p", 0) or 0) > 0
            result = _run_sample(op, sample, values and not random_sample, grad, compiled,
                                 pinned)
            send(ev="result", k=k, dtype=dtype, ms=round(1000 * (time.perf_counter() - start), 1),
                 **result)
        send(ev="done")


# --------------------------------------------------------------------------- parent side

class Worker:
    """A worker subprocess and a thread that turns its output lines into a queue."""

    def __init__(self, args):
        self.stderr = open(os.devnull, "w") if not args.worker_log else open(args.worker_log, "a")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker",
               "--dtypes", ",".join(args.dtypes), "--max-samples", str(args.max_samples)]
        cmd += ["--grad"] if args.grad else []
        cmd += ["--compile"] if args.compile else []
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, bufsize=1)
        self.events = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith('{"ev"'):  # anything else was printed before the channel
                self.events.put(json.loads(line))
        self.events.put(None)

    def send(self, op, start):
        self.proc.stdin.write(json.dumps({"op": op, "from": start}) + "\n")
        self.proc.stdin.flush()

    def next_event(self, deadline):
        """The next event, None when the worker died, or 'timeout'."""
        try:
            return self.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return "timeout"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stderr.close()


# --compile's counters of samples: a graph ran op by op; no compiled program ran at all
# (Dynamo captured no op, or fell back to eager without a graph).
COMPILE_COUNTERS = ("graph_fallback", "no_graph")


def new_op_record(compiled=False):
    record = {s: 0 for s in STATUSES}
    record.update(samples=0, native_match=0, fallback=0, fallback_ops={}, failures=[],
                  by_dtype={}, seconds=0.0)
    if compiled:
        record.update({k: 0 for k in COMPILE_COUNTERS}, graph_reasons={})
    return record


def add_result(record, event, grad):
    status = event["status"]
    record[status] += 1
    dtype_counts = record["by_dtype"].setdefault(event["dtype"], {s: 0 for s in STATUSES})
    dtype_counts[status] += 1
    if status != "skip":
        record["samples"] += 1
        fallback = event.get("fallback", {})
        if fallback:
            record["fallback"] += 1
            for aten, count in fallback.items():
                record["fallback_ops"][aten] = record["fallback_ops"].get(aten, 0) + count
        if event.get("graph_fallback"):
            record["graph_fallback"] += 1
            for reason in event.get("graph_reasons", ()):
                record["graph_reasons"][reason] = record["graph_reasons"].get(reason, 0) + 1
        elif event.get("graph_runs") == 0 and status in ("match", "mismatch"):
            record["no_graph"] += 1
        if status == "match" and not fallback and not event.get("graph_fallback"):
            record["native_match"] += 1
        if status != "match" and len(record["failures"]) < 5:
            record["failures"].append(f"{event['dtype']} #{event['k']} {status}: "
                                      f"{event.get('detail', '')}")
    if grad and "grad" in event:
        g = record.setdefault("grad", dict({s: 0 for s in STATUSES}, native_match=0))
        g[event["grad"]["status"]] += 1
        g["native_match"] += (event["grad"]["status"] == "match" and not event["grad"]["fallback"]
                              and not event["grad"].get("graph_fallback"))
        if event["grad"]["status"] in ("mismatch", "error") and len(record["failures"]) < 5:
            record["failures"].append(f"{event['dtype']} #{event['k']} grad "
                                      f"{event['grad']['status']}: "
                                      f"{event['grad'].get('detail', '')}")


def _wait(worker, deadline, on_event):
    """Feeds events to on_event until 'done'; returns 'done', 'died' or 'timeout'."""
    while True:
        event = worker.next_event(deadline)
        if event is None:
            return "died"
        if event == "timeout":
            return "timeout"
        if event["ev"] == "done":
            return "done"
        on_event(event)


def run_op(name, state, args):
    """Runs every sample of one op, restarting the worker after crashes."""
    record = new_op_record(args.compile)
    started = time.monotonic()
    deadline = started + args.timeout
    progress = {"start": 0, "total": None, "current": None}
    crashes = 0

    def on_event(event):
        if event["ev"] == "begin":
            progress["total"] = event["n"]
        elif event["ev"] == "start":
            progress["current"] = event
        elif event["ev"] == "result":
            add_result(record, event, args.grad)
            progress["current"] = None

    while True:
        if state.get("worker") is None:
            state["worker"] = Worker(args)
            if state["worker"].next_event(time.monotonic() + 300) in (None, "timeout"):
                state["worker"].kill()
                state["worker"] = None
                raise RuntimeError("a worker failed to start; see --worker-log FILE")
        worker = state["worker"]
        worker.send(name, progress["start"])
        outcome = _wait(worker, deadline, on_event)
        if outcome == "done":
            break
        worker.kill()
        state["worker"] = None
        current = progress["current"]
        reason = f"{'timeout' if outcome == 'timeout' else 'worker died'} " \
                 f"(exit {worker.proc.returncode})"
        if current is None:
            add_result(record, {"k": -1, "dtype": "-", "status": "crash",
                                "detail": reason + " outside a sample"}, args.grad)
            break
        crashes += 1
        add_result(record, dict(current, status="crash", detail=reason), args.grad)
        progress.update(start=current["k"] + 1, current=None)
        remaining = progress["total"] - progress["start"]
        if remaining and (outcome == "timeout" or crashes >= MAX_CRASHES_PER_OP):
            # The rest of the op is not run; its samples count as crashes.
            record["crash"] += remaining
            record["samples"] += remaining
            record["not_run"] = remaining
            break
        if not remaining:
            break
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


def summarize(records, names):
    counted = ("samples", "native_match", "fallback") + STATUSES
    counted += tuple(k for k in COMPILE_COUNTERS if any(k in r for r in records.values()))
    s = {k: 0 for k in counted}
    ops = 0
    for name in names:
        if name not in records:
            continue
        ops += 1
        for k in s:
            s[k] += records[name][k]
    s["ops"] = ops
    s["match_rate"] = round(s["match"] / s["samples"], 4) if s["samples"] else 0.0
    s["native_match_rate"] = round(s["native_match"] / s["samples"], 4) if s["samples"] else 0.0
    return s


DOCS_DATA = "<!-- conformance-data"
OP_COLUMNS = ("samples", "match", "mismatch", "error", "crash", "fallback", "native_match")


def read_docs_data(path):
    """The data an earlier --write-docs kept at the end of the page: {"runs", "ops"}."""
    if not os.path.exists(path):
        return {"runs": {}, "ops": {}}
    with open(path) as f:
        text = f.read()
    if DOCS_DATA not in text:
        return {"runs": {}, "ops": {}}
    return json.loads(text.split(DOCS_DATA, 1)[1].rsplit("-->", 1)[0])


def write_docs(report, path):
    """docs/conformance.md from this report, keeping the summaries of selections not run
    now and the rows of ops not run now from the page's earlier data. A --compile report
    updates the compiled section's data only."""
    data = read_docs_data(path)
    compiled = report.get("compile")
    target = data.setdefault("compiled", {"runs": {}, "ops": {}}) if compiled else data
    for key, summary in report["summary"].items():
        if key == "ops":
            continue
        target["runs"][key] = dict(summary, date=report["date"], torch=report["torch_version"],
                                   torch_tpu=report["torch_tpu_version"],
                                   max_samples=report["max_samples"])
    for name, r in report["ops"].items():
        if compiled:
            target["ops"][name] = ([r[c] for c in OP_COLUMNS + COMPILE_COUNTERS]
                                   + [sorted(r["graph_reasons"]), r["failures"][:1]])
        else:
            target["ops"][name] = [r[c] for c in OP_COLUMNS] + [sorted(r["fallback_ops"])]
    lines = [
        "# OpInfo conformance",
        "",
        "`tools/opinfo_conformance.py` runs every sample input of PyTorch's OpInfo database",
        "(`torch.testing._internal.common_methods_invocations.op_db`, from the installed",
        "torch wheel) on CPU and on `tpu`, and compares the outputs. Each sample is a",
        "**match**, **mismatch** (tpu ran, the output differs), **error** (tpu raised, CPU",
        "did not), **crash** (the worker process died or the op timed out) or **skip** (CPU",
        "itself raised: not counted). The CPU fallback is on while it runs; a sample during",
        "which any op fell back to CPU (`torch_tpu.metrics` fallback counters) is a",
        "*fallback* sample.",
        "",
        "- **match rate** = matching samples / samples (skips excluded)",
        "- **native match rate** = matching samples with no fallback / samples",
        "",
        "Dtypes: " + ", ".join(DTYPES) + ", each intersected with the dtypes the op",
        "supports on CPU. Tolerances (rtol, atol) by output dtype are",
        "`torch.testing.assert_close`'s defaults with a larger atol for the half types (as",
        "OpInfo tests' toleranceOverride usually has; rounding at different points differs",
        "most near zero): "
        + ", ".join(f"{k} ({r:g}, {a:g})" for k, (r, a) in TOLERANCES.items())
        + "; integer and bool outputs must be equal, NaNs match NaNs. Random ops and ops",
        "returning uninitialized memory (`NONDETERMINISTIC` in the tool: "
        + ", ".join(sorted(NONDETERMINISTIC & set(ISSUE_SET))) + ", ...)",
        "cannot match CPU values: their samples, and samples with a positive `dropout_p`",
        "(scaled_dot_product_attention), are compared by structure, shape, dtype and",
        "device only.",
        "",
        "## Running it",
        "",
        "```",
        "python tools/opinfo_conformance.py                 # the issue set (issue 3's ops)",
        "python tools/opinfo_conformance.py --subset ci     # the pinned CI subset",
        "python tools/opinfo_conformance.py --all           # the whole op_db",
        "python tools/opinfo_conformance.py --ops gather,sum --dtypes float32,int64",
        "  --json FILE        the report (default conformance_report.json)",
        "  --write-docs docs/conformance.md",
        "  --grad             also compare input gradients (backward through both devices)",
        "  --timeout S        per-op limit (default 300)   --workers N",
        "  --max-samples N    at most N samples per (op, dtype), evenly spaced: a quicker sweep",
        "  --compile          tpu runs each sample through torch.compile (see Compiled mode)",
        "```",
        "",
        "The issue set is `ISSUE_FAMILIES` in the tool: issue 3's op families mapped to OpInfo",
        "names. The CI subset (`CI_SUBSET`) runs in `tests/python/test_conformance.py`. Ops",
        "run one after another in a worker subprocess; a crash restarts the worker and resumes",
        f"the op after the crashed sample (after {MAX_CRASHES_PER_OP} crashes, or on a timeout,",
        "the op's remaining samples count as crashes). `--all` also reports the issue set",
        "within it.",
        "",
        "## Latest summary",
        "",
    ]
    lines += _summary_table(data["runs"], SUMMARY_COUNTERS)
    if "whole op_db" not in data["runs"]:
        lines += ["", "The whole op_db has not been swept yet (`--all`)."]
    if "compiled" in data:
        lines += _compiled_section(data["compiled"], _kept_notes(path))
    lines += [
        "",
        "## Per op",
        "",
        "Samples exclude skips; *fallback* counts samples during which some op ran on CPU;",
        "*native* counts matches without fallback. Ops of the issue set are in bold; rows",
        "are sorted by non-native samples, most first.",
        "",
        "| op | samples | match | mismatch | error | crash | fallback | native "
        "| fallen-back ATen ops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    issue = set(ISSUE_SET)
    rows = sorted(data["ops"].items(), key=lambda kv: (kv[1][6] - kv[1][0], kv[0]))
    for name, row in rows:
        shown = f"**{name}**" if name in issue else name
        fell = ", ".join(f"`{a}`" for a in row[7][:4]) + (", ..." if len(row[7]) > 4 else "")
        lines.append(f"| {shown} | " + " | ".join(str(v) for v in row[:7]) + f" | {fell} |")
    lines += ["", DOCS_DATA, json.dumps(data, separators=(",", ":")), "-->"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


SUMMARY_COUNTERS = ("match", "mismatch", "error", "crash", "fallback", "skip")
NOTES = ("<!-- compiled-notes: kept by --write-docs -->", "<!-- /compiled-notes -->")


def _summary_table(runs, counters):
    header = ["selection", "date", "torch", "ops", "samples"]
    header += [c.replace("_", " ") for c in counters] + ["match rate", "native match rate"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, s in runs.items():
        capped = f" (max {s['max_samples']}/op/dtype)" if s.get("max_samples") else ""
        lines.append(f"| {key}{capped} | {s['date']} | {s['torch']} | {s['ops']} "
                     f"| {s['samples']} | " + " | ".join(str(s[c]) for c in counters)
                     + f" | {100 * s['match_rate']:.1f}% | {100 * s['native_match_rate']:.1f}% |")
    return lines


def _kept_notes(path):
    """The hand-written triage of the compiled section, which --write-docs keeps."""
    text = open(path).read() if os.path.exists(path) else ""
    if NOTES[0] not in text:
        return ""
    return text.split(NOTES[0], 1)[1].split(NOTES[1], 1)[0].strip("\n")


def _compiled_section(compiled, notes):
    lines = [
        "",
        "## Compiled mode",
        "",
        "`--compile` runs each sample on tpu as `torch.compile(lambda *a, **k: op(*a, **k),",
        "backend=\"tpu\", dynamic=False)` with a fresh Dynamo cache (its Python scalars and",
        "sizes are constants of the graph) and compares it with CPU eager as above. A sample",
        "during which a graph ran op by op (`graph_fallbacks` in `torch_tpu.metrics`) is a",
        "*graph fallback* and not native; *no graph* counts the samples that ran no compiled",
        "program at all (Dynamo captured no op). Counts are over the same samples as eager",
        "mode's with the same `--max-samples`.",
        "",
    ]
    lines += _summary_table(compiled["runs"], SUMMARY_COUNTERS[:-1] + COMPILE_COUNTERS + ("skip",))
    lines += ["", NOTES[0], notes, NOTES[1], "",
              "Ops with samples that are not native compiled matches or ran no graph, with the",
              "first failure or the reasons a graph ran op by op:", "",
              "| op | samples | match | mismatch | error | crash | fallback | native "
              "| graph fallback | no graph | first failure / op-by-op reasons |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = sorted(compiled["ops"].items(), key=lambda kv: (kv[1][6] - kv[1][0], kv[0]))
    for name, row in rows:
        if row[6] == row[0] and not row[8]:
            continue
        why = "; ".join(row[9] + row[10]).replace("|", "\\|")[:DETAIL_CHARS // 2]
        lines.append(f"| {name} | " + " | ".join(str(v) for v in row[:9]) + f" | {why} |")
    return lines


def select_ops(args, all_names):
    if args.ops:
        names = args.ops.split(",")
    elif args.all:
        names = all_names
    elif args.subset == "ci":
        names = CI_SUBSET
    else:
        names = ISSUE_SET
    unknown = [n for n in names if n not in set(all_names)]
    if unknown:
        sys.exit(f"not in op_db: {', '.join(unknown)}")
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every op of op_db")
    parser.add_argument("--subset", choices=["ci", "issue"], default="issue")
    parser.add_argument("--ops", help="comma-separated OpInfo names (name.variant)")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--grad", action="store_true", help="also compare input gradients")
    parser.add_argument("--compile", action="store_true",
                        help="run each sample on tpu through torch.compile(backend='tpu')")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per op")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-samples", type=int, default=0,
                        help="at most N samples per (op, dtype); 0: all")
    parser.add_argument("--json", default="conformance_report.json")
    parser.add_argument("--write-docs", metavar="MD")
    parser.add_argument("--worker-log", metavar="FILE", help="append workers' stderr here")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtypes = args.dtypes.split(",")
    if args.worker:
        worker_main(args.dtypes, args.grad, args.max_samples, args.compile)
        return

    from torch.testing._internal.common_methods_invocations import op_db

    names = select_ops(args, [op_key(op) for op in op_db])
    records = {}
    pending = collections.deque(names)
    lock = threading.Lock()
    fatal = []

    def drain():
        state = {}
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    name = pending.popleft()
                record = run_op(name, state, args)
                with lock:
                    records[name] = record
                    if not args.quiet:
                        graph = (f"{record['graph_fallback']} graph fallback, "
                                 if args.compile else "")
                        print(f"[{len(records)}/{len(names)}] {name}: {record['samples']} samples, "
                              f"{record['match']} match, {record['native_match']} native, "
                              f"{record['mismatch']} mismatch, {record['error']} error, "
                              f"{record['crash']} crash, {graph}{record['seconds']} s", flush=True)
        except RuntimeError as e:
            fatal.append(str(e))
        finally:
            if state.get("worker") is not None:
                state["worker"].proc.stdin.close()
                state["worker"].kill()

    threads = [threading.Thread(target=drain) for _ in range(max(1, args.workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if fatal:
        sys.exit(fatal[0])

    records = {n: records[n] for n in names if n in records}
    selection = ("whole op_db" if args.all else "ops" if args.ops
                 else "ci subset" if args.subset == "ci" else "issue set")
    summary = {selection: summarize(records, names)}
    if args.all:
        summary["issue set"] = summarize(records, ISSUE_SET)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch_version": torch.__version__,
        "torch_tpu_version": torch_tpu.__version__,
        "selection": selection,
        "dtypes": args.dtypes,
        "grad": args.grad,
        "compile": args.compile,
        "max_samples": args.max_samples,
        "tolerances": TOLERANCES,
        "nondeterministic_ops": sorted(NONDETERMINISTIC),
        "summary": summary,
        "ops": records,
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    if args.write_docs:
        write_docs(report, args.write_docs)

    worst = sorted(records.items(), key=lambda kv: kv[1]["native_match"] - kv[1]["samples"])
    print("\nmost non-native samples: " + ", ".join(
        f"{n} ({r['samples'] - r['native_match']})" for n, r in worst[:15]
        if r["samples"] > r["native_match"]))
    for key, s in summary.items():
        print(f"{key}: {s['ops']} ops, {s['samples']} samples — match rate "
              f"{100 * s['match_rate']:.1f}%, native match rate "
              f"{100 * s['native_match_rate']:.1f}% (mismatch {s['mismatch']}, error "
              f"{s['error']}, crash {s['crash']}, fallback {s['fallback']}, skip {s['skip']}"
              + "".join(f", {k.replace('_', ' ')} {s[k]}" for k in COMPILE_COUNTERS if k in s)
              + ")")
    reasons = collections.Counter()
    for r in records.values():
        reasons.update(r.get("graph_reasons", {}))
    for reason, count in reasons.most_common(15):
        print(f"graph ran op by op ({count} samples): {reason}")
    print(f"report: {args.json}")


if __name__ == "__main__":
    main()
