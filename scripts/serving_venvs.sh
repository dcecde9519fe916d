#!/usr/bin/env bash
# Builds the serving engines' virtual environments, one per engine (engines pin
# conflicting versions of openai, tokenizers and compressed-tensors, so they cannot share
# one). Idempotent: a venv whose stamp matches is left as it is; the engine wheels built
# from source are kept in a wheelhouse, so a rebuilt venv installs in seconds.
#
#   bash scripts/serving_venvs.sh [vllm]     (default: every engine below)
#
# SGLang is not here yet: sglang 0.5.21 requires CUDA-only packages (cuda-tile is a
# placeholder that downloads from NVIDIA's index at install time), so it needs a
# curated dependency set.
#
# Venvs go to $TORCH_TPU_SERVING_VENVS (default /work/venvs): outside the repository, so
# that fresh clones (CI) reuse them. They see the system site-packages, where torch
# 2.13.0 and torch_tpu are installed (.ci/run installs torch_tpu there); for a developer
# build, TORCH_TPU_PKG=build/dev-NAME/pkg adds that directory with a .pth file instead.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
root=${TORCH_TPU_SERVING_VENVS:-/work/venvs}
wheels=$root/wheels
mkdir -p "$wheels"
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(vllm)

VLLM_VERSION=0.32.0
# What the tests need besides the engine; torch is pinned so pip never swaps in another
# build (an unpinned resolve would pull a multi-GB CUDA torch).
COMMON=("torch==2.13.0" pytest requests)

# A venv is rebuilt when this script or its constraints change.
stamp_of() { echo "$1 $(cat "$self" scripts/serving-*-constraints.txt | sha256sum | cut -c1-16)"; }

make_venv() {  # name
  local venv=$root/$1 site
  [ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ -n "${TORCH_TPU_PKG:-}" ]; then
    realpath "$TORCH_TPU_PKG" > "$site/torch_tpu_dev.pth"
    # An editable install of torch_tpu in the system site-packages (scikit-build-core's
    # import redirector, first on sys.meta_path) would shadow the dev build; this
    # runs after every .pth file and takes the redirector out.
    cat > "$site/sitecustomize.py" <<'PY'
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "ScikitBuild" not in type(f).__name__]
PY
  else  # the installed torch_tpu, not a dev build a previous run pointed at
    rm -f "$site/torch_tpu_dev.pth"
    if grep -qs ScikitBuild "$site/sitecustomize.py"; then rm -f "$site/sitecustomize.py"; fi
  fi
}

build_vllm() {
  local venv=$root/vllm
  make_venv vllm
  if [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$(stamp_of vllm)" ]; then
    echo "vllm venv up to date: $venv"; return
  fi
  if ! ls "$wheels"/vllm-$VLLM_VERSION-*.whl > /dev/null 2>&1; then
    # No CUDA here: the "empty" target builds vLLM's pure-Python part from the sdist.
    # Without VLLM_SKIP_VERSION_SUFFIX the wheel says 0.32.0+empty and pip rejects it;
    # cargo is kept off PATH so the optional Rust frontend is skipped.
    local path_no_cargo
    path_no_cargo=$(echo "$PATH" | tr ':' '\n' | grep -v '\.cargo' | paste -sd:)
    PATH=$path_no_cargo VLLM_TARGET_DEVICE=empty VLLM_SKIP_VERSION_SUFFIX=1 \
      "$venv/bin/pip" wheel -q --no-deps --no-binary vllm "vllm==$VLLM_VERSION" -w "$wheels"
  fi
  # Pinned to the versions of a resolved venv (pip's own resolution of vLLM's
  # dependencies takes minutes), from the wheelhouse alone when it has them all.
  local pins=scripts/serving-vllm-constraints.txt
  local install=("$venv/bin/pip" install -q -c "$pins" "$wheels"/vllm-$VLLM_VERSION-*.whl
                 "${COMMON[@]}")
  if ! "${install[@]}" --no-index --find-links "$wheels" 2> /dev/null; then
    "${install[@]}"
    "$venv/bin/pip" download -q --no-deps -d "$wheels" -r <(grep -v '^#' "$pins")
  fi
  stamp_of vllm > "$venv/.stamp"
  echo "vllm venv ready: $venv"
}

for engine in "${engines[@]}"; do
  start=$(date +%s)
  "build_$engine"
  echo "$engine venv: $(( $(date +%s) - start )) s"
done
