#!/usr/bin/env bash
# Builds the serving engines' virtual environments, one per engine (engines pin
# conflicting versions of openai, tokenizers and compressed-tensors, so they cannot share
# one). Idempotent: a venv whose stamp matches is left as it is; the engine wheels built
# from source are kept in a wheelhouse, so a rebuilt venv installs in seconds.
#
#   bash scripts/serving_venvs.sh [vllm] [sglang]     (default: every engine below)
#
# SGLang 0.5.21 declares CUDA-only requirements (flashinfer, sglang-kernel, cuda-python,
# cuda-tile, a placeholder that downloads from NVIDIA's index at install time): it is
# installed with --no-deps, beside the curated set in scripts/serving-sglang-constraints.txt.
#
# Venvs go to $TORCH_TPU_SERVING_VENVS (default /work/venvs): outside the repository, so
# that fresh clones (CI) reuse them. They see the system site-packages, where torch
# (pyproject.toml's pin) and torch_tpu are installed (.ci/run installs torch_tpu there); for a developer
# build, TORCH_TPU_PKG=build/dev-NAME/pkg adds that directory with a .pth file instead.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
root=${TORCH_TPU_SERVING_VENVS:-/work/venvs}
wheels=$root/wheels
mkdir -p "$wheels"
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(vllm sglang)

VLLM_VERSION=0.32.0
SGLANG_VERSION=0.5.21
TORCHVISION_VERSION=0.28.0  # the release paired with the torch pin below
# What the tests need besides the engine; torch is pinned (pyproject.toml's pin, named
# only there) so pip never swaps in another build (an unpinned resolve would pull a
# multi-GB CUDA torch).
TORCH_PIN=$(python3 -c 'import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d for d in deps if d.startswith("torch==")))')
COMMON=("$TORCH_PIN" pytest requests)

# A venv is rebuilt when this script or its constraints change.
stamp_of() { echo "$1 $TORCH_PIN $(cat "$self" scripts/serving-*-constraints.txt scripts/serving_torchvision_without_ops.py | sha256sum | cut -c1-16)"; }

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

# Installs the pinned requirements `pins` (a file) plus `extra` into a venv, from the
# wheelhouse alone when it has them all, else from the index, then caches them.
install_pinned() {  # venv pins [extra...]
  local venv=$1 pins=$2; shift 2
  local install=("$venv/bin/pip" install -q -r "$pins" "$@")
  if ! "${install[@]}" --no-index --find-links "$wheels" 2> /dev/null; then
    "${install[@]}"
    "$venv/bin/pip" download -q --no-deps -d "$wheels" -r "$pins"
  fi
}

build_sglang() {
  local venv=$root/sglang site
  make_venv sglang
  if [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$(stamp_of sglang)" ]; then
    echo "sglang venv up to date: $venv"; return
  fi
  local pkg
  for pkg in "sglang==$SGLANG_VERSION" "torchvision==$TORCHVISION_VERSION"; do
    ls "$wheels/${pkg%%==*}-${pkg##*==}-"*.whl > /dev/null 2>&1 ||
      "$venv/bin/pip" download -q --no-deps -d "$wheels" "$pkg"
  done
  "$venv/bin/pip" install -q --no-deps --no-index --find-links "$wheels" \
    "sglang==$SGLANG_VERSION" "torchvision==$TORCHVISION_VERSION"
  # pip's resolver then lists SGLang's CUDA-only requirements as missing: expected.
  install_pinned "$venv" scripts/serving-sglang-constraints.txt "${COMMON[@]}" \
    2> >(grep -v -e "^sglang $SGLANG_VERSION requires" -e "^ERROR: pip's dependency resolver" >&2)
  # Test environment only (never torch_tpu itself): SGLang imports transformers' image
  # processors, which need torchvision, and PyPI's torchvision 0.28.0 is a CUDA build
  # whose compiled ops cannot load with the CPU torch used here. This hook (see the
  # file) lets torchvision's Python code import without them.
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp scripts/serving_torchvision_without_ops.py "$site/_torch_tpu_test_torchvision_without_ops.py"
  echo "import _torch_tpu_test_torchvision_without_ops as m; m.install()" \
    > "$site/_torch_tpu_test_torchvision_without_ops.pth"
  stamp_of sglang > "$venv/.stamp"
  echo "sglang venv ready: $venv"
}

for engine in "${engines[@]}"; do
  start=$(date +%s)
  "build_$engine"
  echo "$engine venv: $(( $(date +%s) - start )) s"
done
