"""The worker subprocess: runs the samples of the ops the runner sends it, each on CPU and on
tpu, compares the outputs and writes one JSON event per step to its stdout.

A request is a line {"op", "from": the first sample to run}; the events are "ready" once,
then per request "begin" (n: its samples), per sample "start" (k, dtype) and "result" (k,
dtype, ms and what _run_sample returns), and "done". The runner starts it as
`tools/conformance --worker` with the run's --dtypes, --max-samples, --grad, --compile."""

import contextlib
import json
import math
import os
import sys
import time
import warnings

import torch
import torch_tpu

from .ops import NONDETERMINISTIC, TOLERANCES, op_key
from .records import DETAIL_CHARS


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
        return {
            k: (
                "tpu"
                if k == "device" and isinstance(v, str) and v == "cpu"
                else _to_tpu(v, grad_leaves, pinned, path + (k,))
            )
            for k, v in value.items()
        }
    return value


def _tensor_paths(value, path=()):
    """{path: tensor} of the tensors in a sample argument (paths as _to_tpu builds them)."""
    if isinstance(value, torch.Tensor):
        return {path: value}
    items = (
        enumerate(value)
        if isinstance(value, (list, tuple))
        else value.items()
        if isinstance(value, dict)
        else ()
    )
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
    return frozenset(
        path for path, t in meta.items() if t.device.type == "cpu" and cpu[path].shape == t.shape
    )


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
            raise Mismatch(f"{path}: shape {tuple(actual.shape)} vs CPU {tuple(expected.shape)}")
        if not values:
            return
        host = actual.detach().cpu()
        exp = expected.detach()
        if exp.layout != torch.strided:
            exp, host = exp.to_dense(), host.to_dense()
        name = str(exp.dtype).replace("torch.", "")
        rtol, atol = TOLERANCES.get(name, (0.0, 0.0))
        try:
            torch.testing.assert_close(
                host,
                exp,
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                check_device=False,
                check_stride=False,
            )
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            raise Mismatch(f"{path}: " + "; ".join(lines[:4])) from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(
                f"{path}: structure {type(actual).__name__} vs CPU "
                f"{type(expected).__name__}[{len(expected)}]"
            )
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
        if values and not (
            math.isclose(actual, expected, rel_tol=1e-5, abs_tol=1e-5)
            or (math.isnan(actual) and math.isnan(expected))
        ):
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
            into["fallback"] = {
                op: n - old.get(op, 0)
                for op, n in after["fallbacks"].items()
                if n != old.get(op, 0)
            }
            if compiled:
                into["graph_fallback"] = after["graph_fallbacks"] - before["graph_fallbacks"]
                into["graph_runs"] = after["graph_runs"] - before["graph_runs"]
                reasons = {
                    str(w.message)[len(GRAPH_WARNING) :]
                    for w in caught
                    if str(w.message).startswith(GRAPH_WARNING)
                }
                if reasons:
                    into["graph_reasons"] = sorted(reasons)


def _compiled(op):
    """--compile: the op as Dynamo captures a call of it, for the tpu backend. Python
    scalars and sizes are constants of the graph (dynamic=False)."""
    # Every sample compiles afresh: no recompile limit to reach, and a graph an earlier
    # sample compiled cannot hide this sample's op-by-op fallback (counted at compile).
    torch._dynamo.reset()
    return torch.compile(lambda *a, **k: op(*a, **k), backend="tpu", fullgraph=False, dynamic=False)


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
        cpu_grads = torch.autograd.grad(
            cpu_outs, [c for c, _ in grad_pairs], seeds, allow_unused=True
        )
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "detail": "CPU: " + _short(e)}
    try:
        if len(tpu_outs) != len(cpu_outs):
            raise Mismatch("differentiable outputs differ")
        tpu_grads = torch.autograd.grad(
            tpu_outs, [t for _, t in grad_pairs], [s.to("tpu") for s in seeds], allow_unused=True
        )
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
        requires_grad = (
            grad and op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
        )

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
            result = _run_sample(op, sample, values and not random_sample, grad, compiled, pinned)
            send(
                ev="result",
                k=k,
                dtype=dtype,
                ms=round(1000 * (time.perf_counter() - start), 1),
                **result,
            )
        send(ev="done")
