"""`torch.ops.higher_order.out_dtype(op, dtype, *args)` in compiled graphs.

torchao's int8 paths compute `out_dtype(aten.mm, torch.int32, a_int8, b_int8)`: the product
of int8 matrices accumulated and returned in int32. Eager mode runs it as `aten._int_mm`
(lowered); a compiled graph holds the higher-order op, which has no lowering, so each such
node is rewritten as `op` on its arguments converted to `dtype`: exact for integer
products (int8 values are exact in int32, and so is their sum unless it overflows int32,
as it would for `_int_mm`), and at least as precise as the accumulation asked for
floats.
"""

import torch
from torch import fx

from torch_tpu._fx_rewrite import replace_nodes

aten = torch.ops.aten


def _as_op(node: fx.Node):
    op, dtype, *args = node.args
    if not isinstance(op, torch._ops.OpOverload) or node.kwargs:
        return None
    graph = node.graph
    converted = []
    for arg in args:
        if isinstance(arg, fx.Node) and isinstance(arg.meta.get("val"), torch.Tensor):
            cast = graph.call_function(aten._to_copy.default, (arg,), {"dtype": dtype})
            cast.meta["val"] = arg.meta["val"].to(dtype)
            converted.append(cast)
        else:
            converted.append(arg)
    result = graph.call_function(op, tuple(converted))
    result.meta["val"] = node.meta["val"]
    result.meta["stack_trace"] = node.meta.get("stack_trace")
    return result


def rewrite(gm: fx.GraphModule) -> int:
    """Rewrites gm's out_dtype nodes in place; returns how many."""
    return replace_nodes(gm, {torch.ops.higher_order.out_dtype: _as_op})
