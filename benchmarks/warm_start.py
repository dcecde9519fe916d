"""Warm starts: the first training step of a small GPT (minGPT as in compile_step.py) in a
fresh process, cold (empty caches) then warm (the caches the cold run left), for

  tpu-compiled     torch.compile(backend="tpu"): PyTorch's AOTAutograd cache holds the
                   graphs, torch_tpu's disk cache their programs
  tpu-async        the same with options={"async_compile": True}
  tpu-precompiled  tpu-compiled with torch._dynamo.config.caching_precompile, the cold run
                   saving torch.compiler.save_cache_artifacts() and the warm one loading
                   them (load time included in its first step)
  tpu-eager        op by op (its programs come from the disk cache when warm)
  cpu-inductor     torch.compile(backend="inductor") on the CPU, its own caches

    python benchmarks/warm_start.py [--model mingpt|llama] [--repeats 2]

Every run is its own process with its own TORCHINDUCTOR_CACHE_DIR and TORCH_TPU_CACHE_DIR
(shared by its cold and warm run only). As in compile_step.py, the import of PyTorch's
compile stack is timed apart ("import") and the first step is the rest: Dynamo, AOTAutograd,
lowering, compiling or loading, and running forward, backward and the optimizer once.
Printed: seconds, ratios to our cold compiled step and to Inductor's warm one measured in
the same run, and what each warm step traced and compiled.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MODES = ("tpu-compiled", "tpu-async", "tpu-precompiled", "tpu-eager", "cpu-inductor")


def child(args) -> None:
    import torch

    result = {}
    start = time.perf_counter()
    import torch._dynamo  # noqa: F401
    import torch._functorch.aot_autograd  # noqa: F401
    from torch._dynamo.utils import counters

    result["import_s"] = time.perf_counter() - start
    device, _, how = args.mode.partition("-")
    if device == "tpu":
        import torch_tpu
    from compile_step import build, make_step

    artifacts = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "..", "artifacts.bin")
    model, optimizers, batch, loss_of = build(args.model, device)
    model.train()
    start = time.perf_counter()
    run = model
    if how == "precompiled":
        torch._dynamo.config.caching_precompile = True
        if args.warm:
            with open(artifacts, "rb") as f:
                torch.compiler.load_cache_artifacts(f.read())
    if how in ("compiled", "precompiled"):
        run = torch.compile(model, backend="tpu")
    elif how == "async":
        run = torch.compile(model, backend="tpu", options={"async_compile": True})
    elif how == "inductor":
        run = torch.compile(model, backend="inductor")
    loss = make_step(run, model, optimizers, batch, loss_of)()
    result["loss"] = loss.item()
    result["first_step_s"] = time.perf_counter() - start
    result["dynamo_frames"] = counters["stats"]["unique_graphs"]
    result["aot_traces"] = (
        counters["aot_autograd"]["autograd_cache_miss"]
        + counters["aot_autograd"]["autograd_cache_bypass"]
    )
    if device == "tpu":
        m = torch_tpu.metrics.snapshot()
        result.update(
            compiles=m["compiles"],
            xla_s=m["compile_seconds"],
            graph_build_s=m["graph_build_seconds"],
        )
    if how == "precompiled" and not args.warm:
        with open(artifacts, "wb") as f:
            f.write(torch.compiler.save_cache_artifacts()[0])
    print(json.dumps(result))


def run_child(mode: str, args, caches: str, warm: bool) -> dict:
    env = dict(
        os.environ,
        TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
        TORCH_TPU_CACHE_DIR=os.path.join(caches, "tpu"),
    )
    if mode.startswith("cpu"):
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, __file__, "--child", "--mode", mode, "--model", args.model]
    if warm:
        cmd.append("--warm")
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, env=env, text=True, cwd=tempfile.gettempdir()
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("mingpt", "llama"), default="mingpt")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return

    print(
        f"{args.model}: first training step in a fresh process, seconds (import of the "
        "compile stack apart)"
    )
    print(
        f"{'mode':<16} {'run':>3} {'import':>7} {'cold':>7} {'warm':>7} {'warm/cold':>9} "
        f"{'warm: frames':>12} {'AOT traces':>10} {'compiles':>8}"
    )
    results = {}
    for repeat in range(args.repeats):
        for mode in args.modes:
            with tempfile.TemporaryDirectory() as caches:
                cold = run_child(mode, args, caches, warm=False)
                warm = run_child(mode, args, caches, warm=True)
            if abs(cold["loss"] - warm["loss"]) > 1e-4:
                raise SystemExit(f"{mode}: warm loss {warm['loss']} != cold {cold['loss']}")
            results.setdefault(mode, []).append((cold, warm))
            print(
                f"{mode:<16} {repeat + 1:>3} {warm['import_s']:>7.2f} "
                f"{cold['first_step_s']:>7.2f} {warm['first_step_s']:>7.2f} "
                f"{warm['first_step_s'] / cold['first_step_s']:>9.2f} "
                f"{warm['dynamo_frames']:>12} {warm['aot_traces']:>10} "
                f"{warm.get('compiles', '-'):>8}",
                flush=True,
            )

    def best(mode, which):
        return min(r[which]["first_step_s"] for r in results[mode])

    if "tpu-compiled" in results:
        ours_cold = best("tpu-compiled", 0)
        print(
            "\nratios of the best runs (target: warm <= 0.25x our cold compiled step, and "
            "<= Inductor's warm one)"
        )
        for mode in ("tpu-compiled", "tpu-async", "tpu-precompiled"):
            if mode not in results:
                continue
            line = f"  {mode} warm: {best(mode, 1) / ours_cold:.2f}x our cold compiled step"
            if "cpu-inductor" in results:
                line += f", {best(mode, 1) / best('cpu-inductor', 1):.2f}x Inductor's warm step"
            print(line)


if __name__ == "__main__":
    main()
