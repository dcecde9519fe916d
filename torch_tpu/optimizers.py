"""`torch.tpu.optimizers` (TorchTPU 0.2): functional optimizers over named tensors and
`SingleTraceTrainer`, a whole training step as one compiled program.

An optimizer here holds only hyperparameters (fixed at construction; `defaults` lists
them). Its state lives in a `ParamGroup` (a dataclass, a pytree) that
`init_param_group(model or {name: tensor})` creates: the parameters themselves (the
model's own tensors, detached, so updates reach the model), the moments and each
parameter's step count (a 0-d float32 tensor on the parameters' device: the number of
steps taken, so no step reads a host value). `step(group, grads)` updates the group in
place and returns it.

On tpu tensors a step is recorded and runs as one program in either eager mode (as a
`torch.optim` step does here, torch_tpu/_eager.py). Inside a traced step
(`SingleTraceTrainer`, `make_fx`, `torch.compile`) it is ordinary traced code.

The updates are `torch.optim`'s, computed in float32 whatever the moments' dtype:
`AdamW` as `torch.optim.AdamW`, `Sgd` as `torch.optim.SGD`, `Muon` as `torch.optim.Muon`
for 2-D parameters and AdamW for the others (biases, gains: whatever is not a matrix),
as Muon's authors and `torch.optim.Muon`'s documentation prescribe."""

from __future__ import annotations

import abc
import dataclasses
import math
import types
from typing import Any, Callable, ClassVar, Mapping, Optional, Union

import torch
from torch.utils import _pytree

from torch_tpu import _C, _eager

_Params = Union[Mapping[str, torch.Tensor], torch.nn.Module]


def _named(params: _Params) -> dict:
    """{name: tensor}: a module's parameters named with "_" for "." (names usable as
    identifiers), detached views of the very parameters."""
    if isinstance(params, torch.nn.Module):
        return {n.replace(".", "_"): p.detach() for n, p in params.named_parameters()}
    return dict(params)


def _on_device(tensors) -> bool:
    """Plain tpu tensors (not fake or functional ones being traced)."""
    return bool(tensors) and all(
        type(t) in (torch.Tensor, torch.nn.Parameter) and t.device.type == "tpu" for t in tensors
    )


def _steps(params: dict) -> dict:
    return {n: torch.tensor(0.0, dtype=torch.float32, device=p.device) for n, p in params.items()}


class Optimizer(abc.ABC):
    """Base class of the functional optimizers: hyperparameters in, a `ParamGroup` of
    parameters and state created by `init_param_group`, updated by `step`. The
    hyperparameters are constants of a traced step, so they cannot change afterwards:
    make a new optimizer instead."""

    ParamGroup: ClassVar[Any]
    _HYPERPARAMETERS: ClassVar[tuple] = ("lr", "weight_decay")

    def __init__(self, lr: float = 1e-3, weight_decay: float = 0.0):
        self._lr = lr
        self._weight_decay = weight_decay

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The hyperparameters, read-only."""
        return types.MappingProxyType({n: getattr(self, f"_{n}") for n in self._HYPERPARAMETERS})

    @abc.abstractmethod
    def init_param_group(self, params: _Params) -> Any:
        """A fresh `ParamGroup` for a module's parameters or named tensors."""

    def _update(self, group: Any, grads: Mapping[str, torch.Tensor]) -> None:
        """The update of every parameter of `group`, in place (what `step` runs; a
        subclass implements this, or `step` itself as TorchTPU's subclasses do)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither step nor _update")

    def step(self, param_group: Any, grads: Mapping[str, torch.Tensor]) -> Any:
        """Updates `param_group` in place with `grads` ({name: gradient}, the names of
        the group's parameters) and returns it. On tpu the whole update is one program."""
        missing = [n for n in param_group.params if n not in grads]
        if missing:
            raise KeyError(f"{type(self).__name__}.step: no gradient for {missing}")
        if _eager._threaded_ranks or not _on_device(list(param_group.params.values())):
            self._update(param_group, grads)
            return param_group
        _C._fused_begin()
        try:
            self._update(param_group, grads)
        finally:
            _C._fused_end()
            _C._flush()
        return param_group

    def __call__(self, param_group: Any, grads: Mapping[str, torch.Tensor]) -> Any:
        return self.step(param_group, grads)


def _register(cls) -> None:
    """`cls` (a ParamGroup dataclass) as a pytree of its dict fields."""
    names = [f.name for f in dataclasses.fields(cls)]
    _pytree.register_pytree_node(
        cls,
        lambda g: ([getattr(g, n) for n in names], None),
        lambda children, _: cls(*children),
    )


def _adamw_update(p, g, m, v, step, lr, weight_decay, beta1, beta2, eps) -> None:
    """torch.optim.AdamW's update of `p`, in float32; `m`, `v` keep their dtype."""
    step.add_(1)
    g32 = g.float()
    m32 = m.float().lerp(g32, 1 - beta1)
    v32 = v.float().mul(beta2).addcmul(g32, g32, value=1 - beta2)
    m.copy_(m32)
    v.copy_(v32)
    bias1 = 1 - torch.pow(beta1, step)
    bias2_sqrt = (1 - torch.pow(beta2, step)).sqrt()
    new = p.float().mul(1 - lr * weight_decay)
    new = new - (lr / bias1) * m32 / (v32.sqrt() / bias2_sqrt + eps)
    p.copy_(new)


@dataclasses.dataclass
class _AdamState:
    """Parameters, first and second moments and step counts, by parameter name (Muon's:
    its momentum buffers as first moments; second moments for the AdamW parameters)."""

    params: dict
    opt_state_m: dict = dataclasses.field(default_factory=dict)
    opt_state_v: dict = dataclasses.field(default_factory=dict)
    opt_steps: dict = dataclasses.field(default_factory=dict)


_register(_AdamState)


def _moments(params: dict, bfloat16: bool, second) -> _AdamState:
    """Zero first moments for every parameter, second moments where `second(p)`."""
    dtype = torch.bfloat16 if bfloat16 else None
    return _AdamState(
        params,
        {n: torch.zeros_like(p, dtype=dtype) for n, p in params.items()},
        {n: torch.zeros_like(p, dtype=dtype) for n, p in params.items() if second(p)},
        _steps(params),
    )


class AdamW(Optimizer):
    """AdamW (decoupled weight decay), `torch.optim.AdamW`'s update. With
    `use_bfloat16_moments` (the default, as TorchTPU's) the moments are stored in
    bfloat16 and updated in float32. `maximize` ascends. TorchTPU's other arguments
    (`foreach`, `capturable`, `differentiable`, `fused`, `grad_scale`, `found_inf`) are
    accepted for compatibility and change nothing; `amsgrad=True` is refused (TorchTPU's
    keeps no maximum either)."""

    ParamGroup = _AdamState
    _HYPERPARAMETERS = (
        "lr",
        "weight_decay",
        "beta1",
        "beta2",
        "eps",
        "use_bfloat16_moments",
        "amsgrad",
        "maximize",
    )

    def __init__(
        self,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        use_bfloat16_moments: bool = True,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: Optional[bool] = False,
        capturable: bool = True,
        differentiable: bool = False,
        fused: Optional[bool] = False,
        grad_scale: Optional[torch.Tensor] = None,
        found_inf: Optional[torch.Tensor] = None,
    ):
        if amsgrad:
            raise ValueError("AdamW: amsgrad is not supported")
        super().__init__(lr, weight_decay)
        self._beta1, self._beta2, self._eps = beta1, beta2, eps
        self._use_bfloat16_moments = use_bfloat16_moments
        self._amsgrad, self._maximize = amsgrad, maximize

    def init_param_group(self, params: _Params) -> _AdamState:
        return _moments(_named(params), self._use_bfloat16_moments, lambda p: True)

    def _update(self, group: _AdamState, grads) -> None:
        for n, p in group.params.items():
            g = -grads[n] if self._maximize else grads[n]
            _adamw_update(
                p,
                g,
                group.opt_state_m[n],
                group.opt_state_v[n],
                group.opt_steps[n],
                self._lr,
                self._weight_decay,
                self._beta1,
                self._beta2,
                self._eps,
            )


@dataclasses.dataclass
class _MomentumState:
    """Parameters, momentum buffers and step counts, by parameter name."""

    params: dict
    opt_state_m: dict = dataclasses.field(default_factory=dict)
    opt_steps: dict = dataclasses.field(default_factory=dict)


_register(_MomentumState)


class Sgd(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum
    and (coupled) weight decay: `torch.optim.SGD`'s update, its first momentum buffer
    being the first gradient. `maximize` ascends. `foreach`, `fused`, `grad_scale`,
    `found_inf` and `has_sparse_grad` are accepted for TorchTPU compatibility and change
    nothing."""

    ParamGroup = _MomentumState
    _HYPERPARAMETERS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")

    def __init__(
        self,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
        foreach: Optional[bool] = False,
        fused: Optional[bool] = True,
        grad_scale: Optional[torch.Tensor] = None,
        found_inf: Optional[torch.Tensor] = None,
        has_sparse_grad: bool = False,
    ):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Sgd: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(lr, weight_decay)
        self._momentum, self._dampening = momentum, dampening
        self._nesterov, self._maximize = nesterov, maximize

    def init_param_group(self, params: _Params) -> _MomentumState:
        params = _named(params)
        buffers = {n: torch.zeros_like(p) for n, p in params.items()} if self._momentum else {}
        return _MomentumState(params, buffers, _steps(params))

    def _update(self, group: _MomentumState, grads) -> None:
        for n, p in group.params.items():
            step = group.opt_steps[n]
            d = -grads[n] if self._maximize else grads[n]
            if self._weight_decay:
                d = d + self._weight_decay * p
            if self._momentum:
                buf = group.opt_state_m[n]
                later = buf * self._momentum + (1 - self._dampening) * d
                buf.copy_(torch.where(step == 0, d, later))
                d = d + self._momentum * buf if self._nesterov else buf
            p.sub_(self._lr * d)
            step.add_(1)


def _bf16(t: torch.Tensor) -> torch.Tensor:
    """`t` (float32) rounded to bfloat16 values, kept in float32."""
    return t.to(torch.bfloat16).to(torch.float32)


def _orthogonalize(g: torch.Tensor, coefficients, steps: int, eps: float) -> torch.Tensor:
    """Newton-Schulz iteration towards the nearest semi-orthogonal matrix with bfloat16
    values, as torch.optim.Muon (the result: float32 holding bfloat16 values). Each
    product is accumulated in float32 and rounded to bfloat16 once, as CPU's (and a
    TPU's matrix unit's) bfloat16 products are, whatever the engine does with a bfloat16
    `addmm`. Only contiguous tensors change dtype (a converted transposed view would end
    a fused group here)."""
    a, b, c = coefficients
    x = _bf16(g.float())
    tall = g.shape[0] > g.shape[1]
    if tall:
        x = x.T
    x = _bf16(x / _bf16(_bf16(x.norm()).clamp(min=eps)))
    for _ in range(steps):
        gram = _bf16(x @ x.T)
        poly = _bf16(torch.addmm(gram, gram, gram, beta=b, alpha=c))
        x = _bf16(torch.addmm(x, poly, x, beta=a))
    return x.T if tall else x


def _muon_lr(lr: float, how: Optional[str], shape) -> float:
    rows, cols = shape[:2]
    if how is None or how == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if how == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    raise ValueError(
        f"Muon: adjust_lr_fn must be None, 'original' or 'match_rms_adamw', got {how!r}"
    )


class Muon(Optimizer):
    """Muon: momentum (Nesterov by default) orthogonalized by `ns_steps` Newton-Schulz
    iterations, for 2-D parameters (`torch.optim.Muon`'s update, learning rate adjusted
    by `adjust_lr_fn`: None or "original", or "match_rms_adamw"); every other parameter
    takes AdamW's update with `adamw_betas`, `adamw_eps`, and `adamw_lr` /
    `adamw_weight_decay` (default: `lr` / `weight_decay`). `use_bfloat16_moments` stores
    the momentum buffers in bfloat16. `foreach` and `has_complex` are accepted for
    TorchTPU compatibility and change nothing."""

    ParamGroup = _AdamState
    _HYPERPARAMETERS = (
        "lr",
        "weight_decay",
        "momentum",
        "nesterov",
        "ns_coefficients",
        "eps",
        "ns_steps",
        "adjust_lr_fn",
        "use_bfloat16_moments",
        "adamw_lr",
        "adamw_betas",
        "adamw_eps",
        "adamw_weight_decay",
    )

    def __init__(
        self,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple = (3.4445, -4.7750, 2.0315),
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: Optional[str] = None,
        use_bfloat16_moments: bool = False,
        foreach: Optional[bool] = False,
        has_complex: bool = False,
        *,
        adamw_lr: Optional[float] = None,
        adamw_betas: tuple = (0.9, 0.999),
        adamw_eps: float = 1e-8,
        adamw_weight_decay: Optional[float] = None,
    ):
        if len(ns_coefficients) != 3:
            raise ValueError("Muon: ns_coefficients must be 3 numbers")
        if not 0 < ns_steps < 100:
            raise ValueError(f"Muon: ns_steps must be within 1 .. 99, got {ns_steps}")
        _muon_lr(lr, adjust_lr_fn, (1, 1))  # checks the name
        super().__init__(lr, weight_decay)
        self._momentum, self._nesterov = momentum, nesterov
        self._ns_coefficients, self._eps, self._ns_steps = tuple(ns_coefficients), eps, ns_steps
        self._adjust_lr_fn = adjust_lr_fn
        self._use_bfloat16_moments = use_bfloat16_moments
        self._adamw_lr = lr if adamw_lr is None else adamw_lr
        self._adamw_betas, self._adamw_eps = tuple(adamw_betas), adamw_eps
        self._adamw_weight_decay = (
            weight_decay if adamw_weight_decay is None else adamw_weight_decay
        )

    def init_param_group(self, params: _Params) -> _AdamState:
        return _moments(_named(params), self._use_bfloat16_moments, lambda p: p.dim() != 2)

    def _update(self, group: _AdamState, grads) -> None:
        for n, p in group.params.items():
            g, m, step = grads[n], group.opt_state_m[n], group.opt_steps[n]
            if p.dim() != 2:
                beta1, beta2 = self._adamw_betas
                v = group.opt_state_v[n]
                lr, wd = self._adamw_lr, self._adamw_weight_decay
                _adamw_update(p, g, m, v, step, lr, wd, beta1, beta2, self._adamw_eps)
                continue
            step.add_(1)
            m32 = m.float().lerp(g.float(), 1 - self._momentum)
            m.copy_(m32)
            update = g.float().lerp(m32, self._momentum) if self._nesterov else m32
            update = _orthogonalize(update, self._ns_coefficients, self._ns_steps, self._eps)
            new = p.float().mul(1 - self._lr * self._weight_decay)
            p.copy_(new - _muon_lr(self._lr, self._adjust_lr_fn, p.shape) * update)


class _LossModule(torch.nn.Module):
    """`compute_loss_fn(model, args, kwargs)` as a module whose parameters are the
    model's (named "model.<name>"), so `functional_call` can swap them in."""

    def __init__(self, model: torch.nn.Module, fn: Callable):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, args, kwargs):
        return self.fn(self.model, args, kwargs)


def _loss_of(out, targets) -> torch.Tensor:
    if targets is not None:
        return torch.nn.functional.mse_loss(out, targets)
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, Mapping):
        loss = out.get("loss")
    if loss is not None:
        return loss
    for leaf in _pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            return leaf.mean()
    raise TypeError(f"SingleTraceTrainer: cannot find a loss in a {type(out).__name__}")


def _call_args(inputs) -> tuple:
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


class SingleTraceTrainer:
    """A whole training step (forward, loss, backward and the optimizer's update) traced
    once and compiled as one program.

    `make_compiled_train_step(example_inputs, example_targets)` traces the step with
    `make_fx` (fake tensors: nothing runs) and compiles the graph with `compile_fn`
    (default: `torch.compile(graph, backend="tpu")`, one program on this engine;
    TorchTPU requires a callback). The returned `train_step(inputs, targets=None)` runs
    it and returns the loss computed before the update, as an eager loop's
    `loss = ...; loss.backward(); opt.step()` does; the parameters (the model's own
    tensors), the optimizer state and the model's buffers are updated in place.

    The loss: `compute_loss_fn(model, args, kwargs)` if given (the targets are not
    passed to it); else the mean squared error of the output against the targets; else
    the output's `loss` (attribute or key), else the mean of its first tensor. Inputs:
    a dict (keyword arguments), a tuple or list (positional ones) or one value.

    Without an optimizer the step computes gradients only and stores them in the
    model parameters' `.grad`."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Optional[Optimizer] = None,
        compile_fn: Optional[Callable] = None,
        compute_loss_fn: Optional[Callable] = None,
    ):
        self._model, self._optimizer = model, optimizer
        self._compile_fn, self._compute_loss_fn = compile_fn, compute_loss_fn
        self._names = {n.replace(".", "_"): n for n, _ in model.named_parameters()}
        initial = {safe: p.detach() for safe, p in zip(self._names, model.parameters())}
        self._param_group = initial if optimizer is None else optimizer.init_param_group(initial)
        self._buffers = {n: b.detach() for n, b in model.named_buffers()}

    @property
    def param_group(self) -> Any:
        """The parameters and optimizer state the step updates: the optimizer's
        ParamGroup, or {name: parameter} without an optimizer."""
        return self._param_group

    @property
    def params(self) -> dict:
        """The parameters under their names in the model."""
        group = getattr(self._param_group, "params", self._param_group)
        return {self._names[n]: p for n, p in group.items()}

    def _loss(self, params: dict, buffers: dict, inputs, targets) -> torch.Tensor:
        named = {self._names[n]: p for n, p in params.items()}
        args, kwargs = _call_args(inputs)
        if self._compute_loss_fn is not None:
            module = _LossModule(self._model, self._compute_loss_fn)
            state = {f"model.{n}": t for n, t in {**named, **buffers}.items()}
            return torch.func.functional_call(module, state, (args, kwargs), strict=False)
        out = torch.func.functional_call(self._model, {**named, **buffers}, args, kwargs)
        return _loss_of(out, targets)

    def make_compiled_train_step(
        self,
        example_inputs: Any,
        example_targets: Any = None,
        compile_fn: Optional[Callable] = None,
    ) -> Callable:
        """Traces and compiles the step for inputs (and targets) like the examples;
        returns `train_step(inputs, targets=None) -> loss`."""
        from torch.fx.experimental.proxy_tensor import make_fx

        compile_fn = compile_fn or self._compile_fn or _compile_tpu
        with_targets = example_targets is not None
        example = (self._param_group, self._buffers, example_inputs)
        flat, spec = _pytree.tree_flatten(example + ((example_targets,) if with_targets else ()))
        optimizer = self._optimizer

        def step(*leaves):
            group, buffers, inputs, *rest = _pytree.tree_unflatten(list(leaves), spec)
            params = getattr(group, "params", group)

            # The buffers are an argument, not captured: a model may update them in place
            # (batch norm's running statistics), which a transform allows only for inputs.
            def loss_of(p, b):
                return self._loss(p, b, inputs, rest[0] if rest else None)

            grads, loss = torch.func.grad_and_value(loss_of)(params, buffers)
            if optimizer is None:
                return (loss, *[grads[n] for n in params])
            optimizer(group, grads)
            return (loss,)

        graph = make_fx(step, tracing_mode="fake")(*flat)
        compiled = compile_fn(graph, flat)

        def train_step(inputs: Any, targets: Any = None) -> torch.Tensor:
            if (targets is None) == with_targets:
                raise ValueError(
                    "SingleTraceTrainer: pass targets to the step exactly when the "
                    "examples had them"
                )
            now = (self._param_group, self._buffers, inputs)
            leaves = _pytree.tree_leaves(now + ((targets,) if with_targets else ()))
            loss, *grads = compiled(*leaves)
            if optimizer is None:
                for (name, p), g in zip(self._model.named_parameters(), grads):
                    p.grad = g
            return loss

        return train_step


def _compile_tpu(graph: torch.fx.GraphModule, example_inputs) -> Callable:
    return torch.compile(graph, backend="tpu", fullgraph=True)
