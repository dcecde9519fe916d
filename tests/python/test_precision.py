"""Precision of f32 matrix products: torch.get_float32_matmul_precision() and
torch.tpu.precision(...) become StableHLO precision_config on dot_general and
convolution, in eager (op and fused) and compiled programs; read back from the dumped
programs (TORCH_TPU_DUMP_DIR, read once per process: a fresh one per test)."""

import json

import pytest
import torch

import torch_tpu  # noqa: F401
from helpers import assert_same, rand, run_python

# Runs `body` once per setting in a fresh process with an empty cache and a dump
# directory; prints, per setting, the precision attributes of every program it compiled
# that has a product, and the results.
SCRIPT = """
import glob, json, os, torch, torch_tpu
dump = os.environ["TORCH_TPU_DUMP_DIR"]
torch_tpu.set_eager_mode({mode!r})
g = torch.Generator().manual_seed(0)
x = torch.randn(6, 8, generator=g).to("tpu")
w = torch.randn(8, 5, generator=g).to("tpu")
img = torch.randn(1, 2, 6, 6, generator=g).to("tpu")
k = torch.randn(3, 2, 3, 3, generator=g).to("tpu")

def seen():
    out = []
    for f in glob.glob(dump + "/*.mlir"):
        text = open(f).read()
        os.remove(f)
        for op in ("dot_general", "convolution"):
            for line in text.splitlines():
                if "stablehlo." + op in line:
                    attrs = [a for a in ("HIGHEST", "HIGH", "DEFAULT")
                             if "precision " + a + ">" in line]
                    out.append([op, attrs[0] if attrs else None, "bf16" in line])
    return sorted(out, key=str)

def body():
{body}

result = {{}}
for setting in {settings!r}:
    torch.tpu.clear_cache()
    torch.set_float32_matmul_precision(setting)
    values = [v.cpu().tolist() for v in body()]
    result[setting] = {{"programs": seen(), "values": values}}
print(json.dumps(result))
"""


def _run(tmp_path, body, settings=("highest", "high", "medium"), mode="op"):
    indented = "\n".join("    " + line for line in body.strip().splitlines())
    proc = run_python(
        SCRIPT.format(body=indented, settings=list(settings), mode=mode),
        env={
            "TORCH_TPU_DUMP_DIR": str(tmp_path),
            "TORCH_TPU_CACHE_DIR": str(tmp_path / "cache"),
            "TORCH_TPU_DISK_CACHE": "0",
        },
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


EXPECTED = {"highest": "HIGHEST", "high": "HIGH", "medium": "DEFAULT"}


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_eager_matmul_and_conv_follow_torch_setting(tmp_path, mode):
    body = """
return [x @ w, torch.nn.functional.linear(x, w.t()),
        torch.nn.functional.conv2d(img, k, padding=1)]
"""
    result = _run(tmp_path, body, mode=mode)
    for setting, want in EXPECTED.items():
        programs = result[setting]["programs"]
        assert {op for op, _, _ in programs} == {"dot_general", "convolution"}
        assert all(p == want for _, p, _ in programs), (setting, programs)
    # XLA:CPU computes f32 products in f32 whatever the precision: same values.
    assert result["highest"]["values"] == result["medium"]["values"]


def test_low_precision_products_keep_default(tmp_path):
    body = """
return [(x.bfloat16() @ w.bfloat16()).float(), x @ w]
"""
    programs = _run(tmp_path, body, settings=["highest"])["highest"]["programs"]
    bf16 = [p for op, p, low in programs if low]
    f32 = [p for op, p, low in programs if not low]
    assert bf16 == [None]  # no precision_config: StableHLO's DEFAULT
    assert f32 == ["HIGHEST"]


def test_compiled_graph_follows_setting_and_agrees_with_eager(tmp_path):
    body = """
f = torch.compile(lambda a, b, c, d: (a @ b, torch.nn.functional.conv2d(c, d)), backend="tpu")
return list(f(x, w, img, k))
"""
    result = _run(tmp_path, body)
    for setting, want in EXPECTED.items():
        programs = result[setting]["programs"]
        assert {op for op, _, _ in programs} == {"dot_general", "convolution"}
        assert all(p == want for _, p, _ in programs), (setting, programs)
    eager = _run(
        tmp_path / "eager",
        """
return [x @ w, torch.nn.functional.conv2d(img, k)]
""",
        settings=["highest"],
    )
    assert eager["highest"]["values"] == result["highest"]["values"]


def test_context_manager_overrides_and_restores(tmp_path):
    body = """
P = torch.tpu.Precision
outs = []
with torch.tpu.precision(P.HIGH):
    outs.append(x @ w)
    with torch.tpu.precision(P.DEFAULT):
        outs.append(x[:3] @ w)
    outs.append(x[:2] @ w)
try:
    with torch.tpu.precision(P.DEFAULT):
        raise KeyError
except KeyError:
    pass
outs.append(x[:1] @ w)
return outs
"""
    programs = _run(tmp_path, body, settings=["highest"])["highest"]["programs"]
    # One program per shape: HIGH, DEFAULT (inner block), HIGH again, then the global
    # setting after the blocks (also after one that raised).
    assert sorted(p for _, p, _ in programs) == ["DEFAULT", "HIGH", "HIGH", "HIGHEST"]


def test_context_manager_in_process():
    x, w = rand((4, 3), torch.float32), rand((3, 2), torch.float32, seed=1)
    assert torch_tpu._precision.current() == torch.tpu.Precision.HIGHEST
    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        assert torch_tpu._precision.current() == torch.tpu.Precision.DEFAULT
        assert_same(x.to("tpu") @ w.to("tpu"), x @ w)
    assert torch_tpu._precision.current() == torch.tpu.Precision.HIGHEST
    with pytest.raises(ValueError, match="torch.tpu.Precision"):
        with torch.tpu.precision("high"):
            pass
    assert torch_tpu._precision.current() == torch.tpu.Precision.HIGHEST


def test_highest_error_against_float64_within_cpu():
    a = rand((64, 64), torch.float32, seed=2)
    b = rand((64, 64), torch.float32, seed=3)
    exact = a.double() @ b.double()
    tpu_err = ((a.to("tpu") @ b.to("tpu")).cpu().double() - exact).abs().max()
    cpu_err = ((a @ b).double() - exact).abs().max()
    assert tpu_err <= cpu_err * 4 + 1e-6


def test_compiled_graph_relowered_for_a_new_precision(tmp_path):
    body = """
f = torch.compile(lambda a, b: a @ b, backend="tpu")
outs = [f(x, w)]
with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
    outs.append(f(x, w))
outs.append(f(x, w))
return outs
"""
    result = _run(tmp_path, body, settings=["highest"])["highest"]
    # The graph Dynamo compiled once is lowered again for the block, and only once.
    assert sorted(p for _, p, _ in result["programs"]) == ["DEFAULT", "HIGHEST"]
    assert result["values"][0] == result["values"][1] == result["values"][2]
