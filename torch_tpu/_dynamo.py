"""`torch.compile(model, backend="tpu")`.

Dynamo captures a graph; AOTAutograd turns it into functional ATen forward and backward
graphs (decomposing only the ops the lowering table lacks); each graph becomes one
StableHLO module, lowered in C++ by the same table eager mode uses, compiled once
through the shared cache and called from C++ (`_C._Graph`). This module only describes
the graph to `_C`; it does no tensor math.

Warm starts: the graphs AOTAutograd produces are stored in its cache (and in the
artifacts of `aot_compile`, `save_cache_artifacts` and `caching_precompile`) as
`_output_code.TpuOutputCode`, their executables in torch_tpu's disk cache: a process
that finds them there neither traces them nor compiles them.

Shapes: a graph Dynamo traced with symbolic sizes (after a shape change, `dynamic=True`
or `mark_dynamic`) compiles one program per bucket of its sizes, run at the real sizes
(_buckets.py), where every op of it stays exact that way; otherwise one program per
concrete input signature. Either way results are exact.
"""

import concurrent.futures
import functools
import operator
import os
import warnings
from typing import NamedTuple

import torch
from torch import fx
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
from torch.fx.passes.split_module import split_module

from torch_tpu import (
    _C,
    _buckets,
    _fastpath,
    _flex_attention,
    _out_dtype,
    _output_code,
    _restride,
    pallas,
)
from torch_tpu import tpu as _tpu
from torch_tpu._no_compile import forbidden_by_env

_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# Dynamo runs torch.cuda's functions eagerly (torch/ is in its skip list) but would trace
# into torch.tpu's, e.g. the generator functions, which read and write the generator
# through _C and must run when called: torch.tpu's file joins the skip list.
torch._dynamo.trace_rules.add(_tpu.__name__)

# TORCH_TPU_NO_COMPILE=1 forbids Dynamo recompiles as well as XLA compiles.
if forbidden_by_env():
    torch._dynamo.config.error_on_recompile = True

_IGNORED = (torch.device, torch.layout, torch.memory_format)


class Unsupported(NotImplementedError):
    """A graph the compiler cannot turn into one program; it runs op by op instead."""


# backend "tpu"'s options: name -> (type, what it means).
OPTIONS = {
    "bucket_size": (int, "the size a dynamic dimension is rounded up to a multiple of"),
    "max_buckets": (
        int,
        "at most this many buckets per dynamic dimension: past them, a "
        "size runs at the smallest bucket already compiled that holds it",
    ),
    "async_compile": (
        bool,
        "compile the graphs of a trace (forward and backward, the "
        "backward at once rather than at its first call) in background "
        "threads, at the same time; their first call waits",
    ),
}


def check_options(options) -> dict:
    """`options` validated: a ValueError names an unknown key (and the valid ones) or a
    value of the wrong type."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(
            f"backend 'tpu': unknown option(s) {unknown}; valid options are {sorted(OPTIONS)}"
        )
    for name, value in options.items():
        kind, _ = OPTIONS[name]
        if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or value < 1)):
            what = "a positive int" if kind is int else kind.__name__
            raise ValueError(f"backend 'tpu': option {name!r} must be {what}, got {value!r}")
    return options


def tpu_backend(gm: fx.GraphModule, example_inputs, mode=None, options=None):
    """The Dynamo backend registered as "tpu" (entry point `torch_dynamo_backends`).

    Every mode gives the same thing, one executable per graph called from C++:
    "reduce-overhead" (CUDA graphs elsewhere) is accepted and needs nothing more here.
    `options`: see OPTIONS.

    The graphs go through AOTAutograd's cache (see _output_code.py): a warm process
    finds them there instead of tracing, and their programs in torch_tpu's cache. Its
    entry holds forward and backward, so it is written when the backward compiles (at
    the first backward call, or at once with async_compile); the bundled mode that lets
    it hold our graphs stays on for the process, as it must still be on by then.
    """
    if mode is not None and mode not in _MODES:
        raise ValueError(f"backend 'tpu': unknown mode {mode!r}; expected one of {_MODES}")
    options = check_options(options)
    gm = _flex_attention.inline_dense(gm)
    torch._functorch.config.bundled_autograd_cache = True
    # (aot_compile asks for the backward at once itself.)
    ahead = (
        options.get("async_compile", False)
        or torch._functorch.config.force_non_lazy_backward_lowering
    )
    with (
        torch.compiler.config.patch(cache_key_tag=_output_code.cache_key_tag(options)),
        torch._functorch.config.patch(force_non_lazy_backward_lowering=ahead),
    ):
        return aot_autograd(
            # One compiler object each: AOTAutograd wraps the backward one in place.
            fw_compiler=_serializable_compiler(options),
            bw_compiler=_serializable_compiler(options),
            inference_compiler=_serializable_compiler(options),
            decompositions=decompositions(),
            keep_inference_input_mutations=True,
        )(gm, example_inputs)


def _serializable_compiler(options: dict) -> SerializableAOTDispatchCompiler:
    return SerializableAOTDispatchCompiler(
        _output_code.TpuOutputCode, functools.partial(_output_code_for, options=options)
    )


def _output_code_for(gm: fx.GraphModule, example_inputs, options) -> _output_code.TpuOutputCode:
    takes_numbers = any(not isinstance(v, torch.Tensor) for v in example_inputs)
    in_background = options.get("async_compile", False)
    return _output_code.TpuOutputCode(
        gm=gm,
        build=functools.partial(
            _build,
            takes_numbers=takes_numbers,
            in_background=in_background,
            bucket_size=options.get("bucket_size"),
            max_buckets=options.get("max_buckets"),
        ),
        rebuild=functools.partial(program, in_background=in_background),
    )


def _schema_name(op) -> str:
    schema = op._schema
    name = schema.name.split("::", 1)[1]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


@functools.cache
def decompositions() -> dict:
    """Core-ATen decompositions, except for ops with a lowering of their own (one
    lowering is fewer, better-fused StableHLO ops than its decomposition), tpu's fused
    attention as the ops eager mode runs it with, and the transformer fast path's ops
    (_fastpath.py)."""
    table = {
        op: fn
        for op, fn in core_aten_decompositions().items()
        if not isinstance(op, torch._ops.OpOverload) or _schema_name(op) not in _lowered_names()
    }
    aten = torch.ops.aten
    table[aten._scaled_dot_product_fused_attention_overrideable.default] = _fused_attention
    table[aten._scaled_dot_product_fused_attention_overrideable_backward.default] = (
        _fused_attention_backward
    )
    table.update(_fastpath.table())
    return table


def _fused_attention(
    query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, *_, scale=None
):
    """`F.scaled_dot_product_attention` on tpu in a graph (the fused op eager mode runs,
    which DTensor shards): the ATen ops of csrc/aten/fused_attention.cpp's composite."""
    if dropout_p != 0.0:  # the op is only chosen without dropout
        raise RuntimeError(f"tpu fused attention: dropout is not supported (dropout_p={dropout_p})")
    out, lse = torch.ops.tpu._fused_attention(query, key, value, attn_bias, is_causal, scale)
    seed = torch.zeros((), dtype=torch.long, device=query.device)
    return out, lse, None, None, query.size(2), key.size(2), seed, seed.clone(), None


def _fused_attention_backward(
    grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, *rest, scale=None
):
    is_causal = rest[5]  # after cum_seq_q, cum_seq_k, max_q, max_k, dropout_p
    return torch.ops.tpu._fused_attention_backward(
        grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, is_causal, scale
    )


def _build(
    gm: fx.GraphModule,
    takes_numbers: bool,
    in_background: bool = False,
    bucket_size=None,
    max_buckets=None,
):
    """AOTAutograd's graph (forward, backward or inference) as a callable taking the
    inputs as a list (the boxed convention). Only the nodes' fake values are read, not
    example inputs: a graph loaded from a cache has none."""
    if in_background:
        return _Compiling(_build, gm, takes_numbers, False, bucket_size, max_buckets)
    if takes_numbers or _has_symbols(gm):
        return _Specializing(gm, bucket_size, max_buckets)
    _restride.rewrite(gm)
    _out_dtype.rewrite(gm)
    return _lower(gm, _meta_vals(gm))


def _has_symbols(gm: fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return True
            if isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape):
                return True
    return False


def _meta_vals(gm: fx.GraphModule) -> dict:
    return {node: node.meta.get("val") for node in gm.graph.nodes}


_warned: set = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=3)


def _lower(gm: fx.GraphModule, vals: dict, positions=None, split=True):
    """A `_C._Graph` for `gm`. If some op has no lowering (a collective, a custom op),
    the graph is split around those ops: the runs of ops between them become programs
    and they run eagerly in between (a warning naming them; counted in
    torch_tpu.metrics as graph_splits). A graph that still cannot become programs runs
    op by op on the device (a warning naming the reason; counted as graph_fallbacks)."""
    try:
        # AOTAutograd may call the compiler under its fake mode; constants and the C++
        # side work on real tensors.
        with unset_fake_temporarily():
            spec, template = _spec(gm, vals)
            return program((spec, template, positions))
    except NotImplementedError as e:
        # What stops the graph from becoming one program, eager mode can still run.
        # Other errors are bugs and surface.
        if split:
            pieces = _split(gm, vals)
            if pieces is not None:
                return pieces
        reason = str(e).split("\n", 1)[0]
        _warn_once(f"torch_tpu: a compiled graph runs op by op: {reason}")
        _C._count_graph_fallback()
        return _Eager(gm)


def program(recipe: tuple, in_background: bool = False):
    """The callable running one program: `recipe` is (spec, template, positions), the
    graph's description for `_C._Graph`, the numbers it returns in place of tensors and
    the positions of its tensor inputs (None: all tensors, all inputs). The callable keeps
    `recipe` (unless the graph has in-program collectives): a cached compiled graph is
    rebuilt from it (see _output_code.py)."""
    if in_background:
        return _Compiling(program, recipe)
    spec, template, positions = recipe
    graph = _boxed(_C._Graph(spec))
    runner = (
        graph if template is None and positions is None else _Adapted(graph, template, positions)
    )
    # A graph with in-program collectives names its group's size and devices, which a
    # later process may not share: a cache stores its FX graph, described again on load.
    if not any(node[0] == "@collective" for node in spec[2]):
        runner.recipe = recipe
    return runner


@functools.cache
def _lowered_names() -> frozenset:
    return frozenset(_C._graph_lowerings())


def _lowerable(node: fx.Node, vals: dict) -> bool:
    """Whether `node` can be part of a program, as far as can be told before lowering
    (_SpecBuilder.call decides the same way; a lowering may still refuse an application,
    which then makes its piece run op by op)."""
    val = vals.get(node)
    if not isinstance(val, (torch.Tensor, list, tuple)) and val is not None:
        return True  # size arithmetic
    target = node.target
    if target in _STRUCTURED:
        return True
    if target in pallas.GRAPH_CALLS:
        return True
    if target in _collective_ops():
        return _in_program_collective(node, vals) is not None
    if target is _wait_op():
        producer = node.args[0]
        return isinstance(producer, fx.Node) and _in_program_collective(producer, vals) is not None
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return False
    if target is torch.ops.aten.copy_.default and node.args[0].op == "placeholder":
        return True
    return _schema_name(target) in _lowered_names()


def _split(gm: fx.GraphModule, vals: dict):
    """`gm` as a module that runs each maximal run of lowerable nodes as one program and
    every other node eagerly, in the graph's order; None if nothing would be lowered."""
    piece: dict = {}
    current, lowered_run, eager_ops = -1, False, []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            piece[node] = piece[node.args[0]]  # with the node whose result it picks
            continue
        ok = _lowerable(node, vals)
        if not ok:
            effectful = node.target is torch.ops.higher_order.with_effects
            eager_ops.append(str(node.args[1]) if effectful else str(node.target))
        if ok != lowered_run or not ok or current < 0:
            current += 1
            lowered_run = ok
        piece[node] = current
    lowered = {piece[n] for n in piece if n.target is not operator.getitem and _lowerable(n, vals)}
    if not eager_ops or not lowered:
        return None
    # split_module copies node.meta; fake values of a specialised graph are only in `vals`.
    saved = {n: n.meta.get("val") for n in gm.graph.nodes}
    for n in gm.graph.nodes:
        n.meta["val"] = vals.get(n)
    try:
        parent = split_module(
            gm, None, lambda n: piece[n], keep_original_order=True, tuple_return=True
        )
    finally:
        for n, v in saved.items():
            n.meta["val"] = v
    for node in parent.graph.nodes:
        if node.op != "call_module":
            continue
        sub = getattr(parent, node.target)
        index = int(node.target.rsplit("_", 1)[1])
        if index in lowered:
            sub_vals = _meta_vals(sub)
            inputs = [sub_vals.get(n) for n in sub.graph.nodes if n.op == "placeholder"]
            tensors = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]
            program = _lower(
                sub, sub_vals, None if len(tensors) == len(inputs) else tensors, split=False
            )
            setattr(parent, node.target, _Piece(program))
    collectives = any("_c10d_functional" in op for op in eager_ops)
    _warn_once(
        "torch_tpu: a compiled graph is split into programs around ops without a "
        f"tpu lowering, which run eagerly: {', '.join(sorted(set(eager_ops)))}"
        + (
            " (functional collectives run inside the program only on groups served by "
            "tpu_dist's in-program transport)"
            if collectives
            else ""
        )
    )
    _C._count_graph_split()
    # The parent takes every FX input, numbers too (as a specialising caller passes them).
    return _Eager(parent)


class _Piece(torch.nn.Module):
    """A lowered piece of a split graph, called by the parent graph with positional
    tensors; returns a tuple (split_module's tuple_return convention)."""

    def __init__(self, program):
        super().__init__()
        self.program = program

    def forward(self, *args):
        return tuple(self.program(list(args)))


def _memory_order(t: torch.Tensor):
    """The order of `t`'s dimensions in memory, outermost first, when `t` is a
    permutation of a dense buffer other than row-major (`w.t()` of a contiguous `w`, as
    serving keeps its linear weights): the graph takes such an input as laid out, no copy
    per call, and XLA reads the transpose into its consumer. None otherwise."""
    sizes, strides = list(t.shape), list(t.stride())
    if t.dim() < 2 or not all(type(x) is int for x in sizes + strides) or min(sizes) < 2:
        return None
    order = sorted(range(t.dim()), key=lambda d: -strides[d])
    expected = 1
    for d in reversed(order):
        if strides[d] != expected:
            return None
        expected *= sizes[d]
    return None if order == sorted(order) else order


class GraphSpec(NamedTuple):
    """The description of a graph `_C._Graph` takes, field by field as
    csrc/compile/graph.h documents them (C++ reads it as a plain tuple, in this order)."""

    inputs: list  # [(dtype, shape[, order])]: placeholder i is value i (_memory_order)
    values: list  # [(dtype, shape) or None]: the type of every value id
    nodes: list  # [(schema name, args, [out value ids])]
    outputs: list  # [value id, or -1 for None]
    mutations: list  # [(input index, value id)]: inputs the graph writes
    constants: list  # [(value id, raw little-endian bytes)]: tensor constants


def _spec(gm: fx.GraphModule, vals: dict):
    """The description `_C._Graph` takes (see csrc/compile/graph.h), and where the graph
    returns constants rather than tensors (None if it returns only tensors)."""
    return _SpecBuilder(vals).build(gm)


class _SpecBuilder:
    """Walks an FX graph in order, numbering every tensor value."""

    def __init__(self, vals: dict, nested: bool = False):
        self.vals = vals  # fx node -> its (fake) value
        self.nested = nested  # a control-flow body
        self.refs: dict = {}  # fx node -> value id, list of ids, or a _Const
        self.values: list = []  # type of each value id
        self.inputs: list = []
        self.nodes: list = []
        self.mutations: list = []
        self.constants: list = []  # (value id, raw little-endian bytes) of tensor constants

    def build(self, gm: fx.GraphModule):
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node)
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                outs, template = self.output(node)
                spec = GraphSpec(
                    self.inputs, self.values, self.nodes, outs, self.mutations, self.constants
                )
                return spec, template
            if node.op == "get_attr":
                self.get_attr(gm, node)
            elif node.op == "call_function":
                self.call(node)
            else:
                raise Unsupported(f"an FX {node.op} node")
        raise AssertionError("graph without an output node")

    def new_value(self, val) -> int:
        if val is None:
            self.values.append(None)
        else:
            if not isinstance(val, torch.Tensor):
                raise Unsupported(f"a graph value of type {type(val).__name__}")
            self.values.append((val.dtype, [int(s) for s in val.shape]))
        return len(self.values) - 1

    def encode(self, a):
        if isinstance(a, fx.Node):
            r = self.refs[a]
            if isinstance(r, _Const):
                if r.opaque:
                    raise Unsupported(f"an argument of type {type(r.value).__name__}")
                return r.value
            if isinstance(r, list):
                return [(i,) if i >= 0 else None for i in r]
            return (r,)
        if isinstance(a, (list, tuple)):
            return [self.encode(x) for x in a]
        if isinstance(a, _IGNORED):
            return None
        if a is None or isinstance(a, (bool, int, float, str, torch.dtype)):
            return a
        raise Unsupported(f"an argument of type {type(a).__name__}")

    def placeholder(self, node: fx.Node) -> None:
        # Inputs are numbered first: value i is placeholder i.
        val = self.vals[node]
        if not isinstance(val, torch.Tensor):
            self.refs[node] = _Const(val, opaque_ok=True)
            return
        self.refs[node] = self.new_value(val)
        order = None if self.nested else _memory_order(val)
        self.inputs.append(self.values[-1] if order is None else (*self.values[-1], order))

    def output(self, node: fx.Node):
        """The output value ids (-1 where the graph returns None or a number), and the
        numbers it returns in place of tensors (None if it returns only tensors)."""
        outs, template = [], []
        results = node.args[0]
        for o in (results,) if isinstance(results, fx.Node) else results:
            r = self.refs[o] if isinstance(o, fx.Node) else _Const(o)
            if isinstance(r, int):
                outs.append(r)
                template.append(None)
            elif isinstance(r, _Const):
                outs.append(-1)
                template.append(None if r.value is None else (r.value,))
            else:
                raise Unsupported("a graph output that is a list")
        return outs, None if all(t is None for t in template) else template

    def get_attr(self, gm: fx.GraphModule, node: fx.Node) -> None:
        const = getattr(gm, node.target)
        if isinstance(const, fx.GraphModule):  # a control-flow body
            self.refs[node] = _Body(const)
            return
        if not isinstance(const, torch.Tensor):
            raise Unsupported(f"a graph attribute of type {type(const).__name__}")
        self.refs[node] = self.new_value(const)
        data = const.detach().cpu().contiguous()
        self.constants.append((self.refs[node], data.view(-1).view(torch.uint8).numpy().tobytes()))

    def call(self, node: fx.Node) -> None:
        val = self.vals.get(node)
        if not isinstance(val, (torch.Tensor, list, tuple)) and val is not None:
            self.refs[node] = _Const(val)  # size arithmetic: known once shapes are
            return
        target = node.target
        if target is operator.getitem:
            self.refs[node] = self.refs[node.args[0]][node.args[1]]
            return
        if target in _STRUCTURED:
            self.structured(node, val)
            return
        if target in _collective_ops() or target is _wait_op():
            self.collective(node, val)
            return
        if target in pallas.GRAPH_CALLS:
            self.stablehlo_call(node, val)
            return
        if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
            raise Unsupported(f"{target} has no tpu lowering")
        if target is torch.ops.aten.copy_.default and node.args[0].op == "placeholder":
            # A mutated input (keep_inference_input_mutations): the graph computes the new
            # value, the call writes it into the input.
            dst = self.refs[node.args[0]]
            new = self.new_value(self.vals[node.args[0]])
            self.nodes.append(("copy", [(dst,), self.encode(node.args[1]), False], [new]))
            self.mutations.append((dst, new))
            self.refs[node] = new
            return
        args = _schema_args(target, node)
        if isinstance(val, (list, tuple)):
            ids = [self.new_value(v) for v in val]
            self.refs[node] = ids
        else:
            ids = [self.new_value(val)]
            self.refs[node] = ids[0]
        self.nodes.append((_schema_name(target), [self.encode(a) for a in args], ids))

    def collective(self, node: fx.Node, val) -> None:
        """A functional collective on a group of tpu_dist's in-program transport: a
        "@collective" node (csrc/compile/graph.h); its wait_tensor is the value itself
        (the program's collective is complete when the program is)."""
        producer = node.args[0]
        if node.target is _wait_op():
            if not (
                isinstance(producer, fx.Node)
                and _in_program_collective(producer, self.vals) is not None
            ):
                raise Unsupported(f"{node.target} of a collective that runs eagerly")
            self.refs[node] = self.refs[producer]
            return
        args = _in_program_collective(node, self.vals)
        if args is None:
            raise Unsupported(
                f"{node.target} on a group that tpu_dist's in-program transport does not serve"
            )
        if self.nested:
            raise Unsupported(f"{node.target} inside a control-flow body")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"{node.target} with a result that is not a tensor")
        self.refs[node] = self.new_value(val)
        self.nodes.append(("@collective", [self.encode(producer), *args], [self.refs[node]]))

    def stablehlo_call(self, node: fx.Node, val) -> None:
        """A jax_op (torch.tpu.pallas) or its VJP: a "@call_stablehlo" node calling the
        JAX export's functions inside the graph's program."""
        args = _schema_args(node.target, node)
        values = [
            [self.vals[n] for n in a]
            if isinstance(a, (list, tuple))
            else (self.vals[a] if isinstance(a, fx.Node) else a)
            for a in args
        ]
        program = pallas.GRAPH_CALLS[node.target](values)
        tensors = [
            n
            for a in args
            for n in (a if isinstance(a, (list, tuple)) else [a])
            if isinstance(n, fx.Node)
        ]
        results = val if isinstance(val, (list, tuple)) else [val]
        ids = [self.new_value(v) for v in results]
        self.refs[node] = ids if isinstance(val, (list, tuple)) else ids[0]
        kept = [self.encode(tensors[i]) for i in program.kept]
        call = [program.functions, program.callee, kept]
        self.nodes.append(("@call_stablehlo", call, ids))

    def structured(self, node: fx.Node, val) -> None:
        """A control-flow op or the optimization barrier: a "@name" node whose bodies are
        nested specs (csrc/compile/control_flow.h)."""
        name = _STRUCTURED[node.target]
        if name == "optimization_barrier":
            args = [self.encode(node.args[0])]
        elif name == "cond":
            pred, true_fn, false_fn, operands = node.args
            ins = self.types(operands)
            args = [
                self.encode(pred),
                self.body(true_fn, ins),
                self.body(false_fn, ins),
                self.tensors(operands),
            ]
        elif name == "while_loop":
            cond_fn, body_fn, carried, extra = node.args
            ins = self.types(carried, numbers=False) + self.types(extra)
            args = [
                self.body(cond_fn, ins),
                self.body(body_fn, ins),
                self.tensors(carried),
                self.tensors(extra),
            ]
        else:
            combine_fn, init, xs, extra = node.args
            steps = [(dtype, shape[1:]) for dtype, shape in self.types(xs, numbers=False)]
            ins = self.types(init, numbers=False) + steps + self.types(extra)
            args = [
                self.body(combine_fn, ins),
                self.tensors(init),
                self.tensors(xs),
                self.tensors(extra),
            ]
        if not isinstance(val, (list, tuple)) or not all(isinstance(v, torch.Tensor) for v in val):
            raise Unsupported(f"{name} with results that are not tensors")
        ids = [self.new_value(v) for v in val]
        self.refs[node] = ids
        self.nodes.append(("@" + name, args, ids))

    def types(self, nodes, numbers=True) -> list:
        """(dtype, shape) of each control-flow operand, or its value if it is a number
        (a size, part of the body's program as in any graph)."""
        out = []
        for n in nodes:
            v = self.vals.get(n) if isinstance(n, fx.Node) else n
            if isinstance(v, torch.Tensor):
                out.append((v.dtype, list(v.shape)))
            elif numbers and isinstance(v, (bool, int, float)):
                out.append(v)
            else:
                raise Unsupported(f"a control-flow operand of type {type(v).__name__}")
        return out

    def tensors(self, nodes) -> list:
        """The tensor operands of a control-flow op (its numbers are constants in the body)."""
        return [
            self.encode(n)
            for n in nodes
            if isinstance(self.vals.get(n) if isinstance(n, fx.Node) else n, torch.Tensor)
        ]

    def body(self, node: fx.Node, inputs: list):
        """The nested spec of a control-flow body (a get_attr of a GraphModule) called
        with tensors of `inputs` (dtype, shape). A body traced with symbolic sizes is
        re-run on fake tensors of these sizes, as a specialised graph is."""
        ref = self.refs.get(node) if isinstance(node, fx.Node) else None
        if not isinstance(ref, _Body):
            raise Unsupported("a control-flow body that is not a graph")
        gm = ref.gm
        vals = _concrete_vals(gm, inputs) if _has_symbols(gm) else _meta_vals(gm)
        spec, template = _SpecBuilder(vals, nested=True).build(gm)
        if template is not None or any(o < 0 for o in spec.outputs):
            raise Unsupported("a control-flow body that returns something other than tensors")
        return spec


def _concrete_vals(gm: fx.GraphModule, inputs: list) -> dict:
    """Every node's fake value for `gm` run on fake tensors of `inputs` ((dtype, shape),
    or a number)."""
    tensors = [i for i in inputs if isinstance(i, tuple)]
    if any(isinstance(s, torch.SymInt) for _, shape in tensors for s in shape):
        raise Unsupported("a control-flow body with symbolic sizes")
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    interp = _Interpreter(gm)
    with mode:
        interp.run(*[torch.empty(i[1], dtype=i[0]) if isinstance(i, tuple) else i for i in inputs])
    return dict(interp.vals)


class _Body:
    """A control-flow body in a graph (the GraphModule a get_attr node names)."""

    def __init__(self, gm: fx.GraphModule):
        self.gm = gm


def _structured_ops() -> dict:
    """The non-ATen graph ops lowered as "@name" nodes, by their FX target."""
    hop = torch.ops.higher_order
    ops = {
        getattr(hop, name): name for name in ("cond", "while_loop", "scan") if hasattr(hop, name)
    }
    from torch_tpu import ops as tpu_ops  # registers torch.ops.tpu

    ops[tpu_ops.barrier_op] = "optimization_barrier"
    return ops


_STRUCTURED = _structured_ops()


@functools.cache
def _collective_ops() -> dict:
    """The functional collectives a graph can run inside its program, by FX target."""
    ops = getattr(torch.ops, "_c10d_functional", None)
    names = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single")
    try:
        return {getattr(ops, name).default: name for name in names}
    except (AttributeError, RuntimeError):  # torch built without distributed
        return {}


@functools.cache
def _wait_op():
    try:
        return torch.ops._c10d_functional.wait_tensor.default
    except (AttributeError, RuntimeError):
        return None


_REDUCE_OPS = frozenset(("sum", "avg", "product", "min", "max", "band", "bor", "bxor"))


def _in_program_collective(node: fx.Node, vals: dict):
    """The arguments of the "@collective" spec node for `node` (kind, reduce op or None,
    group size, group name, device of each rank) when it is a functional collective the
    program can run: its group is served by tpu_dist's in-program transport (resolved on
    this thread, as the collective resolves it), and a gather, scatter or exchange splits
    dimension 0 evenly. None otherwise: the collective runs eagerly between programs."""
    kind = _collective_ops().get(node.target)
    if kind is None:
        return None
    args = _schema_args(node.target, node)
    x, group = args[0], args[-1]
    reduce = args[1] if kind in ("all_reduce", "reduce_scatter_tensor") else None
    val = vals.get(x) if isinstance(x, fx.Node) else None
    if not isinstance(val, torch.Tensor) or not isinstance(group, str):
        return None
    if reduce is not None and reduce not in _REDUCE_OPS:
        return None
    devices = list(_C._in_program_devices(group))
    n = len(devices)
    if n < 2:
        return None
    if kind != "all_reduce":
        if val.dim() == 0:
            return None
        if kind in ("all_gather_into_tensor", "reduce_scatter_tensor") and args[-2] != n:
            return None
        if kind != "all_gather_into_tensor" and val.shape[0] % n != 0:
            return None
        if kind == "all_to_all_single":
            even = val.shape[0] // n
            for splits in (args[1], args[2]):
                if splits is not None and (
                    len(splits) not in (0, n)
                    or any(not isinstance(s, int) or s != even for s in splits)
                ):
                    return None
    return [kind, reduce, n, group, devices]


class _Const:
    """A plain number in the graph (a size, a flag): part of the program. An input of
    another kind (the DeviceMesh a tensor-parallel graph passes through) is `opaque`: the
    graph may return it, but no op may take it."""

    def __init__(self, value, opaque_ok=False):
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unsupported("a symbolic size")
        self.opaque = value is not None and not isinstance(value, (bool, int, float))
        if self.opaque and not opaque_ok:
            raise Unsupported(f"a graph value of type {type(value).__name__}")
        self.value = value


def _schema_args(op, node: fx.Node) -> list:
    out = []
    for i, arg in enumerate(op._schema.arguments):
        if i < len(node.args):
            out.append(node.args[i])
        elif arg.name in node.kwargs:
            out.append(node.kwargs[arg.name])
        elif arg.has_default_value():
            out.append(arg.default_value)
        else:
            raise Unsupported(f"{op}: argument {arg.name} is missing")
    return out


def _boxed(fn):
    """Marks `fn` as taking its inputs as one list, which it empties (AOTAutograd's boxed
    convention). An instance attribute: Dynamo's wrappers copy `__dict__`."""
    fn._boxed_call = True
    return fn


class _Eager:
    """A graph run op by op on the device: what a graph with an unlowered op falls back to."""

    def __init__(self, gm: fx.GraphModule):
        self.gm = gm
        _boxed(self)

    def __call__(self, args):
        inputs = list(args)
        args.clear()
        return self.gm(*inputs)


class _Compiling:
    """A callable being made in a background thread (option async_compile): `_C._Graph`
    releases the GIL while XLA compiles, so the graphs of one trace compile at the same
    time. The first call waits for it; so does reading its recipe."""

    _pool = None

    def __init__(self, make, *args):
        if _Compiling._pool is None:
            _Compiling._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=os.cpu_count() or 1, thread_name_prefix="torch_tpu_compile"
            )
        self.future = _Compiling._pool.submit(make, *args)
        _boxed(self)

    def __call__(self, args):
        return self.future.result()(args)

    @property
    def recipe(self):
        return getattr(self.future.result(), "recipe", None)


class _Adapted:
    """A `_C._Graph` whose FX graph also takes or returns plain numbers."""

    def __init__(self, graph, template, positions):
        self.graph, self.template, self.positions = graph, template, positions
        _boxed(self)

    def __call__(self, args):
        tensors = [args[i] for i in self.positions] if self.positions is not None else list(args)
        args.clear()
        outs = self.graph(tensors)
        if self.template is None:
            return outs
        return [o if t is None else t[0] for o, t in zip(outs, self.template)]


class _Interpreter(fx.Interpreter):
    """Runs a graph on fake tensors of concrete sizes, recording every node's value."""

    def __init__(self, gm):
        super().__init__(gm)
        self.vals = {}

    def run_node(self, n):
        result = super().run_node(n)
        self.vals[n] = result
        return result


class _Specializing:
    """A graph with symbolic sizes: one program per bucket of its sizes where every op
    stays exact at the bound (_buckets.Plan), else one per concrete input signature."""

    def __init__(self, gm: fx.GraphModule, bucket_size=None, max_buckets=None):
        self.gm = gm
        self.programs = {}
        self.multiple = bucket_size or _buckets.setting()
        self.max_buckets = max_buckets
        self.bounds = {}  # symbol -> the bounds compiled for it
        self.plan = None
        if self.multiple != 0 and _has_symbols(gm):
            self.bucket_gm = _buckets.without_split_views(gm)
            plan = _buckets.Plan(self.bucket_gm)
            if plan.reason is None:
                self.plan = plan
            else:
                _warn_once(
                    f"torch_tpu: a compiled graph compiles once per input shape, not "
                    f"per bucket: {plan.reason}"
                )
        _boxed(self)

    def __call__(self, args):
        if self.plan is not None:
            return self._bucketed(args)
        key = tuple(
            (a.dtype, tuple(a.shape), a.device.type) if isinstance(a, torch.Tensor) else a
            for a in args
        )
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._specialize(args)
        return program(args)

    def _bucketed(self, args):
        real = self.plan.bindings(args)
        bounds = {sym: self._bound(sym, n) for sym, n in real.items()}
        padded = self.plan.padded(args, bounds)
        key = ("bucket",) + tuple(
            (a.dtype, tuple(a.shape), a.device.type) if isinstance(a, torch.Tensor) else a
            for a in padded
        )
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._bucket_program(padded)
        if program is None:  # the bound's program could not be built: per shape from now
            return self(args)
        args.clear()
        graph, template, positions = program
        outs = graph([padded[i] for i in positions] + self.plan.sizes(real))
        if template is not None:
            outs = [o if t is None else t[0] for o, t in zip(outs, template)]
        return self.plan.unpadded(outs, real)

    def _bound(self, sym, n: int) -> int:
        """The bound size `n` of `sym` runs at: its bucket, or once `max_buckets` bounds
        exist for `sym`, the smallest of them that holds `n` (a larger size still
        compiles its own bucket, with a warning)."""
        bound = _buckets.bucket(n, self.multiple)
        seen = self.bounds.setdefault(sym, set())
        if self.max_buckets and bound not in seen and len(seen) >= self.max_buckets:
            holding = [b for b in seen if b >= n]
            if holding:
                bound = min(holding)
            else:
                _warn_once(
                    f"torch_tpu: a compiled graph needs more than max_buckets="
                    f"{self.max_buckets} buckets for a dimension (size {n})"
                )
        seen.add(bound)
        return bound

    def _bucket_program(self, padded):
        """(graph, template, tensor positions) of the program at the bound, or None (and
        no more bucketing) if it cannot be one program."""
        vals = self._fake_vals(padded, self.bucket_gm)
        positions = [i for i, a in enumerate(padded) if isinstance(a, torch.Tensor)]
        dynamic = [(positions.index(i), d) for i, d in self.plan.dynamic()]
        try:
            with unset_fake_temporarily():
                builder = _SpecBuilder(vals)
                spec, template = builder.build(self.bucket_gm)
                marks = [
                    (builder.refs[node], d, self.plan.size_index(sym))
                    for node, d, sym in self.plan.marks
                ]
                graph = _boxed(_C._Graph((*spec, dynamic, self.plan.dynamic_outputs(), marks)))
        except (NotImplementedError, RuntimeError) as e:
            # No lowering for an op, or XLA refusing a dynamic dimension somewhere.
            reason = str(e).split("\n", 1)[0]
            _warn_once(
                f"torch_tpu: a compiled graph compiles once per input shape, not per "
                f"bucket: {reason}"
            )
            self.plan = None
            return None
        return graph, template, positions

    def _fake_vals(self, args, gm=None) -> dict:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode:
            fake = [
                mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a
                for a in args
            ]
        interp = _Interpreter(gm if gm is not None else self.gm)
        with mode:
            interp.run(*fake)
        return dict(interp.vals)

    def _specialize(self, args):
        vals = self._fake_vals(args)
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        return _lower(self.gm, vals, positions)
