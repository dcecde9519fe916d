"""Bounded dynamic shapes in compiled graphs: one program per bucket, not per size.

A graph Dynamo traced with symbolic sizes (`dynamic=True`, `mark_dynamic`, or after a
shape change) is compiled with each symbolic size rounded up to its bucket (the bound)
and run at its real size: its inputs are padded to the bound, every dynamic dimension is
marked with its real size inside the program (`stablehlo.set_dimension_size`, see
csrc/compile/graph.h), XLA keeps the padding out of reductions, dots, softmax and
sorts, and the outputs are cut back to their real sizes. Results are the exact-shape
results.

Only graphs whose every op is known to stay exact this way are bucketed (`plan()`
decides, op by op); any other graph keeps one program per concrete shape, and a one-line
warning says which op stopped it and why.

Buckets: the next power of two (at least 8) up to 1,024, then multiples of 128
(`TORCH_TPU_SHAPE_BUCKETS`: "off", or an integer to round up to a multiple of; backend
option `bucket_size` likewise).
"""

from __future__ import annotations

import operator
import os

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import free_symbols

aten = torch.ops.aten

_MIN_BUCKET = 8
_POW2_UP_TO = 1024
_ABOVE_MULTIPLE = 128


def setting():
    """TORCH_TPU_SHAPE_BUCKETS: None (the default rule), 0 (off) or a multiple."""
    raw = os.environ.get("TORCH_TPU_SHAPE_BUCKETS", "").strip().lower()
    if raw in ("", "default", "pow2"):
        return None
    if raw in ("off", "0", "none"):
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 1:
        raise ValueError(f"TORCH_TPU_SHAPE_BUCKETS={raw!r}: expected 'off' or a positive "
                         "integer (sizes round up to a multiple of it)")
    return value


def bucket(n: int, multiple=None) -> int:
    """The bound a size `n` compiles at."""
    if multiple:
        return -(-n // multiple) * multiple
    if n <= _POW2_UP_TO:
        b = _MIN_BUCKET
        while b < n:
            b *= 2
        return b
    return -(-n // _ABOVE_MULTIPLE) * _ABOVE_MULTIPLE


# --- which graphs stay exact -------------------------------------------------------

def _dynamic_dims(val) -> list:
    if not isinstance(val, torch.Tensor):
        return []
    return [d for d, s in enumerate(val.shape)
            if isinstance(s, torch.SymInt) and free_symbols(s)]


def _is_symbolic(x) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(free_symbols(x))


# Ops that move or reinterpret elements without computing across them; sizes given to
# them may be symbolic (they compile at the bound, which is consistent).
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default,
          aten.expand.default, aten.permute.default, aten.transpose.int, aten.t.default,
          aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
          aten.clone.default, aten.alias.default, aten.detach.default,
          aten._to_copy.default}
_SIZE_ARGS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default,
              aten.expand.default}
# Contractions and reductions XLA masks: exact over dynamic dimensions.
_MASKED = {aten.mm.default, aten.bmm.default, aten.addmm.default,
           aten.sum.dim_IntList, aten.sum.default, aten.amax.default, aten.amin.default,
           aten._softmax.default, aten._log_softmax.default,
           aten._softmax_backward_data.default, aten._log_softmax_backward_data.default}
# Exact when the dimensions they compute across (by count) are static.
_STATIC_REDUCED = {aten.mean.dim, aten.native_layer_norm.default,
                   aten.native_layer_norm_backward.default}


# Exact along a static dimension: op -> position of its `dim` argument.
_ALONG_DIM = {aten.slice.Tensor: 1, aten.select.int: 1, aten.cat.default: 1,
              aten.split.Tensor: 2, aten.split_with_sizes.default: 2}


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
                value = int(expr.subs({x: _PRIMES[k % len(_PRIMES)]
                                       for k, x in enumerate(sorted(expr.free_symbols, key=str))}))
                dims.append((value, True))
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


_PRIMES = (1000003, 1000033, 1000037, 1000039, 1000081, 1000099)


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
    if not isinstance(target, torch._ops.OpOverload):
        if target in (operator.getitem,) or not isinstance(val, torch.Tensor):
            return None  # tuple access, size arithmetic
        return f"{getattr(target, '__name__', target)} is not an ATen op"
    if not isinstance(val, (torch.Tensor, list, tuple)):
        return None  # size arithmetic (sym_size): its users are checked
    name = str(target)
    if torch.Tag.nondeterministic_seeded in target.tags:
        return f"{name} draws random numbers (a bucket would draw more)"
    flat = [a for a in torch.utils._pytree.tree_leaves((node.args, node.kwargs))]
    symbolic_args = [a for a in flat if _is_symbolic(a) or (
        isinstance(a, fx.Node) and _is_symbolic(a.meta.get("val")))]
    inputs = [a.meta.get("val") for a in flat if isinstance(a, fx.Node)]
    outs = val if isinstance(val, (list, tuple)) else [val]
    dynamic = any(_dynamic_dims(v) for v in [*inputs, *outs])
    if symbolic_args and target not in _SIZE_ARGS and target is not aten.sym_size.int:
        return f"{name} takes a dynamic size as a value"
    if not dynamic:
        return None
    if target in _SIZE_ARGS and _splits_merged_dim(inputs[0], val):
        return f"{name} splits a dimension that merges a dynamic one (XLA cannot tell how)"
    if target in _VIEWS or target in _MASKED or torch.Tag.pointwise in target.tags:
        return None
    if target in _STATIC_REDUCED:
        first = inputs[0]
        if set(_reduced_dims(node, first)) & set(_dynamic_dims(first)):
            return f"{name} divides by the size of a dynamic dimension"
        return None
    if target in _ALONG_DIM:
        first = inputs[0]
        position = _ALONG_DIM[target]
        dim = node.args[position] if len(node.args) > position else node.kwargs.get("dim", 0)
        if dim % max(first.dim(), 1) not in _dynamic_dims(first):
            return None
        return f"{name} along a dynamic dimension"
    return f"{name} is not known to stay exact when padded"


class Plan:
    """How a graph's symbolic sizes are bound at a call: `tensor_dims[i]` lists the
    (dim, symbol) of placeholder i's dynamic dimensions, `number_inputs[i]` the symbol a
    size input stands for."""

    def __init__(self, gm: fx.GraphModule):
        self.tensor_dims: dict = {}
        self.number_inputs: dict = {}
        self.outputs: list = []
        self.reason = None
        self._analyze(gm)

    def _analyze(self, gm: fx.GraphModule) -> None:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                if _is_symbolic(val):
                    expr = val.node.expr
                    if not expr.is_Symbol:
                        return self._refuse(f"a size input is the expression {expr}")
                    self.number_inputs[i] = expr
                continue
            if not isinstance(val, torch.Tensor):
                if _is_symbolic(val):
                    return self._refuse(f"an input of type {type(val).__name__}")
                continue
            dims = []
            for d in _dynamic_dims(val):
                expr = val.shape[d].node.expr
                if not expr.is_Symbol:
                    return self._refuse(f"input {i} has the size expression {expr}")
                dims.append((d, expr))
            if dims:
                self.tensor_dims[i] = dims
        if not self.tensor_dims:
            return self._refuse("no input has a dynamic dimension")
        known = {s for dims in self.tensor_dims.values() for _, s in dims}
        if set(self.number_inputs.values()) - known:
            return self._refuse("a size input is no tensor's size")
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is aten.copy_.default and \
                    node.args[0].op == "placeholder" and _dynamic_dims(node.args[0].meta.get("val")):
                return self._refuse("the graph writes into an input of dynamic size")
            why = _why_not(node)
            if why is not None:
                return self._refuse(why)
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
            for d, sym in dims:
                out[sym] = int(args[i].shape[d])
        for i, sym in self.number_inputs.items():
            out[sym] = int(args[i])
        return out

    def padded(self, args, bounds: dict) -> list:
        """The arguments at the bound: tensors zero-padded, size inputs replaced."""
        out = list(args)
        for i, dims in self.tensor_dims.items():
            t = args[i]
            pad = [0] * (2 * t.dim())
            for d, sym in dims:
                pad[2 * (t.dim() - 1 - d) + 1] = bounds[sym] - t.shape[d]
            out[i] = torch.nn.functional.pad(t, pad) if any(pad) else t
        for i, sym in self.number_inputs.items():
            out[i] = bounds[sym]
        return out

    def dynamic(self) -> list:
        """(placeholder index, dim) of every dynamic dimension, in the order their real
        sizes are passed."""
        return [(i, d) for i, dims in sorted(self.tensor_dims.items()) for d, _ in dims]

    def dynamic_outputs(self) -> list:
        """(output index, [dim]) of the outputs with dynamic dimensions."""
        return [(k, [d for d, _ in p[1]]) for k, p in enumerate(self.outputs)
                if p is not None and p[0] == "tensor"]

    def sizes(self, real: dict) -> list:
        return [real[sym] for i, dims in sorted(self.tensor_dims.items()) for _, sym in dims]

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
