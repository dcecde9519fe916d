#!/usr/bin/env bash
# Runs every test: the C++ core suites (GoogleTest, via ctest) and the Python suite.
# Expects torch_tpu installed (see README) and libgtest-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/cpp-tests
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTORCH_TPU_BUILD_EXTENSION=OFF -DTORCH_TPU_BUILD_TESTS=ON > /dev/null
cmake --build "$build" -j 2
(cd "$build" && ctest --output-on-failure)
pytest -q tests/python "$@"

# Serving: the paged-attention kernels need only torch_tpu; the engine tests run in the
# engine's venv (scripts/serving_venvs.sh), from outside the checkout so that the
# installed torch_tpu is imported, not the source tree.
pytest -q tests/serving/test_paged_attention.py
venv=${TORCH_TPU_SERVING_VENVS:-/work/venvs}/vllm
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm" 2> /dev/null; then
  repo=$PWD
  (cd /tmp && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/tests/serving")
else
  echo "vLLM serving tests SKIPPED: no vLLM venv at $venv (bash scripts/serving_venvs.sh builds it)"
fi
