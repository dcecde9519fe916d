"""torch_tpu's environment variables: one table (csrc/runtime/settings.h), read by C++ and
by torch_tpu._settings through the same parser; README.md's table is generated from it."""

import os
import re
import sys

import pytest

import torch_tpu  # noqa: F401  (loads the extension)
from torch_tpu import _settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = [s["name"] for s in _settings.table()]

# Each variable's value when unset: what the code read before the table existed.
DEFAULTS = {
    "TORCH_TPU_PJRT_PLUGIN": None,
    "TORCH_TPU_NUM_DEVICES": None,
    "TORCH_TPU_DEVICES_PER_HOST": None,
    "TORCH_TPU_CPU_FALLBACK": False,
    "TORCH_TPU_LAUNCH_BLOCKING": False,
    "TORCH_TPU_DUMP_DIR": None,
    "TORCH_TPU_CACHE_DIR": None,
    "TORCH_TPU_CACHE_MAX_BYTES": 4 << 30,
    "TORCH_TPU_DISK_CACHE": True,
    "TORCH_TPU_VERBOSE": False,
    "TORCH_TPU_CACHE_ENTRIES": 4096,
    "TORCH_TPU_MAX_MAPPINGS": None,
    "TORCH_TPU_EAGER_MODE": None,
    "TORCH_TPU_DEFER_AND_FUSE": False,
    "TORCH_TPU_FUSED_MAX_OPS": 4096,
    "TORCH_TPU_FUSED_REUSE": True,
    "TORCH_TPU_FAST_COMPILE_ELEMENTS": 65536,
    "TORCH_TPU_TIERED_COMPILE": 0,
    "TORCH_TPU_DONATE": True,
    "TORCH_TPU_LOG": [],
    "TORCH_TPU_SHAPE_BUCKETS": -1,
    "TORCH_TPU_NO_COMPILE": False,
    "TORCH_TPU_DIST_TRANSPORT": "auto",
    "TORCH_TPU_DIST_CHECKS": True,
    "TORCH_TPU_VLLM_EAGER": False,
    "TORCH_TPU_SGLANG_EAGER": False,
    "TORCH_TPU_SGLANG_STATS": None,
}
# A value each variable accepts, and what it reads as.
GOOD = {"flag": ("yes", True), "integer": ("7", 7), "text": ("/tmp/x y", "/tmp/x y")}


def test_the_table_is_every_variable_with_its_old_default(monkeypatch):
    assert sorted(NAMES) == sorted(DEFAULTS)
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
        assert _settings.get(name) == DEFAULTS[name], name
        monkeypatch.setenv(name, "")  # empty reads as unset
        assert _settings.get(name) == DEFAULTS[name], name


@pytest.mark.parametrize("name", NAMES)
def test_every_variable_parses_and_rejects_bad_values(monkeypatch, name):
    setting = next(s for s in _settings.table() if s["name"] == name)
    kind = setting["type"]
    if kind in ("choice", "words"):
        raw, value = setting["words"][-1].upper(), setting["words"][-1]
        value = [value] if kind == "words" else value
    else:
        raw, value = GOOD[kind]
    monkeypatch.setenv(name, raw)
    assert _settings.get(name) == value
    for word, number in setting["names"].items():
        monkeypatch.setenv(name, word)
        assert _settings.get(name) == number
    if kind == "text":
        return  # any text is a path or a file name
    monkeypatch.setenv(name, "bogus-value")
    with pytest.raises(ValueError, match=rf"^{name}='bogus-value': expected ") as info:
        _settings.get(name)
    # The message names what the variable accepts.
    accepted = {"flag": "1, true", "integer": f"an integer >= {setting['min']}"}
    assert accepted.get(kind, ", ".join(setting["words"])) in str(info.value)
    with pytest.raises(ValueError, match=name):
        _settings.check_all()


def test_flags_and_integers_read_as_before(monkeypatch):
    # The spellings the old readers accepted mean what they meant.
    for raw, value in (("1", True), ("0", False)):
        monkeypatch.setenv("TORCH_TPU_LAUNCH_BLOCKING", raw)
        assert _settings.get("TORCH_TPU_LAUNCH_BLOCKING") is value
    for raw in ("0", "false", "no"):  # the SGLang plugin's own words for off
        monkeypatch.setenv("TORCH_TPU_SGLANG_EAGER", raw)
        assert _settings.get("TORCH_TPU_SGLANG_EAGER") is False
    monkeypatch.setenv("TORCH_TPU_FAST_COMPILE_ELEMENTS", "0")  # 0 turns the rule off
    assert _settings.get("TORCH_TPU_FAST_COMPILE_ELEMENTS") == 0
    with pytest.raises(ValueError, match="TORCH_TPU_FAST_COMPILE_ELEMENTS='-1'"):
        monkeypatch.setenv("TORCH_TPU_FAST_COMPILE_ELEMENTS", "-1")
        _settings.get("TORCH_TPU_FAST_COMPILE_ELEMENTS")
    monkeypatch.setenv("TORCH_TPU_TIERED_COMPILE", "off")  # a named value
    assert _settings.get("TORCH_TPU_TIERED_COMPILE") == 0
    monkeypatch.setenv("TORCH_TPU_TIERED_COMPILE", "8")
    assert _settings.get("TORCH_TPU_TIERED_COMPILE") == 8
    monkeypatch.setenv("TORCH_TPU_SHAPE_BUCKETS", "None")
    assert _settings.get("TORCH_TPU_SHAPE_BUCKETS") == 0
    with pytest.raises(ValueError, match="no setting named TORCH_TPU_NOPE"):
        _settings.get("TORCH_TPU_NOPE")


def test_readme_table_is_generated_from_the_table():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import settings_readme
    finally:
        sys.path.pop(0)
    with open(os.path.join(ROOT, "README.md")) as f:
        table = settings_readme.readme_table(f.read())
    assert (
        table == _settings.markdown()
    ), "README.md's table of variables is stale: run python tools/settings_readme.py"
    assert all(f"| `{name}` |" in table for name in NAMES)


def _sources():
    for top in ("csrc", "torch_tpu"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".cpp", ".h", ".py")):
                    path = os.path.join(folder, name)
                    with open(path) as f:
                        yield os.path.relpath(path, ROOT), f.read()


def test_variables_are_read_only_through_the_table():
    # No reader of its own (getenv, os.environ.get, os.environ[...] not assigned), and
    # every TORCH_TPU_ name the sources write in quotes or backticks is in the table.
    own_reader = re.compile(
        r'getenv\(\s*"TORCH_TPU_|environ\.get\(\s*"TORCH_TPU_|'
        r'environ\[\s*"TORCH_TPU_[A-Z_]*"\](?!\s*=[^=])'
    )
    named = re.compile(r'["`](TORCH_TPU_[A-Z_]+)\b')
    build_macros = {"TORCH_TPU_VERSION"}
    unknown = []
    for path, text in _sources():
        assert not own_reader.search(text), f"{path} reads a TORCH_TPU_ variable itself"
        unknown += [(path, n) for n in named.findall(text) if n not in NAMES + list(build_macros)]
    assert not unknown
