"""The disk tier of the compilation cache, seen from fresh processes."""
import json
import os
import subprocess
import sys
import tempfile

import torch

import torch_tpu
from conftest import run_python

# A few distinct programs; prints the metrics and a checksum of the results.
WORKLOAD = """
import json, torch, torch_tpu
torch_tpu.metrics.reset()
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
y = (x.exp() * 2 + x.t().sum(1)).sin()
z = x @ x.t()
print(json.dumps({"m": torch_tpu.metrics.snapshot(), "y": y.cpu().tolist(),
                  "z": z.cpu().tolist(), "stats": torch.tpu.cache_stats()}))
"""


def run(cache_dir, **env):
    r = run_python(WORKLOAD, env={"TORCH_TPU_CACHE_DIR": str(cache_dir), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def expected():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return (x.exp() * 2 + x.t().sum(1)).sin(), x @ x.t()


def check_values(out):
    y, z = expected()
    torch.testing.assert_close(torch.tensor(out["y"]), y)
    torch.testing.assert_close(torch.tensor(out["z"]), z)


def entries(d):
    return [f for f in os.listdir(d) if f.endswith(".xla")]


def test_second_process_compiles_nothing(tmp_path):
    cold = run(tmp_path)
    assert cold["m"]["compiles"] > 0
    assert cold["m"]["disk_writes"] == cold["m"]["compiles"]
    assert len(entries(tmp_path)) >= cold["m"]["compiles"]
    warm = run(tmp_path)
    assert warm["m"]["compiles"] == 0
    assert warm["m"]["disk_hits"] == cold["m"]["compiles"]
    check_values(cold)
    check_values(warm)
    assert warm["stats"]["disk_dir"] == str(tmp_path)
    assert warm["stats"]["disk_bytes"] > 0


def test_damaged_entries_are_counted_and_rewritten(tmp_path):
    cold = run(tmp_path)
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


def test_concurrent_processes_compile_each_program_once(tmp_path):
    single = run(tmp_path / "single")["m"]["compiles"]
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "shared"))
    procs = [subprocess.Popen([sys.executable, "-c", WORKLOAD], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,
                              cwd=tempfile.gettempdir()) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    results = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    for r in results:
        check_values(r)
    assert sum(r["m"]["compiles"] for r in results) == single


def test_cache_stats_and_clear_cache():
    stats = torch.tpu.cache_stats()
    for key in ("memory_entries", "memory_hits", "memory_misses", "compiles",
                "compile_seconds", "disk_enabled", "disk_dir", "disk_hits", "disk_misses",
                "disk_writes", "disk_bad_entries", "disk_evictions", "disk_bytes"):
        assert key in stats
    torch.randn(3).to("tpu").exp()
    assert torch.tpu.cache_stats()["memory_entries"] > 0
    torch.tpu.clear_cache()
    assert torch.tpu.cache_stats()["memory_entries"] == 0
    assert "disk" in torch_tpu.metrics.report()


def test_memory_tier_is_bounded(tmp_path):
    out = run(tmp_path, TORCH_TPU_CACHE_ENTRIES="2")
    check_values(out)
    assert out["stats"]["memory_entries"] <= 2
    assert out["stats"]["memory_evictions"] > 0
