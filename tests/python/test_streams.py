"""torch.tpu.Stream / Event / current_stream, as torch.cuda has them."""

import time

import pytest
import torch

import torch_tpu


def _busy(n=6, size=600):
    # Enough device work that an event recorded after it is not done at once.
    xs = [torch.randn(size, size, device="tpu")]
    for _ in range(n):
        xs.append(xs[-1] @ xs[-1] / size)
        # In fused mode, one launch per product too. Every result stays alive: a program
        # given a buffer to donate that is still being computed waits for it.
        torch_tpu.flush()
    return xs[-1]


def test_streams_and_context():
    default = torch.tpu.default_stream()
    assert torch.tpu.current_stream() == default
    assert default.stream_id == 0 and default.device == torch.device("tpu:0")
    s = torch.tpu.Stream()
    assert isinstance(s, torch.tpu.Stream) and isinstance(s, torch.Stream)
    assert not isinstance(torch.Stream(device="cpu"), torch.tpu.Stream)
    assert s != default
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        assert torch.accelerator.current_stream() == s
        x = torch.ones(3, device="tpu") * 2
    assert torch.tpu.current_stream() == default
    torch.tpu.set_stream(s)
    assert torch.tpu.current_stream() == s
    torch.tpu.set_stream(default)
    with s:
        assert torch.tpu.current_stream() == s
    assert torch.equal(x.cpu(), torch.full((3,), 2.0))


def test_event_records_and_waits_for_enqueued_work():
    x = _busy()
    e = torch.tpu.Event()
    e.record()
    e.synchronize()
    assert e.query()
    # the work before the record is finished: reading it needs no more device time
    start = time.perf_counter()
    x.cpu()
    assert time.perf_counter() - start < 0.05
    # an event recorded with nothing enqueued is complete at once
    torch.tpu.synchronize()
    idle = torch.tpu.Event()
    idle.record()
    assert idle.query()


def test_event_query_sees_pending_work():
    torch.tpu.synchronize()
    busy = _busy(10, size=1200)  # noqa: F841 (kept: fused mode computes only results something holds)
    e = torch.tpu.Event()
    e.record()
    pending = not e.query()
    e.synchronize()
    assert e.query()
    assert pending, "an event recorded after ~0.3 s of queued work was already complete"


def test_elapsed_time():
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    torch.tpu.synchronize()
    start.record()
    busy = _busy(10)  # noqa: F841 (kept: fused mode skips work nothing holds)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 0 < ms < 60_000
    plain = torch.tpu.Event()
    plain.record()
    plain.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        start.elapsed_time(plain)


def test_stream_waits_and_record_event():
    s = torch.tpu.Stream()
    x = _busy()
    s.wait_stream(torch.tpu.current_stream())
    e = s.record_event()
    e.wait(torch.tpu.current_stream())
    torch.tpu.current_stream().wait_event(e)
    s.synchronize()
    assert s.query() and e.query()
    assert torch.isfinite(x.cpu()).all()


def test_non_blocking_copy_to_pinned_host_memory_returns_at_once():
    # As on CUDA: into pinned memory (what `.to("cpu", non_blocking=True)` allocates), the
    # copy is enqueued after the work that computes its source and returns before the
    # values are there; an event recorded after it, or synchronize(), waits for them.
    torch.tpu.synchronize()
    busy = _busy(20, size=1200)  # ~0.7 s: enough under a loaded machine's scheduling
    src = busy.sum(0)
    host = src.to("cpu", non_blocking=True)
    e = torch.tpu.Event()
    e.record()
    pending = not e.query()
    assert host.is_pinned() and host.shape == src.shape and host.dtype == src.dtype
    e.synchronize()
    assert torch.equal(host, src.cpu())
    assert pending, "the copy waited for ~0.7 s of queued work"

    # Into a preallocated pinned tensor, from a view (a program makes it dense first);
    # torch.tpu.synchronize() waits for the copy too.
    x = torch.randn(48, 32)
    dst = torch.empty(32, 48).pin_memory()
    dst.copy_(x.to("tpu").t(), non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(dst, x.t())


def test_non_blocking_copy_keeps_its_source_and_destination_alive():
    torch.tpu.synchronize()
    busy = _busy(10, size=1200)
    expected = busy.sum(1).cpu()
    busy = _busy(10, size=1200)
    src = busy.sum(1)
    host = src.to("cpu", non_blocking=True)
    kept = host.view(-1)  # shares the storage the copy writes
    del host, src, busy  # neither end is freed before the copy completes
    torch.tpu.synchronize()
    assert torch.equal(kept, expected)
    dropped = _busy(4).sum(0).to("cpu", non_blocking=True)
    del dropped  # the destination dies first: the copy still has its memory
    torch.tpu.synchronize()


def test_non_blocking_copy_to_pageable_or_converted_memory_blocks():
    # Pageable memory, another dtype or a strided destination: the copy is done on return.
    x = torch.randn(64, 64)
    for dst in (
        torch.empty(64, 64),
        torch.empty(64, 64, dtype=torch.float64).pin_memory(),
        torch.empty(64, 128).pin_memory()[:, ::2],
    ):
        busy = _busy(6)  # noqa: F841 (queued work before the copy)
        dst.copy_(x.to("tpu"), non_blocking=True)
        assert torch.equal(dst, x.to(dst.dtype))
