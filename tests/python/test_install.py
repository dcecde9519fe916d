"""The newcomer path: `import torch` never breaks, whatever state torch_tpu is in; an
editable install works from the repository root; the plugin stays quiet."""

import os
import subprocess

import pytest

import torch_tpu
from helpers import run_python

pytestmark = pytest.mark.single_mode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Drops scikit-build-core's editable finder, so that Python finds torch_tpu as it would
# after a plain `pip install .`: the repository root (the current directory) first.
AS_INSTALLED = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path "
    "if 'ScikitBuild' not in type(f).__name__]\n"
)


def run_in_root(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter started from the repository root."""
    return run_python(code, env, cwd=ROOT)


def test_source_tree_shadowing_the_package_does_not_break_import_torch():
    code = (
        AS_INSTALLED
        + """
import torch
assert torch.ones(2).add(1).tolist() == [2.0, 2.0]   # CPU PyTorch works
assert not torch.tpu.is_available() and torch.tpu.device_count() == 0
try:
    torch.ones(1, device="tpu")
except RuntimeError as e:
    print("ERROR", e)
"""
    )
    r = run_in_root(code)
    assert r.returncode == 0, r.stderr
    assert "ERROR" in r.stdout, r.stdout
    message = r.stdout
    assert "source tree" in message and "pip install --no-build-isolation -e" in message
    # One line of warning at import, no traceback.
    warning_lines = [line for line in r.stderr.splitlines() if "torch_tpu" in line]
    assert len(warning_lines) == 1 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "name,value", [("TORCH_TPU_NUM_DEVICES", "many"), ("TORCH_TPU_FUSED_MAX_OPS", "lots")]
)
def test_a_bad_setting_names_the_cause(name, value):
    # A failure other than shadowing: a bad setting at start-up (the device count, which
    # Python reads, or a variable only the C++ runtime reads: its start checks them all).
    r = run_python(
        "import torch\n"
        "try:\n    torch.zeros(2, device='tpu')\n"
        "except RuntimeError as e:\n    print('ERROR', e)\n",
        {name: value},
    )
    assert r.returncode == 0, r.stderr
    assert (
        "ERROR" in r.stdout and f"{name}='{value}': expected an integer >= 1" in r.stdout
    ), r.stdout


def _editable() -> bool:
    package = os.path.dirname(os.path.abspath(torch_tpu.__file__))
    return package == os.path.join(ROOT, "torch_tpu") and not any(
        name.startswith("_C") for name in os.listdir(package)
    )


@pytest.mark.skipif(
    not _editable(),
    reason="torch_tpu is not installed in editable mode (pip install --no-build-isolation -e .)",
)
def test_editable_install_works_in_the_repository_root():
    r = run_in_root(
        "import torch, torch_tpu\n"
        "x = torch.arange(4.0, device='tpu')\n"
        "print((x * 2).cpu().tolist(), torch_tpu.__file__, torch_tpu._C.__file__)"
    )
    assert r.returncode == 0, r.stderr
    values, package, extension = r.stdout.split("] ")[0] + "]", *r.stdout.split("] ")[1].split()
    assert values == "[0.0, 2.0, 4.0, 6.0]"
    assert package == os.path.join(ROOT, "torch_tpu", "__init__.py")
    assert extension.startswith(os.path.join(ROOT, "build"))


def test_first_use_prints_nothing():
    r = run_python("import torch; x = torch.ones(1, device='tpu'); print((x + 1).item())")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "2.0\n"
    assert r.stderr == "", r.stderr


def test_plugin_logs_on_request():
    # (Without a log level of the user's: importing JAX, as test collection does, sets one.)
    env = {"TORCH_TPU_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": None}
    r = run_python("import torch; torch.ones(1, device='tpu').cpu()", env)
    assert r.returncode == 0, r.stderr
    assert r.stderr != ""


def test_importing_torch_tpu_before_torch():
    r = run_python("import torch_tpu, torch; print(torch.ones(2, device='tpu').sum().item())")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "2.0\n"


def test_version_and_pins_are_pyprojects():
    # pyproject.toml names the version and the pins; the C++ core, the package and the
    # commands a newcomer copies (README, .ci/run) agree with it.
    import tomllib

    project = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]
    assert torch_tpu.__version__ == project["version"]
    pins = [d for d in project["dependencies"] if "==" in d]
    for path in ("README.md", ".ci/run"):
        text = open(os.path.join(ROOT, path)).read()
        quickstart = next(l for l in text.splitlines() if "pip install torch==" in l)
        assert all(pin in quickstart.split() for pin in pins), (path, pins)
