#!/usr/bin/env bash
# Runs every test: the GoogleTest suites of the C++ core (via ctest), then the Python
# suite. It sets up what it needs first: torch_tpu itself (an editable install, if none
# is importable), the `test` extras pinned in pyproject.toml, and the C++ test tools
# from Debian packages when it may install them (root). Without them it says which
# package is missing, skips the C++ suites and still runs the Python suite.
# Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

if ! (cd /tmp && "$python" -c "import torch_tpu._C") 2> /dev/null; then
  echo "test.sh: torch_tpu is not installed; installing it in editable mode"
  # The pins are pyproject.toml's: what building needs, and what torch_tpu depends on.
  "$python" - <<'PY' | xargs "$python" -m pip install -q --root-user-action=ignore ninja
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(dict.fromkeys(p["build-system"]["requires"] + p["project"]["dependencies"])))
PY
  "$python" -m pip install -q --root-user-action=ignore --no-build-isolation -e .
fi
"$python" - <<'PY' | xargs "$python" -m pip install -q --root-user-action=ignore
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]))
PY

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
stage() {  # stage NAME COMMAND...: runs COMMAND, records its counts and time
  local name=$1 t0 rc log counts p f s
  shift
  t0=$(date +%s)
  log=$(mktemp)
  set +e
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
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
    "$name" "$status" "$p" "$f" "$s" $(( $(date +%s) - t0 )))")
}
skip_stage() {  # skip_stage NAME REASON
  echo "test.sh: $1 SKIPPED: $2"
  summary+=("$(printf '%-10s %-7s %s' "$1" skipped "$2")")
}

# The C++ suites need cmake, ninja, a C++ compiler and GoogleTest.
missing=()
command -v cmake > /dev/null || missing+=(cmake)
command -v ninja > /dev/null || missing+=(ninja-build)
command -v g++ > /dev/null || missing+=(g++)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  echo "test.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  missing=()
fi
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

# -P: the repository root must not shadow the installed torch_tpu.
stage op-mode "$python" -P -m pytest -q tests/python "$@"
# Again in fused eager mode (ops recorded, run as one program per group): both eager
# modes must give the same results. Run once, above, and not again here: the files
# about compiled graphs and their cache (a compiled graph is one program in either
# mode), the distributed transports (multi-process; the in-program one refuses fused
# mode), packaging and the lowering table. That halves CI's second pass.
echo "test.sh: the Python suite in fused eager mode (compile, distributed, install and lowering-table files skipped)"
stage fused-mode env TORCH_TPU_EAGER_MODE=fused "$python" -P -m pytest -q tests/python \
  --ignore-glob='tests/python/test_compile*.py' --ignore-glob='tests/python/test_distributed*.py' \
  --ignore=tests/python/test_install.py --ignore=tests/python/test_lowering_table.py "$@"

# Serving: the paged-attention kernels need only torch_tpu; the engine tests run in the
# engine's venv (scripts/serving_venvs.sh), which sees this torch_tpu through the
# system site-packages.
stage paged-attn "$python" -P -m pytest -q tests/serving/test_paged_attention.py
venvs=${TORCH_TPU_SERVING_VENVS:-/work/venvs}
venv=$venvs/vllm
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm" 2> /dev/null; then
  stage vllm "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests/serving --ignore-glob='*sglang*'
else
  skip_stage vllm "no vLLM venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
venv=$venvs/sglang
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('sglang') is None)" 2> /dev/null; then
  stage sglang "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests/serving/test_sglang_offline.py \
    tests/serving/test_sglang_eager.py tests/serving/test_sglang_tp.py \
    tests/serving/test_sglang_server.py tests/serving/test_sglang_warm_start.py
else
  skip_stage sglang "no SGLang venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi

echo
echo "test.sh: summary (stage, status, counts, seconds)"
printf '  %s\n' "${summary[@]}"
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit $any_failed
