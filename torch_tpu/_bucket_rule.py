"""The shape-bucket rule, shared by eager mode and compiled graphs (csrc/ops/bounded.h
holds it): a size that varies compiles at its bucket, the next power of two (at least 8)
up to 1,024, then a multiple of 128. `TORCH_TPU_SHAPE_BUCKETS` is "off", or an integer
that sizes round up to a multiple of."""

import os

from torch_tpu import _C


def setting():
    """TORCH_TPU_SHAPE_BUCKETS: None (the default rule), 0 (off) or a multiple."""
    raw = os.environ.get("TORCH_TPU_SHAPE_BUCKETS", "").strip().lower()
    if raw in ("", "default", "pow2"):
        return None
    if raw in ("off", "0", "none"):
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 1:
        raise ValueError(f"TORCH_TPU_SHAPE_BUCKETS={raw!r}: expected 'off' or a positive "
                       "integer (sizes round up to a multiple of it)")
    return value


def bucket(n: int, multiple=None) -> int:
    """The bound a size `n` compiles at (`multiple`: round up to a multiple of it)."""
    return _C._shape_bucket(int(n), int(multiple) if multiple else -1)


def apply() -> None:
    """Hands the setting to the C++ core (eager ops read it there)."""
    value = setting()
    _C._set_bucket_rule(-1 if value is None else value)
