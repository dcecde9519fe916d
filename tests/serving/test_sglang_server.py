"""`python -m sglang.launch_server --device tpu` on 127.0.0.1 with a tiny Qwen3 and
compiled steps: OpenAI-compatible completions give the tokens Hugging Face gives on
the CPU, for single and 16 concurrent requests, streamed or not; chat completions
answer; a prompt longer than the context gets HTTP 400 and the server keeps serving;
a client that disconnects mid-stream has its request aborted and freed; no step
program compiles after warm-up (the server runs with TORCH_TPU_NO_COMPILE=1, under
which one would raise). Every wait is bounded; the server's process group is
killed at the end."""

import concurrent.futures
import json
import os
import sys
import time

import pytest

pytest.importorskip("sglang")
pytestmark = pytest.mark.sglang  # runs in the engine's venv (scripts/test.sh)
requests = pytest.importorskip("requests")

from conftest import (  # noqa: E402
    PROMPTS,
    REQUEST_TIMEOUT,
    free_port,
    hf_greedy,
    running_server,
)

MAX_TOKENS = 8


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    path = model_dir("qwen3")
    port = free_port()
    tmp = tmp_path_factory.mktemp("sglang-server")
    log, stats = tmp / "server.log", tmp / "stats.json"
    # -P: the repository root (the working directory) must not shadow torch_tpu.
    # A 32-token chunk budget and a 128-token context: token buckets 16 and 32 by
    # block-table widths 64 and 128, all compiled before the server answers.
    cmd = [
        sys.executable,
        "-P",
        "-m",
        "sglang.launch_server",
        "--model-path",
        path,
        "--device",
        "tpu",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--context-length",
        "128",
        "--max-total-tokens",
        "2048",
        "--chunked-prefill-size",
        "32",
        "--max-running-requests",
        "16",
        "--random-seed",
        "0",
        "--log-level",
        "warning",
        "--skip-server-warmup",
    ]
    env = {
        **os.environ,
        "SGLANG_PLATFORM": "tpu",
        "TORCH_TPU_SGLANG_STATS": str(stats),
        "TORCH_TPU_NO_COMPILE": "1",
    }
    env.pop("TORCH_TPU_SGLANG_EAGER", None)
    base = f"http://127.0.0.1:{port}"
    with running_server(cmd, log, base, env=env) as proc:
        yield base, path, proc, stats


def complete_ids(base, path, prompt):
    """Greedy completion of `prompt` as token ids (the tokenizer is a byte-level BPE,
    so the text re-encodes to the ids the server produced)."""
    body = {
        "model": path,
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "min_tokens": MAX_TOKENS,
    }
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"], r.json()["usage"]["completion_tokens"]


def test_completions_match_hf(server):
    from transformers import AutoTokenizer

    base, path, _, _ = server
    tok = AutoTokenizer.from_pretrained(path)
    want = hf_greedy(path, PROMPTS[:3], MAX_TOKENS)
    for prompt, ids in zip(PROMPTS[:3], want):
        text, count = complete_ids(base, path, prompt)
        assert count == MAX_TOKENS
        assert text == tok.decode(ids)


def test_concurrent_completions(server):
    from transformers import AutoTokenizer

    base, path, proc, _ = server
    tok = AutoTokenizer.from_pretrained(path)
    want = {p: tok.decode(ids) for p, ids in zip(PROMPTS, hf_greedy(path, PROMPTS, MAX_TOKENS))}
    prompts = (PROMPTS * 4)[:16]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        results = list(pool.map(lambda p: complete_ids(base, path, p), prompts))
    assert [text for text, _ in results] == [want[p] for p in prompts]
    assert proc.poll() is None


def test_chat_completion(server):
    base, path, _, _ = server
    body = {
        "model": path,
        "messages": [{"role": "user", "content": "Hello, how are you?"}],
        "max_tokens": 6,
        "temperature": 0.0,
    }
    r = requests.post(base + "/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]


def test_streaming_completion(server):
    import json

    base, path, _, _ = server
    whole, _ = complete_ids(base, path, PROMPTS[1])
    body = {
        "model": path,
        "prompt": PROMPTS[1],
        "max_tokens": MAX_TOKENS,
        "min_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "stream": True,
    }
    pieces = []
    with requests.post(
        base + "/v1/completions", json=body, stream=True, timeout=REQUEST_TIMEOUT
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                pieces.append(json.loads(line[6:])["choices"][0]["text"])
    assert len([p for p in pieces if p]) > 1  # it streamed
    assert "".join(pieces) == whole


def test_too_long_prompt_is_400_and_server_survives(server):
    base, path, proc, _ = server
    body = {"model": path, "prompt": "fox " * 300, "max_tokens": 4}
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 400, r.text
    assert proc.poll() is None
    assert complete_ids(base, path, "Hello")[1] == MAX_TOKENS


def test_client_disconnect_frees_its_request(server):
    """A streaming client that goes away mid-stream: the server aborts its request.
    The scheduler is slowed (SGLang's /slow_down test hook: 0.5 s per step), so the
    request's 100 tokens would take ~50 s; /flush_cache succeeds only when no request
    is running or waiting, which it must within 15 s of the disconnect."""
    base, path, proc, _ = server
    body = {
        "model": path,
        "prompt": "Hello",
        "max_tokens": 100,
        "min_tokens": 100,
        "temperature": 0.0,
        "stream": True,
    }
    slow = requests.post(
        base + "/slow_down", json={"forward_sleep_time": 0.5}, timeout=REQUEST_TIMEOUT
    )
    assert slow.status_code == 200, slow.text
    try:
        r = requests.post(base + "/v1/completions", json=body, stream=True, timeout=REQUEST_TIMEOUT)
        assert r.status_code == 200
        chunks = 0
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunks += bool(json.loads(line[6:])["choices"][0]["text"])
            if chunks == 2:
                break
        # Still generating: the cache cannot be flushed under a running request.
        assert requests.post(base + "/flush_cache", timeout=REQUEST_TIMEOUT).status_code == 400
        r.close()  # the client disconnects
        deadline = time.monotonic() + 15
        while requests.post(base + "/flush_cache", timeout=REQUEST_TIMEOUT).status_code != 200:
            assert time.monotonic() < deadline, "the disconnected request is still running"
            time.sleep(0.5)
    finally:
        requests.post(
            base + "/slow_down", json={"forward_sleep_time": None}, timeout=REQUEST_TIMEOUT
        )
    assert proc.poll() is None
    from transformers import AutoTokenizer

    want = hf_greedy(path, ["Hello"], MAX_TOKENS)[0]
    assert complete_ids(base, path, "Hello") == (
        AutoTokenizer.from_pretrained(path).decode(want),
        MAX_TOKENS,
    )


def test_no_step_compile_after_warmup(server):
    """Runs last: every request above (1 to 16 at once, prompts of 1 to 300 tokens,
    streamed, aborted) ran on step programs compiled during warm-up."""
    *_, stats = server
    with open(stats) as f:
        counts = json.load(f)
    assert counts["compiled"]
    assert counts["bucket_pairs"] == 4 and counts["warmup_graphs"] >= 4
    assert counts["steps"] > 0 and counts["eager_steps"] == 0
    assert counts["step_graphs_after_warmup"] == 0
    assert counts["step_compiles_after_warmup"] == 0
