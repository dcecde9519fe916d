"""`torch.tpu.pallas`: JAX functions, Pallas kernels included, as PyTorch ops on tpu.

    @torch.tpu.pallas.jax_op("mylib::scaled_sin")
    def scaled_sin(x: jax.Array, y: jax.Array, scale: float) -> jax.Array:
        return jnp.sin(x) * y * scale

    out = scaled_sin(a, b, 2.0)          # a, b: tpu tensors; eager or inside torch.compile

The function is exported with `jax.export` for the engine's platform at the inputs' shapes
and dtypes (and the values of its non-array arguments), once per such signature. Its
StableHLO functions (made private, symbols prefixed, locations dropped, printed in
generic form so that the engine's parser reads them whatever JAX version printed them)
are called from a program of ours: one program per call in eager mode
(`_C._call_stablehlo`), part of the recorded group in fused mode. Gradients come from the
export's own VJP (`Exported.vjp()`), itself such an op. A Pallas kernel runs wherever
Pallas can lower it; on XLA:CPU that is `interpret=True`.

JAX is an optional dependency: `pip install torch_tpu[jax]`.
"""

from __future__ import annotations

import hashlib
import inspect
import typing
from typing import Callable, Sequence

import torch

from torch_tpu import _C

__all__ = ["jax_op"]

_EXTRA = "pip install torch_tpu[jax]"

# Engine platform (PJRT's platform name) -> jax.export's platform name.
_PLATFORMS = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda", "rocm": "rocm", "tpu": "tpu"}

# Argument annotations other than arrays: static arguments, part of the schema.
_STATIC_TYPES = {int: "int", float: "float", bool: "bool"}


def _jax():
    try:
        import jax
        import jax.export  # noqa: F401
    except ImportError as e:
        raise ModuleNotFoundError(
            f"torch.tpu.pallas.jax_op needs JAX, which is not installed: {_EXTRA}"
        ) from e
    return jax


def _is_array_annotation(annotation) -> bool:
    jax = _jax()
    return annotation in (jax.Array, "jax.Array", "Array") or annotation is torch.Tensor


def _signature(name: str, fn: Callable) -> tuple[list, list, int | None, str]:
    """(array parameter names, static parameters [(name, schema type)], number of results
    or None for one array, the op's schema)."""
    sig = inspect.signature(inspect.unwrap(fn), eval_str=True)
    arrays, statics, parts = [], [], []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"jax_op {name}: *args and **kwargs are not supported")
        if _is_array_annotation(p.annotation):
            if p.default is not p.empty:
                raise ValueError(f"jax_op {name}: array argument {p.name!r} cannot have a default")
            arrays.append(p.name)
            parts.append(f"Tensor {p.name}")
        elif p.annotation in _STATIC_TYPES:
            kind = _STATIC_TYPES[p.annotation]
            default = "" if p.default is p.empty else f"={p.default!r}"
            statics.append((p.name, kind))
            parts.append(f"{kind} {p.name}{default}")
        else:
            raise ValueError(
                f"jax_op {name}: annotate argument {p.name!r} as jax.Array (a tensor) or as "
                f"int, float or bool (a static value), got {p.annotation!r}"
            )
    if not arrays:
        raise ValueError(f"jax_op {name}: the function takes no jax.Array argument")
    ret = sig.return_annotation
    if _is_array_annotation(ret):
        n_out, returns = None, "Tensor"
    elif typing.get_origin(ret) is tuple and all(
        _is_array_annotation(a) for a in typing.get_args(ret)
    ):
        n_out = len(typing.get_args(ret))
        if n_out == 0 or Ellipsis in typing.get_args(ret):
            raise ValueError(f"jax_op {name}: return a fixed number of arrays")
        returns = "(" + ", ".join(["Tensor"] * n_out) + ")"
    else:
        raise ValueError(
            f"jax_op {name}: annotate the result as jax.Array or tuple[jax.Array, ...], got {ret!r}"
        )
    return arrays, statics, n_out, f"({', '.join(parts)}) -> {returns}"


def _jax_dtype(dtype: torch.dtype):
    import jax.numpy as jnp

    table = {
        torch.float32: jnp.float32,
        torch.float64: jnp.float64,
        torch.float16: jnp.float16,
        torch.bfloat16: jnp.bfloat16,
        torch.int8: jnp.int8,
        torch.int16: jnp.int16,
        torch.int32: jnp.int32,
        torch.int64: jnp.int64,
        torch.uint8: jnp.uint8,
        torch.bool: jnp.bool_,
        torch.complex64: jnp.complex64,
    }
    if dtype not in table:
        raise TypeError(f"jax_op: tensors of dtype {dtype} cannot be passed to JAX")
    return table[dtype]


def _torch_dtype(dtype) -> torch.dtype:
    import numpy as np

    if str(dtype) == "bfloat16":
        return torch.bfloat16
    return torch.from_numpy(np.zeros((), dtype=dtype)).dtype


class _Program(typing.NamedTuple):
    functions: str  # private func.func definitions in generic form
    callee: str
    results: list  # [(shape, torch dtype)]
    kept: tuple  # which tensor arguments the callee takes (JAX drops unused ones)


def _functions(exported, tag: str) -> _Program:
    """The exported module's functions as private functions whose symbols start with
    `tag`, printed without locations in MLIR's generic form."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib.mlir import ir

    if exported.ordered_effects or exported.unordered_effects:
        raise NotImplementedError("jax_op: functions with side effects are not supported")
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(exported.mlir_module())
        ops = list(module.body.operations)
        for op in ops:
            if op.operation.name != "func.func":
                raise NotImplementedError(
                    f"jax_op: the exported module holds a {op.operation.name} "
                    "(sharded functions are not supported)"
                )
            name = ir.StringAttr(op.attributes["sym_name"]).value
            ir.SymbolTable.replace_all_symbol_uses(name, tag + name, module.operation)
            op.attributes["sym_name"] = ir.StringAttr.get(tag + name)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):
                if attr in op.attributes:
                    del op.attributes[attr]
        text = "\n".join(
            op.operation.get_asm(print_generic_op_form=True, enable_debug_info=False) for op in ops
        )
    from jax import dtypes

    # float0 (the cotangent of an integer input) is a pred tensor in the module.
    results = [
        (list(a.shape), torch.bool if a.dtype == dtypes.float0 else _torch_dtype(a.dtype))
        for a in exported.out_avals
    ]
    return _Program(text, tag + "main", results, tuple(sorted(exported.module_kept_var_idx)))


class _JaxFunction:
    """One wrapped JAX function: its exports, by argument signature."""

    def __init__(self, name: str, fn: Callable, statics: list):
        self.name, self.fn, self.statics = name, fn, statics
        self._exports: dict = {}
        self._programs: dict = {}

    def exported(self, specs: tuple, static_values: tuple):
        """The jax.export of the function for `specs` ((shape, torch dtype) per array)."""
        key = (specs, static_values)
        if key not in self._exports:
            jax = _jax()
            platform = _PLATFORMS.get(_C._platform()[0])
            if platform is None:
                raise RuntimeError(
                    f"jax_op {self.name}: JAX cannot export for platform {_C._platform()[0]!r}"
                )
            with jax.enable_x64(any(d in (torch.float64, torch.int64) for _, d in specs)):
                structs = [jax.ShapeDtypeStruct(s, _jax_dtype(d)) for s, d in specs]
                jitted = jax.jit(self.fn, static_argnames=tuple(self.statics))
                statics = dict(zip(self.statics, static_values))
                exp = jax.export.export(jitted, platforms=[platform])(*structs, **statics)
            for (shape, dtype), aval in zip(specs, exp.in_avals):
                if _torch_dtype(aval.dtype) != dtype or list(aval.shape) != list(shape):
                    raise TypeError(
                        f"jax_op {self.name}: JAX took a {dtype} {list(shape)} argument as "
                        f"{aval.dtype}{list(aval.shape)}"
                    )
            self._exports[key] = exp
        return self._exports[key]

    def program(self, specs: tuple, static_values: tuple, kind: str) -> _Program:
        """The functions to call: the export's ("fwd") or its VJP's ("vjp")."""
        key = (specs, static_values, kind)
        if key not in self._programs:
            exp = self.exported(specs, static_values)
            if kind == "vjp":
                try:
                    exp = exp.vjp()
                except (ValueError, TypeError, NotImplementedError) as e:
                    raise RuntimeError(
                        f"jax_op {self.name}: JAX cannot differentiate the function (a Pallas "
                        f"kernel needs a jax.custom_vjp): {str(e).splitlines()[0]}"
                    ) from e
            digest = hashlib.sha256(exp.mlir_module().encode()).hexdigest()[:16]
            op = self.name.replace("::", "_")
            self._programs[key] = _functions(exp, f"jax_{op}_{kind}_{digest}_")
        return self._programs[key]


# The ops jax_op registered (and their VJPs), by OpOverload: a compiled graph's call of
# one becomes a call of the export's functions in the graph's program (_dynamo.py). Each
# takes the op's arguments (tensors as fake tensors) and gives the functions to call with
# its tensor arguments, in order.
GRAPH_CALLS: dict = {}


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point()


def _specs(tensors) -> tuple:
    return tuple((tuple(t.shape), t.dtype) for t in tensors)


def _run(program: _Program, tensors: list) -> list:
    for t in tensors:
        if t.device.type != "tpu":
            raise RuntimeError(f"jax_op: expected tpu tensors, got one on {t.device}")
    kept = [tensors[i] for i in program.kept]
    return _C._call_stablehlo(program.functions, program.callee, kept, program.results)


def _fake(program_results, like: torch.Tensor) -> list:
    return [torch.empty(s, dtype=d, device=like.device) for s, d in program_results]


def jax_op(
    name: str,
    fn: Callable | None = None,
    /,
    *,
    donate_argnums: Sequence[int] | None = None,
):
    """Registers the JAX function `fn` as the PyTorch custom op `name` ("namespace::op")
    on tpu tensors, and returns it (a `torch.library.CustomOpDef`, called like `fn`).
    Without `fn`, a decorator.

    Arguments annotated `jax.Array` are tensors; `int`, `float` and `bool` arguments are
    static (one export per value). The result is annotated `jax.Array` or
    `tuple[jax.Array, ...]`. The op works in eager mode (one program per call) and in
    `torch.compile` graphs (traced through its fake kernel, run as its program), and is
    differentiable with respect to its floating-point tensors through the export's VJP.
    `donate_argnums` is accepted for TorchTPU compatibility; no buffer is donated here
    (the tensors stay valid).
    """
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"jax_op: name must be 'namespace::op', got {name!r}")
    del donate_argnums

    def register(fn: Callable):
        arrays, statics, n_out, schema = _signature(name, fn)
        wrapped = _JaxFunction(name, fn, [n for n, _ in statics])
        signature = inspect.signature(inspect.unwrap(fn))
        positions = list(signature.parameters)
        array_at = [positions.index(a) for a in arrays]

        def split(args, kwargs=None):
            """(tensor arguments, static values) of a call, defaults filled in."""
            bound = signature.bind(*args, **(kwargs or {}))
            bound.apply_defaults()
            values = bound.arguments
            return [values[a] for a in arrays], tuple(values[n] for n, _ in statics)

        def forward(*args, **kwargs):
            tensors, static_values = split(args, kwargs)
            outs = _run(wrapped.program(_specs(tensors), static_values, "fwd"), tensors)
            return outs[0] if n_out is None else tuple(outs)

        op = torch.library.custom_op(name, forward, mutates_args=(), schema=schema)

        @op.register_fake
        def _(*args, **kwargs):
            tensors, static_values = split(args, kwargs)
            exp = wrapped.exported(_specs(tensors), static_values)
            outs = _fake([(a.shape, _torch_dtype(a.dtype)) for a in exp.out_avals], tensors[0])
            return outs[0] if n_out is None else tuple(outs)

        # The VJP: an op of its own (primals and cotangents in, input cotangents out),
        # so that compiled backward graphs hold it like any op.
        vjp_schema = (
            "(Tensor[] primals, Tensor[] cotangents"
            + "".join(f", {kind} {n}" for n, kind in statics)
            + ") -> Tensor[]"
        )

        def vjp_forward(primals, cotangents, *static_values):
            program = wrapped.program(_specs(primals), tuple(static_values), "vjp")
            return _run(program, list(primals) + list(cotangents))

        vjp = torch.library.custom_op(
            f"{name}_vjp", vjp_forward, mutates_args=(), schema=vjp_schema
        )

        @vjp.register_fake
        def _(primals, cotangents, *static_values):
            # An integer input's cotangent is JAX's float0: a bool tensor here.
            return [
                torch.empty_like(p, dtype=p.dtype if _differentiable(p) else torch.bool)
                for p in primals
            ]

        def setup_context(ctx, inputs, output):
            tensors, static_values = split(inputs)
            ctx.save_for_backward(*tensors)
            ctx.static_values = static_values

        def backward(ctx, *grads):
            primals = list(ctx.saved_tensors)
            if any(p.is_complex() for p in primals):
                # JAX's cotangents of complex inputs are the conjugates of PyTorch's.
                raise NotImplementedError(
                    f"jax_op {name}: gradients with complex inputs are not supported"
                )
            exp = wrapped.exported(_specs(primals), ctx.static_values)
            cotangents = [
                g
                if g is not None
                else torch.zeros(a.shape, dtype=_torch_dtype(a.dtype), device=primals[0].device)
                for g, a in zip(grads, exp.out_avals)
            ]
            got = iter(vjp(primals, cotangents, *ctx.static_values))
            by_array = [g if _differentiable(p) else None for g, p in zip(got, primals)]
            result = [None] * len(positions)
            for i, g in zip(array_at, by_array):
                result[i] = g
            return tuple(result)

        op.register_autograd(backward, setup_context=setup_context)

        def graph_forward(args):
            tensors, static_values = split(args)
            return wrapped.program(_specs(tensors), static_values, "fwd")

        def graph_vjp(args):
            primals, _, *static_values = args
            return wrapped.program(_specs(primals), tuple(static_values), "vjp")

        GRAPH_CALLS[op._opoverload] = graph_forward
        GRAPH_CALLS[vjp._opoverload] = graph_vjp
        return op

    return register if fn is None else register(fn)
