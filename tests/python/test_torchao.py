"""torchao's quantization flows on tpu: int8 weight-only and dynamic int8 (`quantize_`),
eager and compiled, against torchao on CPU (or, where XLA rounds a dynamic activation
scale differently, against the dequantized product within int8's rounding bound)."""

import copy
import warnings

import pytest
import torch

import torch_tpu
from helpers import tol

torchao = pytest.importorskip(
    "torchao", reason="torchao is not installed (pyproject's test extras)"
)
from torchao.quantization import (  # noqa: E402
    Int8DynamicActivationInt8WeightConfig,
    Int8WeightOnlyConfig,
    quantize_,
)

CONFIGS = {
    "int8_weight_only": Int8WeightOnlyConfig,
    "int8_dynamic": Int8DynamicActivationInt8WeightConfig,
}


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))


def quantized(device, config):
    m = model().to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_(m, CONFIGS[config]())
    return m


def inputs():
    return torch.randn(16, 64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_eager_matches_torchao_on_cpu(config):
    x = inputs()
    expected = quantized("cpu", config)(x)
    got = quantized("tpu", config)(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32))


def int8_rounding_bound(layer, x):
    """|y - x @ w^T - b| per output for a per-token int8 activation and the layer's int8
    weight: each activation is off by at most half its token's step, so the product by
    at most step / 2 * sum |w|."""
    w = layer.weight.dequantize().float().cpu()
    step = x.abs().amax(1, keepdim=True) / 127
    return step / 2 * w.abs().sum(1) + 1e-5


@pytest.mark.single_mode
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_compiled_matches_cpu(config, fresh_dynamo):
    x = inputs()
    cpu = quantized("cpu", config)
    expected = cpu(x)
    on_tpu = quantized("tpu", config)
    got = torch.compile(on_tpu, backend="tpu")(x.to("tpu")).cpu()
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0
    if config == "int8_weight_only":
        torch.testing.assert_close(got, expected, **tol(torch.float32))
        return
    # The first layer alone, against its dequantized product and int8's rounding bound
    # (what the activation's scale rounds to can differ in the last bit between XLA's
    # fused program and CPU); the whole model stays close to CPU's torchao.
    first = torch.compile(on_tpu[0], backend="tpu")(x.to("tpu")).cpu()
    exact = x @ cpu[0].weight.dequantize().float().t() + cpu[0].bias
    assert ((first - exact).abs() <= int8_rounding_bound(cpu[0], x)).all()
    torch.testing.assert_close(
        got, expected, rtol=0, atol=float((expected - model()(x)).abs().max())
    )


def float8_losses(device, compiled=False, steps=3):
    from torchao.float8 import convert_to_float8_training

    m = model().to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert_to_float8_training(m)
    step_model = torch.compile(m, backend="tpu") if compiled else m
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = inputs().to(device)
    losses = []
    for _ in range(steps):
        loss = step_model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_float8_training_matches_cpu():
    expected = float8_losses("cpu")
    got = float8_losses("tpu")
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.single_mode
def test_compiled_float8_training_matches_cpu(fresh_dynamo):
    expected = float8_losses("cpu")
    got = float8_losses("tpu", compiled=True)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0
