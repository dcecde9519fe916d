"""`vllm serve ./model` on tpu, on 127.0.0.1: completions, chat, streaming and 16
concurrent requests answered with the tokens Hugging Face gives on the CPU; a prompt
longer than max_model_len gets HTTP 400 and the server keeps serving; a client that
disconnects mid-stream does not stop it. Every wait is bounded; the server is killed at
the end."""

import concurrent.futures
import json
import os
import shutil
import sys
import time

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)
requests = pytest.importorskip("requests")

from conftest import (  # noqa: E402
    PROMPTS,
    REQUEST_TIMEOUT,
    free_port,
    hf_greedy,
    running_server,
)

MAX_MODEL_LEN = 128


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    path = model_dir("llama")
    port = free_port()
    vllm_cli = shutil.which("vllm", path=os.path.dirname(sys.executable)) or "vllm"
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    cmd = [
        vllm_cli,
        "serve",
        path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        "16",
        "--max-num-batched-tokens",
        "256",
        "--kv-cache-memory-bytes",
        str(32 << 20),
        "--seed",
        "0",
        # What these tests check is the server's (HTTP, streaming, concurrency, errors);
        # the compiled model's tokens are test_vllm_offline's and warm start's. Eager, the
        # server starts in a fifth of the time (CI time).
        "--enforce-eager",
    ]
    base = f"http://127.0.0.1:{port}"
    with running_server(cmd, log, base) as proc:
        yield base, path, proc


def complete(base, path, prompt, max_tokens=8, **kw):
    body = {
        "model": path,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "temperature": 0.0,
        "return_token_ids": True,
        **kw,
    }
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_completions_match_hf(server):
    base, path, _ = server
    expected = hf_greedy(path, PROMPTS[:3], 8)
    for prompt, want in zip(PROMPTS[:3], expected):
        choice = complete(base, path, prompt)
        assert choice["token_ids"] == want


def test_chat_and_streaming(server):
    base, path, _ = server
    body = {
        "model": path,
        "messages": [{"role": "user", "content": "Hello, how are you?"}],
        "max_tokens": 6,
        "min_tokens": 6,
        "temperature": 0.0,
    }
    r = requests.post(base + "/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    whole = r.json()["choices"][0]["message"]["content"]
    assert whole

    # vLLM merges the deltas a slow reader has not taken yet (its output collector), so
    # how many events carry text depends on timing; the stream's shape does not: the
    # role first, then the text, then the finish reason and (asked for) the usage.
    events = []
    with requests.post(
        base + "/v1/chat/completions",
        json={**body, "stream": True, "stream_options": {"include_usage": True}},
        stream=True,
        timeout=REQUEST_TIMEOUT,
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                events.append(json.loads(line[6:]))
    choices = [e["choices"][0] for e in events if e["choices"]]
    assert choices[0]["delta"].get("role") == "assistant"
    assert choices[-1]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 6
    pieces = [c["delta"].get("content") or "" for c in choices]
    assert "".join(pieces) == whole


def test_sixteen_concurrent_requests(server):
    base, path, _ = server
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(16)]
    expected = dict(zip(PROMPTS, hf_greedy(path, PROMPTS, 8)))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        choices = list(pool.map(lambda p: complete(base, path, p), prompts))
    for prompt, choice in zip(prompts, choices):
        if prompt in expected:  # trailing spaces change the tokens of the others
            assert choice["token_ids"] == expected[prompt]
        assert len(choice["token_ids"]) == 8


def test_too_long_prompt_is_400_and_server_survives(server):
    base, path, proc = server
    body = {"model": path, "prompt": "fox " * (MAX_MODEL_LEN * 2), "max_tokens": 4}
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 400, r.text
    assert proc.poll() is None
    assert len(complete(base, path, "Hello")["token_ids"]) == 8


def test_client_disconnect_mid_stream(server):
    base, path, proc = server
    body = {
        "model": path,
        "prompt": "Once upon a time",
        "max_tokens": 100,
        "min_tokens": 100,
        "temperature": 0.0,
        "stream": True,
    }
    with requests.post(
        base + "/v1/completions", json=body, stream=True, timeout=REQUEST_TIMEOUT
    ) as r:
        next(r.iter_lines())  # one chunk, then hang up
    assert proc.poll() is None
    assert len(complete(base, path, "Hello")["token_ids"]) == 8
    metrics = requests.get(base + "/metrics", timeout=REQUEST_TIMEOUT).text
    running = [l for l in metrics.splitlines() if l.startswith("vllm:num_requests_running")]
    deadline = time.monotonic() + 30
    while running and any(float(l.split()[-1]) > 0 for l in running):
        assert time.monotonic() < deadline, running  # the abandoned sequence was freed
        time.sleep(1)
        metrics = requests.get(base + "/metrics", timeout=REQUEST_TIMEOUT).text
        running = [l for l in metrics.splitlines() if l.startswith("vllm:num_requests_running")]
