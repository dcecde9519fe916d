"""docs/conformance.md from a report, its data kept in a comment at the end of the page."""

import json
import os

from .ops import DTYPES, ISSUE_SET, NONDETERMINISTIC, TOLERANCES
from .records import COMPILE_COUNTERS, DETAIL_CHARS


DOCS_DATA = "<!-- conformance-data"
OP_COLUMNS = ("samples", "match", "mismatch", "error", "crash", "fallback", "native_match")


def read_docs_data(path):
    """The data an earlier --write-docs kept at the end of the page: {"runs", "ops"}."""
    if not os.path.exists(path):
        return {"runs": {}, "ops": {}}
    with open(path) as f:
        text = f.read()
    if DOCS_DATA not in text:
        return {"runs": {}, "ops": {}}
    return json.loads(text.split(DOCS_DATA, 1)[1].rsplit("-->", 1)[0])


def write_docs(report, path):
    """docs/conformance.md from this report, keeping the summaries of selections not run
    now and the rows of ops not run now from the page's earlier data. A --compile report
    updates the compiled section's data only."""
    from .runner import MAX_CRASHES_PER_OP  # runner imports this module

    data = read_docs_data(path)
    compiled = report.get("compile")
    target = data.setdefault("compiled", {"runs": {}, "ops": {}}) if compiled else data
    for key, summary in report["summary"].items():
        if key == "ops":
            continue
        target["runs"][key] = dict(summary, date=report["date"], torch=report["torch_version"],
                                   torch_tpu=report["torch_tpu_version"],
                                   max_samples=report["max_samples"])
    for name, r in report["ops"].items():
        if compiled:
            target["ops"][name] = ([r[c] for c in OP_COLUMNS + COMPILE_COUNTERS]
                                   + [sorted(r["graph_reasons"]), r["failures"][:1]])
        else:
            target["ops"][name] = [r[c] for c in OP_COLUMNS] + [sorted(r["fallback_ops"])]
    lines = [
        "# OpInfo conformance",
        "",
        "`tools/conformance` runs every sample input of PyTorch's OpInfo database",
        "(`torch.testing._internal.common_methods_invocations.op_db`, from the installed",
        "torch wheel) on CPU and on `tpu`, and compares the outputs. Each sample is a",
        "**match**, **mismatch** (tpu ran, the output differs), **error** (tpu raised, CPU",
        "did not), **crash** (the worker process died or the op timed out) or **skip** (CPU",
        "itself raised: not counted). The CPU fallback is on while it runs; a sample during",
        "which any op fell back to CPU (`torch_tpu.metrics` fallback counters) is a",
        "*fallback* sample.",
        "",
        "- **match rate** = matching samples / samples (skips excluded)",
        "- **native match rate** = matching samples with no fallback / samples",
        "",
        "Dtypes: " + ", ".join(DTYPES) + ", each intersected with the dtypes the op",
        "supports on CPU. Tolerances (rtol, atol) by output dtype are",
        "`torch.testing.assert_close`'s defaults with a larger atol for the half types (as",
        "OpInfo tests' toleranceOverride usually has; rounding at different points differs",
        "most near zero): "
        + ", ".join(f"{k} ({r:g}, {a:g})" for k, (r, a) in TOLERANCES.items())
        + "; integer and bool outputs must be equal, NaNs match NaNs. Random ops and ops",
        "returning uninitialized memory (`NONDETERMINISTIC` in `tools/conformance/ops.py`: "
        + ", ".join(sorted(NONDETERMINISTIC & set(ISSUE_SET))) + ", ...)",
        "cannot match CPU values: their samples, and samples with a positive `dropout_p`",
        "(scaled_dot_product_attention), are compared by structure, shape, dtype and",
        "device only.",
        "",
        "## Running it",
        "",
        "```",
        "python tools/conformance                 # the issue set (issue 3's ops)",
        "python tools/conformance --subset ci     # the pinned CI subset",
        "python tools/conformance --all           # the whole op_db",
        "python tools/conformance --ops gather,sum --dtypes float32,int64",
        "  --json FILE        the report (default conformance_report.json)",
        "  --write-docs docs/conformance.md",
        "  --grad             also compare input gradients (backward through both devices)",
        "  --timeout S        per-op limit (default 300)   --workers N",
        "  --max-samples N    at most N samples per (op, dtype), evenly spaced: a quicker sweep",
        "  --compile          tpu runs each sample through torch.compile (see Compiled mode)",
        "```",
        "",
        "Run it from the repository root: Python runs the folder's `__main__.py`. The issue set",
        "is `FAMILIES` in `tools/conformance/ops.py`: issue 3's op families mapped to OpInfo",
        "names. The CI subset (`CI_SUBSET`) runs in `tests/python/test_conformance.py`. Ops",
        "run one after another in a worker subprocess; a crash restarts the worker and resumes",
        f"the op after the crashed sample (after {MAX_CRASHES_PER_OP} crashes, or on a timeout,",
        "the op's remaining samples count as crashes). `--all` also reports the issue set",
        "within it.",
        "",
        "## Latest summary",
        "",
    ]
    lines += _summary_table(data["runs"], SUMMARY_COUNTERS)
    if "whole op_db" not in data["runs"]:
        lines += ["", "The whole op_db has not been swept yet (`--all`)."]
    if "compiled" in data:
        lines += _compiled_section(data["compiled"], _kept_notes(path))
    lines += [
        "",
        "## Per op",
        "",
        "Samples exclude skips; *fallback* counts samples during which some op ran on CPU;",
        "*native* counts matches without fallback. Ops of the issue set are in bold; rows",
        "are sorted by non-native samples, most first.",
        "",
        "| op | samples | match | mismatch | error | crash | fallback | native "
        "| fallen-back ATen ops |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    issue = set(ISSUE_SET)
    rows = sorted(data["ops"].items(), key=lambda kv: (kv[1][6] - kv[1][0], kv[0]))
    for name, row in rows:
        shown = f"**{name}**" if name in issue else name
        fell = ", ".join(f"`{a}`" for a in row[7][:4]) + (", ..." if len(row[7]) > 4 else "")
        lines.append(f"| {shown} | " + " | ".join(str(v) for v in row[:7]) + f" | {fell} |")
    lines += ["", DOCS_DATA, json.dumps(data, separators=(",", ":")), "-->"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


SUMMARY_COUNTERS = ("match", "mismatch", "error", "crash", "fallback", "skip")
NOTES = ("<!-- compiled-notes: kept by --write-docs -->", "<!-- /compiled-notes -->")


def _summary_table(runs, counters):
    header = ["selection", "date", "torch", "ops", "samples"]
    header += [c.replace("_", " ") for c in counters] + ["match rate", "native match rate"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, s in runs.items():
        capped = f" (max {s['max_samples']}/op/dtype)" if s.get("max_samples") else ""
        lines.append(f"| {key}{capped} | {s['date']} | {s['torch']} | {s['ops']} "
                     f"| {s['samples']} | " + " | ".join(str(s[c]) for c in counters)
                     + f" | {100 * s['match_rate']:.1f}% | {100 * s['native_match_rate']:.1f}% |")
    return lines


def _kept_notes(path):
    """The hand-written triage of the compiled section, which --write-docs keeps."""
    text = open(path).read() if os.path.exists(path) else ""
    if NOTES[0] not in text:
        return ""
    return text.split(NOTES[0], 1)[1].split(NOTES[1], 1)[0].strip("\n")


def _compiled_section(compiled, notes):
    lines = [
        "",
        "## Compiled mode",
        "",
        "`--compile` runs each sample on tpu as `torch.compile(lambda *a, **k: op(*a, **k),",
        "backend=\"tpu\", dynamic=False)` with a fresh Dynamo cache (its Python scalars and",
        "sizes are constants of the graph) and compares it with CPU eager as above. A sample",
        "during which a graph ran op by op (`graph_fallbacks` in `torch_tpu.metrics`) is a",
        "*graph fallback* and not native; *no graph* counts the samples that ran no compiled",
        "program at all (Dynamo captured no op). Counts are over the same samples as eager",
        "mode's with the same `--max-samples`.",
        "",
    ]
    lines += _summary_table(compiled["runs"], SUMMARY_COUNTERS[:-1] + COMPILE_COUNTERS + ("skip",))
    lines += ["", NOTES[0], notes, NOTES[1], "",
              "Ops with samples that are not native compiled matches or ran no graph, with the",
              "first failure or the reasons a graph ran op by op:", "",
              "| op | samples | match | mismatch | error | crash | fallback | native "
              "| graph fallback | no graph | first failure / op-by-op reasons |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = sorted(compiled["ops"].items(), key=lambda kv: (kv[1][6] - kv[1][0], kv[0]))
    for name, row in rows:
        if row[6] == row[0] and not row[8]:
            continue
        why = "; ".join(row[9] + row[10]).replace("|", "\\|")[:DETAIL_CHARS // 2]
        lines.append(f"| {name} | " + " | ".join(str(v) for v in row[:9]) + f" | {why} |")
    return lines
