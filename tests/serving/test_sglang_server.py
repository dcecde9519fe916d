"""`python -m sglang.launch_server --device tpu` on 127.0.0.1 with a tiny Qwen3:
OpenAI-compatible completions give the tokens Hugging Face gives on the CPU, for
single and concurrent requests, streamed or not; chat completions answer; a prompt
longer than the context gets HTTP 400 and the server keeps serving. Every wait is
bounded; the server's process group is killed at the end."""

import concurrent.futures
import os
import sys

import pytest

pytest.importorskip("sglang")
requests = pytest.importorskip("requests")

from conftest import (  # noqa: E402
    PROMPTS, REQUEST_TIMEOUT, free_port, hf_greedy, running_server)

MAX_TOKENS = 8


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    path = model_dir("qwen3")
    port = free_port()
    log = tmp_path_factory.mktemp("sglang-server") / "server.log"
    # -P: the repository root (the working directory) must not shadow torch_tpu.
    cmd = [sys.executable, "-P", "-m", "sglang.launch_server", "--model-path", path,
           "--device", "tpu", "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32", "--context-length", "128", "--max-total-tokens", "2048",
           "--max-running-requests", "8", "--random-seed", "0", "--log-level", "warning",
           "--skip-server-warmup"]
    env = {**os.environ, "SGLANG_PLATFORM": "tpu"}
    base = f"http://127.0.0.1:{port}"
    with running_server(cmd, log, base, env=env) as proc:
        yield base, path, proc


def complete_ids(base, path, prompt):
    """Greedy completion of `prompt` as token ids (the tokenizer is a byte-level BPE,
    so the text re-encodes to the ids the server produced)."""
    body = {"model": path, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0.0,
            "min_tokens": MAX_TOKENS}
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"], r.json()["usage"]["completion_tokens"]


def test_completions_match_hf(server):
    from transformers import AutoTokenizer

    base, path, _ = server
    tok = AutoTokenizer.from_pretrained(path)
    want = hf_greedy(path, PROMPTS[:3], MAX_TOKENS)
    for prompt, ids in zip(PROMPTS[:3], want):
        text, count = complete_ids(base, path, prompt)
        assert count == MAX_TOKENS
        assert text == tok.decode(ids)


def test_concurrent_completions(server):
    from transformers import AutoTokenizer

    base, path, proc = server
    tok = AutoTokenizer.from_pretrained(path)
    want = {p: tok.decode(ids) for p, ids in zip(PROMPTS, hf_greedy(path, PROMPTS, MAX_TOKENS))}
    prompts = PROMPTS * 2
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        results = list(pool.map(lambda p: complete_ids(base, path, p), prompts))
    assert [text for text, _ in results] == [want[p] for p in prompts]
    assert proc.poll() is None


def test_chat_completion(server):
    base, path, _ = server
    body = {"model": path, "messages": [{"role": "user", "content": "Hello, how are you?"}],
            "max_tokens": 6, "temperature": 0.0}
    r = requests.post(base + "/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]


def test_streaming_completion(server):
    import json

    base, path, _ = server
    whole, _ = complete_ids(base, path, PROMPTS[1])
    body = {"model": path, "prompt": PROMPTS[1], "max_tokens": MAX_TOKENS,
            "min_tokens": MAX_TOKENS, "temperature": 0.0, "stream": True}
    pieces = []
    with requests.post(base + "/v1/completions", json=body, stream=True,
                       timeout=REQUEST_TIMEOUT) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                pieces.append(json.loads(line[6:])["choices"][0]["text"])
    assert len([p for p in pieces if p]) > 1  # it streamed
    assert "".join(pieces) == whole


def test_too_long_prompt_is_400_and_server_survives(server):
    base, path, proc = server
    body = {"model": path, "prompt": "fox " * 300, "max_tokens": 4}
    r = requests.post(base + "/v1/completions", json=body, timeout=REQUEST_TIMEOUT)
    assert r.status_code == 400, r.text
    assert proc.poll() is None
    assert complete_ids(base, path, "Hello")[1] == MAX_TOKENS
