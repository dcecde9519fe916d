"""Host time of a cached compiled graph call: minGPT's forward compiled with
`torch.compile(model, backend="tpu")`, called again and again on the same shapes (no
trace, no compile), split into its layers, against CPU PyTorch in the same run.

    python benchmarks/compiled_call.py [--calls 300] [--configs tiny small]

Two conditions, best and median wall time of the calls in each:
- in a loop: calls made back to back, as a training or serving loop makes them (the call
  only enqueues the program; the device runs behind the host; results are kept to the
  end of a batch of 20 calls, then one synchronize outside the timer);
- cold: each call after the previous call's device work has finished (a synchronize
  outside the timer). On XLA:CPU the device program runs on the host's own cores and
  evicts the caches, so every layer of the call, PyTorch's included, then runs from cold
  caches. The CPU references are timed cold after the model's CPU forward on the same
  inputs (untimed), which does the same to the caches.
The layers, each timed on the inputs the full call passed down:

- tpu compiled call: `compiled(idx)`, everything below;
- Dynamo + AOTAutograd: the full call less the output code's call (guards, the frame,
  AOTAutograd's runtime wrappers, autograd's Function when grads are on): PyTorch's;
- output code: `TpuOutputCode(inputs)`, torch_tpu's Python wrapper and `_C._Graph`;
- `_C._Graph`: the C++ call (argument conversion, argument buffers, PJRT execute,
  output tensors).

CPU references, the same model: eager forward; Dynamo alone (a backend returning the
graph's first outputs again, so no kernel runs: guards and frame only); Dynamo +
AOTAutograd (the same through `aot_autograd`, the structure backend "tpu" has).
Configurations: "tiny" (1 layer, d 32, batch 1, block 8) and "small" (eager_step.py's
minGPT: 4 layers, d 128, batch 8, block 64).
"""

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

import torch_tpu
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from torch_tpu import _C, _output_code

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mingpt"))
from model import GPT, GPTConfig  # noqa: E402

CONFIGS = {
    "tiny": dict(batch=1, block=8, layers=1, heads=2, d=32),
    "small": dict(batch=8, block=64, layers=4, heads=4, d=128),
}
VOCAB = 64


def timed_calls(fn, before, calls):
    """Wall seconds of each of `calls` calls of `fn`, each after `before()` (untimed), its
    result released after the timer stopped."""
    wall = []
    for _ in range(calls):
        before()
        w = time.perf_counter()
        result = fn()
        wall.append(time.perf_counter() - w)
        del result
    return wall


def timed_in_a_loop(fn, sync, calls, batch=20):
    """Wall seconds of each of `calls` calls of `fn` made back to back, as a loop makes
    them: the device runs behind the host, results are kept to the end of a batch of
    calls, then one synchronize (untimed)."""
    wall = []
    while len(wall) < calls:
        results = []
        for _ in range(batch):
            w = time.perf_counter()
            results.append(fn())
            wall.append(time.perf_counter() - w)
        sync()
        del results
    return wall[:calls]


class Captured:
    """The output code a compiled call runs and the inputs it got (a copy of the list
    AOTAutograd passes and the callee empties)."""

    def __init__(self):
        self.code = None
        self.inputs = None
        self._call = _output_code.TpuOutputCode.__call__

    def __enter__(self):
        captured, call = self, self._call

        def recording(code, inputs):
            if captured.code is None:
                captured.code, captured.inputs = code, list(inputs)
            return call(code, inputs)

        _output_code.TpuOutputCode.__call__ = recording
        return self

    def __exit__(self, *exc):
        _output_code.TpuOutputCode.__call__ = self._call


def _replaying(gm, example_inputs):
    """A compiler whose callable runs `gm` once and then returns those outputs again: what
    remains of a call is the layers above the compiled code."""
    outputs = []

    def run(*args):
        if not outputs:
            outputs.append(gm(*args))
        return outputs[0]

    return run


def _replaying_boxed(gm, example_inputs):
    return make_boxed_func(_replaying(gm, example_inputs))


def build(config: dict, grad: bool):
    c = config
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=VOCAB,
            block_size=c["block"],
            n_layer=c["layers"],
            n_head=c["heads"],
            n_embd=c["d"],
            dropout=0.0,
        )
    )
    if not grad:
        model.eval()
    return model, torch.randint(0, VOCAB, (c["batch"], c["block"]))


def measure(config: dict, calls: int, grad: bool) -> dict:
    """{(name, condition): wall seconds of each call}, the graph's input count.
    Conditions: "loop" (calls back to back) and "cold" (each call after the previous
    call's device work has finished, on tpu; after the model's CPU forward, for CPU)."""
    model, idx = build(config, grad)
    out = {}
    none = lambda: None  # noqa: E731
    cpu_forward = functools.partial(model, idx)  # what a device program does to the caches
    with torch.enable_grad() if grad else torch.no_grad():
        references = {
            "CPU eager forward": model,
            "CPU Dynamo alone": torch.compile(model, backend=_replaying),
            "CPU Dynamo + AOTAutograd": torch.compile(
                model, backend=aot_autograd(fw_compiler=_replaying_boxed)
            ),
        }
        for name, fn in references.items():
            torch._dynamo.reset()
            for _ in range(3):
                fn(idx)
            call = functools.partial(fn, idx)
            out[name, "loop"] = timed_calls(call, none, calls)
            if name != "CPU eager forward":
                out[name, "cold"] = timed_calls(call, cpu_forward, calls)

        torch._dynamo.reset()
        tpu_model, tpu_idx = model.to("tpu"), idx.to("tpu")
        compiled = torch.compile(tpu_model, backend="tpu")
        with Captured() as cap:
            for _ in range(3):
                compiled(tpu_idx)
        sync = torch.tpu.synchronize
        code, inputs = cap.code, cap.inputs
        graph = code._runner
        layers = {
            "tpu compiled call": lambda: compiled(tpu_idx),
            "output code": lambda: code(list(inputs)),
        }
        if isinstance(graph, _C._Graph):
            layers["_C._Graph"] = lambda: graph(list(inputs))
        for name, fn in layers.items():
            out[name, "loop"] = timed_in_a_loop(fn, sync, calls)
            out[name, "cold"] = timed_calls(fn, sync, calls)
        sync()
    model.to("cpu")
    torch._dynamo.reset()
    return out, len(inputs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["tiny", "small"])
    args = p.parse_args()
    print(
        f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, "
        f"{torch.tpu.get_device_name(0)}, CPU threads {torch.get_num_threads()}; "
        f"us per call, best / median wall time of {args.calls} calls: in a loop (calls "
        "back to back) and cold (each after the device work of the one before; CPU "
        "rows: after the model's CPU forward)"
    )
    results = {}
    for name in args.configs:
        for grad in (False, True):
            r, inputs = measure(CONFIGS[name], args.calls, grad)
            fig = {k: (min(w), statistics.median(w)) for k, w in r.items()}
            for cond in ("loop", "cold"):
                full, code = fig["tpu compiled call", cond], fig["output code", cond]
                fig["Dynamo + AOTAutograd", cond] = (full[0] - code[0], full[1] - code[1])
            print(
                f"\nminGPT {name} {CONFIGS[name]}, {'training' if grad else 'no_grad'} "
                f"forward, {inputs} graph inputs"
            )
            print(f"{'':<30} {'in a loop':>15} {'cold':>15}")
            for label in (
                "tpu compiled call",
                "Dynamo + AOTAutograd",
                "output code",
                "_C._Graph",
                "CPU eager forward",
                "CPU Dynamo alone",
                "CPU Dynamo + AOTAutograd",
            ):
                indent = "  " if label in ("Dynamo + AOTAutograd", "output code") else ""
                indent = "    " if label == "_C._Graph" else indent
                cells = [
                    f"{fig[label, c][0] * 1e6:7.1f}/{fig[label, c][1] * 1e6:<7.1f}"
                    if (label, c) in fig
                    else f"{'-':>15}"
                    for c in ("loop", "cold")
                ]
                print(f"{indent + label:<30} {cells[0]:>15} {cells[1]:>15}")
            ref = "CPU Dynamo + AOTAutograd"
            print(
                "tpu Dynamo + AOTAutograd / CPU's (median): in a loop "
                f"{fig['Dynamo + AOTAutograd', 'loop'][1] / fig[ref, 'loop'][1]:.2f}, cold "
                f"{fig['Dynamo + AOTAutograd', 'cold'][1] / fig[ref, 'cold'][1]:.2f}"
            )
            results[(name, grad)] = fig
    return results


if __name__ == "__main__":
    main()
