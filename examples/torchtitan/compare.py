"""Trains torchtitan 0.3.0's llama3 debugmodel on tpu and, as the reference, on CPU
PyTorch from the same seed checkpoint and data, and compares the losses step by step.

    python examples/torchtitan/compare.py CONFIG [--steps N] [--work DIR]

CONFIG is one of CONFIGS below (README.md beside this file gives the plain torchrun
command each one runs). Prints both loss curves and the largest difference; exits 1 if
it is above --tolerance (1e-3). Every run goes through launch.py under torchrun with
command-line overrides only; the tpu runs set no TORCH_TPU_* variable.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The debugmodel, small enough for a 2-core host: 128-token sequences, 2 per rank.
COMMON = [
    "--module",
    "llama3",
    "--config",
    "llama3_debugmodel",
    "--training.seq-len",
    "128",
    "--training.local-batch-size",
    "2",
    "--lr-scheduler.warmup-steps",
    "1",
    "--metrics.log-freq",
    "1",
    "--debug.seed",
    "42",
    "--debug.deterministic",
    # torchtitan's default, "spmd_types", needs FSDP2's SPMD annotations (torch 2.14+);
    # torch 2.13's FSDP2 and DTensor run the "partial_dtensor" backend, on any device.
    "--parallelism.spmd-backend",
    "partial_dtensor",
]
FSDP2 = ["--parallelism.data-parallel-shard-degree", "2"]

# name: (ranks, tpu arguments, CPU reference ranks, CPU reference arguments)
CONFIGS = {
    "single": (1, [], 1, []),
    "fsdp2": (2, FSDP2, 2, FSDP2),
    "tp2": (2, ["--parallelism.tensor-parallel-degree", "2"], 1, []),
    "fsdp2_compile": (2, FSDP2 + ["--compile.enable"], 2, FSDP2),
    "full_ac": (1, ["activation-checkpoint:full"], 1, []),
    "dcp_resume": (1, [], 1, []),  # saved at step 2, resumed by a second run
}

STEP = re.compile(r"step:\s+(\d+)\s+loss:\s+([-\d.]+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def torchrun(ranks, args, work: Path, log: Path, cpu: bool) -> dict[int, float]:
    # A subcommand (activation-checkpoint:full) comes after every option.
    sub = [a for a in args if a.startswith("activation-checkpoint:")]
    args = [a for a in args if a not in sub] + sub
    env = dict(os.environ)
    if cpu:
        env["TITAN_REFERENCE_DEVICE"] = "cpu"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={ranks}",
        "--local-ranks-filter",
        "0",
        str(HERE / "launch.py"),
        *COMMON,
        "--hf-assets-path",
        str(work / "assets" / "tokenizer"),
        "--dataloader.dataset-path",
        str(work / "assets" / "c4_test"),
        "--dump-folder",
        str(work / "outputs"),
        *args,
    ]
    start = time.time()
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    log.write_text(" ".join(cmd) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise SystemExit(f"torchtitan failed ({log}):\n{tail}")
    losses = {int(s): float(v) for s, v in STEP.findall(ANSI.sub("", done.stdout + done.stderr))}
    print(f"  {'cpu' if cpu else 'tpu'}: {ranks} rank(s), {time.time() - start:.0f} s, {log}")
    return losses


def prepare(work: Path) -> Path:
    """The assets and the seed checkpoint (made once, on CPU, shared by every run)."""
    if not (work / "assets" / "tokenizer" / "tokenizer.json").exists():
        subprocess.run(
            [sys.executable, str(HERE / "make_assets.py"), str(work / "assets")], check=True
        )
    seed = work / "seed" / "step-0"
    if not seed.exists():
        torchrun(
            1,
            [
                "--checkpoint.enable",
                "--checkpoint.create-seed-checkpoint",
                "--checkpoint.folder",
                str(work / "seed"),
                "--training.steps",
                "1",
            ],
            work,
            work / "seed.log",
            cpu=True,
        )
    return seed


def checkpointing(work: Path, name: str, seed: Path) -> list[str]:
    folder = work / "checkpoints" / name
    shutil.rmtree(folder, ignore_errors=True)
    return [
        "--checkpoint.enable",
        "--checkpoint.folder",
        str(folder),
        "--checkpoint.initial-load-path",
        str(seed),
        "--checkpoint.interval",
        "1000",
        "--checkpoint.no-last-save-model-only",
    ]


def train(config, work, seed, steps, ranks, args, cpu) -> dict[int, float]:
    """The config's losses by step, on CPU (the reference) or tpu."""
    device = "cpu" if cpu else "tpu"
    if config != "dcp_resume":
        return torchrun(
            ranks,
            args + steps + checkpointing(work, f"{config}.{device}", seed),
            work,
            work / "logs" / f"{config}.{device}.log",
            cpu,
        )
    # One run saves at step 2 and stops; a second run in the same folder resumes from
    # that checkpoint (not the seed) and trains to the end. The CPU reference does the
    # same: on torch 2.13 torchtitan's resumed steps after the first differ from an
    # uninterrupted run on CPU too (README.md), so resumed is compared with resumed.
    saving = checkpointing(work, f"resume.{device}", seed)
    saving[saving.index("--checkpoint.interval") + 1] = "2"
    torchrun(
        ranks,
        args + ["--training.steps", "2"] + saving,
        work,
        work / "logs" / f"dcp_resume.{device}.save.log",
        cpu,
    )
    got = torchrun(
        ranks, args + steps + saving, work, work / "logs" / f"dcp_resume.{device}.resume.log", cpu
    )
    if min(got) != 3:
        raise SystemExit(f"the resumed run started at step {min(got)}, not 3")
    return got


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config", choices=sorted(CONFIGS))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/torch_tpu_torchtitan"))
    parser.add_argument("--tolerance", type=float, default=1e-3)
    opts = parser.parse_args()
    work = opts.work.resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    seed = prepare(work)
    ranks, args, ref_ranks, ref_args = CONFIGS[opts.config]
    steps = ["--training.steps", str(opts.steps)]
    print(f"{opts.config}: {opts.steps} steps")
    ref = train(opts.config, work, seed, steps, ref_ranks, ref_args, cpu=True)
    got = train(opts.config, work, seed, steps, ranks, args, cpu=False)
    worst = 0.0
    print(" step   tpu loss    cpu loss")
    for step in sorted(got):
        print(f" {step:4d}  {got[step]:9.5f}  {ref[step]:9.5f}")
        worst = max(worst, abs(got[step] - ref[step]))
    ok = worst <= opts.tolerance and max(got) == opts.steps and set(got) <= set(ref)
    print(
        f"{opts.config}: largest difference {worst:.2e} ({'ok' if ok else 'ABOVE'} "
        f"{opts.tolerance:g})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
