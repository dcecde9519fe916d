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
