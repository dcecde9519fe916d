"""The OpInfo conformance tool (tools/conformance) on its pinned CI subset, and
docs/conformance.md's tables against the data they are generated from."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu device)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "conformance"
PAGE = ROOT / "docs" / "conformance.md"

# The tool and its pinned subset are op mode's measure (docs/conformance.md): one pass.
pytestmark = pytest.mark.single_mode

# The CI subset measured 99.8% native (docs/conformance.md, 2026-11-30); a drop below
# these is a regression.
MIN_NATIVE_MATCH_RATE = 0.95
MIN_MATCH_RATE = 0.97
# Samples per (op, dtype): keeps the run near a minute on two cores.
CI_MAX_SAMPLES = 8

# The package imports as `conformance` from tools/, as `python tools/conformance` runs it.
sys.path.insert(0, str(TOOL.parent))
from conformance import docs, ops, records, runner, worker  # noqa: E402


def run_tool(tmp_path, *args, env=None):
    report = tmp_path / "report.json"
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--quiet", "--json", str(report), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=full_env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(report.read_text()), proc.stdout


def check_record(record):
    counted = sum(record[s] for s in ("match", "mismatch", "error", "crash"))
    assert record["samples"] == counted
    assert 0 <= record["native_match"] <= record["match"]
    assert record["fallback"] <= record["samples"]


def test_ci_subset(tmp_path):
    report, out = run_tool(tmp_path, "--subset", "ci", "--max-samples", str(CI_MAX_SAMPLES))
    assert report["selection"] == "ci subset"
    assert report["torch_version"] == torch.__version__
    assert list(report["ops"]) == ops.CI_SUBSET
    for record in report["ops"].values():
        check_record(record)
        assert record["samples"] > 0
    summary = report["summary"]["ci subset"]
    assert summary["samples"] == sum(r["samples"] for r in report["ops"].values())
    assert summary["native_match_rate"] == pytest.approx(
        summary["native_match"] / summary["samples"], abs=1e-4
    )
    assert "match rate" in out and "native match rate" in out
    assert summary["crash"] == 0, [r["failures"] for r in report["ops"].values() if r["crash"]]
    assert summary["match_rate"] >= MIN_MATCH_RATE, summary
    assert summary["native_match_rate"] >= MIN_NATIVE_MATCH_RATE, summary


def test_crash_is_counted_and_the_op_resumes(tmp_path):
    report, _ = run_tool(
        tmp_path,
        "--ops",
        "abs,neg",
        "--dtypes",
        "float32,int64",
        "--write-docs",
        str(tmp_path / "conformance.md"),
        env={"TORCH_TPU_CONFORMANCE_CRASH_AT": "abs:1"},
    )
    abs_record, neg_record = report["ops"]["abs"], report["ops"]["neg"]
    check_record(abs_record)
    assert abs_record["crash"] == 1
    assert abs_record["match"] == abs_record["samples"] - 1 > 0
    assert neg_record["crash"] == 0 and neg_record["match"] == neg_record["samples"] > 0
    # The page's rows are this run's (a new page copies docs/conformance.md, tables too).
    text = (tmp_path / "conformance.md").read_text()
    assert (
        f"| **abs** | {abs_record['samples']} | {abs_record['match']} | 0 | 0 | 1 | " in text
    ) and "| **neg** | " in text
    assert docs.read_data(tmp_path / "conformance.md")["ops"]["abs"][4] == 1


def test_tensors_the_generator_keeps_on_cpu_stay_there():
    # tensor_split's index tensor must be on CPU (PyTorch's rule): the sample generator
    # puts it there even when asked for another device, and the tool's copy keeps it.
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == "tensor_split")
    samples = worker._samples(op, ["float32"], grad=False, max_samples=0)
    pinned = [(s, p) for _, s, p in samples if p]
    assert pinned and all(p == {("args", 0)} for _, p in pinned)
    for sample, p in pinned:
        moved = worker._to_tpu(sample.args, [], p, ("args",))
        assert moved[0].device.type == "cpu"
        got = op(sample.input.to("tpu"), *moved)
        assert all(t.device.type == "tpu" for t in got)
        for a, e in zip(got, op(sample.input, *sample.args)):
            torch.testing.assert_close(a.cpu(), e)
    # Ordinary samples pin nothing: every tensor moves.
    add = next(o for o in op_db if o.name == "add")
    assert not any(p for _, _, p in worker._samples(add, ["float32"], False, 2))


def compare(actual, expected):
    worker._compare(actual, expected, "out", values=True, want_tpu=False)


@pytest.mark.parametrize(
    "actual, expected",
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.001])),
        (torch.tensor([1, 2]), torch.tensor([1, 3])),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)),
        (torch.zeros(2, 1), torch.zeros(2)),
        ((torch.zeros(2),), (torch.zeros(2), torch.zeros(2))),
        (torch.tensor(True), torch.tensor(False)),
        (3, 4),
        (0.5, 0.6),
    ],
)
def test_compare_finds_differences(actual, expected):
    with pytest.raises(worker.Mismatch):
        compare(actual, expected)


@pytest.mark.parametrize(
    "actual, expected",
    [
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0 + 1e-7, float("nan")])),
        (torch.tensor([0.5], dtype=torch.bfloat16), torch.tensor([0.501], dtype=torch.bfloat16)),
        ([torch.tensor(3), 2.0], [torch.tensor(3), 2.0]),
        (None, None),
    ],
)
def test_compare_accepts_equal_outputs(actual, expected):
    compare(actual, expected)


def test_compile_mode(tmp_path):
    page = tmp_path / "conformance.md"
    report, out = run_tool(
        tmp_path,
        "--ops",
        "add,nonzero",
        "--dtypes",
        "float32",
        "--max-samples",
        "2",
        "--compile",
        "--write-docs",
        str(page),
    )
    assert report["compile"] is True
    add, nonzero = report["ops"]["add"], report["ops"]["nonzero"]
    check_record(add)
    check_record(nonzero)
    assert add["native_match"] == add["samples"] == 2
    assert add["graph_fallback"] == add["no_graph"] == 0
    # nonzero's output shape depends on the data: Dynamo runs it eagerly, no graph.
    assert nonzero["match"] == nonzero["no_graph"] == 2
    assert "graph fallback 0, no graph 2" in out
    data = docs.read_data(page)
    assert data["ops"] == {} and data["compiled"]["ops"]["add"][0] == 2
    # The page's hand-written text (here the compiled section's notes) survives the next
    # --write-docs, which rewrites the tables only.
    text = page.read_text()
    row = [nonzero[c] for c in docs.OP_COLUMNS + ("graph_fallback", "no_graph")]
    assert "| nonzero | " + " | ".join(map(str, row)) + " | " in text
    notes = "\nNotes on the compiled sweep.\n"
    page.write_text(text.replace("\n## Compiled mode\n", "\n## Compiled mode\n" + notes))
    docs.write(report, page)
    assert notes in page.read_text() and "| nonzero |" in page.read_text()


def test_graph_fallback_is_not_native():
    record = records.new_op_record(compiled=True)
    reason = "torch_tpu: no tpu lowering for aten::x in a compiled graph"
    for k, ran_op_by_op in enumerate([0, 1, 1]):
        event = {
            "k": k,
            "dtype": "float32",
            "status": "match",
            "fallback": {},
            "graph_fallback": ran_op_by_op,
            "graph_runs": 1 - ran_op_by_op,
        }
        if ran_op_by_op:
            event["graph_reasons"] = [reason]
        records.add_result(record, event, grad=False)
    assert record["match"] == 3 and record["native_match"] == 1
    assert record["graph_fallback"] == 2 and record["graph_reasons"] == {reason: 2}


def test_page_tables_are_generated_from_its_data():
    # docs/conformance.md's tables are what --write-docs makes from docs/conformance.json.
    text = PAGE.read_text()
    data = docs.read_data(PAGE)
    assert data["runs"] and data["ops"] and data["compiled"]["ops"]
    assert docs.render(text, data) == text
    # Rendering replaces what is between the markers, whatever it is.
    begin, end = docs.markers("ops")
    stale = text.replace(begin, begin + "| stale | row |\n")
    assert stale != text and docs.render(stale, data) == text


def test_page_states_the_tools_settings():
    # The page's prose names the tool's dtypes, tolerances, random ops and crash limit.
    text = PAGE.read_text()
    assert "Dtypes: " + ", ".join(ops.DTYPES) + "," in text
    for name, (rtol, atol) in ops.TOLERANCES.items():
        assert f"{name} ({rtol:g}, {atol:g})" in text
    random_ops = ", ".join(sorted(ops.NONDETERMINISTIC & set(ops.ISSUE_SET)))
    assert f"`NONDETERMINISTIC` in `tools/conformance/ops.py`: {random_ops}, ...)" in text
    assert f"(after {runner.MAX_CRASHES_PER_OP} crashes," in text
