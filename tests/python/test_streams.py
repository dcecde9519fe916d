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
