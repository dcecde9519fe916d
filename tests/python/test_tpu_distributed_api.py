"""`torch.tpu.distributed` (TorchTPU 0.2's names): the launch environment and workers
that own their device with it, the rank mesh and its deprecated alias, spmd_safe regions
(eager flushes, compiled annotations, a collective inside) and the window settings."""

import os
import subprocess
import sys
import tempfile
import warnings

import pytest
import torch
import torch.distributed as dist

import torch_tpu
from helpers import assert_same, rand

LAUNCH_VARS = (
    "TORCH_TPU_NUM_DEVICES",
    "TORCH_TPU_DEVICES_PER_HOST",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NNODES",
    "NODE_RANK",
    "TPU_WORKER_HOSTNAMES",
    "JOB_COMPLETION_INDEX",
)


@pytest.fixture
def clean_env(monkeypatch):
    # set_tpu_launch_env writes os.environ itself, which monkeypatch does not undo: what it
    # set is taken out after the test (a TORCH_TPU_NUM_DEVICES left behind broke a later
    # torchrun test in the same worker).
    saved = {name: os.environ.get(name) for name in LAUNCH_VARS}
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_launch_env_single_host(clean_env):
    from torch.tpu.distributed import set_tpu_launch_env

    set_tpu_launch_env(nproc_per_node=2)
    assert os.environ["TORCH_TPU_NUM_DEVICES"] == "2"
    assert os.environ["MASTER_ADDR"] == "127.0.0.1"
    port = os.environ["MASTER_PORT"]
    assert 0 < int(port) < 65536
    set_tpu_launch_env(nproc_per_node=3)  # idempotent: nothing set is overwritten
    assert os.environ["TORCH_TPU_NUM_DEVICES"] == "2" and os.environ["MASTER_PORT"] == port
    assert "NNODES" not in os.environ and "NODE_RANK" not in os.environ


def test_launch_env_defaults_and_pinned(clean_env):
    from torch.tpu.distributed import set_tpu_launch_env

    clean_env.setenv("MASTER_PORT", "1234")
    set_tpu_launch_env()
    # This process's runtime is started: its device count is the host's.
    assert os.environ["TORCH_TPU_NUM_DEVICES"] == str(torch.tpu.device_count())
    assert os.environ["MASTER_PORT"] == "1234"


def test_launch_env_multihost(clean_env):
    from torch.tpu.distributed import set_tpu_launch_env

    clean_env.setenv("TPU_WORKER_HOSTNAMES", "host-a,host-b")
    clean_env.setenv("JOB_COMPLETION_INDEX", "1")
    clean_env.setenv("TORCH_TPU_DEVICES_PER_HOST", "4")
    set_tpu_launch_env(nnodes=2)
    got = {k: os.environ.get(k) for k in LAUNCH_VARS}
    assert got["NNODES"] == "2" and got["NODE_RANK"] == "1"
    assert got["MASTER_ADDR"] == "host-a" and got["MASTER_PORT"] == "29500"
    assert got["TORCH_TPU_NUM_DEVICES"] == "4"


def test_launch_env_errors(clean_env):
    from torch.tpu.distributed import set_tpu_launch_env

    with pytest.raises(ValueError, match="nproc_per_node"):
        set_tpu_launch_env(nproc_per_node=0)
    clean_env.setenv("TPU_WORKER_HOSTNAMES", "a,b")
    with pytest.raises(ValueError, match="nnodes to match"):
        set_tpu_launch_env(nnodes=3)
    clean_env.delenv("TPU_WORKER_HOSTNAMES")
    with pytest.raises(ValueError, match="NODE_RANK"):
        set_tpu_launch_env(nnodes=2, nproc_per_node=1)
    clean_env.setenv("NODE_RANK", "0")
    with pytest.raises(ValueError, match="TPU_WORKER_HOSTNAMES"):
        set_tpu_launch_env(nnodes=2, nproc_per_node=1)


WORKER = """
import os, torch, torch.distributed as dist
rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
dist.init_process_group("tpu_dist", init_method="env://")

@torch.tpu.distributed.spmd_safe
def scaled_all_reduce(x):
    y = x * 5
    dist.all_reduce(y)
    return y

x = torch.tensor([rank + 1.0, 2.0 * rank], device=f"tpu:{local}")
y = scaled_all_reduce(x)
print("RESULT", torch.tpu.device_count(), y.device, y.cpu().tolist(), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.distributed
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is required")
def test_launch_env_workers_own_their_device(clean_env):
    """Workers started with nothing but set_tpu_launch_env's variables (and the rank a
    launcher gives each) present 2 devices each, rendezvous and all_reduce."""
    torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=2)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER],
                env=env,
                cwd=tempfile.gettempdir(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            outs.append([line for line in out.splitlines() if line.startswith("RESULT")][0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # (1 + 2) * 5 and (0 + 2) * 5, on each rank's own device.
    assert outs == [f"RESULT 2 tpu:{r} [15.0, 10.0]" for r in range(2)]


def test_topology_aware_mesh_and_deprecated_alias(monkeypatch):
    from torch.tpu.distributed import topology_aware_mesh

    n = torch.tpu.device_count()
    mesh = topology_aware_mesh((n, 1))
    assert mesh.dtype == torch.int64 and mesh.tolist() == [[r] for r in range(n)]
    assert topology_aware_mesh((n,), dcn_mesh_shape=(1,)).tolist() == list(range(n))
    with pytest.raises(ValueError, match="ranks"):
        topology_aware_mesh((n + 1,))
    with pytest.raises(ValueError, match="single slice"):
        topology_aware_mesh((n,), dcn_mesh_shape=(2,))
    monkeypatch.setattr(torch.tpu.topology_aware_mesh, "warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = torch.tpu.topology_aware_mesh((n,))
        second = torch.tpu.topology_aware_mesh((n,))
    deprecations = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(deprecations) == 1 and "torch.tpu.distributed" in str(deprecations[0].message)
    assert deprecations[0].filename == __file__  # points at the caller
    assert first.tolist() == second.tolist() == list(range(n))


@pytest.mark.single_mode  # sets fused mode itself
def test_spmd_safe_eager_flushes(set_eager_mode):
    from torch.tpu.distributed import spmd_safe

    set_eager_mode("fused")
    seen = []

    @spmd_safe
    def region(a, scale=3.0):
        seen.append(torch_tpu._C._fused_pending())
        return (a * scale).sin()

    assert region.__name__ == "region"
    x = rand((4, 5), torch.float32)
    a = x.to("tpu") + 1  # recorded, pending
    assert torch_tpu._C._fused_pending() > 0
    y = region(a, scale=2.0)
    assert seen == [0]  # nothing from outside joined the region's program
    assert torch_tpu._C._fused_pending() == 0  # the region's work ran when it returned
    assert_same(y, ((x + 1) * 2.0).sin())


def test_spmd_safe_compiled_annotates(fresh_dynamo):
    from torch.tpu.distributed import SPMD_SAFE_METADATA_KEY, spmd_safe

    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    @spmd_safe
    def inner(a):
        return a.cos() * 2

    def outer(a):
        return inner(a + 1) - 1

    x = rand((3, 4), torch.float32)
    out = torch.compile(outer, backend=backend, fullgraph=True)(x.to("tpu"))
    assert_same(out, (x + 1).cos() * 2 - 1)
    marked = {
        str(n.target)
        for gm in graphs
        for n in gm.graph.nodes
        if n.meta.get("custom", {}).get(SPMD_SAFE_METADATA_KEY)
    }
    assert any("cos" in t for t in marked) and not any("sub" in t for t in marked), marked
    tpu_out = torch.compile(outer, backend="tpu")(x.to("tpu"))
    assert_same(tpu_out, (x + 1).cos() * 2 - 1)


def test_window_settings():
    mod = torch.tpu.distributed
    before = (mod.window_num_stripes, mod.window_stripe_chunk_mb)
    assert before == (4, 4)
    try:
        mod.window_num_stripes = 8
        mod.window_stripe_chunk_mb = 16
        assert (mod.window_num_stripes, mod.window_stripe_chunk_mb) == (8, 16)
        with pytest.raises(ValueError, match="positive"):
            mod.window_num_stripes = 0
        with pytest.raises(TypeError):
            mod.window_stripe_chunk_mb = "16"
        with pytest.raises(TypeError):
            mod.window_num_stripes = True
        assert (mod.window_num_stripes, mod.window_stripe_chunk_mb) == (8, 16)
    finally:
        mod.window_num_stripes, mod.window_stripe_chunk_mb = before
