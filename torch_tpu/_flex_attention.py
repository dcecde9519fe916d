"""`torch.nn.attention.flex_attention` on tpu, eager and compiled.

Eager: PyTorch 2.13 checks the query's device type against its own list (cuda, cpu,
xpu, hpu, mps) before it traces anything. What runs after that check on a device with no
flex kernel is the flex_attention higher-order op's dense implementation (scores,
score and mask functions vmapped over the index grid, softmax, matmul; its backward is
the flex_attention_backward op's dense one): plain tensor ops, which run on tpu as on
any device. `install()` lets tpu tensors through the check; other devices keep it.

Compiled (`backend="tpu"`): Dynamo puts the higher-order op into the graph with the score
and mask functions as subgraphs. No lowering takes it (the graph would be split around it
and the op run eagerly), so `inline_dense` makes each such node a call of the same dense
implementation before AOTAutograd traces the graph: the attention, its score and mask
functions and their gradients become ops of the forward and backward programs, which XLA
fuses. Like flex_attention's own dense path it materializes the scores (batch x heads x
queries x keys) and ignores the block mask's sparsity (the mask function is applied to
every position, which gives the same result).
"""

import torch
import torch.fx as fx
import torch.nn.attention.flex_attention as _flex
from torch._higher_order_ops.flex_attention import sdpa_dense

_torch_validate_device = _flex._validate_device


def _validate_device(query, key, value) -> None:
    if query.device.type != "tpu":
        _torch_validate_device(query, key, value)


def install() -> None:
    _flex._validate_device = _validate_device


def dense_flex_attention(*args):
    """The flex_attention op's dense implementation, called as a function (traced into
    plain ATen ops, with autograd's gradients) instead of dispatched as the op."""
    return sdpa_dense(*args)


def inline_dense(gm: fx.GraphModule) -> fx.GraphModule:
    """`gm` with its flex_attention nodes calling `dense_flex_attention` (in place)."""
    hop = getattr(torch.ops.higher_order, "flex_attention", None)
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and hop is not None and node.target is hop:
            node.target = dense_flex_attention
            changed = True
    if changed:
        gm.recompile()
    return gm
