"""The disk tier of the compilation cache, seen from fresh processes: eager programs and
torch.compile graphs (minGPT training) share it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import torch_tpu
from helpers import run_python

pytestmark = pytest.mark.single_mode

# A few distinct programs (at least three in either eager mode: each host read ends a
# fused group); prints the metrics and a checksum of the results, read before the metrics.
WORKLOAD = """
import json, torch, torch_tpu
torch_tpu.metrics.reset()
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
y = (x.exp() * 2 + x.t().sum(1)).sin().cpu().tolist()
z = (x @ x.t()).cpu().tolist()
total = (x * 3).sum().item()
print(json.dumps({"y": y, "z": z, "total": total, "m": torch_tpu.metrics.snapshot(),
                  "stats": torch.tpu.cache_stats()}))
"""


# Two minGPT training steps with the model compiled by backend "tpu" (the optimizer runs
# eagerly); prints the metrics and the losses.
MINGPT = Path(__file__).resolve().parents[2] / "examples" / "mingpt"
COMPILED = f"""
import json, sys, torch, torch_tpu
sys.path.insert(0, {str(MINGPT)!r})
import data, train
ds = data.CharDataset(data.make_text(lines=200))
model = train.build(ds.vocab_size, block=32, layers=2, heads=4, d=64, seed=0).to("tpu")
torch_tpu.metrics.reset()
losses = train.train(model, ds, "tpu", steps=2, batch=4, compile="tpu")
print(json.dumps({{"m": torch_tpu.metrics.snapshot(), "losses": [l.item() for l in losses]}}))
"""


def run(cache_dir, workload=WORKLOAD, **env):
    r = run_python(workload, env={"TORCH_TPU_CACHE_DIR": str(cache_dir), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_concurrently(cache_dir, workload, n):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", workload],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )
        for _ in range(n)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]


# One cold run of each workload per module (a fresh process compiling into an empty
# cache); a test that needs the cache it leaves works on a copy.
@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    d = tmp_path_factory.mktemp("cold")
    return d, run(d)


@pytest.fixture(scope="module")
def cold_compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("cold_compiled")
    return d, run(d, COMPILED)


def copy_of(cache_dir, tmp_path):
    shutil.copytree(cache_dir, tmp_path, dirs_exist_ok=True)
    return tmp_path


def expected():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return (x.exp() * 2 + x.t().sum(1)).sin(), x @ x.t()


def check_values(out):
    y, z = expected()
    torch.testing.assert_close(torch.tensor(out["y"]), y)
    torch.testing.assert_close(torch.tensor(out["z"]), z)
    assert out["total"] == 198.0


def entries(d):
    return [f for f in os.listdir(d) if f.endswith(".xla")]


def test_second_process_compiles_nothing(cold, tmp_path):
    cold_dir, cold = cold
    assert cold["m"]["compiles"] > 0
    assert cold["m"]["disk_writes"] == cold["m"]["compiles"]
    assert len(entries(cold_dir)) >= cold["m"]["compiles"]
    warm = run(copy_of(cold_dir, tmp_path))
    assert warm["m"]["compiles"] == 0
    assert warm["m"]["disk_hits"] == cold["m"]["compiles"]
    check_values(cold)
    check_values(warm)
    assert warm["stats"]["disk_dir"] == str(tmp_path)
    assert warm["stats"]["disk_bytes"] > 0


def test_damaged_entries_are_counted_and_rewritten(cold, tmp_path):
    cold_dir, cold = cold
    copy_of(cold_dir, tmp_path)
    names = sorted(entries(tmp_path))
    assert len(names) >= 3
    for i, name in enumerate(names):  # each kind of damage on some entries
        path = tmp_path / name
        data = path.read_bytes()
        if i % 3 == 0:
            path.write_bytes(data[:-20] + bytes(b ^ 0xFF for b in data[-20:]))
        elif i % 3 == 1:
            path.write_bytes(data[: len(data) // 2])
        else:
            path.write_bytes(b"not an executable")
    again = run(tmp_path)
    check_values(again)
    assert again["m"]["disk_bad_entries"] == cold["m"]["compiles"]
    assert again["m"]["compiles"] == cold["m"]["compiles"]
    assert run(tmp_path)["m"]["compiles"] == 0  # rewritten entries are good


def test_size_cap_evicts(tmp_path):
    out = run(tmp_path, TORCH_TPU_CACHE_MAX_BYTES="1")
    check_values(out)
    assert out["m"]["disk_evictions"] > 0
    assert len(entries(tmp_path)) <= 1


def test_disk_cache_can_be_disabled(tmp_path):
    out = run(tmp_path, TORCH_TPU_DISK_CACHE="0")
    check_values(out)
    assert out["stats"]["disk_enabled"] is False
    assert not tmp_path.exists() or entries(tmp_path) == []


def test_concurrent_processes_compile_each_program_once(cold, tmp_path):
    single = cold[1]["m"]["compiles"]
    results = run_concurrently(tmp_path / "shared", WORKLOAD, 3)
    for r in results:
        check_values(r)
    assert sum(r["m"]["compiles"] for r in results) == single


def test_compiled_mingpt_second_process_compiles_nothing(cold_compiled, tmp_path):
    cold_dir, cold = cold_compiled
    assert cold["m"]["graphs"] >= 2  # forward and backward, one program each
    assert cold["m"]["graph_fallbacks"] == 0
    assert cold["m"]["compiles"] > 0
    warm = run(copy_of(cold_dir, tmp_path), COMPILED)
    assert warm["m"]["compiles"] == 0
    assert warm["m"]["graphs"] == cold["m"]["graphs"]
    assert warm["m"]["disk_hits"] == cold["m"]["compiles"]
    assert warm["losses"] == cold["losses"]


def test_compiled_graphs_from_two_processes_at_once_compile_once(cold_compiled, tmp_path):
    single_dir, single = cold_compiled
    results = run_concurrently(tmp_path / "shared", COMPILED, 2)
    assert sum(r["m"]["compiles"] for r in results) == single["m"]["compiles"]
    assert len(entries(tmp_path / "shared")) == len(entries(single_dir))
    for r in results:
        assert r["losses"] == single["losses"]


def test_damaged_compiled_graph_entries_are_recovered(cold_compiled, tmp_path):
    cold_dir, cold = cold_compiled
    copy_of(cold_dir, tmp_path)
    for i, name in enumerate(sorted(entries(tmp_path))):
        path = tmp_path / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if i % 2 else b"garbage")
    again = run(tmp_path, COMPILED)
    assert again["losses"] == cold["losses"]
    assert again["m"]["disk_bad_entries"] == cold["m"]["compiles"]
    assert again["m"]["compiles"] == cold["m"]["compiles"]


# A dot the XLA:CPU plugin hands to oneDNN under these flags: such an executable runs but
# cannot be serialized ("ToProto is not implemented for thunk kind: onednn-fusion").
ONEDNN_FLAGS = "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot"
LINEAR = """
import json, torch, torch_tpu
g = torch.Generator().manual_seed(0)
a, w = torch.randn(64, 256, generator=g), torch.randn(128, 256, generator=g)
torch_tpu.metrics.reset()
out = torch.nn.functional.linear(a.to("tpu"), w.to("tpu")).cpu()
torch.testing.assert_close(out, torch.nn.functional.linear(a, w))
print(json.dumps({"m": torch_tpu.metrics.snapshot()}))
"""


@pytest.mark.skipif(torch_tpu._C._platform()[0] != "cpu", reason="XLA:CPU's oneDNN fusion")
def test_programs_the_plugin_cannot_serialize_run_from_memory(tmp_path):
    # Before: the compile failed with PJRT_Executable_Serialize's error.
    out = run(tmp_path, LINEAR, XLA_FLAGS=ONEDNN_FLAGS)
    assert out["m"]["compiles"] >= 1
    assert out["m"]["disk_unserializable"] == out["m"]["compiles"]
    assert out["m"]["disk_writes"] == 0 and entries(tmp_path) == []
    again = run(tmp_path, LINEAR, XLA_FLAGS=ONEDNN_FLAGS)  # nothing to load: compiled again
    assert again["m"]["compiles"] == out["m"]["compiles"]


def test_xla_flags_are_part_of_the_disk_cache_identity(cold, tmp_path):
    # The plugin reads XLA_FLAGS when it starts; a program compiled under other flags is
    # a different program and must not be loaded.
    cold_dir, cold = cold
    copy_of(cold_dir, tmp_path)
    flagged = run(tmp_path, XLA_FLAGS="--xla_cpu_enable_fast_min_max=false")
    check_values(flagged)
    assert flagged["m"]["disk_hits"] == 0
    assert flagged["m"]["compiles"] == cold["m"]["compiles"]
    assert run(tmp_path, XLA_FLAGS="--xla_cpu_enable_fast_min_max=false")["m"]["compiles"] == 0
    assert run(tmp_path)["m"]["compiles"] == 0  # the unflagged entries are still there


def test_cache_stats_and_clear_cache():
    stats = torch.tpu.cache_stats()
    for key in (
        "memory_entries",
        "memory_hits",
        "memory_misses",
        "compiles",
        "compile_seconds",
        "disk_enabled",
        "disk_dir",
        "disk_hits",
        "disk_misses",
        "disk_writes",
        "disk_bad_entries",
        "disk_evictions",
        "disk_unserializable",
        "disk_bytes",
    ):
        assert key in stats
    x = torch.randn(3).to("tpu")
    torch_tpu.flush()  # fused mode: no work left over from earlier tests in the group
    x.exp().cpu()
    x.exp().cpu()
    assert torch.tpu.cache_stats()["memory_entries"] > 0
    # One program per op, or in fused mode one per group (here each group is one op); the
    # most recently used entry of that label is this test's.
    label = "exp" if torch_tpu.get_eager_mode() == "op" else "fused (1 ops)"
    entry = next(e for e in torch.tpu.cache_stats(entries=True)["entries"] if e["label"] == label)
    assert entry["hits"] >= 1
    assert set(entry) == {"label", "fingerprint", "hits", "compile_seconds", "from_disk"}
    torch.tpu.clear_cache()
    assert torch.tpu.cache_stats()["memory_entries"] == 0
    assert "disk" in torch_tpu.metrics.report()


def test_memory_tier_is_bounded(tmp_path):
    out = run(tmp_path, TORCH_TPU_CACHE_ENTRIES="2")
    check_values(out)
    assert out["stats"]["memory_entries"] <= 2
    assert out["stats"]["memory_evictions"] > 0


def test_memory_tier_keeps_within_the_mapping_budget():
    """Loaded programs hold memory mappings, and a process may hold only vm.max_map_count
    of them: above TORCH_TPU_MAX_MAPPINGS the cache drops programs instead of letting
    the plugin fail to map one (which crashed the process)."""
    code = (
        "import json, os, sys, torch, torch_tpu\n"
        "def maps(): return sum(1 for _ in open('/proc/self/maps'))\n"
        "torch.ones(1).to('tpu').cpu()\n"
        "base = maps()\n"
        "peak, ok = 0, True\n"
        "for n in range(1, 161 if sys.argv[1:] else 1):\n"
        "    x = torch.arange(n, dtype=torch.float32)\n"
        "    ok &= torch.equal((x.to('tpu') * 3 - 1).cpu(), x * 3 - 1)\n"
        "    peak = max(peak, maps())\n"
        "print('OUT', json.dumps({'ok': bool(ok), 'base': base, 'peak': peak,\n"
        "      'stats': torch.tpu.cache_stats()}))\n"
    )

    def run_budget(*args, **env):
        proc = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tempfile.gettempdir(),
            env=dict(os.environ, TORCH_TPU_DISK_CACHE="0", **env),
        )
        line = [l for l in proc.stdout.splitlines() if l.startswith("OUT ")]
        assert line, proc.stdout + proc.stderr
        return json.loads(line[0][4:])

    # A process that has run one program holds `base` mappings; allow 150 more.
    limit = run_budget()["base"] + 150
    out = run_budget("loop", TORCH_TPU_MAX_MAPPINGS=str(limit))
    assert out["ok"]
    assert out["stats"]["memory_evictions"] > 0
    # 160 new programs hold several mappings each (about 500 in all); the cache keeps the
    # process near its budget (it checks every 16 programs).
    assert out["peak"] < limit + 150, out
