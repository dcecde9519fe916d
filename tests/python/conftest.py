"""Fixtures for every test file; the shared helpers are in helpers.py."""

import pytest
import torch

import torch_tpu  # noqa: F401  (autoload does this too; explicit for clarity)


@pytest.fixture
def fresh_dynamo():
    """No compiled code or metrics left from earlier tests (for torch.compile tests)."""
    torch._dynamo.reset()
    torch_tpu.metrics.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def set_eager_mode():
    """torch_tpu.set_eager_mode for one test: the mode before it is restored after it."""
    before = torch_tpu.get_eager_mode()
    yield torch_tpu.set_eager_mode
    torch_tpu.set_eager_mode(before)


@pytest.fixture(autouse=True)
def _no_fallback():
    torch_tpu.set_cpu_fallback(False)
    yield
    torch_tpu.set_cpu_fallback(False)
