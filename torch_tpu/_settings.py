"""torch_tpu's environment variables, read through the C++ table (csrc/runtime/settings.h).

Each `TORCH_TPU_*` variable is named once there with its type, default and doc line; this
module reads the same table and parser through `_C`, so Python and C++ agree on what a
value means, and a bad one raises ValueError naming the variable and what it accepts.

README.md's table of variables is `markdown()` (tools/settings_readme.py writes it there).
"""

from torch_tpu import _C


def get(name: str):
    """The value of `name` now: bool (flag), int (integer), str (text, choice), list of str
    (words), or None when it is unset and has no default here."""
    return _C._setting(name)


def table() -> list:
    """[{name, type, default, doc, words, min, names}] for every variable."""
    return _C._settings()


def check_all() -> None:
    """Raises ValueError for the first variable whose value does not parse."""
    for setting in table():
        get(setting["name"])


def markdown() -> str:
    """README.md's table of variables."""
    lines = ["| variable | default | effect |", "|---|---|---|"]
    for s in table():
        default = f"`{s['default']}`" if s["default"] else ""
        lines.append(f"| `{s['name']}` | {default} | {s['doc']} |")
    return "\n".join(lines) + "\n"
