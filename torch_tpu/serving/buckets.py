"""Shape buckets: every size a step program depends on is rounded up to one of a few
values, so a serving session compiles a bounded set of programs (all during warm-up)
instead of one per distinct batch."""

from __future__ import annotations


def bucket(n: int, minimum: int = 1, maximum: int | None = None) -> int:
    """The smallest power of two >= max(n, minimum), capped at `maximum` (which must
    itself be >= n: padding never truncates)."""
    b = max(int(minimum), 1)
    while b < n:
        b *= 2
    if maximum is not None and b > maximum:
        if n > maximum:
            raise ValueError(f"size {n} exceeds the largest bucket {maximum}")
        b = maximum
    return b


def buckets_up_to(maximum: int, minimum: int = 1) -> list[int]:
    """Every bucket `bucket()` can return for sizes in [1, maximum]."""
    out, b = [], max(int(minimum), 1)
    while b < maximum:
        out.append(b)
        b *= 2
    out.append(maximum)
    return sorted(set(out))


# Smallest token bucket: decode batches of 1..16 requests share one program.
MIN_TOKENS = 16


def token_bucket(num_tokens: int, max_tokens: int) -> int:
    """The padded token count of a step of `num_tokens` tokens (at most `max_tokens`,
    the engine's per-step token budget)."""
    return bucket(num_tokens, minimum=MIN_TOKENS, maximum=max(max_tokens, MIN_TOKENS))
