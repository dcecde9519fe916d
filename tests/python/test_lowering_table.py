"""The generic kernel behind the lowering table: functional, in-place and out= forms,
promotion, PyTorch's own errors, views and autograd (exercised through unary ops)."""

import pytest
import torch

import torch_tpu
from helpers import assert_same

pytestmark = pytest.mark.single_mode


def test_every_table_op_is_registered_for_tpu():
    names = torch_tpu._C._lowerings()
    assert "exp" in names and "exp_" in names and "exp.out" in names
    for name in names:
        base, _, overload = name.partition(".")
        assert torch._C._dispatch_has_kernel_for_dispatch_key(
            f"aten::{base}" + (f".{overload}" if overload else ""), "PrivateUse1"
        ), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_functional_inplace_and_out_agree_with_cpu(dtype):
    cpu = torch.randn(3, 5, dtype=dtype)
    x = cpu.to("tpu")
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    assert_same(torch.exp(x), torch.exp(cpu), **tol)
    y = x.clone()
    y.sin_()
    assert_same(y, cpu.sin(), **tol)
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.cos(x, out=out)
    assert_same(out, cpu.cos(), **tol)


def test_integer_inputs_promote_like_cpu():
    cpu = torch.tensor([[1, 2], [3, 4]])
    assert_same(cpu.to("tpu").exp(), cpu.exp())
    assert_same(cpu.to("tpu").neg(), cpu.neg())  # stays int64
    with pytest.raises(RuntimeError, match="can.t be cast"):
        cpu.to("tpu").exp_()


def test_out_resize_and_dtype_checks_match_cpu():
    x = torch.randn(4).to("tpu")
    out = torch.empty(2, device="tpu")
    with pytest.warns(UserWarning, match="resized"):
        torch.exp(x, out=out)
    assert out.shape == (4,)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.exp(x, out=torch.empty(4, dtype=torch.long, device="tpu"))


def test_views_and_inplace_through_views():
    cpu = torch.randn(4, 6)
    x = cpu.to("tpu")
    assert_same(x.t().tanh(), cpu.t().tanh())
    assert_same(x[:, ::2].abs(), cpu[:, ::2].abs())
    x[1:3, 2:].sigmoid_()
    cpu[1:3, 2:].sigmoid_()
    assert_same(x, cpu)


def test_empty_and_zero_dim():
    assert_same(torch.empty(0, 3, device="tpu").exp(), torch.empty(0, 3).exp())
    assert_same(torch.tensor(0.5).to("tpu").sqrt(), torch.tensor(0.5).sqrt())


def test_autograd_through_table_ops():
    cpu = torch.randn(5, requires_grad=True)
    x = cpu.detach().to("tpu").requires_grad_()
    (x.exp() * x.sin()).sum().backward()
    (cpu.exp() * cpu.sin()).sum().backward()
    assert_same(x.grad, cpu.grad)


def test_scalar_loop_does_not_recompile():
    x = torch.randn(8).to("tpu")
    x[0:3].exp()  # a prefix view is dense; other offsets share one strided program
    x[1:4].exp()
    torch_tpu.metrics.reset()
    for i in range(5):
        x[i : i + 3].exp()
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


def test_zero_dim_cpu_tensors_mix_with_tpu_tensors():
    x = torch.tensor([1.5, -2.0, 3.0])
    for fn in (torch.copysign, torch.floor_divide, torch.atan2):
        assert_same(fn(torch.tensor(-2.0), x.to("tpu")), fn(torch.tensor(-2.0), x))
        assert_same(fn(x.to("tpu"), torch.tensor(2.0)), fn(x, torch.tensor(2.0)))
