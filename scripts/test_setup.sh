#!/usr/bin/env bash
# Sets up what scripts/test.sh runs (test.sh sources it first; it can run alone): torch_tpu
# itself (an editable install, if none is importable), the `test` extras pinned in
# pyproject.toml, and, as root, the Debian packages of the C++ suites (cmake, ninja,
# g++, GoogleTest). Without root it installs no Debian package: test.sh then names the
# missing ones and skips only the C++ suites.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}

if ! (cd /tmp && "$python" -c "import torch_tpu._C") 2> /dev/null; then
  echo "test_setup.sh: torch_tpu is not installed; installing it in editable mode"
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

# The C++ suites need cmake, ninja, a C++ compiler and GoogleTest; what is still missing
# is left in $missing (test.sh skips those suites, naming it).
missing=()
command -v cmake > /dev/null || missing+=(cmake)
command -v ninja > /dev/null || missing+=(ninja-build)
command -v g++ > /dev/null || missing+=(g++)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  echo "test_setup.sh: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  missing=()
fi
