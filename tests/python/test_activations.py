"""torch.nn.functional activations and their backward ops through the lowering table,
compared with CPU PyTorch: forward in every float dtype, gradients, in-place forms,
out= forms of the backward ops, views, empty and 0-d inputs."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

import helpers
from helpers import assert_same, FLOATS, tol as shared_tol

tol = functools.partial(shared_tol, f32=2e-5, f64=2e-5, equal_nan=True)


ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.5, threshold=3.0),
    "leaky_relu": F.leaky_relu,
    "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, alpha=0.7),
    "celu": lambda x: F.celu(x, alpha=1.3),
    "selu": F.selu,
    "hardtanh": F.hardtanh,
    "hardtanh_range": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": F.relu6,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logsigmoid": F.logsigmoid,
    "glu": F.glu,
    "glu_dim0": lambda x: F.glu(x, 0),
    "softshrink": F.softshrink,
    "hardshrink": lambda x: F.hardshrink(x, 0.7),
    "tanhshrink": F.tanhshrink,
    "softsign": F.softsign,
    "prelu": lambda x: F.prelu(x, torch.tensor([0.25], dtype=x.dtype).to(x.device)),
    "prelu_channels": lambda x: F.prelu(
        x, torch.linspace(-0.5, 0.5, x.shape[1], dtype=x.dtype).to(x.device)
    ),
    "relu": F.relu,
}


SPECIALS = [0.0, -0.0, 3.0, -3.0, math.inf, -math.inf, math.nan, 25.0]


def sample(dtype, shape=(6, 8), seed=0, specials=True):
    return helpers.sample(dtype, shape, seed, -6, 6, SPECIALS if specials else ())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward(name, dtype):
    fn = ACTIVATIONS[name]
    cpu = sample(dtype)
    if name == "gelu":
        cpu = cpu.nan_to_num(posinf=30.0, neginf=-30.0)  # CPU's vector erf gives NaN at +-inf
    assert_same(fn(cpu.to("tpu")), fn(cpu), **tol(dtype))
    assert_same(fn(cpu.to("tpu").t()), fn(cpu.t()), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_grad(name, dtype):
    fn = ACTIVATIONS[name]
    # Away from kinks (0, +-3, thresholds) where one-sided choices are conventions.
    base = sample(torch.float64, (6, 8), seed=1, specials=False)
    base = torch.where((base.abs() - base.abs().round()).abs() < 0.05, base + 0.1, base)
    cpu = base.to(dtype).requires_grad_()
    x = cpu.detach().to("tpu").requires_grad_()
    y_cpu = fn(cpu[:, 1:7])
    g = torch.randn(y_cpu.shape, dtype=torch.float64).to(dtype)
    y_cpu.backward(g)
    fn(x[:, 1:7]).backward(g.to("tpu"))
    t = tol(dtype) if dtype != torch.float32 else dict(rtol=1e-4, atol=1e-4)
    assert_same(x.grad, cpu.grad, **t)


INPLACE = {
    "relu": lambda x: F.relu(x, inplace=True),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1, inplace=True),
    "elu": lambda x: F.elu(x, inplace=True),
    "celu": lambda x: F.celu(x, inplace=True),
    "selu": lambda x: F.selu(x, inplace=True),
    "hardtanh": lambda x: F.hardtanh(x, inplace=True),
    "relu6": lambda x: F.relu6(x, inplace=True),
    "silu": lambda x: F.silu(x, inplace=True),
    "mish": lambda x: F.mish(x, inplace=True),
    "hardsigmoid": lambda x: F.hardsigmoid(x, inplace=True),
    "hardswish": lambda x: F.hardswish(x, inplace=True),
    "threshold": lambda x: F.threshold(x, 0.1, 20.0, inplace=True),
    "gelu": lambda x: torch.ops.aten.gelu_(x, approximate="tanh"),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_activation_inplace_on_view(name):
    fn = INPLACE[name]
    cpu = sample(torch.float32, specials=False)
    x = cpu.to("tpu")
    fn(x[1:5, ::2])
    fn(cpu[1:5, ::2])
    assert_same(x, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "name",
    ["gelu", "silu", "softplus", "elu", "hardswish", "logsigmoid", "glu", "leaky_relu", "mish"],
)
def test_activation_empty_and_zero_dim(name):
    fn = ACTIVATIONS[name]
    empty = torch.empty(0, 4)
    assert_same(fn(empty.to("tpu")), fn(empty))
    if name != "glu":
        assert_same(fn(torch.tensor(0.75).to("tpu")), fn(torch.tensor(0.75)))


# Backward ops called directly, including their grad_input= (out) forms.
BACKWARD = {
    "gelu_backward": lambda g, x: torch.ops.aten.gelu_backward(g, x),
    "gelu_backward_tanh": lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh"),
    "silu_backward": lambda g, x: torch.ops.aten.silu_backward(g, x),
    "mish_backward": lambda g, x: torch.ops.aten.mish_backward(g, x),
    "softplus_backward": lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.5, 4.0),
    "leaky_relu_backward": lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.3, False),
    "elu_backward": lambda g, x: torch.ops.aten.elu_backward(g, 1.2, 1.1, 0.9, False, x),
    "elu_backward_result": lambda g, x: torch.ops.aten.elu_backward(g, 1.2, 1.1, 0.9, True, x),
    "hardtanh_backward": lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 2.0),
    "sigmoid_backward": lambda g, x: torch.ops.aten.sigmoid_backward(g, x),
    "tanh_backward": lambda g, x: torch.ops.aten.tanh_backward(g, x),
    "hardsigmoid_backward": lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x),
    "hardswish_backward": lambda g, x: torch.ops.aten.hardswish_backward(g, x),
    "softshrink_backward": lambda g, x: torch.ops.aten.softshrink_backward(g, x, 0.5),
    "hardshrink_backward": lambda g, x: torch.ops.aten.hardshrink_backward(g, x, 0.5),
    "log_sigmoid_backward": lambda g, x: torch.ops.aten.log_sigmoid_backward(
        g, x, torch.ops.aten.log_sigmoid_forward(x)[1]
    ),
    "logit_backward": lambda g, x: torch.ops.aten.logit_backward(g, x, 0.1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward_ops(name, dtype):
    fn = BACKWARD[name]
    x = sample(dtype, (5, 4), seed=2, specials=False) / 3
    g = sample(dtype, (5, 4), seed=3, specials=False)
    assert_same(fn(g.to("tpu"), x.to("tpu")), fn(g, x), **tol(dtype))
    gt = g.t().contiguous().t()
    assert_same(fn(gt.to("tpu"), x.to("tpu")[:, :]), fn(gt, x), **tol(dtype))


@pytest.mark.parametrize(
    "name",
    [
        "gelu_backward",
        "silu_backward",
        "softplus_backward",
        "leaky_relu_backward",
        "elu_backward",
        "hardtanh_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardsigmoid_backward",
        "softshrink_backward",
        "log_sigmoid_backward",
        "glu_backward",
    ],
)
def test_backward_out_forms(name):
    op = getattr(torch.ops.aten, name).grad_input
    x = sample(torch.float32, (4, 6), seed=4, specials=False)
    g = sample(torch.float32, (4, 3) if name == "glu_backward" else (4, 6), seed=5, specials=False)
    args = {
        "gelu_backward": (g, x),
        "silu_backward": (g, x),
        "softplus_backward": (g, x, 1.0, 20.0),
        "leaky_relu_backward": (g, x, 0.01, False),
        "elu_backward": (g, 1.0, 1.0, 1.0, False, x),
        "hardtanh_backward": (g, x, -1.0, 1.0),
        "sigmoid_backward": (g, x),
        "tanh_backward": (g, x),
        "hardsigmoid_backward": (g, x),
        "softshrink_backward": (g, x, 0.5),
        "log_sigmoid_backward": (g, x, torch.ops.aten.log_sigmoid_forward(x)[1]),
        "glu_backward": (g, x, -1),
    }[name]
    tpu_args = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
    out = torch.empty(0, device="tpu")
    op(*tpu_args, grad_input=out)
    assert_same(out, op(*args, grad_input=torch.empty(0)), rtol=1e-5, atol=1e-5)


def test_log_sigmoid_forward_buffer_and_out():
    cpu = sample(torch.float32, (3, 5))
    out, buf = torch.ops.aten.log_sigmoid_forward(cpu.to("tpu"))
    ref_out, ref_buf = torch.ops.aten.log_sigmoid_forward(cpu)
    assert_same(out, ref_out, equal_nan=True)
    assert buf.shape == ref_buf.shape
    o, b = torch.empty(0, device="tpu"), torch.empty(0, device="tpu")
    torch.ops.aten.log_sigmoid_forward.output(cpu.to("tpu"), output=o, buffer=b)
    assert_same(o, ref_out, equal_nan=True)


def test_gelu_rejects_bad_mode_and_integer_inputs():
    with pytest.raises(RuntimeError):
        F.gelu(torch.randn(3).to("tpu"), approximate="fast").cpu()
    with pytest.raises((RuntimeError, NotImplementedError, ValueError)):
        F.leaky_relu(torch.tensor([1, -2]).to("tpu")).cpu()


def test_hardtanh_and_threshold_on_integers():
    cpu = torch.tensor([-3, -1, 0, 2, 5])
    assert_same(F.hardtanh(cpu.to("tpu"), -2, 3), F.hardtanh(cpu, -2, 3))
    assert_same(F.threshold(cpu.to("tpu"), 1, 9), F.threshold(cpu, 1, 9))


def test_mlp_block_forward_backward():
    torch.manual_seed(0)
    layer = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.GELU(),
        torch.nn.Linear(16, 8),
        torch.nn.SiLU(),
        torch.nn.Linear(8, 4),
        torch.nn.Hardswish(),
    )
    inp = torch.randn(5, 8)
    layer(inp).sum().backward()
    ref = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    dev = layer.to("tpu")
    dev(inp.to("tpu")).sum().backward()
    for p, r in zip(dev.parameters(), ref):
        assert_same(p.grad, r, rtol=1e-4, atol=1e-4)
