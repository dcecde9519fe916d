"""Compiled training steps: minGPT, Hugging Face Llama-tiny and the model families of
examples/ (ResNet-small, DLRM, the diffusers UNet), each on tpu compiled (backend "tpu"),
tpu eager, CPU eager and CPU compiled (Inductor), every one in its own subprocess, in one
run; then the first compiled tpu step in a fresh process with a cold disk cache against
one with a warm disk cache.

    python benchmarks/compile_step.py [--models mingpt llama resnet dlrm unet] [--warmup 3]

A step is forward, loss, backward, clip_grad_norm_ and the optimizer (AdamW; the
examples' own for ResNet, SGD with momentum, and DLRM, Adagrad for the tables and SGD);
"compiled" compiles the model (forward and backward), the optimizer runs eagerly in every
mode. The families cycle through four batches made on the host before timing. Times are the
median of the rounds after warm-up; tpu rounds end with one synchronize. The CPU
processes do not load torch_tpu. The first-step runs use a private TORCH_TPU_CACHE_DIR
and time the import of PyTorch's compile stack apart from the step.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import timed_rounds

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MODES = ("tpu-compiled", "tpu-eager", "cpu-eager", "cpu-inductor")
# Also measurable (eager_step.py uses them): tpu eager in fused mode.
CHILD_MODES = MODES + ("tpu-fused",)
# minGPT as in eager_step.py; Llama-tiny as in examples/hf_tiny.py.
CONFIGS = {
    "mingpt": dict(batch=8, block=64, layers=4, heads=4, d=128),
    "llama": dict(batch=4, seq=64, layers=2, hidden=64),
    # The configurations tests/python/test_families.py trains, with larger batches.
    "resnet": dict(batch=16, size=32),
    "dlrm": dict(batch=64),
    "unet": dict(batch=8, size=16),
}
FAMILIES = ("resnet", "dlrm", "unet")


def build_family(name: str, device: str):
    """As build(), for an examples/<name>/train.py."""
    import importlib
    import itertools

    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(EXAMPLES / name))
    ex = importlib.import_module("train")
    c = CONFIGS[name]
    torch.manual_seed(0)
    target = {}  # what the loss compares the model's output with, set by batch()
    if name == "resnet":
        model = ex.resnet_small(10).to(device)
        pool = list(ex.batches(4, c["batch"], c["size"], 10, seed=0))
        optimizers = [torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)]

        def prepare(x, y):
            target["y"] = y.to(device)
            return (x.to(device),), {}

        def loss_of(out):
            return F.cross_entropy(out, target["y"])
    elif name == "dlrm":
        model = ex.DLRM().to(device)
        pool = list(ex.batches(model, 4, c["batch"], seed=0))
        optimizers = ex.optimizers(model, 0.1)

        def prepare(*host):
            dense, bags, target["y"] = ex.to(device, *host)
            return (dense, bags), {}

        def loss_of(out):
            return F.binary_cross_entropy_with_logits(out, target["y"])
    else:
        model = ex.unet_small(c["size"]).to(device)
        schedule = ex.DDPM().to(device)
        pool = list(ex.batches(4, c["batch"], c["size"], schedule.steps, seed=0))
        optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)]

        def prepare(x0, t, noise):
            x0, t, target["noise"] = x0.to(device), t.to(device), noise.to(device)
            return (schedule.add_noise(x0, target["noise"], t), t), {}

        def loss_of(out):
            return F.mse_loss(out.sample, target["noise"])

    cycle = itertools.cycle(pool)

    def batch():
        return prepare(*next(cycle))

    return model, optimizers, batch, loss_of


def build(model_name: str, device: str):
    """The model on `device`, its optimizers, a function giving one step's batch (positional
    and keyword arguments of the model), and one giving the loss of the model's output."""
    if model_name in FAMILIES:
        return build_family(model_name, device)
    import torch

    sys.path[:0] = [str(EXAMPLES), str(EXAMPLES / "mingpt")]
    c = CONFIGS[model_name]
    batches = torch.Generator().manual_seed(0)
    if model_name == "mingpt":
        from data import CharDataset, make_text
        from train import build as build_gpt, make_optimizer

        dataset = CharDataset(make_text())
        model = build_gpt(dataset.vocab_size, c["block"], c["layers"], c["heads"], c["d"], 0)
        model.to(device)

        def batch():
            x, y = dataset.batch(c["batch"], c["block"], batches)
            return (x.to(device), y.to(device)), {}

        def loss_of(out):
            return out[1]

        return model, [make_optimizer(model, 1e-3)], batch, loss_of
    import hf_tiny

    model = hf_tiny.build("llama", seed=0, layers=c["layers"], hidden=c["hidden"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)

    def batch():
        ids = torch.randint(3, hf_tiny.VOCAB, (c["batch"], c["seq"]), generator=batches)
        ids = ids.to(device)
        return (), {"input_ids": ids, "labels": ids}

    def loss_of(out):
        return out.loss

    return model, [optimizer], batch, loss_of


def make_step(run, model, optimizers, batch, loss_of):
    """One training step of `model` called as `run` (itself, or compiled): forward, loss,
    backward, clip_grad_norm_, the optimizers' steps; returns the loss."""
    import torch

    def step():
        a, kw = batch()
        loss = loss_of(run(*a, **kw))
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for optimizer in optimizers:
            optimizer.step()
        return loss.detach()

    return step


def child(args) -> None:
    """Runs in the subprocess: trains and prints one JSON line of results."""
    import torch

    result = {"threads": torch.get_num_threads()}
    # PyTorch's compile stack (Dynamo, AOTAutograd, sympy...) loads on first use, whatever
    # the backend (torch.compile imports it); timed apart from the step.
    start = time.perf_counter()
    import torch._dynamo  # noqa: F401
    import torch._functorch.aot_autograd  # noqa: F401

    result["import_s"] = time.perf_counter() - start
    device, _, how = args.mode.partition("-")
    if device == "tpu":
        import torch_tpu

        sync = torch.tpu.synchronize
    else:

        def sync():
            pass

    model, optimizers, batch, loss_of = build(args.model, device)
    model.train()
    run = model
    if how == "fused":
        torch_tpu.set_eager_mode("fused")
    if how == "compiled":
        run = torch.compile(model, backend="tpu")
    elif how == "inductor":
        run = torch.compile(model, backend="inductor")

    step = make_step(run, model, optimizers, batch, loss_of)
    start = time.perf_counter()
    loss = step()
    result["first_loss"] = loss.item()
    result["first_step_s"] = time.perf_counter() - start
    if device == "tpu":
        m = torch_tpu.metrics.snapshot()
        result.update(
            first_step_compiles=m["compiles"],
            first_step_xla_s=m["compile_seconds"],
            first_step_graph_build_s=m["graph_build_seconds"],
        )
    if args.first_step_only:
        print(json.dumps(result))
        return
    for _ in range(args.warmup - 1):
        loss = step()
    loss.item()
    if device == "tpu":
        torch_tpu.metrics.reset()
    rounds, loss = timed_rounds(step, sync, args.rounds, args.steps)
    result.update(step_s=statistics.median(rounds), rounds_s=rounds, final_loss=loss.item())
    if device == "tpu":
        m = torch_tpu.metrics.snapshot()
        result.update(
            timed_compiles=m["compiles"],
            graph_runs=m["graph_runs"],
            graph_fallbacks=m["graph_fallbacks"],
            executions=m["executions"],
            fused_groups=m["fused_groups"],
            fused_reuses=m["fused_reuses"],
            device_name=torch.tpu.get_device_name(0),
        )
    print(json.dumps(result))


def run_child(mode: str, model: str, args, env_extra=None, first_step_only=False) -> dict:
    env = dict(os.environ, **(env_extra or {}))
    if mode.startswith("cpu"):
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--mode",
        mode,
        "--model",
        model,
        "--warmup",
        str(args.warmup),
        "--rounds",
        str(args.rounds),
        "--steps",
        str(args.steps),
    ]
    if first_step_only:
        cmd.append("--first-step-only")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{model} {mode} failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=tuple(CONFIGS), default=list(CONFIGS))
    p.add_argument("--warmup", type=int, default=3, help="untimed steps (compiles happen here)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds; the median is reported")
    p.add_argument("--steps", type=int, default=10, help="steps per timed round")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=CHILD_MODES, help=argparse.SUPPRESS)
    p.add_argument("--model", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    p.add_argument("--first-step-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return

    print(f"warm-up {args.warmup} steps, median of {args.rounds} rounds x {args.steps} steps")
    for model in args.models:
        with tempfile.TemporaryDirectory() as cache:
            r = {
                mode: run_child(mode, model, args, {"TORCH_TPU_CACHE_DIR": cache}) for mode in MODES
            }
        print(
            f"\n{model} {CONFIGS[model]}: {r['tpu-compiled']['device_name']}, "
            f"CPU threads {r['cpu-eager']['threads']}"
        )
        print(f"{'':<14} {'step ms':>9} {'first step s':>13} {'final loss':>11}")
        for mode in MODES:
            print(
                f"{mode:<14} {r[mode]['step_s'] * 1e3:>9.2f} {r[mode]['first_step_s']:>13.2f} "
                f"{r[mode]['final_loss']:>11.4f}"
            )
        c = r["tpu-compiled"]
        for other in MODES[1:]:
            print(f"tpu-compiled / {other:<13} {c['step_s'] / r[other]['step_s']:>6.2f}")
        print(
            f"tpu-compiled timed steps: {c['timed_compiles']} compiles, "
            f"{c['graph_fallbacks']} graphs run op by op, "
            f"{c['executions'] / (args.rounds * args.steps):.1f} programs per step"
        )

        with tempfile.TemporaryDirectory() as cache:
            env = {"TORCH_TPU_CACHE_DIR": cache}
            cold = run_child("tpu-compiled", model, args, env, first_step_only=True)
            warm = run_child("tpu-compiled", model, args, env, first_step_only=True)
        print(
            "first compiled step in a fresh process (import: loading PyTorch's compile "
            "stack; graph build: lowering the graphs and compiling or loading their programs):"
        )
        for name, r in (("cold disk cache", cold), ("warm disk cache", warm)):
            print(
                f"  {name}: import {r['import_s']:.2f} s + first step {r['first_step_s']:.2f} s; "
                f"{r['first_step_compiles']} compiles ({r['first_step_xla_s']:.2f} s XLA), "
                f"graph build {r['first_step_graph_build_s']:.2f} s"
            )
        whole = [r["import_s"] + r["first_step_s"] for r in (cold, warm)]
        print(
            f"  warm / cold: first step {warm['first_step_s'] / cold['first_step_s']:.2f}, "
            f"with the import {whole[1] / whole[0]:.2f}, graph build "
            f"{warm['first_step_graph_build_s'] / cold['first_step_graph_build_s']:.2f}"
        )


if __name__ == "__main__":
    main()
