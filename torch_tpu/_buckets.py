"""Bounded dynamic shapes in compiled graphs: one program per bucket, not per size.

A graph Dynamo traced with symbolic sizes (`dynamic=True`, `mark_dynamic`, or after a
shape change) is compiled with each symbolic size rounded up to its bucket (the bound)
and run at its real size: its inputs are padded to the bound, every dynamic dimension is
marked with its real size inside the program (`stablehlo.set_dimension_size`, see
csrc/compile/graph.h), XLA keeps the padding out of reductions, dots, softmax and
sorts, and the outputs are cut back to their real sizes. Results are the exact-shape
results.

Only graphs whose every op is known to stay exact this way are bucketed (`Plan`
decides, op by op); any other graph keeps one program per concrete shape, and a one-line
warning says which op stopped it and why.

Buckets: the next power of two (at least 8) up to 1,024, then multiples of 128
(`TORCH_TPU_SHAPE_BUCKETS`: "off", or an integer to round up to a multiple of; backend
option `bucket_size` likewise).
"""

from __future__ import annotations

import operator

import sympy
import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import free_symbols

from torch_tpu._bucket_rule import bucket, setting  # noqa: F401 (re-exported)

aten = torch.ops.aten


# --- which graphs stay exact -------------------------------------------------------


def _dynamic_dims(val) -> list:
    if not isinstance(val, torch.Tensor):
        return []
    return [d for d, s in enumerate(val.shape) if isinstance(s, torch.SymInt) and free_symbols(s)]


def _is_symbolic(x) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(free_symbols(x))


def _symbolic_arg(a) -> bool:
    """A dynamic size given as an argument: a symbolic number or a node computing one."""
    return _is_symbolic(a) or (isinstance(a, fx.Node) and _is_symbolic(a.meta.get("val")))


# Ops that move or reinterpret elements without computing across them; sizes given to
# them may be symbolic (they compile at the bound, which is consistent).
_VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.expand.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.clone.default,
    aten.alias.default,
    aten.detach.default,
    aten._to_copy.default,
}
_SIZE_ARGS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.expand.default,
}
# Elementwise by position (the real block of the bound is the exact result).
_POSITIONAL = {aten.tril.default, aten.triu.default}
# Contractions and reductions XLA masks: exact over dynamic dimensions.
_MASKED = {
    aten.mm.default,
    aten.bmm.default,
    aten.addmm.default,
    aten.sum.dim_IntList,
    aten.sum.default,
    aten.amax.default,
    aten.amin.default,
    aten._softmax.default,
    aten._log_softmax.default,
    aten._softmax_backward_data.default,
    aten._log_softmax_backward_data.default,
}
# Exact when the dimensions they compute across (by count) are static.
_STATIC_REDUCED = {
    aten.mean.dim,
    aten.native_layer_norm.default,
    aten.native_layer_norm_backward.default,
}


# Tensors created with a dynamic size: the program creates them at the bound and marks
# them with the real size (Plan.marks), so later reductions see only the real part.
# op -> the positions of its arguments that may hold a dynamic size (as a size only).
_CREATION = {
    aten.full.default: (0,),
    aten.zeros.default: (0,),
    aten.ones.default: (0,),
    aten.empty.memory_format: (0,),
    aten.new_full.default: (1,),
    aten.new_zeros.default: (1,),
    aten.new_ones.default: (1,),
    aten.new_empty.default: (1,),
    aten.arange.default: (0,),
    aten.arange.start: (1,),
    aten.arange.start_step: (1,),
}


def _why_not_created(node: fx.Node, target, val) -> str | None:
    positions = _CREATION[target]
    for k, a in enumerate(node.args):
        leaves = torch.utils._pytree.tree_leaves(a)
        if k not in positions and any(_symbolic_arg(x) for x in leaves):
            return f"{target} takes a dynamic size as a value"
    for d in _dynamic_dims(val):
        if not val.shape[d].node.expr.is_Symbol:
            return f"{target} creates a dimension of size {val.shape[d].node.expr}"
    return None


# Exact along a static dimension: op -> position of its `dim` argument.
_ALONG_DIM = {
    aten.slice.Tensor: 1,
    aten.select.int: 1,
    aten.cat.default: 1,
    aten.split.Tensor: 2,
    aten.split_with_sizes.default: 2,
}


def _splits_merged_dim(before, after) -> bool:
    """Whether a view does more than merge whole dimensions where a dynamic one is
    involved: XLA's padder cannot split a dynamic dimension (it would give the dynamic
    size to the most major part), nor split and merge at once."""

    def sized(shape):
        # Symbols stand for distinct large primes: products then match only when the
        # dimensions do. Static 1s do not matter.
        dims = []
        for s in shape:
            if isinstance(s, torch.SymInt) and free_symbols(s):
                expr = s.node.expr
                dims.append((int(expr.subs({x: _prime_for(x) for x in expr.free_symbols})), True))
            elif int(s) != 1:
                dims.append((int(s), False))
        return dims

    a, b = sized(before.shape), sized(after.shape)
    i = j = 0
    while i < len(a) and j < len(b):
        pa, pb = a[i][0], b[j][0]
        dynamic = a[i][1] or b[j][1]
        outs = 1
        i, j = i + 1, j + 1
        while pa != pb and (i < len(a) or j < len(b)):
            if pa < pb and i < len(a):
                pa *= a[i][0]
                dynamic |= a[i][1]
                i += 1
            elif j < len(b):
                pb *= b[j][0]
                dynamic |= b[j][1]
                outs += 1
                j += 1
            else:
                return True  # cannot tell: refuse
        if dynamic and outs > 1:
            return True
    return False


_PRIMES: dict = {}


def _prime_for(symbol) -> int:
    if symbol not in _PRIMES:
        _PRIMES[symbol] = int(sympy.nextprime(max(_PRIMES.values(), default=1000000)))
    return _PRIMES[symbol]


def _whole_slice(node: fx.Node) -> bool:
    """x[:] along some dimension (indexing with None and : makes these)."""
    args = list(node.args) + [None] * (5 - len(node.args))
    start, end, step = args[2], args[3], args[4]
    if isinstance(end, fx.Node):
        return False
    return start in (None, 0) and step in (None, 1) and (end is None or end >= 2**62)


def _reduced_dims(node: fx.Node, val) -> list:
    """The dimensions of node's first input that an _STATIC_REDUCED op divides by."""
    rank = val.dim()
    if node.target is aten.mean.dim:
        dims = node.args[1] if len(node.args) > 1 else None
        return list(range(rank)) if not dims else [d % rank for d in dims]
    normalized = node.args[1] if node.target is aten.native_layer_norm.default else node.args[2]
    return list(range(rank - len(normalized), rank))


def _why_not(node: fx.Node) -> str | None:
    """None if `node` stays exact compiled at the bound; else why not."""
    if node.op != "call_function":
        return None
    target = node.target
    val = node.meta.get("val")
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"{target.name()} (control flow) is not bucketed"
    if not isinstance(target, torch._ops.OpOverload):
        if target in (operator.getitem,) or not isinstance(val, torch.Tensor):
            return None  # tuple access, size arithmetic
        return f"{getattr(target, '__name__', target)} is not an ATen op"
    if not isinstance(val, (torch.Tensor, list, tuple)):
        return None  # size arithmetic (sym_size): its users are checked
    name = str(target)
    if torch.Tag.nondeterministic_seeded in target.tags:
        return f"{name} draws random numbers (a bucket would draw more)"
    flat = torch.utils._pytree.tree_leaves((node.args, node.kwargs))
    symbolic_args = [a for a in flat if _symbolic_arg(a)]
    inputs = [a.meta.get("val") for a in flat if isinstance(a, fx.Node)]
    outs = val if isinstance(val, (list, tuple)) else [val]
    dynamic = any(_dynamic_dims(v) for v in [*inputs, *outs])
    if target in _CREATION:
        return _why_not_created(node, target, val)
    if symbolic_args and target not in _SIZE_ARGS and target is not aten.sym_size.int:
        return f"{name} takes a dynamic size as a value"
    if not dynamic:
        return None
    if target in _SIZE_ARGS and _splits_merged_dim(inputs[0], val):
        return f"{name} splits a dimension that merges a dynamic one (XLA cannot tell how)"
    if (
        target in _VIEWS
        or target in _MASKED
        or target in _POSITIONAL
        or torch.Tag.pointwise in target.tags
    ):
        return None
    if target in _STATIC_REDUCED:
        first = inputs[0]
        if set(_reduced_dims(node, first)) & set(_dynamic_dims(first)):
            return f"{name} divides by the size of a dynamic dimension"
        return None
    if target is aten.slice.Tensor and _whole_slice(node):
        return None
    if target in _ALONG_DIM:
        first = inputs[0]
        position = _ALONG_DIM[target]
        dim = node.args[position] if len(node.args) > position else node.kwargs.get("dim", 0)
        if dim % max(first.dim(), 1) not in _dynamic_dims(first):
            return None
        return f"{name} along a dynamic dimension"
    return f"{name} is not known to stay exact when padded"


def without_split_views(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of `gm` where `linear` on a [b, n, k] input (view to [b*n, k], mm or addmm,
    view back to [b, n, m], which splits the merged dynamic dimension) is one batched
    matmul of the 3-D input instead, which XLA keeps exact at the bound."""
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    for node in list(graph.nodes):
        new = _batched_linear(graph, node)
        if new is not None:
            node.replace_all_uses_with(new)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    return fx.GraphModule(gm, graph)


def _batched_linear(graph: fx.Graph, view: fx.Node):
    if view.op != "call_function" or view.target not in _SIZE_ARGS:
        return None
    mm = view.args[0]
    if (
        not isinstance(mm, fx.Node)
        or mm.target not in (aten.mm.default, aten.addmm.default)
        or mm.kwargs
    ):  # (addmm's beta and alpha: 1)
        return None
    lhs, rhs = mm.args[-2:]
    if not isinstance(lhs, fx.Node) or lhs.target not in _SIZE_ARGS:
        return None
    x, sizes = lhs.args[0], view.args[1]
    xv, wv, outv = x.meta.get("val"), rhs.meta.get("val"), view.meta.get("val")
    if not all(isinstance(v, torch.Tensor) for v in (xv, wv, outv)):
        return None
    if (
        xv.dim() != 3
        or outv.dim() != 3
        or wv.dim() != 2
        or any(isinstance(s, torch.SymInt) for s in wv.shape)
        or [str(s) for s in xv.shape[:2]] != [str(s) for s in outv.shape[:2]]
        or not _splits_merged_dim(mm.meta["val"], outv)
    ):
        return None
    if isinstance(sizes[0], int) and sizes[0] < 0:
        return None
    k, m = (int(s) for s in wv.shape)
    mode = xv.fake_mode
    with graph.inserting_before(view):
        w3 = graph.call_function(
            aten.expand.default,
            (graph.call_function(aten.unsqueeze.default, (rhs, 0)), [sizes[0], k, m]),
        )
        out = graph.call_function(aten.bmm.default, (x, w3))
        with mode:
            w3.args[0].meta["val"] = wv.unsqueeze(0)
            w3.meta["val"] = wv.unsqueeze(0).expand(xv.shape[0], k, m)
            out.meta["val"] = torch.bmm(xv, w3.meta["val"])
        if mm.target is aten.addmm.default:
            biased = graph.call_function(aten.add.Tensor, (out, mm.args[0]))
            with mode:
                biased.meta["val"] = out.meta["val"] + mm.args[0].meta["val"]
            out = biased
    return out


class Plan:
    """How a graph's symbolic sizes are bound at a call: `tensor_dims[i]` lists the
    (dim, symbol) of placeholder i's dynamic dimensions, `number_inputs[i]` the symbol a
    size input stands for."""

    def __init__(self, gm: fx.GraphModule):
        self.tensor_dims: dict = {}
        self.number_inputs: dict = {}
        self.outputs: list = []
        self.marks: list = []  # (node, dim, symbol) of tensors created with a dynamic size
        self.reason = None
        self._analyze(gm)

    def _analyze(self, gm: fx.GraphModule) -> None:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                if _is_symbolic(val):
                    self.number_inputs[i] = val.node.expr  # n, or b*n (given at the bound)
                continue
            if not isinstance(val, torch.Tensor):
                if _is_symbolic(val):
                    return self._refuse(f"an input of type {type(val).__name__}")
                continue
            # A dimension like b*s (a flattened activation saved for the backward): its
            # real rows come first, as the forward's output left them.
            dims = [(d, val.shape[d].node.expr) for d in _dynamic_dims(val)]
            if dims:
                self.tensor_dims[i] = dims
        if not self.tensor_dims:
            return self._refuse("no input has a dynamic dimension")
        plain = {e for dims in self.tensor_dims.values() for _, e in dims if e.is_Symbol}
        for expr in self.number_inputs.values():
            if expr.free_symbols - plain:
                return self._refuse(
                    f"a size input {expr} is no function of the inputs' dynamic dimensions"
                )
        for dims in self.tensor_dims.values():
            for _, expr in dims:
                if expr.free_symbols - plain:
                    return self._refuse(
                        f"an input has the size expression {expr}, whose "
                        "symbols no input dimension gives alone"
                    )
        for node in gm.graph.nodes:
            if (
                node.op == "call_function"
                and node.target is aten.copy_.default
                and node.args[0].op == "placeholder"
                and _dynamic_dims(node.args[0].meta.get("val"))
            ):
                return self._refuse("the graph writes into an input of dynamic size")
            why = _why_not(node)
            if why is not None:
                return self._refuse(why)
            if node.op == "call_function" and node.target in _CREATION:
                val = node.meta["val"]
                self.marks += [(node, d, val.shape[d].node.expr) for d in _dynamic_dims(val)]
            if node.op == "output":
                for o in node.args[0]:
                    val = o.meta.get("val") if isinstance(o, fx.Node) else o
                    self.outputs.append(self._output_plan(val))
                    if self.reason:
                        return

    def _output_plan(self, val):
        """None (a tensor of static shape, None or a constant), ("number", expr) or
        ("tensor", [(dim, expr)])."""
        if isinstance(val, torch.SymInt) and _is_symbolic(val):
            return ("number", val.node.expr)
        if isinstance(val, (torch.SymFloat, torch.SymBool)) and _is_symbolic(val):
            self._refuse("the graph returns a symbolic float or bool")
            return None
        dims = _dynamic_dims(val)
        if not dims:
            return None
        # A dimension that merges dynamic ones (b*s after a flattening view): XLA keeps
        # the real elements first, so the leading b*s rows are the value.
        return ("tensor", [(d, val.shape[d].node.expr) for d in dims])

    def _refuse(self, reason: str) -> None:
        self.reason = reason

    # --- at a call ---------------------------------------------------------------

    def bindings(self, args) -> dict:
        """symbol -> real size, read from the arguments."""
        out = {}
        for i, dims in self.tensor_dims.items():
            for d, expr in dims:
                if expr.is_Symbol:
                    out[expr] = int(args[i].shape[d])
        for i, expr in self.number_inputs.items():
            if expr.is_Symbol:
                out[expr] = int(args[i])
        return out

    def padded(self, args, bounds: dict) -> list:
        """The arguments at the bound: tensors zero-padded, size inputs replaced."""
        out = list(args)
        for i, dims in self.tensor_dims.items():
            t = args[i]
            pad = [0] * (2 * t.dim())
            for d, expr in dims:
                pad[2 * (t.dim() - 1 - d) + 1] = int(expr.subs(bounds)) - t.shape[d]
            out[i] = torch.nn.functional.pad(t, pad) if any(pad) else t
        for i, expr in self.number_inputs.items():
            out[i] = int(expr.subs(bounds))
        return out

    def dynamic(self) -> list:
        """(placeholder index, dim) of every dynamic dimension, in the order their real
        sizes are passed."""
        return [(i, d) for i, dims in sorted(self.tensor_dims.items()) for d, _ in dims]

    def dynamic_outputs(self) -> list:
        """(output index, [dim]) of the outputs with dynamic dimensions."""
        return [
            (k, [d for d, _ in p[1]])
            for k, p in enumerate(self.outputs)
            if p is not None and p[0] == "tensor"
        ]

    def size_index(self, symbol) -> int:
        """Which of the runtime sizes (see dynamic()) is `symbol`'s."""
        order = [e for _, dims in sorted(self.tensor_dims.items()) for _, e in dims]
        return order.index(symbol)

    def sizes(self, real: dict) -> list:
        return [int(e.subs(real)) for i, dims in sorted(self.tensor_dims.items()) for _, e in dims]

    def unpadded(self, outs, real: dict) -> list:
        """The outputs cut back to their real sizes (contiguous, as computed)."""
        result = []
        for o, p in zip(outs, self.outputs):
            if p is None:
                result.append(o)
            elif p[0] == "number":
                result.append(int(p[1].subs(real)))
            else:
                cut = o
                for d, expr in p[1]:
                    cut = cut.narrow(d, 0, int(expr.subs(real)))
                result.append(cut if cut.is_contiguous() else cut.contiguous())
        return result
