"""Serving throughput on one run: a ~30M-parameter Llama (random weights, own
tokenizer), 32 requests of 64 prompt tokens and 64 output tokens, greedy.

Rows: vLLM's offline API on tpu (compiled steps, after its warm-up; `vllm-sync`: without
async scheduling, so each step's host work waits for the previous step), SGLang's offline
API on tpu (compiled steps, after its warm-up; radix cache off, so the timed run
prefills again), Hugging Face `generate` on tpu (static cache, so shapes do not change
per token) and on the CPU (its default dynamic cache), both batching all 32 requests
and warmed up first. Prints output tokens/s, time to first token and the compiles in
the timed part; run it in the vLLM venv (scripts/serving_venvs.sh). SGLang cannot
share that venv: its row runs this script again in the SGLang venv
(`$TORCH_TPU_SERVING_VENVS/sglang`, default /work/venvs/sglang), skipped without one.

    /work/venvs/vllm/bin/python benchmarks/serving.py [--rows hf-cpu,hf-tpu,vllm,sglang]

The model is made once under $TORCH_TPU_SERVING_BENCH_DIR (default
~/.cache/torch_tpu/serving_bench) and reused, so a later run's engines start warm.

--profile: after the vLLM row, its workload once more under torch.profiler: the device's
busy time against the time it waited for the host, per phase of vLLM's model runner, and
the device time per program (TORCH_TPU_SERVING_TRACE=path keeps the trace).

--startup: engine start to the answers of 3 short prompts instead, vLLM and SGLang,
compiled and eager, each cold (empty PyTorch and torch_tpu cache directories) then warm
(the same directories again), every start in a fresh process; a small configuration
(the serving tests': a tiny Llama, steps of up to 64 tokens, contexts up to 128), and the
Dynamo frames traced and XLA programs compiled during each start.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # metrics see the engine

import torch

import torch_tpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples" / "serving"))
from tiny_model import make_tiny_model  # noqa: E402

NUM_REQUESTS, PROMPT_LEN, OUTPUT_LEN = 32, 64, 64


def prompts(vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return torch.randint(3, vocab, (NUM_REQUESTS, PROMPT_LEN), generator=g).tolist()


def bench_vllm(
    path: str,
    ids: list[list[int]],
    eager: bool,
    profile: bool = False,
    async_scheduling: bool = True,
) -> dict:
    import vllm

    start = time.perf_counter()
    llm = vllm.LLM(
        async_scheduling=async_scheduling,
        model=path,
        dtype="float32",
        enforce_eager=eager,
        max_model_len=PROMPT_LEN + OUTPUT_LEN,
        max_num_seqs=NUM_REQUESTS,
        max_num_batched_tokens=512,
        kv_cache_memory_bytes=256 << 20,
        seed=0,
        disable_log_stats=False,
    )  # per-request metrics (first-token latency)
    startup = time.perf_counter() - start
    params = vllm.SamplingParams(temperature=0.0, max_tokens=OUTPUT_LEN, min_tokens=OUTPUT_LEN)
    reqs = [{"prompt_token_ids": p} for p in ids]
    # Warmed up on the same workload, as the HF rows are: vLLM's small per-batch-size
    # ops (input staging, logits of the sampled rows) compile once per size.
    llm.generate(reqs, params, use_tqdm=False)
    before = torch_tpu.metrics.snapshot()["compiles"]
    start = time.perf_counter()
    outs = llm.generate(reqs, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    # All requests arrive at once: the batch's time to first token is the latest one.
    ttft = [o.metrics.first_token_latency for o in outs if o.metrics is not None]
    if profile:
        profile_steps(functools.partial(llm.generate, reqs, params, use_tqdm=False))
    del llm
    return dict(
        tokens=tokens,
        seconds=seconds,
        startup=startup,
        ttft=max(ttft) if ttft else float("nan"),
        compiles=torch_tpu.metrics.snapshot()["compiles"] - before,
    )


# vLLM's model runner opens these scopes under VLLM_CUSTOM_SCOPES_FOR_PROFILING (set by
# --profile before vLLM is imported); the engine core's own step is outside them.
VLLM_PHASES = ("preprocess", "forward", "postprocess", "sample", "bookkeep", "ModelRunnerOutput")


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _overlap(span: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(span[1], e) - max(span[0], s)) for s, e in busy)


def profile_steps(run) -> None:
    """Host against device in one more run of the timed workload, under torch.profiler
    (CPU and tpu activities): the device's busy time is the union of its program runs
    (one kernel event each); the rest of the run's wall time the device waited for the
    host. Per vLLM phase: its host time per step, and how much of it the device sat idle."""
    from torch.profiler import ProfilerActivity, profile

    with tempfile.TemporaryDirectory() as tmp:
        trace = pathlib.Path(tmp) / "trace.json"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            run()
        prof.export_chrome_trace(str(trace))
        if keep := os.environ.get("TORCH_TPU_SERVING_TRACE"):
            shutil.copy(trace, keep)  # for chrome://tracing or Perfetto
        events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]

    def spans(pred) -> list[tuple[float, float]]:
        return [(e["ts"], e["ts"] + e["dur"]) for e in events if pred(e)]

    busy = _union(spans(lambda e: e.get("cat") == "kernel"))
    phases = {
        name: spans(lambda e, n=name: e["name"] == f"gpu_model_runner: {n}") for name in VLLM_PHASES
    }
    steps = len(phases["forward"])
    if not busy or not steps:
        print("profile: no device runs or no vLLM phases recorded")
        return
    # The run: from the first step's start to the last device run's end.
    start = min(s for spans_ in phases.values() for s, _ in spans_)
    end = max(busy[-1][1], max(e for spans_ in phases.values() for _, e in spans_))
    wall = end - start
    device = _overlap((start, end), busy)
    print(f"\nprofile of one more run: {steps} model steps, {wall / 1e3 / steps:.2f} ms per step")
    print(
        f"  device busy {device / 1e3 / steps:.2f} ms per step; waiting for the host "
        f"{(wall - device) / 1e3 / steps:.2f} ms ({(wall - device) / wall:.1%} of the run)"
    )
    print(f"  {'phase':20} {'host ms/step':>13} {'device idle in it':>18}")
    for name, spans_ in phases.items():
        host = sum(e - s for s, e in spans_)
        idle = host - sum(_overlap(span, busy) for span in spans_)
        print(f"  {name:20} {host / 1e3 / steps:13.2f} {idle / 1e3 / steps:15.2f} ms")
    inside = _union([span for spans_ in phases.values() for span in spans_])
    outside_idle = (wall - device) - sum((e - s) - _overlap((s, e), busy) for s, e in inside)
    print(f"  {'outside the phases':20} {'':13} {outside_idle / 1e3 / steps:15.2f} ms")
    per_program: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "kernel":
            per_program.setdefault(e["name"], []).append(e["dur"])
    print(f"  {'device time by program':40} {'ms/step':>8} {'runs/step':>10}")
    for name, durs in sorted(per_program.items(), key=lambda kv: -sum(kv[1]))[:6]:
        print(f"  {name[:40]:40} {sum(durs) / 1e3 / steps:8.2f} {len(durs) / steps:10.1f}")


def bench_sglang(path: str, ids: list[list[int]]) -> dict | None:
    """The SGLang row, run by this script in the SGLang venv (`sglang_row`)."""
    venvs = os.environ.get("TORCH_TPU_SERVING_VENVS", "/work/venvs")
    python = pathlib.Path(venvs) / "sglang" / "bin" / "python"
    if not python.exists():
        print(f"SGLang row skipped: no SGLang venv at {python.parent.parent}")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "sglang.json"
        (pathlib.Path(tmp) / "ids.json").write_text(json.dumps(ids))
        subprocess.run(
            [str(python), "-P", __file__, "--sglang-row", path, tmp],
            check=True,
            env={**os.environ, "SGLANG_PLATFORM": "tpu"},
        )
        return json.loads(out.read_text())


def sglang_row(path: str, tmp: str) -> None:
    """SGLang's offline Engine on tpu; writes the row to `tmp`/sglang.json. The model
    runs in SGLang's scheduler subprocess: its compile counts come from the file
    named by TORCH_TPU_SGLANG_STATS (torch_tpu/serving/sglang/compiled.py)."""
    import sglang as sgl

    ids = json.loads((pathlib.Path(tmp) / "ids.json").read_text())
    stats = pathlib.Path(tmp) / "stats.json"
    os.environ["TORCH_TPU_SGLANG_STATS"] = str(stats)
    start = time.perf_counter()
    # Chunks of 512 tokens, as vLLM's row batches: token buckets 16 to 512 by
    # block-table widths 64 and 128, all compiled during start-up.
    llm = sgl.Engine(
        model_path=path,
        device="tpu",
        dtype="float32",
        random_seed=0,
        context_length=PROMPT_LEN + OUTPUT_LEN,
        chunked_prefill_size=512,
        max_running_requests=NUM_REQUESTS,
        disable_radix_cache=True,
        max_total_tokens=NUM_REQUESTS * (PROMPT_LEN + OUTPUT_LEN) * 2,
        log_level="warning",
    )
    startup = time.perf_counter() - start

    def run(new_tokens):
        params = {"temperature": 0.0, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens}
        return llm.generate(input_ids=ids, sampling_params=params)

    def compiles():
        return json.loads(stats.read_text())["compiles_after_warmup"]

    # Warmed up on the same workload, as the other rows are: the eager ops around the
    # compiled steps (logits of the last tokens, sampling) compile once per size.
    run(OUTPUT_LEN)
    start = time.perf_counter()
    run(1)
    ttft = time.perf_counter() - start
    before = compiles()
    start = time.perf_counter()
    outs = run(OUTPUT_LEN)
    seconds = time.perf_counter() - start
    row = dict(
        tokens=sum(len(o["output_ids"]) for o in outs),
        seconds=seconds,
        startup=startup,
        ttft=ttft,
        compiles=compiles() - before,
        warmup=json.loads(stats.read_text()),
    )
    llm.shutdown()
    (pathlib.Path(tmp) / "sglang.json").write_text(json.dumps(row))


def bench_hf(path: str, ids: list[list[int]], device: str) -> dict:
    from transformers import AutoModelForCausalLM

    # vLLM lowers torch's thread count for itself; the CPU row gets every core.
    torch.set_num_threads(os.cpu_count())
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval().to(device)
    input_ids = torch.tensor(ids, device=device)
    kw = dict(do_sample=False, pad_token_id=model.config.pad_token_id)
    if device == "tpu":
        kw["cache_implementation"] = "static"

    def run(new_tokens):
        with torch.no_grad():
            out = model.generate(
                input_ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw
            )
        return out[:, PROMPT_LEN:].cpu()

    run(OUTPUT_LEN)  # warm-up: compiles every program of the timed run
    start = time.perf_counter()
    run(1)
    ttft = time.perf_counter() - start
    before = torch_tpu.metrics.snapshot()["compiles"]
    start = time.perf_counter()
    out = run(OUTPUT_LEN)
    seconds = time.perf_counter() - start
    return dict(
        tokens=out.numel(),
        seconds=seconds,
        ttft=ttft,
        startup=float("nan"),
        compiles=torch_tpu.metrics.snapshot()["compiles"] - before,
    )


STARTUP_PROMPTS = ["Hello", "The quick brown fox", "Once upon a time"]


def startup_run(engine: str, mode: str, path: str) -> None:
    """One engine start in this process (in that engine's venv): prints a JSON line
    with the seconds from creating the engine to the answers of STARTUP_PROMPTS."""
    eager = mode == "eager"
    start = time.perf_counter()
    if engine == "vllm":
        import vllm
        from torch._dynamo.utils import counters

        llm = vllm.LLM(
            model=path,
            dtype="float32",
            enforce_eager=eager,
            max_model_len=128,
            max_num_seqs=8,
            max_num_batched_tokens=64,
            kv_cache_memory_bytes=16 << 20,
            seed=0,
        )
        params = vllm.SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8)
        llm.generate(STARTUP_PROMPTS, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        frames = counters["stats"]["unique_graphs"]
        compiles = torch_tpu.metrics.snapshot()["compiles"]
    else:
        import sglang as sgl

        stats = pathlib.Path(tempfile.mkdtemp()) / "stats.json"
        os.environ["TORCH_TPU_SGLANG_STATS"] = str(stats)
        os.environ["TORCH_TPU_SGLANG_EAGER"] = "1" if eager else "0"
        llm = sgl.Engine(
            model_path=path,
            device="tpu",
            dtype="float32",
            random_seed=0,
            context_length=128,
            max_total_tokens=2048,
            chunked_prefill_size=64,
            max_running_requests=8,
            log_level="warning",
        )
        llm.generate(STARTUP_PROMPTS, {"temperature": 0.0, "max_new_tokens": 8})
        seconds = time.perf_counter() - start
        warmup = json.loads(stats.read_text())
        llm.shutdown()
        # The scheduler's own counts (its warm-up; eager mode has none).
        frames = warmup.get("warmup_traced_frames", 0)
        compiles = warmup.get("warmup_compiles", 0)
    print(json.dumps(dict(seconds=seconds, frames=frames, compiles=compiles)))


def bench_startup(engines: list[str]) -> None:
    venvs = pathlib.Path(os.environ.get("TORCH_TPU_SERVING_VENVS", "/work/venvs"))
    print("engine start to the answers of 3 prompts (tiny Llama), cold then warm caches")
    print(f"{'':22} {'cold s':>7} {'warm s':>7} {'warm frames':>12} {'warm compiles':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(make_tiny_model(tmp, "llama"))
        warm = {}
        for engine in engines:
            python = venvs / engine / "bin" / "python"
            if not python.exists():
                print(f"{engine}: skipped, no venv at {python.parent.parent}")
                continue
            for mode in ("compiled", "eager"):
                caches = pathlib.Path(tmp) / f"{engine}-{mode}"
                env = {
                    **os.environ,
                    "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
                    "TORCH_TPU_CACHE_DIR": str(caches / "tpu"),
                    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                    "SGLANG_PLATFORM": "tpu",
                }
                runs = []
                for _ in ("cold", "warm"):
                    out = subprocess.run(
                        [str(python), "-P", __file__, "--startup-run", engine, mode, path],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                    runs.append(json.loads(out.strip().splitlines()[-1]))
                warm[engine, mode] = runs[1]["seconds"]
                print(
                    f"{engine + ' ' + mode:22} {runs[0]['seconds']:7.1f} "
                    f"{runs[1]['seconds']:7.1f} {runs[1]['frames']:12d} "
                    f"{runs[1]['compiles']:14d}"
                )
        for engine in engines:
            if (engine, "compiled") in warm and (engine, "eager") in warm:
                print(
                    f"  {engine}: warm compiled start = "
                    f"{warm[engine, 'compiled'] / warm[engine, 'eager']:.2f}x warm eager"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="hf-cpu,hf-tpu,vllm,sglang")
    parser.add_argument("--eager", action="store_true", help="vLLM without compiled steps")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the vLLM row, host against device per step and phase (torch.profiler)",
    )
    parser.add_argument(
        "--sglang-row", nargs=2, metavar=("MODEL", "DIR"), help=argparse.SUPPRESS
    )  # the SGLang row, in the SGLang venv
    parser.add_argument(
        "--startup",
        action="store_true",
        help="engine start-up times instead (--rows picks vllm, sglang)",
    )
    parser.add_argument(
        "--startup-run", nargs=3, metavar=("ENGINE", "MODE", "MODEL"), help=argparse.SUPPRESS
    )  # one start, in that engine's venv
    args = parser.parse_args()
    if args.profile:
        os.environ["VLLM_CUSTOM_SCOPES_FOR_PROFILING"] = "1"
    if args.startup_run:
        startup_run(*args.startup_run)
        return
    if args.startup:
        engines = [r for r in args.rows.split(",") if r in ("vllm", "sglang")]
        bench_startup(engines or ["vllm", "sglang"])
        return
    if args.sglang_row:
        sglang_row(*args.sglang_row)
        return
    rows = args.rows.split(",")
    # The model is made once and kept: vLLM keys the step graphs a warm start loads
    # with the model's path, so a fresh directory per run would trace every bucket again.
    root = pathlib.Path(
        os.environ.get("TORCH_TPU_SERVING_BENCH_DIR", "~/.cache/torch_tpu/serving_bench")
    ).expanduser()
    model = root / "llama-30m"
    if not model.is_dir():
        # Made aside and moved into place whole: an interrupted run leaves no half model.
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            os.replace(make_tiny_model(pathlib.Path(tmp) / "model", "llama", "30m"), model)
    path = str(model)
    from safetensors.torch import load_file

    weights = load_file(str(model / "model.safetensors"))
    params = sum(w.numel() for w in weights.values())
    ids = prompts(weights["model.embed_tokens.weight"].shape[0])
    results = {}
    for row in rows:
        if row in ("vllm", "vllm-sync"):
            name = "vLLM on tpu" + (" (eager)" if args.eager else "")
            if row == "vllm-sync":
                name += ", no async scheduling"
            results[name] = bench_vllm(path, ids, args.eager, args.profile, row == "vllm")
        elif row == "sglang":
            result = bench_sglang(path, ids)
            if result is not None:
                results["SGLang on tpu"] = result
                w = result["warmup"]
                print(
                    f"SGLang warm-up: token buckets {w['token_buckets']} x widths "
                    f"{w['width_buckets']}: {w['warmup_graphs']} step graphs, "
                    f"{w['warmup_compiles']} compiles, {w['warmup_disk_hits']} "
                    f"disk-cache loads, {w['warmup_seconds']} s"
                )
        elif row == "hf-tpu":
            results["HF generate on tpu (static cache)"] = bench_hf(path, ids, "tpu")
        elif row == "hf-cpu":
            results["HF generate on CPU"] = bench_hf(path, ids, "cpu")
        else:
            raise SystemExit(f"unknown row {row!r}")
    print(
        f"{NUM_REQUESTS} requests x {PROMPT_LEN} prompt + {OUTPUT_LEN} output tokens, "
        f"greedy, Llama of {params / 1e6:.1f}M parameters (random weights)"
    )
    print(f"{'':36} {'tokens/s':>9} {'TTFT s':>8} {'startup s':>10} {'compiles':>9}")
    for name, r in results.items():
        print(
            f"{name:36} {r['tokens'] / r['seconds']:9.1f} {r['ttft']:8.2f} "
            f"{r['startup']:10.1f} {r['compiles']:9d}"
        )
    base = results.get("HF generate on CPU")
    if base:
        for name, r in results.items():
            print(
                f"  {name}: {r['tokens'] / r['seconds'] / (base['tokens'] / base['seconds']):.2f}x HF CPU"
            )


if __name__ == "__main__":
    main()
