"""Fixtures for the serving tests: tiny models written on the fly (no downloads) and
the Hugging Face reference generation on the CPU.

The tests marked vllm or sglang run in that engine's venv (scripts/serving_venvs.sh) and
are not collected where it is missing; the others (paged attention, what both plugins
share) run anywhere.
"""

import contextlib
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "serving"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tiny_model import make_tiny_model  # noqa: E402

# An engine's test files (marked with its name: scripts/test.sh selects by marker) are
# collected only where the engine is installed, so another venv does not count them as
# skipped modules.
collect_ignore_glob = [
    f"test_{engine}_*.py"
    for engine in ("vllm", "sglang")
    if importlib.util.find_spec(engine) is None
]

# Prompts of different lengths (1 to ~40 tokens), so a batch mixes short and long
# prefills and decodes of different context lengths.
PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "A tensor is a multi-dimensional array of numbers on a device. Paged attention "
    "stores keys and values in fixed-size blocks of a cache.",
    "Once upon a time",
    "XLA compiles programs ahead of time; shapes decide how many programs exist, "
    "so serving engines pad",
]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """tiny_model(arch) -> path of a saved random-weight model of that architecture."""
    made = {}

    def get(arch: str = "llama") -> str:
        if arch not in made:
            made[arch] = str(make_tiny_model(tmp_path_factory.mktemp(arch), arch=arch))
        return made[arch]

    return get


def hf_greedy(path: str, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """Greedy continuations from Hugging Face `generate` on the CPU, one prompt at a
    time (no padding), as token ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return greedy_tokens(model, tok, prompts, max_new_tokens)


def greedy_tokens(model, tok, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """`hf_greedy` for a model already loaded (and possibly changed: merged adapters)."""
    out = []
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            gen = model.generate(
                ids,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                min_new_tokens=max_new_tokens,
                pad_token_id=tok.pad_token_id,
            )
        out.append(gen[0, ids.shape[1] :].tolist())
    return out


# Bounds of the server tests' waits, in seconds.
SERVER_STARTUP_TIMEOUT = 600
REQUEST_TIMEOUT = 120


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(
    cmd: list[str],
    log: pathlib.Path,
    base: str,
    timeout: float = SERVER_STARTUP_TIMEOUT,
    env: dict | None = None,
):
    """Starts `cmd` (an engine's HTTP server) in its own process group with its output
    in `log`, waits (at most `timeout` s) until `base`/health answers 200, yields the
    process, and kills its whole process group at the end."""
    import requests

    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{cmd[0]} exited with {proc.returncode}:\n" + log.read_text()[-5000:])
            try:
                if requests.get(base + "/health", timeout=5).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):  # not up, or busy
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd[0]} did not become healthy:\n" + log.read_text()[-5000:])
            time.sleep(2)
        yield proc
    finally:
        # The server's process group: the HTTP server and its engine processes.
        for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:  # the group is gone
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
