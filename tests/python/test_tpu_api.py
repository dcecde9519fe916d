"""TorchTPU 0.2's public `torch.tpu` names: each imported and exercised (results against
CPU, or against what the name promises)."""

import json
import os

import pytest
import torch

import torch_tpu
from helpers import assert_same, rand, run_python


def test_names_exist():
    for name in (
        "EagerMode",
        "set_eager_mode",
        "eager_mode",
        "Precision",
        "precision",
        "allow_excess_precision",
        "compiler",
        "profiler",
        "ops",
        "default_generators",
        "get_device_properties",
        "get_amp_supported_dtype",
        "topology_aware_mesh",
        "Stream",
        "Event",
        "synchronize",
        "manual_seed",
        "memory_allocated",
        "cache_stats",
    ):
        assert hasattr(torch.tpu, name), name
    from torch.tpu.compiler import custom_compiler_options  # noqa: F401
    from torch.tpu.profiler import TpuProfilerConfig  # noqa: F401
    from torch.tpu.ops import all_gather_dim, ragged_dot  # noqa: F401


@pytest.fixture
def restore_mode():
    before = torch.tpu.eager_mode
    yield
    torch.tpu.eager_mode = before


def test_eager_mode_property_and_set_eager_mode(restore_mode):
    E = torch.tpu.EagerMode
    torch.tpu.eager_mode = E.DEFER_AND_FUSE
    assert torch_tpu.get_eager_mode() == "fused"
    x = rand((4, 4), torch.float32)
    assert_same((x.to("tpu") * 2).exp(), (x * 2).exp())
    torch.tpu.set_eager_mode(E.DEFER_NEVER)  # as a call
    assert torch.tpu.eager_mode is E.DEFER_NEVER and torch_tpu.get_eager_mode() == "op"
    with torch.tpu.set_eager_mode(E.DEFER_AND_FUSE):  # as a context manager
        assert torch.tpu.eager_mode is E.DEFER_AND_FUSE
        y = x.to("tpu").sin()
        assert torch_tpu._C._fused_pending() > 0  # recorded, not yet run
        assert_same(y, x.sin())
    assert torch.tpu.eager_mode is E.DEFER_NEVER
    with torch.tpu.set_eager_mode("fused"):  # our names stay as aliases
        assert torch.tpu.eager_mode is E.DEFER_AND_FUSE
    with pytest.raises(ValueError, match="unknown mode"):
        torch.tpu.set_eager_mode("lazy")


def test_launch_blocking_mode(restore_mode):
    E = torch.tpu.EagerMode
    torch.tpu.eager_mode = E.DEFER_NEVER_AND_LAUNCH_BLOCKING
    assert torch_tpu._C._launch_blocking()
    x = rand((5, 3), torch.float32)
    assert_same(x.to("tpu").cumsum(0), x.cumsum(0))
    torch.tpu.eager_mode = E.DEFER_NEVER
    assert not torch_tpu._C._launch_blocking()


def test_defer_and_fuse_env():
    code = "import torch, torch_tpu; print(torch.tpu.eager_mode.name, torch_tpu.get_eager_mode())"
    # TORCH_TPU_EAGER_MODE (set when the suite runs in fused mode) would win: unset.
    out = run_python(code, env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_EAGER_MODE": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["DEFER_AND_FUSE", "fused"]
    out = run_python(code, env={"TORCH_TPU_LAUNCH_BLOCKING": "1", "TORCH_TPU_EAGER_MODE": ""})
    assert out.stdout.split() == ["DEFER_NEVER_AND_LAUNCH_BLOCKING", "op"]


def test_custom_compiler_options(tmp_path):
    from torch.tpu.compiler import custom_compiler_options

    x = rand((3, 7), torch.float32)
    dump = tmp_path / "xla"
    with custom_compiler_options({"xla_dump_to": str(dump)}):
        assert "xla_dump_to=" in torch_tpu._C._compiler_options()
        with custom_compiler_options({"xla_cpu_enable_fast_math": False}):
            assert "xla_cpu_enable_fast_math=false" in torch_tpu._C._compiler_options()
        y = (x.to("tpu") * 1.25).tanh()
        assert_same(y, (x * 1.25).tanh())
    assert torch_tpu._C._compiler_options() == ""
    # XLA itself took the option: it dumped the program compiled in the block.
    assert any(p.name.endswith(".txt") for p in dump.iterdir())
    # The options are part of the key: outside the block the program compiles again
    # (no dump), and a program compiled outside is not reused inside.
    before = len(list(dump.iterdir()))
    assert_same((x.to("tpu") * 1.25).tanh(), (x * 1.25).tanh())
    assert len(list(dump.iterdir())) == before
    with pytest.raises(RuntimeError, match="No such compile option"):
        with custom_compiler_options({"xla_not_an_option": 1}):
            (x.to("tpu") + 3.5).cpu()
    with pytest.raises(TypeError):
        with custom_compiler_options({"xla_dump_to": [1]}):
            pass


def test_allow_excess_precision():
    out = run_python(
        "import torch, torch_tpu\n"
        "print(torch.tpu.allow_excess_precision)\n"
        "torch.tpu.allow_excess_precision = False\n"
        "print(torch.tpu.allow_excess_precision, torch_tpu._C._compiler_options())\n"
        "x = torch.arange(6.).to('tpu').bfloat16()\n"
        "print((x * 3 + 1).float().sum().item())\n",
        env={"XLA_FLAGS": ""},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "True"  # XLA's default
    assert lines[1] == "False xla_allow_excess_precision=false"
    assert float(lines[2]) == sum(i * 3 + 1 for i in range(6))
    with pytest.raises(TypeError):
        torch.tpu.allow_excess_precision = "yes"


def test_default_generators():
    gens = torch.tpu.default_generators
    assert isinstance(gens, tuple) and len(gens) == torch.tpu.device_count()
    assert gens[0] is torch.tpu.default_generators[0]
    assert gens[0].device == torch.device("tpu", 0)
    gens[0].manual_seed(123)
    a = torch.rand(8, device="tpu")
    torch.tpu.manual_seed(123)
    b = torch.rand(8, device="tpu")
    assert torch.equal(a.cpu(), b.cpu())
    assert gens[0].initial_seed() == 123


def test_device_properties_and_amp():
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory > 0 and isinstance(props.name, str)
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()


def test_topology_aware_mesh():
    n = torch.tpu.device_count()
    mesh = torch.tpu.topology_aware_mesh((n,))
    assert mesh.dtype == torch.int64 and mesh.tolist() == list(range(n))
    with pytest.raises(ValueError, match="ranks"):
        torch.tpu.topology_aware_mesh((n + 1,))


def test_profiler_config(tmp_path):
    from torch.profiler import ProfilerActivity, profile
    from torch.tpu.profiler import TpuProfilerConfig

    x = rand((4, 4), torch.float32).to("tpu")
    (x + 2).sum().item()
    acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    programs = 2 if torch_tpu.get_eager_mode() == "op" else 1  # add, sum; or one group
    for level, expect in ((1, programs), (0, 0)):
        with profile(
            activities=acts, experimental_config=TpuProfilerConfig(device_tracer_level=level)
        ) as prof:
            (x + 2).sum().item()
        device = [
            e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
        ]
        assert len(device) == expect
    with pytest.raises(ValueError):
        TpuProfilerConfig(worker_rank="a:b")
    with pytest.raises(ValueError):
        TpuProfilerConfig(experimental_options={"run_dir": "x"})
    out = tmp_path / "t.json"
    prof.export_chrome_trace(str(out))
    json.loads(out.read_text())
    assert os.path.getsize(out) > 0


def test_device_of():
    x = rand((2, 3), torch.float32)
    with torch.tpu.device_of(x):  # a CPU tensor: no-op
        assert torch.tpu.current_device() == 0
    code = """
import torch
x = torch.ones(3, device="tpu:1")
seen = []
with torch.tpu.device_of(x):
    seen.append(torch.tpu.current_device())
    y = torch.zeros(2, device="tpu")  # the current device: tpu:1
seen.append(torch.tpu.current_device())
with torch.tpu.device_of(x.untyped_storage()):
    seen.append(torch.tpu.current_device())
with torch.tpu.device_of(torch.ones(1)):
    seen.append(torch.tpu.current_device())
print(seen, y.device)
"""
    proc = run_python(code, env={"TORCH_TPU_NUM_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[1, 0, 1, 0] tpu:1"


def test_profiler_config_run_dir(tmp_path):
    import gzip
    import socket

    from torch.profiler import ProfilerActivity, profile
    from torch.tpu.profiler import TpuProfilerConfig

    x = rand((16, 16), torch.float32).to("tpu")
    (x @ x).relu().sum().item()
    acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    config = TpuProfilerConfig(run_dir=tmp_path / "run", worker_rank="w0")
    sessions = []
    for _ in range(2):  # each stopped session writes its own trace
        with profile(activities=acts, experimental_config=config) as prof:
            (x @ x).relu().sum().item()
        sessions.append(prof)
    with profile(activities=acts, experimental_config=TpuProfilerConfig()):
        (x + 1).sum().item()  # no run_dir: nothing written
    files = sorted((tmp_path / "run" / "plugins" / "profile").glob("*/*"))
    assert [f.name for f in files] == [f"{socket.gethostname()}_w0.pt.trace.json.gz"] * 2
    assert files[0].parent != files[1].parent
    for f, prof in zip(files, sessions):
        with gzip.open(f) as g:
            trace = json.load(g)  # Chrome trace JSON: what Perfetto and TensorBoard read
        kernels = sorted(e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel")
        device = sorted(
            e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
        )
        assert kernels and kernels == device
