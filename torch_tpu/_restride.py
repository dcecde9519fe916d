"""`aten.as_strided` and `aten.as_strided_scatter` in compiled graphs, as ops on values.

AOTAutograd emits them where a view's strides must be restored: a channels-last
`mean((2, 3), keepdim=True)` head (timm's MaxViT) gives a forward `as_strided` that only
changes the strides of size-1 dims, and a backward `new_zeros` + `as_strided_scatter` +
`as_strided`. Graph values here are logical (their elements in row-major order), with no
storage, so such a node is rewritten, from its input's static sizes and strides, as what
it reads or writes in that input's storage:
- the elements it reads are a run of the input's elements in row-major order: a reshape
  (and a slice when the run is part of them), no data moved;
- otherwise a gather (scatter, for as_strided_scatter) with a constant index.
A node whose sizes are symbolic, or that reads storage its input does not cover, is left
as it is (the graph then splits there, as for any op without a lowering).
"""

import torch
from torch import fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from torch_tpu._fx_rewrite import replace_nodes

aten = torch.ops.aten


def _ints(values) -> bool:
    return all(isinstance(v, int) for v in values)


def _extent(shape, stride, offset) -> int:
    """One past the last storage position a view reaches (offset if it is empty)."""
    if any(s == 0 for s in shape):
        return offset
    return offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1


def _positions(size, shape, stride, offset) -> torch.Tensor:
    return torch.arange(size).as_strided(shape, stride, offset)


def _logical_index(val, shape, stride, offset):
    """For the view (shape, stride, offset) of `val`'s storage: the row-major index into
    `val` of each element it reaches, flat; None if one lies outside `val`'s elements.
    Computed on real CPU tensors (the compiler may run under AOTAutograd's fake mode)."""
    vshape, vstride, voffset = list(val.shape), list(val.stride()), val.storage_offset()
    if not (
        _ints(vshape)
        and _ints(vstride)
        and _ints(shape)
        and _ints(stride)
        and _ints([voffset, offset])
    ):
        return None
    with unset_fake_temporarily():
        size = max(_extent(vshape, vstride, voffset), _extent(shape, stride, offset))
        inverse = torch.full((size,), -1, dtype=torch.long)
        inverse[_positions(size, vshape, vstride, voffset).reshape(-1)] = torch.arange(val.numel())
        index = inverse[_positions(size, shape, stride, offset).reshape(-1)]
        return None if bool((index < 0).any()) else index


def _run(index: torch.Tensor):
    """(start, stop) when `index` is a run start, start + 1, ...; else None."""
    if index.numel() == 0:
        return 0, 0
    with unset_fake_temporarily():
        start = int(index[0])
        if torch.equal(index, torch.arange(start, start + index.numel())):
            return start, start + index.numel()
    return None


class _Rewriter:
    def __init__(self, gm: fx.GraphModule):
        self.gm, self.graph, self.constants = gm, gm.graph, 0

    def call(self, target, args, like):
        node = self.graph.call_function(target, args)
        node.meta["val"] = target(*fx.node.map_arg(args, lambda a: a.meta["val"]))
        node.meta["stack_trace"] = like.meta.get("stack_trace")
        return node

    def constant(self, tensor: torch.Tensor, like) -> fx.Node:
        name = f"_restride_index_{self.constants}"
        while hasattr(self.gm, name):
            self.constants += 1
            name = f"_restride_index_{self.constants}"
        self.gm.register_buffer(name, tensor)
        node = self.graph.get_attr(name)
        fake = like.meta["val"]
        node.meta["val"] = fake.new_empty(tensor.shape, dtype=tensor.dtype)
        return node

    def flat(self, node, like):
        """`node`'s elements in row-major order, 1-d (values here are logical: the clone of
        a strided value only makes its fake value viewable)."""
        if not node.meta["val"].is_contiguous():
            node = self.call(aten.clone.default, (node,), like)
            node.meta["val"] = node.meta["val"].contiguous()
        return self.call(aten.view.default, (node, [-1]), like)

    def as_strided(self, node: fx.Node) -> fx.Node | None:
        x, shape, stride = node.args[:3]
        offset = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0
        index = _logical_index(x.meta["val"], list(shape), list(stride), offset)
        if index is None:
            return None
        flat = self.flat(x, node)
        run = _run(index)
        if run is not None:
            picked = self.call(aten.slice.Tensor, (flat, 0, run[0], run[1]), node)
        else:
            picked = self.call(
                aten.index_select.default, (flat, 0, self.constant(index, node)), node
            )
        return self.call(aten.view.default, (picked, list(shape)), node)

    def as_strided_scatter(self, node: fx.Node) -> fx.Node | None:
        base, src, shape, stride = node.args[:4]
        offset = node.args[4] if len(node.args) > 4 and node.args[4] is not None else 0
        base_val = base.meta["val"]
        index = _logical_index(base_val, list(shape), list(stride), offset)
        if index is None:
            return None
        with unset_fake_temporarily():
            if index.unique().numel() != index.numel():
                return None  # a window that overlaps itself: no single value per element
        flat, values = self.flat(base, node), self.flat(src, node)
        run = _run(index)
        if run is not None:
            written = self.call(aten.slice_scatter.default, (flat, values, 0, run[0], run[1]), node)
        else:
            positions = self.constant(index, node)
            written = self.call(aten.index_put.default, (flat, [positions], values), node)
        return self.call(aten.view.default, (written, list(base_val.shape)), node)


def rewrite(gm: fx.GraphModule) -> int:
    """Rewrites gm's as_strided / as_strided_scatter nodes in place; returns how many."""
    rewriter = _Rewriter(gm)

    def only_tensors(handler):
        return lambda node: (
            handler(node) if isinstance(node.meta.get("val"), torch.Tensor) else None
        )

    return replace_nodes(
        gm,
        {
            aten.as_strided.default: only_tensors(rewriter.as_strided),
            aten.as_strided_scatter.default: only_tensors(rewriter.as_strided_scatter),
        },
    )
