#!/usr/bin/env bash
# The venv torchtitan runs in: torchtitan 0.3.0 and what it imports, beside the torch and
# torch_tpu of the system site-packages (torch pinned to pyproject.toml's release, so pip
# never swaps in another build). Idempotent; outside the repository so fresh clones reuse it.
#
#   bash examples/torchtitan/setup.sh          (venv: $TORCH_TPU_TITAN_VENV, default /work/venvs/torchtitan)
#
# triton: torchtitan 0.3.0 imports it at start-up (its MoE all-to-all kernels) without
# declaring it; only the import is needed, no GPU. 3.7.x is the release torch 2.13 pairs with.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/../.."
venv=${TORCH_TPU_TITAN_VENV:-/work/venvs/torchtitan}
TORCH_PIN=$(python3 -c 'import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d for d in deps if d.startswith("torch==")))')
stamp="$TORCH_PIN $(sha256sum "$self" | cut -c1-16)"
if [ "$(cat "$venv/.stamp" 2> /dev/null)" = "$stamp" ]; then
  echo "torchtitan venv up to date: $venv"
  exit 0
fi
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "$TORCH_PIN" > "$constraints"
"$venv/bin/pip" install -q -c "$constraints" torchtitan==0.3.0 triton==3.7.1 pytest
"$venv/bin/python" -c "import torchtitan.train" > /dev/null
echo "$stamp" > "$venv/.stamp"
echo "torchtitan venv ready: $venv"
