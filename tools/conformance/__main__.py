"""`python tools/conformance`: Python runs this file with the package's folder on sys.path.
The folder above it (tools/) takes its place, so that the package imports as `conformance`
and its modules are not top-level names; the repository root stays off sys.path, so that
a source tree's torch_tpu cannot shadow the installed one (why this is not
`python -m tools.conformance`). The workers are started the same way."""

import os
import sys

PACKAGE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [os.path.dirname(PACKAGE)] + [p for p in sys.path if os.path.abspath(p) != PACKAGE]

from conformance.runner import main  # noqa: E402 — after sys.path is set

main()
