"""The model families of examples/ beyond the language models: ResNet, DLRM and the
diffusers UNet train on tpu with the same per-step losses and parameters as on the CPU, eager and compiled,
with every op native and every graph whole."""

import copy
import importlib
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOL = dict(rtol=1e-4, atol=1e-5)


def load(example: str, module: str = "train"):
    """examples/<example>/<module>.py, with that folder first on sys.path for its own
    imports (several examples have a model.py and a train.py)."""
    folder = str(EXAMPLES / example)
    saved = {name: sys.modules.pop(name) for name in ("model", "train") if name in sys.modules}
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(folder)
        for name in ("model", "train"):
            sys.modules.pop(name, None)
        sys.modules.update(saved)


resnet = load("resnet")
dlrm = load("dlrm")
unet = load("unet")


def check_native(compiled: bool):
    m = torch_tpu.metrics.snapshot()
    assert m["fallbacks"] == {}
    if compiled:
        assert m["graphs"] >= 2 and m["graph_fallbacks"] == 0


def same_training(cpu_model, tpu_model, cpu_losses, tpu_losses):
    torch.testing.assert_close(torch.stack(tpu_losses).cpu(), torch.stack(cpu_losses), **TOL)
    for (name, p), q in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), **TOL, msg=name)
    for (name, b), c in zip(cpu_model.named_buffers(), tpu_model.buffers()):
        torch.testing.assert_close(c.cpu(), b, **TOL, msg=name)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


# One compiled layout keeps the suite short; channels-last runs eager.
@pytest.mark.parametrize(
    "compiled,channels_last",
    [(False, False), (False, True), (True, False)],
    ids=["eager", "eager-nhwc", "compiled"],
)
def test_resnet_trains_like_cpu(compiled, channels_last):
    torch.manual_seed(0)
    cpu_model = resnet.resnet_small(10)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    if channels_last:
        cpu_model.to(memory_format=torch.channels_last)
        tpu_model.to(memory_format=torch.channels_last)
    data = list(resnet.batches(3, 8, 32, 10, seed=0))
    cpu_losses = resnet.train(cpu_model, data, "cpu", lr=0.01, channels_last=channels_last)
    tpu_losses = resnet.train(
        tpu_model,
        data,
        "tpu",
        lr=0.01,
        compile="tpu" if compiled else None,
        channels_last=channels_last,
    )
    same_training(cpu_model, tpu_model, cpu_losses, tpu_losses)
    check_native(compiled)
    cpu_model.eval()
    tpu_model.eval()
    x = data[0][0]
    with torch.no_grad():
        torch.testing.assert_close(tpu_model(x.to("tpu")).cpu(), cpu_model(x), **TOL)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_dlrm_trains_like_cpu(compiled):
    torch.manual_seed(0)
    cpu_model = dlrm.DLRM(tables=(50, 40, 30), dim=8, bottom=(16,), top=(16,))
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    data = list(dlrm.batches(cpu_model, 3, 16, seed=0))
    cpu_losses = dlrm.train(cpu_model, data, "cpu")
    tpu_losses = dlrm.train(tpu_model, data, "tpu", compile="tpu" if compiled else None)
    same_training(cpu_model, tpu_model, cpu_losses, tpu_losses)
    check_native(compiled)


# Slow (tens of seconds); ResNet covers convolution training in the fused pass.
@pytest.mark.slow
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_unet_ddpm_trains_and_samples_like_cpu(compiled):
    torch.manual_seed(0)
    cpu_model = unet.unet_small(16)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    backend = "tpu" if compiled else None
    data = list(unet.batches(3, 4, 16, 1000, seed=0))
    cpu_losses = unet.train(cpu_model, unet.DDPM(), data, "cpu", lr=0.05, optimizer="sgd")
    tpu_schedule = unet.DDPM().to("tpu")
    tpu_losses = unet.train(
        tpu_model, tpu_schedule, data, "tpu", lr=0.05, compile=backend, optimizer="sgd"
    )
    same_training(cpu_model, tpu_model, cpu_losses, tpu_losses)
    # Three denoising steps from the same noise, through the same (trained) weights.
    shape = (2, 3, 16, 16)
    cpu_images = unet.sample(cpu_model, unet.DDPM(), shape, "cpu", 3, seed=1)
    tpu_images = unet.sample(tpu_model, tpu_schedule, shape, "tpu", 3, seed=1, compile=backend)
    torch.testing.assert_close(tpu_images.cpu(), cpu_images, **TOL)
    check_native(compiled)
