"""The shape-bucket rule, shared by eager mode and compiled graphs (csrc/ops/bounded.h
holds it): a size that varies compiles at its bucket, the next power of two (at least 8)
up to 1,024, then a multiple of 128. `TORCH_TPU_SHAPE_BUCKETS` is "off", or an integer
that sizes round up to a multiple of."""

from torch_tpu import _C, _settings


def setting():
    """TORCH_TPU_SHAPE_BUCKETS: None (the default rule), 0 (off) or a multiple."""
    value = _settings.get("TORCH_TPU_SHAPE_BUCKETS")
    return None if value < 0 else value


def bucket(n: int, multiple=None) -> int:
    """The bound a size `n` compiles at (`multiple`: round up to a multiple of it)."""
    return _C._shape_bucket(int(n), int(multiple) if multiple else -1)


def apply() -> None:
    """Hands the setting to the C++ core (eager ops read it there)."""
    value = setting()
    _C._set_bucket_rule(-1 if value is None else value)
