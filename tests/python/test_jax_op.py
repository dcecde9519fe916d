"""torch.tpu.pallas.jax_op: JAX functions and Pallas kernels (interpret mode, which
XLA:CPU runs) as torch ops on tpu, eager and inside compiled graphs (part of the graph's
program), values and gradients against the same computation in CPU PyTorch."""

import os

import pytest
import torch

import torch_tpu
from helpers import assert_same, run_python, tol

# Importing JAX sets TF_CPP_MIN_LOG_LEVEL in os.environ, which the subprocesses of other
# test files (collected with this one) would inherit: keep the environment as it was.
_environ = dict(os.environ)
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pl = pytest.importorskip("jax.experimental.pallas")
os.environ.clear()
os.environ.update(_environ)

F32 = tol(torch.float32, f32=1e-5)


@torch.tpu.pallas.jax_op("torch_tpu_test::scaled_sin")
def scaled_sin(x: jax.Array, y: jax.Array, scale: float = 1.0) -> jax.Array:
    return jnp.sin(x) * y * scale


@torch.tpu.pallas.jax_op("torch_tpu_test::tanh_and_norm")
def tanh_and_norm(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.tanh(x @ w), jnp.sum(x * x, axis=-1)


@torch.tpu.pallas.jax_op("torch_tpu_test::gather_rows")
def gather_rows(x: jax.Array, rows: jax.Array) -> jax.Array:
    return x[rows] * 3.0


def _scale_exp_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * jnp.exp(x_ref[...])


def _scale_exp_grad_kernel(x_ref, g_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = g_ref[...] * jnp.exp(x) * (1.0 + x)


def _pallas(kernel, like, *args):
    out = jax.ShapeDtypeStruct(like.shape, like.dtype)
    return pl.pallas_call(kernel, out_shape=out, interpret=True)(*args)


@jax.custom_vjp
def _x_exp_x(x):
    return _pallas(_scale_exp_kernel, x, x)


def _x_exp_x_fwd(x):
    return _x_exp_x(x), x


def _x_exp_x_bwd(x, g):
    return (_pallas(_scale_exp_grad_kernel, x, x, g),)


_x_exp_x.defvjp(_x_exp_x_fwd, _x_exp_x_bwd)


@torch.tpu.pallas.jax_op("torch_tpu_test::x_exp_x")
def x_exp_x(x: jax.Array) -> jax.Array:
    """x * exp(x): a Pallas kernel with a Pallas gradient kernel (jax.custom_vjp)."""
    return _x_exp_x(x)


def pair(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.randn(*s, generator=g).requires_grad_() for s in shapes]
    return cpu, [c.detach().to("tpu").requires_grad_() for c in cpu]


def run(fn, compiled):
    return torch.compile(fn, backend="tpu", fullgraph=True) if compiled else fn


def check_grads(cpu, tpu):
    for c, t in zip(cpu, tpu):
        assert t.grad is not None and t.grad.device.type == "tpu"
        assert_same(t.grad, c.grad, **F32)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_function_value_and_gradient(compiled, fresh_dynamo):
    (x, y), (xt, yt) = pair((4, 5), (4, 5))
    out = run(lambda a, b: scaled_sin(a * 2, b, scale=0.5), compiled)(xt, yt)
    expected = torch.sin(x * 2) * y * 0.5
    assert out.device.type == "tpu"
    assert_same(out, expected.detach(), **F32)
    grad = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    out.backward(grad.to("tpu"))
    expected.backward(grad)
    check_grads((x, y), (xt, yt))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_two_results_one_used(compiled, fresh_dynamo):
    """A result the loss does not use gets a zero cotangent in the VJP."""
    (x, w), (xt, wt) = pair((6, 5), (5, 3), seed=1)
    out = run(lambda a, b: tanh_and_norm(a, b)[0].sum(), compiled)(xt, wt)
    expected = torch.tanh(x @ w).sum()
    assert_same(out, expected.detach(), **F32)
    out.backward()
    expected.backward()
    check_grads((x, w), (xt, wt))
    first, second = tanh_and_norm(xt.detach(), wt.detach())
    assert_same(second, (x * x).sum(-1).detach(), **F32)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_pallas_kernel_value_and_gradient(compiled, fresh_dynamo):
    (x,), (xt,) = pair((8, 128), seed=2)
    out = run(lambda a: x_exp_x(a) + 1.0, compiled)(xt)
    expected = x * torch.exp(x) + 1.0
    assert_same(out, expected.detach(), **F32)
    out.sum().backward()
    expected.sum().backward()
    check_grads((x,), (xt,))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_integer_argument_gets_no_gradient(compiled, fresh_dynamo):
    (x,), (xt,) = pair((8, 4), seed=4)
    rows = torch.tensor([2, 0, 5, 2])
    out = run(lambda a, r: gather_rows(a, r).sum(), compiled)(xt, rows.to("tpu"))
    expected = (x[rows] * 3.0).sum()
    assert_same(out, expected.detach(), **F32)
    out.backward()
    expected.backward()
    check_grads((x,), (xt,))


def test_compiled_call_is_part_of_the_program(fresh_dynamo):
    """Forward and backward graphs each stay one program: the JAX functions are called
    inside them, no split around the op."""
    (x, y), (xt, yt) = pair((3, 7), (3, 7), seed=5)
    before = torch_tpu.metrics.snapshot()
    step = torch.compile(lambda a, b: (scaled_sin(a, b, 2.0) ** 2).sum(), backend="tpu")
    step(xt, yt).backward()
    after = torch_tpu.metrics.snapshot()
    assert after["graphs"] - before["graphs"] == 2
    assert after["graph_splits"] == before["graph_splits"]
    assert after["graph_fallbacks"] == before["graph_fallbacks"]
    ((torch.sin(x) * y * 2.0) ** 2).sum().backward()
    check_grads((x, y), (xt, yt))


def test_one_export_per_signature():
    """A new shape or static value exports again; the same ones reuse the export."""
    a = torch.randn(3, 3).to("tpu")
    scaled_sin(a, a, 1.5)
    scaled_sin(a, a, 1.5)
    before = torch_tpu.metrics.snapshot()["compiles"]
    scaled_sin(a, a, 1.5)
    assert torch_tpu.metrics.snapshot()["compiles"] == before
    assert_same(scaled_sin(a, a, 2.5), (torch.sin(a.cpu()) * a.cpu() * 2.5), **F32)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="namespace::op"):
        torch.tpu.pallas.jax_op("no_namespace", lambda x: x)
    with pytest.raises(ValueError, match="annotate argument 'x'"):

        def unannotated(x) -> jax.Array:
            return x

        torch.tpu.pallas.jax_op("torch_tpu_test::unannotated", unannotated)
    with pytest.raises(RuntimeError, match="expected tpu tensors"):
        scaled_sin(torch.ones(2), torch.ones(2))

    @torch.tpu.pallas.jax_op("torch_tpu_test::plain_pallas")
    def plain_pallas(x: jax.Array) -> jax.Array:
        return _pallas(_scale_exp_kernel, x, x)

    xt = torch.ones(8, 128, device="tpu", requires_grad=True)
    out = plain_pallas(xt)
    assert_same(out, torch.full((8, 128), torch.e), **F32)
    with pytest.raises(RuntimeError, match="jax.custom_vjp"):
        out.sum().backward()


def test_without_jax_names_the_extra():
    code = (
        "import sys; sys.modules['jax'] = None\n"
        "import torch\n"
        "try:\n"
        "    torch.tpu.pallas.jax_op('x::y', lambda a: a)\n"
        "except ModuleNotFoundError as e:\n"
        "    print('ERR', e)\n"
    )
    result = run_python(code)
    assert "ERR" in result.stdout and "pip install torch_tpu[jax]" in result.stdout, (
        result.stdout + result.stderr
    )
