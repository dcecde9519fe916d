"""Host time of a cached compiled graph call: minGPT's forward compiled with
`torch.compile(model, backend="tpu")`, called again and again on the same shapes (no
trace, no compile), split into its layers, against CPU PyTorch in the same run.

    python benchmarks/compiled_call.py [--calls 300] [--configs tiny small]

Each call is timed alone: a synchronize before it and the release of its results after
it are outside the timer, so the program's device work is not counted (the call only
enqueues it; XLA:CPU runs it on other threads). Two figures per layer: the best wall
time of the calls (the machine is shared: the best is what the code costs), and the
median CPU time of the calling thread (`time.thread_time`: not slowed by other
processes, and blind to the device's threads). The layers, each timed on the inputs the
full call passed down:

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


def timed_calls(fn, sync, calls):
    """(wall seconds, calling thread's CPU seconds) of each of `calls` calls of `fn`, each
    between synchronizes, its result released after the timer stopped."""
    wall, cpu = [], []
    for _ in range(calls):
        sync()
        w, c = time.perf_counter(), time.thread_time()
        result = fn()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
        del result
    sync()
    return wall, cpu


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
    """{name: (wall seconds, thread CPU seconds) of each call}, the graph's input count."""
    model, idx = build(config, grad)
    out = {}
    none = lambda: None  # noqa: E731
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
            out[name] = timed_calls(functools.partial(fn, idx), none, calls)

        torch._dynamo.reset()
        tpu_model, tpu_idx = model.to("tpu"), idx.to("tpu")
        compiled = torch.compile(tpu_model, backend="tpu")
        with Captured() as cap:
            for _ in range(3):
                compiled(tpu_idx)
        sync = torch.tpu.synchronize
        out["tpu compiled call"] = timed_calls(lambda: compiled(tpu_idx), sync, calls)
        code, inputs = cap.code, cap.inputs
        out["output code"] = timed_calls(lambda: code(list(inputs)), sync, calls)
        graph = code._runner
        if isinstance(graph, _C._Graph):
            out["_C._Graph"] = timed_calls(lambda: graph(list(inputs)), sync, calls)
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
        f"us per call: best wall time of {args.calls} calls, median thread CPU time"
    )
    results = {}
    for name in args.configs:
        for grad in (False, True):
            r, inputs = measure(CONFIGS[name], args.calls, grad)
            fig = {k: (min(w), statistics.median(c)) for k, (w, c) in r.items()}
            full, code = fig["tpu compiled call"], fig["output code"]
            fig["Dynamo + AOTAutograd"] = (full[0] - code[0], full[1] - code[1])
            print(
                f"\nminGPT {name} {CONFIGS[name]}, {'training' if grad else 'no_grad'} "
                f"forward, {inputs} graph inputs"
            )
            print(f"{'':<34} {'wall':>8} {'thread CPU':>11}")
            for label in (
                "tpu compiled call",
                "Dynamo + AOTAutograd",
                "output code",
                "_C._Graph",
                "CPU eager forward",
                "CPU Dynamo alone",
                "CPU Dynamo + AOTAutograd",
            ):
                if label in fig:
                    indent = "  " if label in ("Dynamo + AOTAutograd", "output code") else ""
                    indent = "    " if label == "_C._Graph" else indent
                    wall, cpu = fig[label]
                    print(f"{indent + label:<34} {wall * 1e6:>8.1f} {cpu * 1e6:>11.1f}")
            ref = fig["CPU Dynamo + AOTAutograd"]
            print(
                "ratios (wall, thread CPU): tpu call / CPU eager forward "
                f"{full[0] / fig['CPU eager forward'][0]:.2f}, "
                f"{full[1] / fig['CPU eager forward'][1]:.2f}; tpu Dynamo + AOTAutograd / "
                f"CPU's {fig['Dynamo + AOTAutograd'][0] / ref[0]:.2f}, "
                f"{fig['Dynamo + AOTAutograd'][1] / ref[1]:.2f}"
            )
            results[(name, grad)] = fig
    return results


if __name__ == "__main__":
    main()
