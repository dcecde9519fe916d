"""Device-side asserts (aten::_assert_async and its functional form): checked on the
device, raised at the next synchronizing call with CPU's message, the process going on."""

import pytest
import torch

import torch_tpu


def cpu_error(fn, *args):
    with pytest.raises(RuntimeError) as caught:
        fn(*args)
    return str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: torch._assert_async(c),
        lambda c: torch._assert_async(c, "position out of range"),
        lambda c: torch._assert_async(c, ""),
        lambda c: torch.ops.aten._functional_assert_async.msg(
            c, "functional", torch.ops.aten._make_dep_token(device=c.device)
        ),
    ],
    ids=["plain", "msg", "empty-msg", "functional"],
)
@pytest.mark.parametrize("value", [False, 0, 0.0], ids=["bool", "int", "float"])
def test_failed_assert_raises_cpus_message_at_the_next_sync(call, value):
    message = cpu_error(call, torch.tensor(value))
    cond = torch.tensor(value, device="tpu")
    call(cond)  # recorded, not read back
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        torch.tpu.synchronize()
    # Raised once: the next read of a healthy tensor goes through.
    assert torch.ones(3, device="tpu").sum().item() == 3


def test_a_host_read_raises_too_and_names_the_first_failure():
    x = torch.arange(4.0, device="tpu")
    torch._assert_async(torch.tensor(True, device="tpu"), "holds")
    torch._assert_async((x.sum() < 0), "first failure")
    torch._assert_async((x.max() > 10), "second failure")
    y = x * 2
    with pytest.raises(RuntimeError, match="^first failure$"):
        y.cpu()
    torch.testing.assert_close(y.cpu(), torch.arange(4.0) * 2)


def test_passing_asserts_read_nothing_back():
    x = torch.randn(8, device="tpu")
    torch.tpu.synchronize()
    before = torch_tpu.metrics.snapshot()["device_to_host_bytes"]
    for _ in range(5):
        torch._assert_async(x.abs().sum() >= 0, "non-negative")
    after_asserts = torch_tpu.metrics.snapshot()["device_to_host_bytes"]
    assert after_asserts == before  # nothing read back per assert
    torch.tpu.synchronize()  # one 8-byte read checks all five
    assert torch_tpu.metrics.snapshot()["device_to_host_bytes"] - after_asserts == 8


@pytest.mark.parametrize("shape", [(2,), (0,)])
def test_conditions_of_other_sizes_raise_at_once_as_on_cpu(shape):
    message = cpu_error(torch._assert_async, torch.ones(shape))
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        torch._assert_async(torch.ones(shape, device="tpu"))


def test_dep_token_and_functional_result_match_cpu():
    token = torch.ops.aten._make_dep_token(device="tpu")
    cpu_token = torch.ops.aten._make_dep_token()
    assert (token.device.type, token.shape, token.dtype) == (
        "tpu",
        cpu_token.shape,
        cpu_token.dtype,
    )
    out = torch.ops.aten._functional_assert_async.msg(torch.tensor(1, device="tpu"), "m", token)
    assert out.device.type == "tpu" and out.shape == cpu_token.shape
    torch.tpu.synchronize()
