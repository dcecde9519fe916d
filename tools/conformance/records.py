"""The records of the report: one per op, the counts a sample's result adds to it, and
the summary of a selection."""

STATUSES = ("match", "mismatch", "error", "crash", "skip")
# The longest failure detail a record keeps.
DETAIL_CHARS = 300

# --compile's counters of samples: a graph ran op by op; no compiled program ran at all
# (Dynamo captured no op, or fell back to eager without a graph).
COMPILE_COUNTERS = ("graph_fallback", "no_graph")


def new_op_record(compiled=False):
    """An op's record before its first sample."""
    record = {s: 0 for s in STATUSES}
    record.update(
        samples=0,
        native_match=0,
        fallback=0,
        fallback_ops={},
        failures=[],
        by_dtype={},
        seconds=0.0,
    )
    if compiled:
        record.update({k: 0 for k in COMPILE_COUNTERS}, graph_reasons={})
    return record


def add_result(record, event, grad):
    """Counts one sample's result (a worker's "result" event, or a crash) in the record."""
    status = event["status"]
    record[status] += 1
    dtype_counts = record["by_dtype"].setdefault(event["dtype"], {s: 0 for s in STATUSES})
    dtype_counts[status] += 1
    if status != "skip":
        record["samples"] += 1
        fallback = event.get("fallback", {})
        if fallback:
            record["fallback"] += 1
            for aten, count in fallback.items():
                record["fallback_ops"][aten] = record["fallback_ops"].get(aten, 0) + count
        if event.get("graph_fallback"):
            record["graph_fallback"] += 1
            for reason in event.get("graph_reasons", ()):
                record["graph_reasons"][reason] = record["graph_reasons"].get(reason, 0) + 1
        elif event.get("graph_runs") == 0 and status in ("match", "mismatch"):
            record["no_graph"] += 1
        if status == "match" and not fallback and not event.get("graph_fallback"):
            record["native_match"] += 1
        if status != "match" and len(record["failures"]) < 5:
            record["failures"].append(
                f"{event['dtype']} #{event['k']} {status}: {event.get('detail', '')}"
            )
    if grad and "grad" in event:
        g = record.setdefault("grad", dict({s: 0 for s in STATUSES}, native_match=0))
        g[event["grad"]["status"]] += 1
        g["native_match"] += (
            event["grad"]["status"] == "match"
            and not event["grad"]["fallback"]
            and not event["grad"].get("graph_fallback")
        )
        if event["grad"]["status"] in ("mismatch", "error") and len(record["failures"]) < 5:
            record["failures"].append(
                f"{event['dtype']} #{event['k']} grad "
                f"{event['grad']['status']}: "
                f"{event['grad'].get('detail', '')}"
            )


def summarize(records, names):
    """The counts and rates over the records of `names` (those that ran)."""
    counted = ("samples", "native_match", "fallback") + STATUSES
    counted += tuple(k for k in COMPILE_COUNTERS if any(k in r for r in records.values()))
    s = {k: 0 for k in counted}
    ops = 0
    for name in names:
        if name not in records:
            continue
        ops += 1
        for k in s:
            s[k] += records[name][k]
    s["ops"] = ops
    s["match_rate"] = round(s["match"] / s["samples"], 4) if s["samples"] else 0.0
    s["native_match_rate"] = round(s["native_match"] / s["samples"], 4) if s["samples"] else 0.0
    return s
