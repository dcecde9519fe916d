"""The runner: the command line, worker processes fed one op after another, crash and
timeout handling, the report and, with --write-docs, the page."""

import argparse
import collections
import datetime
import json
import os
import queue
import subprocess
import sys
import threading
import time

import torch
import torch_tpu

from . import docs
from .ops import CI_SUBSET, DTYPES, ISSUE_SET, NONDETERMINISTIC, TOLERANCES, op_key
from .records import COMPILE_COUNTERS, add_result, new_op_record, summarize
from .worker import worker_main

# This package's folder: `python PACKAGE` runs its __main__.py, also for the workers.
PACKAGE = os.path.dirname(os.path.abspath(__file__))
MAX_CRASHES_PER_OP = 3


class Worker:
    """A worker subprocess and a thread that turns its output lines into a queue."""

    def __init__(self, args):
        self.stderr = open(os.devnull, "w") if not args.worker_log else open(args.worker_log, "a")
        cmd = [
            sys.executable,
            PACKAGE,
            "--worker",
            "--dtypes",
            ",".join(args.dtypes),
            "--max-samples",
            str(args.max_samples),
        ]
        cmd += ["--grad"] if args.grad else []
        cmd += ["--compile"] if args.compile else []
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.events = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith('{"ev"'):  # anything else was printed before the channel
                self.events.put(json.loads(line))
        self.events.put(None)

    def send(self, op, start):
        self.proc.stdin.write(json.dumps({"op": op, "from": start}) + "\n")
        self.proc.stdin.flush()

    def next_event(self, deadline):
        """The next event, None when the worker died, or 'timeout'."""
        try:
            return self.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return "timeout"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stderr.close()


def _wait(worker, deadline, on_event):
    """Feeds events to on_event until 'done'; returns 'done', 'died' or 'timeout'."""
    while True:
        event = worker.next_event(deadline)
        if event is None:
            return "died"
        if event == "timeout":
            return "timeout"
        if event["ev"] == "done":
            return "done"
        on_event(event)


def run_op(name, state, args):
    """Runs every sample of one op, restarting the worker after crashes."""
    record = new_op_record(args.compile)
    started = time.monotonic()
    deadline = started + args.timeout
    progress = {"start": 0, "total": None, "current": None}
    crashes = 0

    def on_event(event):
        if event["ev"] == "begin":
            progress["total"] = event["n"]
        elif event["ev"] == "start":
            progress["current"] = event
        elif event["ev"] == "result":
            add_result(record, event, args.grad)
            progress["current"] = None

    while True:
        if state.get("worker") is None:
            state["worker"] = Worker(args)
            if state["worker"].next_event(time.monotonic() + 300) in (None, "timeout"):
                state["worker"].kill()
                state["worker"] = None
                raise RuntimeError("a worker failed to start; see --worker-log FILE")
        worker = state["worker"]
        worker.send(name, progress["start"])
        outcome = _wait(worker, deadline, on_event)
        if outcome == "done":
            break
        worker.kill()
        state["worker"] = None
        current = progress["current"]
        reason = (
            f"{'timeout' if outcome == 'timeout' else 'worker died'} "
            f"(exit {worker.proc.returncode})"
        )
        if current is None:
            add_result(
                record,
                {"k": -1, "dtype": "-", "status": "crash", "detail": reason + " outside a sample"},
                args.grad,
            )
            break
        crashes += 1
        add_result(record, dict(current, status="crash", detail=reason), args.grad)
        progress.update(start=current["k"] + 1, current=None)
        remaining = progress["total"] - progress["start"]
        if remaining and (outcome == "timeout" or crashes >= MAX_CRASHES_PER_OP):
            # The rest of the op is not run; its samples count as crashes.
            record["crash"] += remaining
            record["samples"] += remaining
            record["not_run"] = remaining
            break
        if not remaining:
            break
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


def select_ops(args, all_names):
    if args.ops:
        names = args.ops.split(",")
    elif args.all:
        names = all_names
    elif args.subset == "ci":
        names = CI_SUBSET
    else:
        names = ISSUE_SET
    unknown = [n for n in names if n not in set(all_names)]
    if unknown:
        sys.exit(f"not in op_db: {', '.join(unknown)}")
    return names


def main():
    description = sys.modules[__package__].__doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--all", action="store_true", help="every op of op_db")
    parser.add_argument("--subset", choices=["ci", "issue"], default="issue")
    parser.add_argument("--ops", help="comma-separated OpInfo names (name.variant)")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--grad", action="store_true", help="also compare input gradients")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run each sample on tpu through torch.compile(backend='tpu')",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per op")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--max-samples", type=int, default=0, help="at most N samples per (op, dtype); 0: all"
    )
    parser.add_argument("--json", default="conformance_report.json")
    parser.add_argument("--write-docs", metavar="MD")
    parser.add_argument("--worker-log", metavar="FILE", help="append workers' stderr here")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.dtypes = args.dtypes.split(",")
    if args.worker:
        worker_main(args.dtypes, args.grad, args.max_samples, args.compile)
        return

    from torch.testing._internal.common_methods_invocations import op_db

    names = select_ops(args, [op_key(op) for op in op_db])
    records = {}
    pending = collections.deque(names)
    lock = threading.Lock()
    fatal = []

    def drain():
        state = {}
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    name = pending.popleft()
                record = run_op(name, state, args)
                with lock:
                    records[name] = record
                    if not args.quiet:
                        graph = (
                            f"{record['graph_fallback']} graph fallback, " if args.compile else ""
                        )
                        print(
                            f"[{len(records)}/{len(names)}] {name}: {record['samples']} samples, "
                            f"{record['match']} match, {record['native_match']} native, "
                            f"{record['mismatch']} mismatch, {record['error']} error, "
                            f"{record['crash']} crash, {graph}{record['seconds']} s",
                            flush=True,
                        )
        except RuntimeError as e:
            fatal.append(str(e))
        finally:
            if state.get("worker") is not None:
                state["worker"].proc.stdin.close()
                state["worker"].kill()

    threads = [threading.Thread(target=drain) for _ in range(max(1, args.workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if fatal:
        sys.exit(fatal[0])

    records = {n: records[n] for n in names if n in records}
    selection = (
        "whole op_db"
        if args.all
        else "ops"
        if args.ops
        else "ci subset"
        if args.subset == "ci"
        else "issue set"
    )
    summary = {selection: summarize(records, names)}
    if args.all:
        summary["issue set"] = summarize(records, ISSUE_SET)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch_version": torch.__version__,
        "torch_tpu_version": torch_tpu.__version__,
        "selection": selection,
        "dtypes": args.dtypes,
        "grad": args.grad,
        "compile": args.compile,
        "max_samples": args.max_samples,
        "tolerances": TOLERANCES,
        "nondeterministic_ops": sorted(NONDETERMINISTIC),
        "summary": summary,
        "ops": records,
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    if args.write_docs:
        docs.write(report, args.write_docs)

    worst = sorted(records.items(), key=lambda kv: kv[1]["native_match"] - kv[1]["samples"])
    print(
        "\nmost non-native samples: "
        + ", ".join(
            f"{n} ({r['samples'] - r['native_match']})"
            for n, r in worst[:15]
            if r["samples"] > r["native_match"]
        )
    )
    for key, s in summary.items():
        print(
            f"{key}: {s['ops']} ops, {s['samples']} samples — match rate "
            f"{100 * s['match_rate']:.1f}%, native match rate "
            f"{100 * s['native_match_rate']:.1f}% (mismatch {s['mismatch']}, error "
            f"{s['error']}, crash {s['crash']}, fallback {s['fallback']}, skip {s['skip']}"
            + "".join(f", {k.replace('_', ' ')} {s[k]}" for k in COMPILE_COUNTERS if k in s)
            + ")"
        )
    reasons = collections.Counter()
    for r in records.values():
        reasons.update(r.get("graph_reasons", {}))
    for reason, count in reasons.most_common(15):
        print(f"graph ran op by op ({count} samples): {reason}")
    print(f"report: {args.json}")
