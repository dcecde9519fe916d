import functools

import pytest
import torch

import torch_tpu
from helpers import assert_same, FLOATS, rand, same_error, tol as shared_tol

tol = functools.partial(shared_tol, f32=None, low=1e-2)

BINARY = {
    "add": lambda a, b: a + b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: a - b,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
}


def nonzero(t):
    return torch.where(t == 0, torch.ones_like(t), t)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_binary_broadcasting(op, dtype):
    a, b = rand((4, 1, 3), dtype, 1), nonzero(rand((5, 3), dtype, 2))
    fn = BINARY[op]
    assert_same(fn(a.to("tpu"), b.to("tpu")), fn(a, b), **tol(dtype))


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_with_python_scalars_and_promotion(op):
    fn = BINARY[op]
    a = rand((3, 4), torch.int32)
    f = rand((3, 4), torch.float32)
    h = rand((3, 4), torch.float16)
    for x, y in [
        (a, 3),
        (a, 2.5),
        (f, 2),
        (h, 1.5),
        (a, f),
        (h, f),
        (a, torch.tensor(4)),
        (torch.tensor(2.0), a),
    ]:
        tx = x.to("tpu") if isinstance(x, torch.Tensor) and x.dim() > 0 else x
        ty = y.to("tpu") if isinstance(y, torch.Tensor) and y.dim() > 0 else y
        expected = fn(x, y)
        got = fn(tx, ty)
        assert_same(got, expected, **tol(expected.dtype))


def test_inplace_and_out_variants():
    a, b = rand((3, 4), torch.float32, 1), rand((4,), torch.float32, 2)
    ta, tb = a.to("tpu"), b.to("tpu")
    for name in ("add_", "sub_", "mul_", "div_"):
        getattr(ta, name)(tb)
        getattr(a, name)(b)
        assert_same(ta, a)
    out = torch.empty(0, device="tpu")
    torch.add(ta, tb, out=out)
    assert_same(out, torch.add(a, b))
    out_i = torch.empty(3, 4, dtype=torch.float64, device="tpu")
    torch.mul(ta, tb, out=out_i)
    assert_same(out_i, torch.mul(a, b).double())
    ti = torch.arange(4).to("tpu")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        ti.add_(1.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        tb.add_(ta)


def _ints(*shape, dtype=torch.int64):
    return torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype)


# What CPU rejects in the binary ops and relu, with CPU's words (the table checks promotion
# before PyTorch's meta kernels, whose Python versions word several of these otherwise).
ERRORS = {
    "int.add_(float)": (lambda a, b: a.add_(b), _ints(4), torch.ones(4)),
    "int.add_(1.5)": (lambda a: a.add_(1.5), _ints(4)),
    "int.sub_(cpu 0-d float)": (lambda a: a.sub_(torch.tensor(1.5)), _ints(4)),
    "int.mul_(1.5)": (lambda a: a.mul_(1.5), _ints(4)),
    "int.div_(2)": (lambda a: a.div_(2), _ints(4)),
    "int.div_(int)": (lambda a, b: a.div_(b), _ints(4), _ints(4) + 1),
    "bool.add_(int)": (lambda a, b: a.add_(b), torch.ones(4, dtype=torch.bool), _ints(4)),
    "add out=long": (lambda a, o: torch.add(a, 1, out=o), torch.ones(4), _ints(4)),
    "mul out=long": (lambda a, b, o: torch.mul(a, b, out=o), torch.ones(4), _ints(4), _ints(4)),
    "div out=long": (lambda a, o: torch.div(a, 2, out=o), _ints(4), _ints(4)),
    "float alpha, int": (lambda a, b: torch.add(a, b, alpha=1.5), _ints(4), _ints(4)),
    "float alpha, int_": (lambda a, b: a.sub_(b, alpha=1.5), _ints(4), _ints(4)),
    "float alpha, int out=": (
        lambda a, b, o: torch.add(a, b, alpha=0.5, out=o),
        _ints(4),
        _ints(4),
        _ints(4),
    ),
    "bool alpha, float": (lambda a, b: torch.add(a, b, alpha=True), torch.ones(4), torch.ones(4)),
    "bool - bool": (lambda a: a - a, torch.ones(4, dtype=torch.bool)),
    "bool -= bool": (lambda a: a.sub_(a.clone()), torch.ones(4, dtype=torch.bool)),
    "bool -= int": (lambda a, b: a.sub_(b), torch.ones(4, dtype=torch.bool), _ints(4)),
    "div rounding_mode": (lambda a: torch.div(a, 2, rounding_mode="round"), torch.ones(4)),
    "relu bool": (torch.relu, torch.ones(4, dtype=torch.bool)),
    "relu_ bool": (torch.relu_, torch.ones(4, dtype=torch.bool)),
    "relu complex": (torch.relu, torch.ones(4, dtype=torch.complex64)),
    "in-place broadcast": (lambda a, b: a.add_(b), torch.ones(4), torch.ones(3, 4)),
    "sizes": (lambda a, b: a * b, torch.ones(4), torch.ones(3)),
    "in-place sizes": (lambda a, b: a.div_(b), torch.ones(4), torch.ones(3)),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_binary_errors_are_cpus(case):
    fn, *args = ERRORS[case]
    same_error(fn, *args)


def test_binary_errors_are_checked_on_every_call():
    # A program already built for these shapes and dtypes does not skip CPU's checks.
    a, b = _ints(4).to("tpu"), _ints(4).to("tpu")
    torch.add(a, b, alpha=2)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        torch.add(a, b, alpha=1.5)
    out = torch.empty(4, dtype=torch.long, device="tpu")
    torch.mul(a, 2, out=out)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        torch.mul(a, 2.5, out=out)
    f = torch.ones(4, device="tpu")
    torch.ops.aten.rsub.Scalar(f, 3)
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        torch.ops.aten.rsub.Scalar(f, True)
    a.add_(1)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        a.add_(1.5)
    assert_same(a, _ints(4) + 1)


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_of_complex_is_not_implemented(mode):
    z = torch.ones(4, dtype=torch.complex64)
    with pytest.raises(NotImplementedError, match=f"div_{mode}"):
        torch.div(z, z, rounding_mode=mode)
    with pytest.raises(NotImplementedError, match=f'"div_{mode}" not implemented for'):
        torch.div(z.to("tpu"), z.to("tpu"), rounding_mode=mode)


def test_true_division_of_integers_into_float64_matches_cpu():
    # CPU divides in the default float dtype, then casts into out=.
    a, b = _ints(7) * 7919, _ints(7) + 3
    out = torch.empty(7, dtype=torch.float64)
    tout = out.to("tpu")
    torch.div(a.to("tpu"), b.to("tpu"), out=tout)
    assert torch.equal(tout.cpu(), torch.div(a, b, out=out))


def test_relu():
    x = rand((6, 7), torch.float32)
    assert_same(x.to("tpu").relu(), x.relu())
    t = x.to("tpu")
    t[2:].relu_()
    c = x.clone()
    c[2:].relu_()
    assert_same(t, c)
    assert_same(
        torch.nn.functional.relu(rand((5,), torch.int64).to("tpu")),
        torch.nn.functional.relu(rand((5,), torch.int64)),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_matmul_family(dtype):
    a, b = rand((5, 7), dtype, 1), rand((7, 3), dtype, 2)
    assert_same(a.to("tpu") @ b.to("tpu"), a @ b, **tol(dtype))
    assert_same(
        torch.mm(a.t().contiguous().to("tpu").t(), b.to("tpu")), torch.mm(a, b), **tol(dtype)
    )
    ba, bb = rand((2, 5, 7), dtype, 3), rand((2, 7, 3), dtype, 4)
    assert_same(torch.bmm(ba.to("tpu"), bb.to("tpu")), torch.bmm(ba, bb), **tol(dtype))
    assert_same(torch.matmul(ba.to("tpu"), b.to("tpu")), torch.matmul(ba, b), **tol(dtype))
    if dtype.is_floating_point:
        bias = rand((3,), dtype, 5)
        assert_same(
            torch.addmm(bias.to("tpu"), a.to("tpu"), b.to("tpu"), beta=0.5, alpha=2.0),
            torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
            **tol(dtype),
        )
        nan_bias = torch.full((3,), float("nan"), dtype=dtype)
        assert_same(
            torch.addmm(nan_bias.to("tpu"), a.to("tpu"), b.to("tpu"), beta=0),
            torch.addmm(nan_bias, a, b, beta=0),
            **tol(dtype),
        )


def test_linear_forward_backward():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4)
    x = torch.randn(3, 8, requires_grad=True)
    lin_t = torch.nn.Linear(8, 4).to("tpu")
    lin_t.load_state_dict(lin.state_dict())
    xt = x.detach().to("tpu").requires_grad_()
    lin(x).relu().sum().backward()
    lin_t(xt).relu().sum().backward()
    assert_same(xt.grad, x.grad)
    assert_same(lin_t.weight.grad, lin.weight.grad)
    assert_same(lin_t.bias.grad, lin.bias.grad)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool]
)
def test_sum_and_mean(dtype):
    x = rand((3, 4, 5), dtype) if dtype != torch.bool else rand((3, 4, 5), torch.float32) > 0
    t = x.to("tpu")
    for dims, keepdim in [(None, False), ((1,), False), ((0, 2), True), ((-1,), True), ((), False)]:
        ref = x.sum() if dims is None else x.sum(dims, keepdim=keepdim)
        got = t.sum() if dims is None else t.sum(dims, keepdim=keepdim)
        assert_same(got, ref, **tol(dtype))
        if dtype.is_floating_point:
            ref = x.mean() if dims is None else x.mean(dims, keepdim=keepdim)
            got = t.mean() if dims is None else t.mean(dims, keepdim=keepdim)
            assert_same(got, ref, **tol(dtype))
    assert_same(t.sum(1, dtype=torch.float64), x.sum(1, dtype=torch.float64), **tol(dtype))
    if not dtype.is_floating_point:
        with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
            t.mean()


def test_reductions_of_views_and_empty():
    x = torch.randn(6, 8)
    t = x.to("tpu")
    assert_same(t[::2, 1:].sum(0), x[::2, 1:].sum(0))
    assert_same(t.t().mean(1, keepdim=True), x.t().mean(1, keepdim=True))
    e = torch.empty(0, 3)
    assert_same(e.to("tpu").sum(0), e.sum(0))
    assert torch.isnan(e.to("tpu").mean().cpu())


def test_scalars_and_offsets_do_not_recompile():
    x = torch.randn(10, 16).to("tpu")

    def run(offsets, scalars):
        results = [x[i] + k for i, k in zip(offsets, scalars)]
        torch_tpu.flush()  # fused mode: the eight adds are one group
        return results

    # One program per scalar kind (Python int, Python float) in op mode, one group of this
    # shape in fused mode: later values and offsets reuse them (a fused group that repeats
    # the earlier one runs its program through trace reuse, without a cache lookup). The
    # values avoid the few literals built into programs as constants (the next test).
    run(range(0, 8), [1.5, 3, 0.25, -2, 3, 4, 0.75, 9])
    torch_tpu.metrics.reset()
    results = run(range(2, 10), [0.75, 5, 2.5, -3, 7, 11, 0.125, 99])
    snap = torch_tpu.metrics.snapshot()
    assert snap["compiles"] == 0
    assert snap["cache_hits"] + snap["fused_reuses"] >= 1
    host = x.cpu()
    for (i, k), r in zip(zip(range(2, 10), [0.75, 5, 2.5, -3, 7, 11, 0.125, 99]), results):
        torch.testing.assert_close(r.cpu(), host[i] + k)


@pytest.mark.parametrize("literal", [0, 1, -1, 2, 0.5, -0.5])
def test_literal_scalars_are_constants(literal):
    # pow(x, 2) runs as x * x when 2 is a constant of the program (a runtime exponent
    # makes XLA call powf per element): the literals XLA simplifies with get a program
    # each, every other value shares one. A shape no other test uses: a program another
    # test (or another pytest worker, through the disk cache) built would not compile.
    x = torch.rand(3, 37) + 0.5
    y = x.to("tpu")
    torch.testing.assert_close(y.pow(3.5).cpu(), x.pow(3.5))
    torch.testing.assert_close((y * 3.5).cpu(), x * 3.5)
    torch_tpu.flush()
    torch_tpu.metrics.reset()
    got = [y.pow(literal), y * literal, torch.add(y, y, alpha=literal), y.pow(4.5), y * 4.5]
    torch_tpu.flush()
    compiles = torch_tpu.metrics.snapshot()["compiles"]
    # The literal compiles (three ops; one group in fused mode), the other values do not.
    assert 1 <= compiles <= 3
    want = [x.pow(literal), x * literal, torch.add(x, x, alpha=literal), x.pow(4.5), x * 4.5]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)
    if literal == 2:  # CPU computes x ** 2 as x * x too
        assert torch.equal(got[0].cpu(), x * x)


def test_acceptance_expression():
    x = torch.randn(64, 64)
    y = x.to("tpu")
    got = ((y @ y + 1).relu().sum(0)).cpu()
    assert torch.allclose(got, (x @ x + 1).relu().sum(0), rtol=1e-4, atol=1e-4)
    assert torch_tpu.metrics.snapshot()["fallbacks"] == {}
