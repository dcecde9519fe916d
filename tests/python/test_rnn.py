"""Recurrent layers (nn.RNN / nn.LSTM / nn.GRU and their cells) against CPU PyTorch:
outputs, final states and every parameter's gradient, for multi-layer, bidirectional,
batch_first and packed inputs, with odd sizes. On tpu the layers run PyTorch's fused
cell ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward), which
csrc/ops/rnn.cpp lowers."""

import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_tpu

TOL = dict(rtol=1e-4, atol=1e-5)
LAYERS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


def compare(cpu_module, run):
    """Runs `run(module, device)` on CPU and tpu copies; compares outputs and gradients."""
    tpu_module = copy.deepcopy(cpu_module).to("tpu")
    torch_tpu.metrics.reset()
    out_c, out_t = run(cpu_module, "cpu"), run(tpu_module, "tpu")
    flat_c, flat_t = torch.utils._pytree.tree_leaves(out_c), torch.utils._pytree.tree_leaves(out_t)
    assert len(flat_c) == len(flat_t)
    for c, t in zip(flat_c, flat_t):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), **TOL)
    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(c.shape, generator=g) for c in flat_c]
    sum(w.mul(c).sum() for w, c in zip(weights, flat_c)).backward()
    sum(w.to("tpu").mul(t).sum() for w, t in zip(weights, flat_t)).backward()
    for (name, p), q in zip(cpu_module.named_parameters(), tpu_module.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **TOL, msg=name)
    assert torch_tpu.metrics.snapshot()["fallbacks"] == {}


@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize(
    "layers,bidirectional,batch_first,bias",
    [
        (1, False, False, True),
        (2, True, True, True),
        (3, False, True, False),
        (2, True, False, False),
    ],
)
def test_layer_matches_cpu(kind, layers, bidirectional, batch_first, bias):
    torch.manual_seed(0)
    module = LAYERS[kind](
        5, 7, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias
    )
    x = torch.randn((3, 4, 5) if batch_first else (4, 3, 5))
    directions = 2 if bidirectional else 1
    h0 = torch.randn(layers * directions, 3, 7)
    state = (h0, torch.randn_like(h0)) if kind == "lstm" else h0

    def run(m, device):
        s = tuple(t.to(device) for t in state) if kind == "lstm" else state.to(device)
        return m(x.to(device), s)

    compare(module, run)


@pytest.mark.parametrize("kind", LAYERS)
def test_packed_sequences(kind):
    torch.manual_seed(0)
    module = LAYERS[kind](3, 5, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(4, 6, 3)
    lengths = torch.tensor([6, 4, 3, 1])

    def run(m, device):
        packed = pack_padded_sequence(x.to(device), lengths, batch_first=True)
        out, state = m(packed)
        return pad_packed_sequence(out, batch_first=True)[0], state

    compare(module, run)


@pytest.mark.parametrize("cell", [nn.RNNCell, nn.LSTMCell, nn.GRUCell])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(cell, bias):
    torch.manual_seed(0)
    module = cell(5, 9, bias=bias)
    x = torch.randn(3, 5)

    def run(m, device):
        state, outs = None, []
        for _ in range(3):  # the state feeds back: gradients flow through the cell three times
            state = m(x.to(device), state)
            outs.append(state)
        return outs

    compare(module, run)


def test_lstm_without_initial_state_in_a_compiled_graph():
    torch.manual_seed(0)
    module = nn.LSTM(4, 6, batch_first=True)
    x = torch.randn(2, 5, 4)
    tpu_module = copy.deepcopy(module).to("tpu")
    torch._dynamo.reset()
    torch_tpu.metrics.reset()
    out = torch.compile(tpu_module, backend="tpu")(x.to("tpu"))[0]
    torch.testing.assert_close(out.detach().cpu(), module(x)[0].detach(), **TOL)
    assert torch_tpu.metrics.snapshot()["graph_fallbacks"] == 0
    torch._dynamo.reset()
