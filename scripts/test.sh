#!/usr/bin/env bash
# Runs every test: the GoogleTest suites of the C++ core (via ctest), then the Python
# suite in op and fused eager mode, then the serving tests in the engines' venvs. It runs
# scripts/test_setup.sh first (installs torch_tpu if missing, the pinned test extras and,
# as root, the C++ suites' Debian packages). Arguments go to pytest. The stages pick
# tests by pytest marker (pyproject.toml lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
# Sourced: it leaves $python and the C++ suites' missing Debian packages ($missing).
source scripts/test_setup.sh

# One empty program cache for all stages (tests/conftest.py): every run starts cold, as a
# fresh CI machine does, and the fused-mode pass reuses what the op-mode pass compiled.
export TORCH_TPU_TEST_CACHE_DIR
TORCH_TPU_TEST_CACHE_DIR=$(mktemp -d -t torch_tpu_test_cache_XXXXXX)
trap 'rm -rf "$TORCH_TPU_TEST_CACHE_DIR"' EXIT

# Every stage runs even when an earlier one failed; each prints one summary line (counts
# and seconds), and the script exits non-zero if any stage failed.
summary=()
any_failed=0
total_passed=0 total_failed=0 total_skipped=0
run_stage() {  # run_stage LOG COMMAND...: runs COMMAND, its output to the terminal and LOG
  local log=$1
  shift
  set +e
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}
count_stage() {  # count_stage NAME RC LOG T0 [T1]: records a finished stage's counts and time
  local name=$1 rc=$2 log=$3 t0=$4 t1=${5:-$(date +%s)} counts p f s
  # pytest's closing line ("3 failed, 2880 passed, 2 skipped in 9.1s") or ctest's
  # ("100% tests passed, 0 tests failed out of 99").
  counts=$(grep -E '[0-9]+ (passed|failed)|tests failed out of' "$log" | tail -1 || true)
  if [[ $counts =~ tests\ failed\ out\ of ]]; then
    f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<< "$counts")
    p=$(( $(sed -E 's/.*out of ([0-9]+).*/\1/' <<< "$counts") - f )); s=0
  else
    p=$(grep -oE '[0-9]+ passed' <<< "$counts" | cut -d' ' -f1 || true)
    f=$(( $(grep -oE '[0-9]+ failed' <<< "$counts" | cut -d' ' -f1 || echo 0) \
          + $(grep -oE '[0-9]+ errors?' <<< "$counts" | cut -d' ' -f1 || echo 0) ))
    s=$(grep -oE '[0-9]+ skipped' <<< "$counts" | cut -d' ' -f1 || true)
  fi
  p=${p:-0} s=${s:-0}
  # A stage that failed without counting a failure (a crash, a build error, pytest's
  # exit 5 for no test) counts as one failure.
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  rm -f "$log"
  total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
  total_skipped=$((total_skipped + s))
  if [ "$rc" = 0 ]; then status=ok; else status=FAILED; any_failed=1; fi
  summary+=("$(printf '%-10s %-7s %5d passed, %d failed, %d skipped  %5d s' \
    "$name" "$status" "$p" "$f" "$s" $((t1 - t0)))")
}
stage() {  # stage NAME COMMAND...: runs COMMAND, records its counts and time
  local name=$1 t0 rc=0 log
  shift
  t0=$(date +%s)
  log=$(mktemp)
  run_stage "$log" "$@" || rc=$?
  count_stage "$name" "$rc" "$log" "$t0"
}
# A stage beside the others: start_stage NAME COMMAND... runs it in the background, its
# output to a file; finish_stages waits for each, prints its output and records it.
bg_names=() bg_pids=() bg_logs=() bg_t0=()
start_stage() {
  local name=$1 log
  shift
  log=$(mktemp)
  echo "test.sh: stage $name started in the background (its output follows when it ends)"
  ("$@" > "$log" 2>&1; rc=$?; date +%s > "$log.end"; exit $rc) &
  bg_names+=("$name") bg_pids+=($!) bg_logs+=("$log") bg_t0+=("$(date +%s)")
}
finish_stages() {
  local i rc
  for i in "${!bg_pids[@]}"; do
    rc=0
    wait "${bg_pids[$i]}" || rc=$?
    echo "test.sh: output of stage ${bg_names[$i]} (ran in the background)"
    cat "${bg_logs[$i]}"
    count_stage "${bg_names[$i]}" "$rc" "${bg_logs[$i]}" "${bg_t0[$i]}" \
      "$(cat "${bg_logs[$i]}.end" 2> /dev/null || date +%s)"
    rm -f "${bg_logs[$i]}.end"
  done
  bg_names=() bg_pids=() bg_logs=() bg_t0=()
}
skip_stage() {  # skip_stage NAME REASON
  echo "test.sh: $1 SKIPPED: $2"
  summary+=("$(printf '%-10s %-7s %s' "$1" skipped "$2")")
}

cpp_tests() {
  local build=build/cpp-tests
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTORCH_TPU_BUILD_EXTENSION=OFF -DTORCH_TPU_BUILD_TESTS=ON > /dev/null &&
    cmake --build "$build" -j 2 &&
    (cd "$build" && ctest --output-on-failure)
}
if [ ${#missing[@]} -gt 0 ]; then
  skip_stage c++ "missing Debian package(s) ${missing[*]} (apt-get install ${missing[*]} as root)"
else
  stage c++ cpp_tests
fi

# The Python suites run in TORCH_TPU_TEST_WORKERS pytest processes (pytest-xdist, default
# 2; 0: in this process), each taking a whole file at a time, so a module's fixtures and
# order hold; the program cache directory is shared (the disk tier is safe across
# processes). Op mode took 12 min this way against 22 in one process (2 cores).
workers=(-n "${TORCH_TPU_TEST_WORKERS:-2}" --dist loadfile)
# Each pytest stage lists its slowest tests (CI time: 50 minutes on a fresh machine).
slowest=(--durations=12)
# -P: the repository root must not shadow the installed torch_tpu.
stage op-mode "$python" -P -m pytest -q "${workers[@]}" "${slowest[@]}" tests/python \
  -m "not torchtitan" "$@"
# Again in fused eager mode (ops recorded, run as one program per group): both eager
# modes must give the same results. Tests marked single_mode, distributed, slow or
# op_by_op ran once, above (pyproject.toml says what each marker means).
echo "test.sh: the Python suite in fused eager mode" \
  "(without tests marked single_mode, distributed, slow or op_by_op)"
stage fused-mode env TORCH_TPU_EAGER_MODE=fused "$python" -P -m pytest -q "${workers[@]}" \
  "${slowest[@]}" tests/python \
  -m "not single_mode and not distributed and not slow and not op_by_op" "$@"

# torchtitan (examples/torchtitan): its one-process and FSDP2 runs against CPU, once, in
# the venv examples/torchtitan/setup.sh builds (torchtitan and what it imports).
venv=${TORCH_TPU_TITAN_VENV:-/work/venvs/torchtitan}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torchtitan" 2> /dev/null; then
  stage torchtitan "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests/python/test_torchtitan.py \
    -m torchtitan "$@"
else
  skip_stage torchtitan "no torchtitan venv at $venv (bash examples/torchtitan/setup.sh builds it)"
fi

# Serving: tests marked vllm or sglang run in that engine's venv (scripts/serving_venvs.sh),
# which sees this torch_tpu through the system site-packages; the rest (paged-attention
# kernels, what both plugins share) need only torch_tpu. The two engines' stages run side
# by side: alone each keeps about 1.4 of the 2 cores busy (engine start-up, tracing and
# XLA's compiles are mostly one thread); together they took 472 s on 2 cores against
# 762 s one after the other.
stage serving "$python" -P -m pytest -q tests/serving -m "not vllm and not sglang"
venvs=${TORCH_TPU_SERVING_VENVS:-/work/venvs}
venv=$venvs/vllm
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm" 2> /dev/null; then
  start_stage vllm "$venv/bin/python" -P -m pytest -q -p no:cacheprovider "${slowest[@]}" \
    tests/serving -m vllm
else
  skip_stage vllm "no vLLM venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
venv=$venvs/sglang
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('sglang') is None)" 2> /dev/null; then
  stage sglang "$venv/bin/python" -P -m pytest -q -p no:cacheprovider "${slowest[@]}" \
    tests/serving -m sglang
else
  skip_stage sglang "no SGLang venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
finish_stages

echo
echo "test.sh: summary (stage, status, counts, seconds)"
printf '  %s\n' "${summary[@]}"
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit $any_failed
