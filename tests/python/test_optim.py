"""_foreach_* ops (one program per call over every tensor of the lists) and the foreach
optimizers built on them, compared with CPU."""

import copy
import math

import pytest
import torch

import torch_tpu
from helpers import assert_same, tol, LOW


def make_lists(dtype, count=3, positive=False, seed=0):
    """Tensors of several shapes, one of them a non-contiguous view and one 0-d."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(3, 4), (5,), (), (2, 3, 2)][:count]
    cpu = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    if positive:
        cpu = [c.abs() + 0.5 for c in cpu]
    tpu = [c.to("tpu") for c in cpu]
    # a transposed view in place of the first tensor
    cpu[0] = cpu[0].t()
    tpu[0] = tpu[0].t()
    return cpu, tpu


def check_lists(tpu, cpu, **t):
    assert len(tpu) == len(cpu)
    for a, b in zip(tpu, cpu):
        assert_same(a, b, **t)


def run_both(fn, cpu_args, tpu_args, dtype):
    """fn on CPU and on tpu (in-place forms mutate the first list), counting tpu programs."""
    expected = fn(*cpu_args)
    torch_tpu.flush()  # fused mode: the inputs' pending work is not counted
    torch_tpu.metrics.reset()
    got = fn(*tpu_args)
    torch_tpu.flush()  # ... and the call's own is
    executions = torch_tpu.metrics.snapshot()["executions"]
    if expected is None:
        check_lists(tpu_args[0], cpu_args[0], **tol(dtype))
    else:
        check_lists(got, expected, **tol(dtype))
    return executions


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("inplace", [False, True])
def test_binary_overloads(op, dtype, inplace):
    positive = op == "pow"
    name = f"_foreach_{op}" + ("_" if inplace else "")
    fn = getattr(torch, name)
    overloads = {
        "List": lambda xs, ys: fn(xs, ys),
        "Scalar": lambda xs, ys: fn(xs, 1.5),
        "ScalarList": lambda xs, ys: fn(xs, [0.5, -2.0, 3.0]),
    }
    if op in ("add", "sub"):
        overloads["alpha"] = lambda xs, ys: fn(xs, ys, alpha=0.25)
    if op in ("add", "mul", "div"):
        overloads["Tensor"] = lambda xs, ys: fn(xs, ys[2])  # a 0-d tpu tensor
    if op == "pow":
        overloads["ScalarList"] = lambda xs, ys: fn(xs, [0.5, 2.0, 3.0])
    for kind, call in overloads.items():
        cpu, tpu = make_lists(dtype, positive=positive)
        cpu_o, tpu_o = make_lists(dtype, positive=positive, seed=1)
        if kind == "Tensor":
            cpu_o[2] = cpu_o[2].float()  # a 0-d f32 tensor broadcasts over every list
            tpu_o[2] = tpu_o[2].float()
        executions = run_both(call, (cpu, cpu_o), (tpu, tpu_o), dtype)
        assert executions == 1, (kind, executions)


def test_pow_scalar_and_tensor():
    cpu, tpu = make_lists(torch.float32)
    check_lists(torch._foreach_pow(2.0, tpu), torch._foreach_pow(2.0, cpu), **tol(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("inplace", [False, True])
def test_addcmul_addcdiv(op, dtype, inplace):
    fn = getattr(torch, f"_foreach_{op}" + ("_" if inplace else ""))
    for value in (0.3, [0.1, -1.0, 2.0]):
        cpu, tpu = make_lists(dtype)
        c1, t1 = make_lists(dtype, seed=1)
        c2, t2 = make_lists(dtype, positive=True, seed=2)
        executions = run_both(
            lambda a, b, c: fn(a, b, c, value), (cpu, c1, c2), (tpu, t1, t2), dtype
        )
        assert executions == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("inplace", [False, True])
def test_lerp(dtype, inplace):
    fn = getattr(torch, "_foreach_lerp" + ("_" if inplace else ""))
    cw, tw = make_lists(dtype, seed=3)
    for weight in (0.1, 0.9, "list", "scalars"):
        cpu, tpu = make_lists(dtype)
        ce, te = make_lists(dtype, seed=1)
        if weight == "list":
            args_c, args_t = (cpu, ce, cw), (tpu, te, tw)
        elif weight == "scalars":
            args_c, args_t = (cpu, ce, [0.2, 0.7, 1.5]), (tpu, te, [0.2, 0.7, 1.5])
        else:
            args_c, args_t = (cpu, ce, weight), (tpu, te, weight)
        assert run_both(fn, args_c, args_t, dtype) == 1


UNARY = [
    "sqrt",
    "neg",
    "sign",
    "reciprocal",
    "abs",
    "exp",
    "log",
    "expm1",
    "log1p",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "erfc",
    "lgamma",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "log2",
    "log10",
    "rsqrt",
]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    positive = op in ("sqrt", "log", "log1p", "lgamma", "log2", "log10", "rsqrt")
    for dtype in (torch.float32, torch.bfloat16):
        cpu, tpu = make_lists(dtype, positive=positive)
        if op in ("asin", "acos"):
            cpu = [c.clamp(-0.9, 0.9) for c in cpu]
            tpu = [c.to("tpu") for c in cpu]
        fn = getattr(torch, f"_foreach_{op}")
        assert run_both(fn, (cpu,), (tpu,), dtype) == 1
        fn_ = getattr(torch, f"_foreach_{op}_")
        assert run_both(fn_, (cpu,), (tpu,), dtype) == 1


def test_mixed_dtypes_in_one_list():
    cpu = [torch.randn(4), torch.randn(3).bfloat16(), torch.randn(2).double()]
    tpu = [c.to("tpu") for c in cpu]
    out = torch._foreach_mul(tpu, 3.0)
    check_lists(out, torch._foreach_mul(cpu, 3.0), **tol(torch.bfloat16))
    torch._foreach_addcmul_(tpu, tpu, tpu, 0.5)
    torch._foreach_addcmul_(cpu, cpu, cpu, 0.5)
    check_lists(tpu, cpu, **tol(torch.bfloat16))


def test_integer_lists():
    cpu = [torch.arange(6).reshape(2, 3), torch.tensor([5, -7])]
    tpu = [c.to("tpu") for c in cpu]
    check_lists(torch._foreach_add(tpu, 2), torch._foreach_add(cpu, 2))
    check_lists(torch._foreach_div(tpu, 2), torch._foreach_div(cpu, 2))  # true division: f32
    check_lists(torch._foreach_maximum(tpu, 0), torch._foreach_maximum(cpu, 0))


def test_zero_copy_clone_and_empty_tensors():
    cpu, tpu = make_lists(torch.float32)
    cpu.append(torch.empty(0, 3))
    tpu.append(torch.empty(0, 3, device="tpu"))
    src_c, src_t = make_lists(torch.float32, seed=4)
    src_c.append(torch.empty(0, 3))
    src_t.append(torch.empty(0, 3, device="tpu"))
    clones = torch._foreach_clone(tpu)
    check_lists(clones, cpu)
    torch._foreach_copy_(tpu, src_t)
    check_lists(tpu, src_c)
    check_lists(clones, cpu)  # the clones are independent
    torch._foreach_zero_(tpu)
    check_lists(tpu, [torch.zeros_like(c) for c in cpu])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_norm_every_ord_without_recompiling(dtype):
    cpu, tpu = make_lists(dtype, count=4)
    # Fused mode: the warm-up runs as a group of its own, with its results alive, which is
    # the group each step below records (a group whose results are dead has no outputs).
    warm = torch._foreach_norm(tpu, 3.0)
    torch_tpu.flush()
    del warm
    torch_tpu.metrics.reset()
    # Runtime ords share the program; the literal ords 0, 1, 2 and 0.5 (constants of
    # programs of their own, see op_call.cpp) are checked after.
    for ord in (3.0, 1.5, 4, math.inf, -math.inf):
        got = torch._foreach_norm(tpu, ord)
        expected = torch._foreach_norm(cpu, ord)
        check_lists(got, expected, **tol(dtype) if dtype in LOW else dict(rtol=1e-5, atol=1e-5))
    assert torch_tpu.metrics.snapshot()["compiles"] == 0
    for ord in (2.0, 1.0, 0.5, 0.0, 2):
        got = torch._foreach_norm(tpu, ord)
        expected = torch._foreach_norm(cpu, ord)
        check_lists(got, expected, **tol(dtype) if dtype in LOW else dict(rtol=1e-5, atol=1e-5))
    got = torch._foreach_norm(tpu, 2.0, dtype=torch.float64)
    check_lists(got, torch._foreach_norm(cpu, 2.0, dtype=torch.float64), rtol=1e-2, atol=1e-2)


def test_max():
    cpu, tpu = make_lists(torch.float32)
    check_lists(torch._foreach_max(tpu), torch._foreach_max(cpu))


def test_nan_propagates_like_cpu():
    cpu = [torch.tensor([math.nan, 1.0, 2.0]), torch.tensor([0.0, math.nan])]
    other = [torch.tensor([0.0, math.nan, 1.0]), torch.tensor([1.0, 1.0])]
    tpu, tpu_o = [c.to("tpu") for c in cpu], [o.to("tpu") for o in other]
    for op in ("maximum", "minimum", "clamp_min", "clamp_max"):
        fn = getattr(torch, f"_foreach_{op}")
        check_lists(fn(tpu, tpu_o), fn(cpu, other), equal_nan=True)
    check_lists(torch._foreach_max(tpu), torch._foreach_max(cpu), equal_nan=True)


def test_scalar_values_do_not_recompile():
    cpu, tpu = make_lists(torch.float32)
    torch._foreach_mul_(tpu, [0.75, 0.25, 3.0])
    torch_tpu.metrics.reset()
    for k in range(3):  # (values other than the literals op_call.cpp builds in)
        torch._foreach_mul_(tpu, [1.5 + k, 0.75, 3.0])
        torch._foreach_add_(tpu, 0.1 * (k + 1))
    assert torch_tpu.metrics.snapshot()["compiles"] <= 1  # the add, once


# ---- optimizers -------------------------------------------------------------------------


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


OPTIMIZERS = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, dampening=0, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=0.01)),
    (torch.optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05)),
    (torch.optim.AdamW, dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))),
]


def run_steps(opt_cls, kwargs, tpu_kwargs, mode=dict(foreach=True)):
    """Four steps on CPU and on tpu (`tpu_kwargs` added to or replacing `kwargs` there);
    returns the tpu programs of the last step."""
    cpu_model = small_model()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_opt = opt_cls(cpu_model.parameters(), **mode, **kwargs)
    tpu_opt = opt_cls(tpu_model.parameters(), **{**mode, **kwargs, **tpu_kwargs})
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        x = torch.randn(8, 6, generator=g)
        for model, opt, inp in ((cpu_model, cpu_opt, x), (tpu_model, tpu_opt, x.to("tpu"))):
            opt.zero_grad()
            out = model(inp)
            (out * out).sum().backward()
            torch_tpu.flush()  # fused mode: the backward runs before the step is counted
            torch_tpu.metrics.reset()
            opt.step()
    for p_cpu, p_tpu in zip(cpu_model.parameters(), tpu_model.parameters()):
        assert_same(p_tpu.detach(), p_cpu.detach(), rtol=1e-4, atol=1e-5)
    for s_cpu, s_tpu in zip(cpu_opt.state.values(), tpu_opt.state.values()):
        for key, value in s_cpu.items():
            if torch.is_tensor(value) and value.dim() > 0:
                assert_same(s_tpu[key], value, rtol=1e-4, atol=1e-5)
    return torch_tpu.metrics.snapshot()["executions"]


@pytest.mark.parametrize(
    "opt_cls, kwargs", OPTIMIZERS, ids=[f"{c.__name__}-{'-'.join(k)}" for c, k in OPTIMIZERS]
)
def test_foreach_optimizer_steps_match_cpu(opt_cls, kwargs):
    run_steps(opt_cls, kwargs, {})


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW])
def test_capturable_adam_keeps_steps_on_tpu_and_matches_cpu(opt_cls):
    # capturable keeps the step counts on the device: bias corrections are _foreach ops
    run_steps(opt_cls, dict(lr=0.01, amsgrad=True, weight_decay=0.1), dict(capturable=True))


@pytest.mark.parametrize(
    "opt_cls, kwargs",
    [
        (torch.optim.Adam, dict(lr=0.01)),
        (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
        (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
    ],
)
def test_fused_adam_is_one_program_and_matches_cpu(opt_cls, kwargs):
    # an optimizer step is one program in either eager mode: step count and update
    assert run_steps(opt_cls, kwargs, {}, mode=dict(fused=True)) == 1


@pytest.mark.parametrize(
    "opt_cls, kwargs",
    [
        (torch.optim.SGD, dict(lr=0.1)),
        (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01, dampening=0.1)),
        (
            torch.optim.SGD,
            dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True),
        ),
        (torch.optim.Adagrad, dict(lr=0.1)),
        (
            torch.optim.Adagrad,
            dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, eps=1e-6, maximize=True),
        ),
    ],
    ids=["sgd", "sgd-momentum", "sgd-nesterov-maximize", "adagrad", "adagrad-decay"],
)
def test_fused_sgd_and_adagrad_are_one_program_and_match_cpu(opt_cls, kwargs):
    # Adagrad's step count and update are one program too (a step runs as one program).
    assert run_steps(opt_cls, kwargs, {}, mode=dict(fused=True)) == 1


@pytest.mark.parametrize(
    "opt_cls, kwargs",
    [
        (torch.optim.SGD, dict(momentum=0.9)),
        (torch.optim.Adagrad, dict(lr_decay=0.01)),
        (torch.optim.Adam, dict(amsgrad=True)),
        (torch.optim.AdamW, dict(weight_decay=0.05)),
    ],
    ids=["sgd", "adagrad", "adam", "adamw"],
)
@pytest.mark.parametrize("lr_device", ["cpu", "tpu"])
def test_fused_steps_with_a_tensor_lr_match_cpu(opt_cls, kwargs, lr_device):
    # The .tensor_lr overloads: the lr tensor may live on the CPU or on the device.
    run_steps(
        opt_cls,
        dict(lr=torch.tensor(0.02), **kwargs),
        dict(lr=torch.tensor(0.02, device=lr_device)),
        mode=dict(fused=True),
    )


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda params: torch.optim.AdamW(params, lr=0.01, fused=True),
        lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9, fused=True),
        lambda params: torch.optim.Adagrad(params, lr=0.05, fused=True),
    ],
    ids=["adamw", "sgd", "adagrad"],
)
def test_fused_step_with_grad_scaler_skips_overflows_like_cpu(make_opt):
    runs = []
    for device in ("cpu", "tpu"):
        model = small_model().to(device)
        opt = make_opt(model.parameters())
        scaler = torch.amp.GradScaler(device, init_scale=2.0**8, growth_interval=2)
        g = torch.Generator().manual_seed(2)
        for step in range(4):
            x = torch.randn(8, 6, generator=g).to(device)
            opt.zero_grad()
            out = model(x)
            scaler.scale((out * out).mean()).backward()
            if step == 2:
                next(model.parameters()).grad[0, 0] = math.nan
            scaler.step(opt)
            scaler.update()
        runs.append(([p.detach().cpu() for p in model.parameters()], scaler.get_scale()))
    (cpu_params, cpu_scale), (params, scale) = runs
    assert scale == cpu_scale
    for p, p_c in zip(params, cpu_params):
        torch.testing.assert_close(p, p_c, rtol=1e-4, atol=1e-5)


def test_clip_grad_norm_matches_cpu():
    cpu_model = small_model()
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    x = torch.randn(8, 6)
    for model, inp in ((cpu_model, x), (tpu_model, x.to("tpu"))):
        out = model(inp)
        (out * out).sum().backward()
    for norm_type in (2.0, math.inf, 1.0):
        expected = torch.nn.utils.clip_grad_norm_(cpu_model.parameters(), 0.5, norm_type=norm_type)
        got = torch.nn.utils.clip_grad_norm_(tpu_model.parameters(), 0.5, norm_type=norm_type)
        assert_same(got, expected, rtol=1e-5, atol=1e-6)
        for p_cpu, p_tpu in zip(cpu_model.parameters(), tpu_model.parameters()):
            assert_same(p_tpu.grad, p_cpu.grad, rtol=1e-5, atol=1e-6)
