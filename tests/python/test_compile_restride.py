"""as_strided and as_strided_scatter in compiled graphs (AOTAutograd's restrides, e.g.
timm MaxViT's channels-last pooling head) compile whole: a reshape/slice where the
elements keep their order, a gather/scatter otherwise (torch_tpu/_restride.py)."""

import warnings

import pytest
import torch

import torch_tpu
from helpers import tol

pytestmark = pytest.mark.single_mode


def restrides(x, w):
    a = x.as_strided((3, 4), (4, 1), 2)  # elements 2..13 in order: a slice
    b = x.as_strided((4, 3), (1, 4), 0)  # transposed: a gather
    h = torch.as_strided_scatter(
        torch.zeros(16, device=x.device, dtype=x.dtype),
        (a.sum(0) * w).view(2, 2),
        (2, 2),
        (1, 2),
        1,
    )
    weights = torch.arange(16.0, device=x.device)
    return (a * w.view(1, 4)).sum() + b.square().sum() + (h * weights).sum()


class Head(torch.nn.Module):
    """A conv stem, then a channels-last norm and a mean((2, 3), keepdim=True) head."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        x = self.norm(self.conv(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.fc(x.mean((2, 3), keepdim=True).flatten(1))


def grads_match(f, cpu_args):
    expected = f(*cpu_args)
    expected.sum().backward()
    tpu_args = [a.detach().to("tpu").requires_grad_() for a in cpu_args]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="tpu")(*tpu_args)
        got.sum().backward()
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), **tol(torch.float32))
    for a, b in zip(tpu_args, cpu_args):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **tol(torch.float32))
    assert not [m for m in seen if "split" in str(m.message)]
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0


def test_as_strided_and_scatter_compile_whole_forward_and_backward(fresh_dynamo):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, generator=g, requires_grad=True)
    w = torch.randn(4, generator=g, requires_grad=True)
    grads_match(restrides, [x, w])


@pytest.mark.parametrize("channels_last", [False, True])
def test_channels_last_mean_head_compiles_whole(fresh_dynamo, channels_last):
    torch.manual_seed(0)
    model = Head()
    x = torch.randn(2, 3, 8, 8)
    if channels_last:
        model, x = (
            model.to(memory_format=torch.channels_last),
            x.to(memory_format=torch.channels_last),
        )
    expected = model(x)
    expected.sum().backward()
    on_tpu = Head().to("tpu")
    on_tpu.load_state_dict(model.state_dict())
    compiled = torch.compile(on_tpu, backend="tpu")
    got = compiled(x.to("tpu"))
    got.sum().backward()
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), **tol(torch.float32))
    for (name, p), q in zip(on_tpu.named_parameters(), model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, **tol(torch.float32), msg=name)
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0


def test_a_read_outside_the_input_is_left_to_split():
    from torch_tpu import _restride

    val = torch.empty(2, 3)
    assert _restride._logical_index(val, [2, 3], [3, 1], 0) is not None
    assert _restride._logical_index(val, [7], [1], 0) is None  # past the input's storage
