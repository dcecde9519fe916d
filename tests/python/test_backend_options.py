"""Backend "tpu"'s options, and torch.compile's default backend for tpu tensors."""

import warnings

import pytest
import torch

import torch_tpu
from torch_tpu import _dynamo

pytestmark = pytest.mark.single_mode


def f(x, w):
    return torch.nn.functional.gelu(x @ w).sum(0)


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(5, 4, generator=g), torch.randn(4, 3, generator=g)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"bucket_sise": 64},
            r"unknown option\(s\) \['bucket_sise'\]; valid options are "
            r"\['async_compile', 'bucket_size', 'max_buckets'\]",
        ),
        ({"xla_options": {}}, r"unknown option\(s\) \['xla_options'\]"),
        ({"bucket_size": 0}, "'bucket_size' must be a positive int, got 0"),
        ({"max_buckets": True}, "'max_buckets' must be a positive int, got True"),
        ({"async_compile": 1}, "'async_compile' must be bool, got 1"),
    ],
)
def test_bad_options_raise_naming_the_problem(fresh_dynamo, options, message):
    x, w = inputs()
    compiled = torch.compile(f, backend="tpu", options=options)
    with pytest.raises(Exception, match=message):
        compiled(x.to("tpu"), w.to("tpu"))


def test_valid_options_compile(fresh_dynamo):
    x, w = inputs()
    out = torch.compile(f, backend="tpu", options={"bucket_size": 128, "max_buckets": 8})(
        x.to("tpu"), w.to("tpu")
    )
    torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)


def test_async_compile_trains_like_the_cpu(fresh_dynamo):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
    tpu = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    x = torch.randn(7, 6)
    compiled = torch.compile(tpu, backend="tpu", options={"async_compile": True})
    loss = compiled(x.to("tpu")).square().mean()
    loss.backward()
    ref = cpu(x).square().mean()
    ref.backward()
    torch.testing.assert_close(loss.cpu(), ref, rtol=1e-5, atol=1e-6)
    for a, b in zip(tpu.parameters(), cpu.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-6)
    assert torch_tpu.metrics.snapshot()["graphs"] == 2  # forward and backward, each a program


def test_async_compile_reports_errors_at_the_first_call(fresh_dynamo, monkeypatch):
    def fail(*args):
        raise RuntimeError("lowering failed on purpose")

    monkeypatch.setattr(_dynamo, "_lower", fail)
    x, w = inputs()
    compiled = torch.compile(f, backend="tpu", options={"async_compile": True})
    with pytest.raises(RuntimeError, match="lowering failed on purpose"):
        compiled(x.to("tpu"), w.to("tpu"))


def test_no_backend_compiles_tpu_tensors_with_tpu(fresh_dynamo):
    x, w = inputs()
    out = torch.compile(f)(x.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graphs"] == 1


def test_no_backend_as_decorator_and_on_a_module(fresh_dynamo):
    x, w = inputs()

    @torch.compile(mode="reduce-overhead")
    def g(x, w):
        return f(x, w) * 2

    torch.testing.assert_close(g(x.to("tpu"), w.to("tpu")).cpu(), f(x, w) * 2, rtol=1e-5, atol=1e-5)
    linear = torch.nn.Linear(4, 3)
    with torch.no_grad():
        expected = linear(x)
        got = torch.compile(linear.to("tpu"))(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graphs"] == 2


def test_no_backend_leaves_cpu_tensors_to_inductor(fresh_dynamo, monkeypatch):
    # Inductor's own compiler is replaced by one that records its graph and runs it as
    # is: what is tested is who gets CPU graphs, not Inductor's code (generating and
    # building it takes tens of seconds).
    import torch._inductor.compile_fx as inductor

    seen = []

    def compile_fx(gm, example_inputs, **kwargs):
        seen.append([t.device.type for t in example_inputs if isinstance(t, torch.Tensor)])
        return gm.forward

    monkeypatch.setattr(inductor, "compile_fx", compile_fx)
    x, w = inputs()
    out = torch.compile(f)(x, w)
    torch.testing.assert_close(out, f(x, w), rtol=1e-5, atol=1e-5)
    assert seen and all(set(devices) == {"cpu"} for devices in seen)
    assert torch_tpu.metrics.snapshot()["graphs"] == 0


@pytest.fixture
def fresh_warnings(monkeypatch):
    from torch_tpu import _default_backend

    monkeypatch.setattr(_default_backend, "_warned", set())


def test_explicit_inductor_on_tpu_tensors_compiles_with_tpu(fresh_dynamo, fresh_warnings):
    x, w = inputs()
    torch.compile(f)(x.to("tpu"), w.to("tpu"))  # the default's code is not reused
    assert torch_tpu.metrics.snapshot()["graphs"] == 1
    compiled = torch.compile(f, backend="inductor")
    with pytest.warns(UserWarning, match=r"backend='inductor'.*compiled by backend 'tpu'") as seen:
        out = compiled(x.to("tpu"), w.to("tpu"))
    assert len(seen) == 1
    torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graphs"] == 2
    # Once per process: a second function compiled the same way says nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = torch.compile(lambda x, w: f(x, w) + 1, backend="inductor")(x.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x, w) + 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"options": {"max_autotune": True}},
        {"backend": "inductor", "mode": "max-autotune", "options": None},
        {"options": {"max_autotune": True, "coordinate_descent_tuning": True}},
    ],
)
def test_inductor_options_on_tpu_tensors_are_ignored_with_one_warning(
    fresh_dynamo, fresh_warnings, kwargs
):
    x, w = inputs()
    options = sorted(kwargs.get("options") or {})
    if options:
        kwargs = {k: v for k, v in kwargs.items() if k != "mode"}
    compiled = torch.compile(f, **kwargs)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = compiled(x.to("tpu"), w.to("tpu"))
        again = torch.compile(lambda x, w: f(x, w) * 3, **kwargs)(x.to("tpu"), w.to("tpu"))
    ours = [str(m.message) for m in seen if "torch.compile" in str(m.message)]
    if options:
        assert [m for m in ours if "options" in m] == [m for m in ours if f"options {options}" in m]
        assert len([m for m in ours if "options" in m]) == 1
    assert len(ours) == (1 if options else 0) + (1 if kwargs.get("backend") == "inductor" else 0)
    torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(again.cpu(), f(x, w) * 3, rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graphs"] == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_eager_backends_keep_pytorchs_meaning(fresh_dynamo, backend):
    x, w = inputs()
    out = torch.compile(f, backend=backend)(x.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x, w), rtol=1e-5, atol=1e-5)
    assert torch_tpu.metrics.snapshot()["graphs"] == 0
