"""Tiered compilation (TORCH_TPU_TIERED_COMPILE, runtime/tiered_compile.h): a new program
compiles at XLA's cheapest level, and after N runs again at its full level in a
background thread, swapped in. Results before and after equal CPU's and each other's bit
for bit; the swap happens at the N-th run; the disk cache holds the optimized executable;
a process may exit with a tier-up in flight; 0 restores one compile per program.

What is compiled depends on what the caches hold, so each check runs in a fresh process
with a disk cache of its own."""

import json

import pytest

from helpers import run_python

pytestmark = pytest.mark.single_mode

# Six one-op programs (and an in-place write), in op or fused mode: each run RUNS times
# with fresh inputs; the results of every run are compared with CPU's, and runs before
# and after the tier-up with each other.
PROGRAMS = """
import json, sys, torch, torch_tpu, torch_tpu.compiler
torch.manual_seed(0)
RUNS = int(sys.argv[1])
w = torch.randn(64, 64)
ln = torch.nn.LayerNorm(64)
with torch.no_grad():
    ln.weight.normal_(); ln.bias.normal_()
OPS = {
    "matmul": lambda x, w, ln: x @ w,
    "softmax": lambda x, w, ln: torch.softmax(x, -1),
    "layer_norm": lambda x, w, ln: ln(x),
    "gelu": lambda x, w, ln: torch.nn.functional.gelu(x),
    "sum": lambda x, w, ln: x.sum(0),
    "cat": lambda x, w, ln: torch.cat([x, x.exp()]),
    "add_": lambda x, w, ln: x.clone().mul_(3.0).add_(x),
}
wt, lnt = w.to("tpu"), torch.nn.LayerNorm(64).to("tpu")
lnt.load_state_dict(ln.state_dict())
inputs = [torch.randn(33, 64) for _ in range(RUNS)]
torch_tpu.metrics.reset()
out = {"tier_ups": [], "equal_cpu": {}, "same_bits": {}, "optimized_bits": {}}
with torch.no_grad():
    results = {name: [] for name in OPS}
    for i in range(RUNS):
        for name, fn in OPS.items():
            results[name].append(fn(inputs[i].to("tpu"), wt, lnt).cpu())
        torch_tpu._C._wait_for_tier_ups()
        out["tier_ups"].append(torch_tpu.metrics.snapshot()["tier_ups"])
    m = torch_tpu.metrics.snapshot()
    out["compiles"] = m["compiles"]
    out["final_tier_ups"] = m["tier_ups"]
    out["log"] = torch_tpu.metrics.compile_log()
    # Run 0's input again, now that every program is optimized, and with the level set
    # by hand (1, what small programs compile at without tiering: not tiered).
    for name, fn in OPS.items():
        again = fn(inputs[0].to("tpu"), wt, lnt).cpu()
        with torch_tpu.compiler.custom_compiler_options({"xla_backend_optimization_level": 1}):
            untiered = fn(inputs[0].to("tpu"), wt, lnt).cpu()
        expect = [fn(x, w, ln) for x in inputs]
        out["equal_cpu"][name] = all(
            torch.allclose(r, e, rtol=1e-5, atol=1e-5) for r, e in zip(results[name], expect))
        out["same_bits"][name] = torch.equal(again, results[name][0])
        out["optimized_bits"][name] = torch.equal(again, untiered)
print("RESULT " + json.dumps(out))
"""


def run(code, cache_dir, *args, **env):
    argv = "import sys; sys.argv = ['-c'] + %r\n" % [str(a) for a in args]
    r = run_python(argv + code, env={"TORCH_TPU_CACHE_DIR": str(cache_dir), **env})
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[-1][len("RESULT ") :]) if line else r


@pytest.mark.parametrize("mode", ["op", "fused"])
def test_results_before_and_after_the_tier_up_equal_cpu_and_each_other(tmp_path, mode):
    out = run(PROGRAMS, tmp_path, 5, TORCH_TPU_TIERED_COMPILE="3", TORCH_TPU_EAGER_MODE=mode)
    assert all(out["equal_cpu"].values()), out["equal_cpu"]
    # After the tier-up every program gives the bits it gives without tiering.
    assert all(out["optimized_bits"].values()), out["optimized_bits"]
    # Before it too where the program has no multiply-add XLA may fuse: level 0 keeps
    # llvm.fmuladd a multiply and an add, the other levels make it one FMA instruction
    # (layer_norm's affine step, tanh's polynomial, rsqrt, addcmul, lerp: last-bit
    # differences, within CPU's tolerance above).
    fma_free = ["matmul", "softmax", "gelu", "sum", "cat"]
    assert all(out["same_bits"][name] for name in fma_free), out["same_bits"]
    first = [r for r in out["log"] if r["first_tier"]]
    ups = [r for r in out["log"] if r["reason"].startswith("tier-up")]
    assert first and len(ups) == len(first) == out["final_tier_ups"], out["log"]
    assert all(r["reason"] == "tier-up after 3 runs" and not r["first_tier"] for r in ups)
    # Every program compiled once at the first tier; nothing compiled twice in the open.
    assert out["compiles"] == len(first)


def test_the_swap_happens_at_the_nth_run(tmp_path):
    # Op mode: each op is one program run once per iteration; the third run of each
    # queues its tier-up, so none happen before and all by then.
    out = run(PROGRAMS, tmp_path, 4, TORCH_TPU_TIERED_COMPILE="3", TORCH_TPU_EAGER_MODE="op")
    ups = out["tier_ups"]
    assert ups[0] == ups[1] == 0, ups
    assert ups[2] == ups[3] == out["compiles"] > 0, out


@pytest.mark.parametrize("setting", ["off", "0", None])  # None: unset, the default
def test_off_compiles_each_program_once_at_its_full_level(tmp_path, setting):
    out = run(PROGRAMS, tmp_path, 4, TORCH_TPU_TIERED_COMPILE=setting, TORCH_TPU_EAGER_MODE="op")
    assert all(out["equal_cpu"].values()) and all(out["same_bits"].values()), out
    assert all(out["optimized_bits"].values()), out
    assert out["final_tier_ups"] == 0 and out["tier_ups"] == [0, 0, 0, 0]
    assert out["compiles"] > 0 and not any(r["first_tier"] for r in out["log"])
    assert all(r["reason"] == "new program" for r in out["log"]), out["log"]


def test_a_warm_start_loads_the_optimized_executable(tmp_path):
    env = {"TORCH_TPU_TIERED_COMPILE": "3", "TORCH_TPU_EAGER_MODE": "op"}
    cold = run(PROGRAMS, tmp_path, 3, **env)
    assert cold["final_tier_ups"] == cold["compiles"] > 0
    # The disk tier holds what the tier-ups compiled: a second process compiles nothing,
    # starts optimized (no first tier), so nothing tiers up either.
    warm = run(PROGRAMS, tmp_path, 3, **env)
    assert warm["compiles"] == 0 and warm["final_tier_ups"] == 0, warm["log"]
    assert warm["log"] and all(r["from_disk"] and not r["first_tier"] for r in warm["log"])
    assert all(warm["same_bits"].values()) and all(warm["equal_cpu"].values())
    assert all(warm["optimized_bits"].values())


def test_a_warm_start_loads_programs_that_never_got_hot_at_their_first_tier(tmp_path):
    env = {"TORCH_TPU_TIERED_COMPILE": "3", "TORCH_TPU_EAGER_MODE": "op"}
    cold = run(PROGRAMS, tmp_path, 1, **env)
    assert cold["final_tier_ups"] == 0 and cold["compiles"] > 0
    warm = run(PROGRAMS, tmp_path, 1, **env)
    assert warm["compiles"] == 0, warm["log"]
    assert warm["log"] and all(r["from_disk"] and r["first_tier"] for r in warm["log"])


NO_COMPILE = """
import json, torch, torch_tpu
x = torch.randn(8, 8).to("tpu")
y = (x * 2).cpu()           # compiled at the first tier, outside the region
torch_tpu.metrics.reset()
with torch_tpu.no_compile():
    for _ in range(4):      # the third run queues the tier-up: not a user-visible compile
        z = (x * 2).cpu()
    torch_tpu._C._wait_for_tier_ups()
    w = (x * 2).cpu()
m = torch_tpu.metrics.snapshot()
assert torch.equal(y, z) and torch.equal(y, w)
print("RESULT " + json.dumps({"tier_ups": m["tier_ups"], "compiles": m["compiles"]}))
"""


def test_no_compile_allows_the_background_tier_up(tmp_path):
    out = run(NO_COMPILE, tmp_path, TORCH_TPU_TIERED_COMPILE="3", TORCH_TPU_EAGER_MODE="op")
    assert out == {"tier_ups": 1, "compiles": 0}


# Many programs made hot at once, then the process exits at once: their tier-ups are
# queued or compiling while Python finalizes and the process exits.
EXIT_IN_FLIGHT = """
import torch, torch_tpu
x = torch.randn(16, 96).to("tpu")
ops = [torch.sin, torch.cos, torch.tanh, torch.exp, torch.sigmoid, torch.erf, torch.log1p,
       torch.atan, torch.asinh, torch.softmax]
for _ in range(2):
    for i, op in enumerate(ops):
        y = op(x[: 8 + i], -1) if op is torch.softmax else op(x[: 8 + i])
y.cpu()
print("queued", torch_tpu.metrics.snapshot()["tier_ups"], flush=True)
"""


@pytest.mark.parametrize("how", ["return", "sys.exit", "os._exit"])
def test_a_process_exits_cleanly_with_tier_ups_in_flight(tmp_path, how):
    code = (
        EXIT_IN_FLIGHT
        + {
            "return": "",
            "sys.exit": "import sys; sys.exit(0)\n",
            "os._exit": "import os; os._exit(0)\n",
        }[how]
    )
    r = run_python(
        code,
        env={
            "TORCH_TPU_CACHE_DIR": str(tmp_path),
            "TORCH_TPU_TIERED_COMPILE": "2",
            "TORCH_TPU_EAGER_MODE": "op",
        },
    )
    assert r.returncode == 0, r.stderr
    assert "queued" in r.stdout and "terminate" not in r.stderr, r.stderr
