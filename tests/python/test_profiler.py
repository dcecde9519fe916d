"""torch.profiler on tpu: device events for every program run (eager, fused, compiled),
host events for compiles and transfers, memory events, and the exported traces."""

import json
import time

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from helpers import assert_same, rand

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def _train_step(model, opt, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.item()


def _profiled(fn, **kwargs):
    """Runs `fn` under the profiler; returns the profile, the programs it ran (the
    `executions` metric), its wall time in microseconds and its result."""
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    start = time.perf_counter()
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        result = fn()
    wall_us = (time.perf_counter() - start) * 1e6
    return prof, torch_tpu.metrics.snapshot()["executions"], wall_us, result


def _check_device_events(prof, executions, wall_us):
    events = _device_events(prof)
    assert executions > 0
    assert len(events) == executions
    assert all(e.device_time > 0 for e in events)
    assert sum(e.device_time for e in events) <= wall_us
    return events


def test_supported_by_default():
    # torch.profiler's default activities are the supported ones: tpu's are among them.
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_eager_training_step(mode):
    model = _model().to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = rand((8, 16), torch.float32).to("tpu")
    previous = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        _train_step(model, opt, x)  # compiles outside the profile
        prof, executions, wall_us, loss = _profiled(lambda: _train_step(model, opt, x))
    finally:
        torch_tpu.set_eager_mode(previous)
    events = _check_device_events(prof, executions, wall_us)
    names = {e.name for e in events}
    if mode == "op":
        # Each op's program is named after it and linked to the aten op that launched it,
        # which therefore shows device time.
        assert {"addmm", "gelu", "gelu_backward", "mm"} <= names
        table = {e.key: e for e in prof.key_averages()}
        assert table["aten::addmm"].self_device_time_total > 0
        assert table["aten::mm"].self_device_time_total > 0
    else:
        assert all(n.startswith("fused (") for n in names)
        flushes = [e for e in prof.events() if e.name == "tpu::fused_flush"]
        assert len(flushes) == executions
    # The same step on CPU gives the same loss: profiling changes nothing.
    cpu_model = _model()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    cpu_x = rand((8, 16), torch.float32)
    _train_step(cpu_model, cpu_opt, cpu_x)
    assert loss == pytest.approx(_train_step(cpu_model, cpu_opt, cpu_x), rel=1e-5, abs=1e-6)


def test_compiled_step(fresh_dynamo):
    model = _model().to("tpu")
    compiled = torch.compile(model, backend="tpu")
    x = rand((8, 16), torch.float32).to("tpu")
    compiled(x).sum().item()
    prof, executions, wall_us, _ = _profiled(lambda: compiled(x).sum().item())
    events = _check_device_events(prof, executions, wall_us)
    graphs = [e for e in events if e.name.startswith("graph (")]
    assert len(graphs) == 1
    # Linked to the host op that ran it: AOTAutograd's CompiledFunction.
    table = {e.key: e for e in prof.key_averages()}
    assert table["CompiledFunction"].device_time_total >= graphs[0].device_time


def test_compile_and_transfer_events():
    torch.tpu.clear_cache(memory=True, disk=False)
    host = rand((5, 7), torch.float32)

    def work():
        # A shape no other test uses: compiled (or loaded from disk) inside the profile.
        y = (host.to("tpu") * 1.75).cumsum(1)
        return y.cpu()

    prof, _, _, result = _profiled(work)
    torch.testing.assert_close(result, (host * 1.75).cumsum(1))
    names = [e.name for e in prof.events()]
    # Each program run here was compiled here: a compile event names it.
    programs = {e.name for e in _device_events(prof)}
    assert programs and all("tpu::compile " + p in names for p in programs)
    assert "tpu::host_to_device" in names and "tpu::device_to_host" in names


def test_chrome_trace_has_device_lane(tmp_path):
    x = rand((32, 32), torch.float32).to("tpu")
    (x @ x).relu().sum().item()
    prof, executions, _, _ = _profiled(lambda: (x @ x).relu().sum().item())
    out = tmp_path / "trace.json"
    prof.export_chrome_trace(str(out))
    trace = json.loads(out.read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == executions
    if torch_tpu.get_eager_mode() == "op":
        assert {e["name"] for e in kernels} == {"mm", "relu", "sum"}
    else:
        assert all(e["name"].startswith("fused (") for e in kernels)
    assert all(e["pid"] == 0 and e["dur"] > 0 and len(e["args"]["program"]) == 32 for e in kernels)
    lanes = {
        e["args"]["name"]
        for e in trace["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == 0
    }
    assert "tpu:0 programs" in lanes
    transfers = [e for e in trace["traceEvents"] if e.get("name") == "tpu::device_to_host"]
    assert transfers and transfers[0]["args"]["bytes"] == 4


def test_schedule_and_tensorboard_handler(tmp_path):
    x = rand((8, 8), torch.float32).to("tpu")
    with profile(
        activities=ACTIVITIES,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(tmp_path)),
    ) as p:
        for _ in range(4):
            (x + 1).sum().item()
            p.step()
    files = list(tmp_path.glob("*.pt.trace.json"))
    assert len(files) == 1
    trace = json.loads(files[0].read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    # add and sum (one fused group in fused mode), in each of the 2 active steps
    assert len(kernels) == (4 if torch_tpu.get_eager_mode() == "op" else 2)


def test_memory_events():
    x = rand((64, 64), torch.float32).to("tpu")

    def work():
        y = x * 2
        z = y @ y
        return z.sum().item()

    prof, _, _, result = _profiled(work, profile_memory=True)
    assert result == pytest.approx(((x.cpu() * 2) @ (x.cpu() * 2)).sum().item(), rel=1e-4)
    mm = {e.key: e for e in prof.key_averages()}["aten::mm"]
    assert mm.device_memory_usage == 64 * 64 * 4


def test_cpu_only_profile_records_no_device_events():
    x = rand((8, 8), torch.float32).to("tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert_same(x + 1, x.cpu() + 1)
    assert not _device_events(prof)
    assert any(e.name == "aten::add" for e in prof.events())


def test_memory_timeline(tmp_path):
    model = _model().to("tpu")
    x = rand((8, 16), torch.float32).to("tpu")
    model(x).sum().backward()
    with profile(
        activities=ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        model(x).sum().backward()
        torch.tpu.synchronize()
    out = tmp_path / "memory.json"
    prof.export_memory_timeline(str(out), device="tpu:0")
    times, sizes = json.loads(out.read_text())
    # [times, per-category bytes at each time]: tpu allocations were seen and categorised.
    assert len(times) > 0 and len(times) == len(sizes)
    assert max(sum(row) for row in sizes) > 0


# A tiny program reading a large one's output can run as that output becomes ready and
# report its completion first (XLA:CPU). Device spans were derived in the order the
# completions were seen, which gave the tiny gather the large matmul's whole time
# (vLLM's logits gather after its step program showed 40 ms); a device's runs are now a
# lane in launch order.
@pytest.mark.single_mode
def test_a_small_run_after_a_large_one_gets_its_own_time():
    x = rand((1024, 1024), torch.float32).to("tpu")
    row = torch.tensor([3], device="tpu")

    def chain():
        for _ in range(12):
            torch.index_select(x @ x, 0, row)
        torch.tpu.synchronize()

    chain()
    prof, _, _, _ = _profiled(chain)
    events = _device_events(prof)
    mm = [e.device_time for e in events if e.name == "mm"]
    gathers = [e.device_time for e in events if e.name == "index_select"]
    assert len(mm) == len(gathers) == 12
    assert sum(gathers) < sum(mm) / 4, (mm, gathers)
