"""Writes docs/api.md, the public API reference, from the API table (torch_tpu/_api.py).
Run it after changing the table or a public name's docstring;
tests/python/test_api_table.py checks that docs/api.md is up to date."""

import os
import sys

API_MD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "api.md")


def main() -> int:
    from torch_tpu import _api

    with open(API_MD, "w") as f:
        f.write(_api.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
