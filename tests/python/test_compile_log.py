"""Compiles you can see and forbid: torch_tpu.metrics.compile_log(), TORCH_TPU_LOG=compiles,
torch_tpu.no_compile() and TORCH_TPU_NO_COMPILE=1.

What was compiled and why depends on what the caches hold, so most checks run in fresh
processes with a disk cache of their own."""

import json

import pytest
import torch

import torch_tpu
from helpers import run_python

pytestmark = pytest.mark.single_mode

# Ops in op mode, each new program, shape and dtype once; prints the compile log.
EAGER = """
import json, torch, torch_tpu
torch_tpu.metrics.reset()
a = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
r1 = (a + a).cpu()                                  # new program
b = torch.arange(10, dtype=torch.float32).reshape(2, 5).to("tpu")
r2 = (b + b).cpu()                                  # new shape
c = torch.arange(12, dtype=torch.int32).reshape(3, 4).to("tpu")
r3 = (c + c).cpu()                                  # new dtype
r4 = (a + a).cpu()                                  # cached: no record
assert r1.tolist() == (2 * torch.arange(12.).reshape(3, 4)).tolist()
assert r3.tolist() == (2 * torch.arange(12).reshape(3, 4)).tolist()
print(json.dumps(torch_tpu.metrics.compile_log()))
"""


def run(code, cache_dir, **env):
    r = run_python(
        code, env={"TORCH_TPU_CACHE_DIR": str(cache_dir), "TORCH_TPU_EAGER_MODE": "op", **env}
    )
    assert r.returncode == 0, r.stderr
    return r


def adds(log):
    return [r for r in log if r["what"].startswith("add")]


def test_log_names_op_shapes_and_reason(tmp_path):
    r = run(EAGER, tmp_path, TORCH_TPU_LOG="compiles")
    log = adds(json.loads(r.stdout.strip().splitlines()[-1]))
    assert [(e["signature"], e["reason"]) for e in log] == [
        ("f32[3,4], f32[3,4], f32[] -> f32[3,4]", "new program"),  # a, a and alpha
        ("f32[2,5], f32[2,5], f32[] -> f32[2,5]", "new shape"),
        ("i32[3,4], i32[3,4], i32[] -> i32[3,4]", "new dtype"),
    ]
    for e in log:
        assert e["disk"] == "miss" and not e["from_disk"] and e["ms"] > 0
    # One stderr line per record, the same facts.
    lines = [line for line in r.stderr.splitlines() if line.startswith("torch_tpu: compiled add")]
    assert len(lines) == 3
    assert "add.Tensor (f32[2,5], f32[2,5], f32[] -> f32[2,5]): new shape, disk miss" in lines[1]
    assert lines[1].endswith(" ms")

    # A second process loads every program from disk: records say so, nothing compiles.
    warm = run(EAGER, tmp_path)
    log = json.loads(warm.stdout.strip().splitlines()[-1])
    assert log and all(e["from_disk"] and e["disk"] == "hit" for e in log)
    assert "torch_tpu: compiled" not in warm.stderr  # no log without TORCH_TPU_LOG


def test_corrupt_entry_is_the_reason(tmp_path):
    run(EAGER, tmp_path)
    for entry in tmp_path.glob("*.xla"):
        entry.write_bytes(b"not an executable")
    log = json.loads(run(EAGER, tmp_path).stdout.strip().splitlines()[-1])
    assert log and all(e["disk"] == "corrupt entry" and not e["from_disk"] for e in log)


def test_evicted_program_is_the_reason(tmp_path):
    code = """
import json, torch, torch_tpu
a = torch.ones(3, 5, device="tpu")
(a * 3).cpu()
torch.tpu.clear_cache(disk=False)
torch_tpu.metrics.reset()
(a * 3).cpu()
print(json.dumps(torch_tpu.metrics.compile_log()))
"""
    log = json.loads(run(code, tmp_path).stdout.strip().splitlines()[-1])
    mul = [e for e in log if e["what"].startswith("mul")]
    assert [(e["reason"], e["from_disk"]) for e in mul] == [("evicted", True)]


NO_COMPILE = """
import torch, torch_tpu
a = torch.ones(4, 6, device="tpu")
b = torch.ones(4, 7, device="tpu")
torch.tpu.synchronize()                  # (fused mode: the fills run as a group of their own)
expected = (a * 2).cpu()                 # compiled outside the region
with torch_tpu.no_compile():
    assert torch.equal((a * 2).cpu(), expected)   # cached: allowed
    try:
        (b * 2).cpu()                    # a new shape: forbidden
    except RuntimeError as e:
        print("RAISED", e)
# The process carries on: the same op compiles outside the region.
assert torch.equal((b * 2).cpu(), torch.full((4, 7), 2.0))
print("OK")
"""


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_no_compile_raises_on_a_new_shape_and_passes_when_cached(tmp_path, mode):
    r = run(NO_COMPILE, tmp_path, TORCH_TPU_EAGER_MODE=mode)
    out = r.stdout
    assert out.strip().endswith("OK")
    raised = [line for line in out.splitlines() if line.startswith("RAISED")]
    assert len(raised) == 1
    message = raised[0]
    assert "new shape" in message and "no_compile" in message
    # A fused group's arguments are the storages it reads, flat.
    assert ("mul.Tensor (f32[4,7]" if mode == "op" else "fused (1 ops) (f32[28]") in message


def test_no_compile_env_allows_disk_loads_only(tmp_path):
    code = """
import torch, torch_tpu
x = torch.arange(6.).reshape(2, 3).to("tpu")
print((x.exp() + 1).sum().item())
"""
    cold = run(code, tmp_path)
    warm = run(code, tmp_path, TORCH_TPU_NO_COMPILE="1")  # everything is on disk
    assert warm.stdout == cold.stdout
    r = run_python(
        code.replace("reshape(2, 3)", "reshape(3, 2)"),
        env={
            "TORCH_TPU_CACHE_DIR": str(tmp_path),
            "TORCH_TPU_NO_COMPILE": "1",
            "TORCH_TPU_EAGER_MODE": "op",
        },
    )
    assert r.returncode != 0
    assert "TORCH_TPU_NO_COMPILE=1" in r.stderr and "f32[3,2]" in r.stderr


def test_no_compile_forbids_a_dynamo_recompile(fresh_dynamo):
    def f(x):
        return (x * 2 + 1).sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    x = torch.randn(4, 3)
    y = torch.randn(5, 3)
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
    with torch_tpu.no_compile():
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
        with pytest.raises(RuntimeError, match="Recompiling function f"):
            compiled(y.to("tpu"))
    # Outside the region the recompile happens as usual.
    torch.testing.assert_close(compiled(y.to("tpu")).cpu(), f(y))


def test_no_compile_names_a_graph_that_would_compile(tmp_path):
    code = """
import torch, torch_tpu
f = torch.compile(lambda x: (x.sin() * 3).sum(1), backend="tpu")
x = torch.ones(3, 9, device="tpu")
torch.tpu.synchronize()
with torch_tpu.no_compile():
    try:
        f(x)
    except RuntimeError as e:
        print("RAISED", str(e).replace("\\n", " "))
"""
    out = run(code, tmp_path).stdout
    assert "RAISED" in out and "graph (" in out and "f32[3,9]" in out and "new program" in out


def test_every_counter_is_documented_and_reset_zeroes_all_but_the_process_ones():
    a = torch.ones(3, device="tpu")
    (a + a).cpu()
    snap = torch_tpu.metrics.snapshot()
    docs = torch_tpu._C._metric_docs()
    assert snap.keys() == docs.keys()
    for name, doc in docs.items():
        assert f"{name}: {doc}" in torch_tpu.metrics.snapshot.__doc__
    assert snap["executions"] > 0 and isinstance(snap["compile_seconds"], float)
    torch_tpu.metrics.reset()
    after = torch_tpu.metrics.snapshot()
    for name, value in after.items():
        if name.endswith("_groups") and name != "fused_groups":  # tpu_dist's, per process
            assert value == snap[name], name
        else:
            assert not value, name
