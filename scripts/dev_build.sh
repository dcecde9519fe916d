#!/usr/bin/env bash
# Developer build into a private directory, for working on the extension without
# reinstalling: builds _C into build/dev-<name> and lays out an importable package
# under build/dev-<name>/pkg. Use it as:
#   bash scripts/dev_build.sh me && PYTHONPATH=build/dev-me/pkg pytest -q tests/python
# Several developers (or agents) can each use their own name side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-dev}
dir=build/dev-$name
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
cmake --build "$dir" -j "${JOBS:-2}" --target _C
mkdir -p "$dir/pkg/torch_tpu"
for f in torch_tpu/*.py; do ln -sf "$PWD/$f" "$dir/pkg/torch_tpu/"; done
for d in torch_tpu/*/; do  # subpackages (serving/)
  [ "$(basename "$d")" = __pycache__ ] || ln -sfn "$PWD/${d%/}" "$dir/pkg/torch_tpu/"
done
# Replace, never overwrite: a running test process may have the old library mapped.
for so in "$dir"/_C*.so; do
  cp "$so" "$dir/pkg/torch_tpu/.tmp.so" && mv -f "$dir/pkg/torch_tpu/.tmp.so" "$dir/pkg/torch_tpu/$(basename "$so")"
done
# The package's entry points (device autoload, the "tpu" Dynamo backend), so that
# importlib.metadata finds them on PYTHONPATH as it would for an installed package.
python - "$dir/pkg" <<'PY'
import pathlib, sys, tomllib
pkg = pathlib.Path(sys.argv[1])
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
info = pkg / "torch_tpu_dev.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch_tpu_dev\nVersion: {project['version']}\n")
lines = []
for group, entries in project["entry-points"].items():
    lines.append(f"[{group}]")
    lines += [f"{name} = {value}" for name, value in entries.items()]
(info / "entry_points.txt").write_text("\n".join(lines) + "\n")
PY
