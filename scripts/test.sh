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
  "$python" -m pip install -q --root-user-action=ignore torch==2.13.0 xla-cpu-pjrt==0.0.1 scikit-build-core pybind11 ninja
  "$python" -m pip install -q --root-user-action=ignore --no-build-isolation -e .
fi
"$python" - <<'PY' | xargs "$python" -m pip install -q --root-user-action=ignore
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]))
PY

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
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: SKIPPING the C++ suites: missing Debian package(s) ${missing[*]}" \
       "(apt-get install ${missing[*]} as root)"
else
  build=build/cpp-tests
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTORCH_TPU_BUILD_EXTENSION=OFF -DTORCH_TPU_BUILD_TESTS=ON > /dev/null
  cmake --build "$build" -j 2
  (cd "$build" && ctest --output-on-failure)
fi

# -P: the repository root must not shadow the installed torch_tpu.
"$python" -P -m pytest -q tests/python "$@"
# Again in fused eager mode (ops recorded, run as one program per group): both eager
# modes must give the same results. Run once, above, and not again here: the files
# about compiled graphs and their cache (a compiled graph is one program in either
# mode), the distributed transports (multi-process; the in-program one refuses fused
# mode), packaging and the lowering table. That halves CI's second pass.
echo "test.sh: the Python suite in fused eager mode (compile, distributed, install and lowering-table files skipped)"
TORCH_TPU_EAGER_MODE=fused "$python" -P -m pytest -q tests/python \
  --ignore-glob='tests/python/test_compile*.py' --ignore-glob='tests/python/test_distributed*.py' \
  --ignore=tests/python/test_install.py --ignore=tests/python/test_lowering_table.py "$@"

# Serving: the paged-attention kernels need only torch_tpu; the engine tests run in the
# engine's venv (scripts/serving_venvs.sh), which sees this torch_tpu through the
# system site-packages.
"$python" -P -m pytest -q tests/serving/test_paged_attention.py
venvs=${TORCH_TPU_SERVING_VENVS:-/work/venvs}
venv=$venvs/vllm
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm" 2> /dev/null; then
  "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests/serving --ignore-glob='*sglang*'
else
  echo "vLLM serving tests SKIPPED: no vLLM venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
venv=$venvs/sglang
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('sglang') is None)" 2> /dev/null; then
  "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests/serving/test_sglang_offline.py \
    tests/serving/test_sglang_eager.py tests/serving/test_sglang_tp.py \
    tests/serving/test_sglang_server.py
else
  echo "SGLang serving tests SKIPPED: no SGLang venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
