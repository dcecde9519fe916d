"""torch.isin on tpu against CPU: every form, dtypes, promotion, invert, scalars, empty and
non-contiguous inputs, NaN."""

import pytest
import torch

from helpers import assert_same


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16, torch.float16]
)
@pytest.mark.parametrize("invert", [False, True])
def test_tensor_tensor(dtype, invert):
    elements = torch.tensor([[1, 5, 2], [7, 0, 5]], dtype=dtype)
    tests = torch.tensor([[5, 9], [0, 3]], dtype=dtype)
    assert_same(
        torch.isin(elements.to("tpu"), tests.to("tpu"), invert=invert),
        torch.isin(elements, tests, invert=invert),
    )


def test_out_promotion_and_non_contiguous():
    elements = torch.arange(12).reshape(3, 4).t()
    tests = torch.tensor([2.0, 7.0, 11.5])
    out = torch.empty(0, dtype=torch.bool, device="tpu")
    torch.isin(elements.to("tpu"), tests.to("tpu"), out=out)
    assert_same(out, torch.isin(elements, tests))


def test_scalars_empty_and_nan():
    x = torch.tensor([1.0, float("nan"), 3.0])
    t = x.to("tpu")
    assert_same(torch.isin(t, 3.0), torch.isin(x, 3.0))
    assert_same(torch.isin(3.0, t), torch.isin(3.0, x))
    assert_same(torch.isin(t, t), torch.isin(x, x))  # NaN is not in [NaN]
    empty = torch.empty(0)
    assert_same(torch.isin(t, empty.to("tpu")), torch.isin(x, empty))
    assert_same(torch.isin(empty.to("tpu"), t), torch.isin(empty, x))
    assert_same(
        torch.isin(torch.tensor(2).to("tpu"), torch.tensor([2, 4]).to("tpu")),
        torch.isin(torch.tensor(2), torch.tensor([2, 4])),
    )
