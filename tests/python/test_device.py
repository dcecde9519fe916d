import pytest
import torch

import torch_tpu
from helpers import run_python


def test_device_module_basics():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    torch.tpu.synchronize()
    assert "cpu" in torch.tpu.get_device_name(0).lower()
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory > 0
    assert props.pjrt_api_version.startswith("0.")
    assert torch.tpu.is_initialized()


def test_accelerator_api():
    assert str(torch.accelerator.current_accelerator()) == "tpu"
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == torch.tpu.device_count()


def test_tensor_and_module_helpers():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.tpu()
    assert y.device == torch.device("tpu:0")
    assert y.is_tpu
    m = torch.nn.Linear(3, 2).to("tpu")
    assert all(p.device.type == "tpu" for p in m.parameters())
    out = m(y)
    ref = torch.nn.functional.linear(x, m.weight.detach().cpu(), m.bias.detach().cpu())
    torch.testing.assert_close(out.detach().cpu(), ref)


def test_device_index_out_of_range():
    with pytest.raises(RuntimeError, match="Invalid device id"):
        torch.zeros(2, device="tpu:7")
    with pytest.raises(RuntimeError, match="Invalid device id"):
        torch.tpu.set_device(7)


def test_rng_state_round_trip():
    torch.tpu.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    torch.tpu.manual_seed(99)
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 1234
    torch.manual_seed(7)  # torch.manual_seed seeds the tpu generators too
    assert torch.tpu.initial_seed() == 7
    gen = torch.Generator(device="tpu")
    gen.manual_seed(5)
    assert gen.initial_seed() == 5 and gen.device.type == "tpu"


def test_memory_stats_track_allocations():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1024, 1024, device="tpu")
    assert torch.tpu.memory_allocated() - before == 4 * 1024 * 1024
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == before
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == before


def test_pinned_host_memory_is_one_tracked_allocator():
    # pin_memory() (the hooks' allocator) and torch.accelerator's host-memory calls are
    # one allocator: what one pins, the other counts, and is_pinned() knows it.
    torch.accelerator.empty_host_cache()  # nothing cached: a no-op, not a crash
    torch.tpu.reset_peak_host_memory_stats()
    before = torch.tpu.host_memory_stats()
    x = torch.arange(1000, dtype=torch.float32)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and torch.equal(p, x)
    assert not p.clone().is_pinned()  # a clone is ordinary CPU memory
    stats = torch.tpu.host_memory_stats()
    assert stats["active_bytes.current"] - before["active_bytes.current"] == 4000
    assert stats["active_requests.current"] - before["active_requests.current"] == 1
    assert stats["num_host_alloc"] - before["num_host_alloc"] == 1
    assert stats["active_bytes.peak"] >= stats["active_bytes.current"]
    # A pinned buffer copies to the device and back like any CPU tensor.
    y = p.to("tpu", non_blocking=True)
    assert torch.equal(y.cpu(), x)
    del p
    after = torch.tpu.host_memory_stats()
    assert after["active_bytes.current"] == before["active_bytes.current"]
    assert after["num_host_free"] - before["num_host_free"] == 1
    empty = torch.empty(0).pin_memory()  # an empty block shares nullptr: counted, not kept
    assert (
        torch.tpu.host_memory_stats()["active_requests.current"]
        == before["active_requests.current"] + 1
    )
    del empty
    torch.tpu.reset_accumulated_host_memory_stats()
    torch.tpu.reset_peak_host_memory_stats()
    stats = torch.tpu.host_memory_stats()
    assert stats["num_host_alloc"] == 0 and stats["allocated_bytes.allocated"] == 0
    assert stats["active_bytes.peak"] == stats["active_bytes.current"]


def test_autoload_without_import():
    r = run_python(
        "import torch; x = torch.ones(3, device='tpu'); print((x + x).cpu().tolist(), "
        "torch.tpu.device_count(), torch.accelerator.current_accelerator())"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0, 2.0] 1 tpu"


def test_multiple_virtual_devices():
    code = """
import torch
assert torch.tpu.device_count() == 2
a = torch.arange(4.0).to('tpu:1')
assert a.device == torch.device('tpu:1')
b = (a * 2).cpu()
assert b.tolist() == [0.0, 2.0, 4.0, 6.0]
with torch.tpu.device(1):
    assert torch.tpu.current_device() == 1
    c = torch.ones(2, device='tpu')
    assert c.device.index == 1
assert torch.tpu.current_device() == 0
moved = a.to('tpu:0')
assert moved.device.index == 0 and moved.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
try:
    a + torch.ones(4, device='tpu:0')
except RuntimeError as e:
    assert 'same device' in str(e), e
else:
    raise AssertionError('expected a device mismatch error')
print('ok')
"""
    r = run_python(code, {"TORCH_TPU_NUM_DEVICES": "2"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_lazy_init_and_one_device_per_launched_process():
    """As with CUDA: counting devices and asking for the accelerator start nothing (so
    DeviceMesh's LOCAL_RANK device selection applies), and under a launcher every process
    sees one XLA:CPU device per local process, so tpu:LOCAL_RANK exists."""
    code = """
import torch
assert torch.tpu.device_count() == 3 and torch.tpu.is_available()
assert torch.accelerator.is_available() and torch.accelerator.device_count() == 3
assert str(torch._C._get_accelerator()) == 'tpu'  # the C++ hook isAvailable()
assert not torch.tpu.is_initialized()
torch.accelerator.set_device_index(2)
assert torch.accelerator.current_device_index() == 2
with torch.accelerator.device_index(1):
    assert torch.tpu.current_device() == 1
    x = torch.ones(2, device='tpu')
    assert x.device.index == 1
with torch.accelerator.device_index(None):
    assert torch.tpu.current_device() == 2
assert torch.tpu.current_device() == 2
assert torch.tpu.is_initialized() and torch.tpu.device_count() == 3
print('ok')
"""
    r = run_python(code, {"LOCAL_WORLD_SIZE": "3", "TORCH_TPU_NUM_DEVICES": None})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    # An explicit count wins.
    r = run_python(
        "import torch; print(torch.tpu.device_count())",
        {"LOCAL_WORLD_SIZE": "3", "TORCH_TPU_NUM_DEVICES": "2"},
    )
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr


# A daemon thread waits in torch.tpu.synchronize() (GIL released) when the main thread
# returns; its wait ends while the interpreter finalizes. Taking the GIL back then ends the
# thread by unwinding it: out of a destructor (pybind11's gil_scoped_release) that
# terminated the whole process ("terminate called without an active exception", rc -6).
DAEMON_AT_EXIT = """
import threading, torch, torch_tpu
x = torch.randn(1024, 1024, device="tpu")
queued = threading.Event()
def work():
    y = x
    for _ in range(100):
        y = y @ x
    queued.set()
    torch.tpu.synchronize()
threading.Thread(target=work, daemon=True).start()
queued.wait()
print("main returns", flush=True)
"""


# Fused mode adds a compile under way at exit: the daemon's synchronize() compiles the
# queued matmuls as one program, GIL released, while the main thread ends. exit() then
# ran XLA:CPU's static destructors, which unmap its JIT-compiled code, under the compile
# or the run that followed (SIGSEGV, rc -11). Every run of this script crashed that way.
@pytest.mark.single_mode
@pytest.mark.parametrize("mode", ["op", "fused"])
def test_daemon_thread_in_synchronize_at_exit_does_not_abort(mode):
    r = run_python(DAEMON_AT_EXIT, {"TORCH_TPU_EAGER_MODE": mode})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "main returns" in r.stdout


# The main thread ends with 16 large matmuls still running (fused mode: flushed, so
# launched): exit() must not unmap the plugin's code under them (SIGSEGV in most runs).
WORK_IN_FLIGHT_AT_EXIT = """
import torch, torch_tpu
x = torch.randn(2048, 2048, device="tpu")
y = x
for _ in range(16):
    y = y @ x
torch_tpu.flush()
print("main returns", flush=True)
"""


@pytest.mark.single_mode
@pytest.mark.parametrize("mode", ["op", "fused"])
def test_exit_with_work_in_flight_does_not_crash(mode):
    for _ in range(2):
        r = run_python(WORK_IN_FLIGHT_AT_EXIT, {"TORCH_TPU_EAGER_MODE": mode})
        assert r.returncode == 0, r.stderr[-2000:]
        assert "main returns" in r.stdout


# The last act is a compiled backward under saved-tensor hooks. Autograd's tpu worker
# thread wakes the caller before it drops the finished graph task, which holds the
# caller's thread-local Python state (the hooks); dropped after finalization began, that
# asked for the GIL, and Python's unwind of the worker terminated the process ("terminate
# called without an active exception", rc -6) in about 1 run of 10-20. Now an atexit
# function drains the workers first (csrc/aten/autograd_exit.h). Four runs at once, as
# the load of a parallel test run made it likelier.
BACKWARD_AT_EXIT = """
import torch, torch_tpu
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
m = torch.compile(m.to("tpu"), backend="tpu")
x = torch.randn(6, 8, device="tpu")
with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
    m(x).log_softmax(-1).mean().backward()
print("main returns", flush=True)
"""


@pytest.mark.single_mode
def test_backward_as_last_act_exits_cleanly():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: run_python(BACKWARD_AT_EXIT), range(4)))
    for r in runs:
        assert r.returncode == 0 and "terminate called" not in r.stderr, r.stderr[-2000:]
        assert "main returns" in r.stdout


# The drain itself: once it returns, no worker holds anything of the finished backward
# (here the hooks' closures); it runs nothing on the device (a first version compiled two
# programs at every exit), and before the runtime starts it starts nothing.
def test_drain_autograd_workers_releases_the_finished_backward():
    import weakref

    class Sentinel:
        pass

    sentinel = Sentinel()
    alive = weakref.ref(sentinel)
    m = torch.compile(torch.nn.Linear(8, 4).to("tpu"), backend="tpu")
    x = torch.randn(6, 8, device="tpu")
    hooks = torch.autograd.graph.saved_tensors_hooks(
        lambda t, s=sentinel: t, lambda t, s=sentinel: t
    )
    del sentinel
    with hooks:
        m(x).sum().backward()
    del hooks
    before = torch_tpu.metrics.snapshot()
    torch_tpu._C._drain_autograd_workers()
    after = torch_tpu.metrics.snapshot()
    assert alive() is None
    assert after["executions"] == before["executions"]
    assert after["compiles"] == before["compiles"]
    assert m.weight.grad is not None

    r = run_python(
        "import torch, torch_tpu; torch_tpu._C._drain_autograd_workers(); "
        "print(torch.tpu.is_initialized())"
    )
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
