import json
import warnings

import pytest
import torch

import torch_tpu
from helpers import run_python


def test_cpu_and_tpu_tensors_in_one_op():
    a = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    # 0-dim CPU tensors are scalars, as with CUDA
    torch.testing.assert_close((a + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_unsupported_dtype():
    # complex32 has no PJRT element type (complex64 and complex128 do).
    with pytest.raises(TypeError, match="complex32 is not supported on the tpu device"):
        torch.zeros(2, dtype=torch.complex32, device="tpu")
    with pytest.raises(TypeError, match="not supported on the tpu device"):
        torch.zeros(2, dtype=torch.complex32).to("tpu")


# aten::_standard_gamma_grad (the derivative of a Gamma sample in its concentration)
# stands for any op without a lowering.
def _gamma_inputs(device):
    g = torch.Generator().manual_seed(0)
    alpha = torch.rand(5, generator=g) + 0.5
    return [t.to(device) for t in (alpha, torch.rand(5, generator=g) + 0.1)]


def test_missing_op_raises_and_names_the_fallback_switch():
    with pytest.raises(NotImplementedError, match=r"aten::_standard_gamma_grad.*set_cpu_fallback"):
        torch._standard_gamma_grad(*_gamma_inputs("tpu"))


def test_cpu_fallback_runs_and_counts():
    torch_tpu.set_cpu_fallback(True)
    torch_tpu.metrics.reset()
    cpu, x = _gamma_inputs("cpu"), _gamma_inputs("tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once per process, maybe by an earlier test
        y = torch._standard_gamma_grad(*x)
    assert y.device.type == "tpu"
    torch.testing.assert_close(y.cpu(), torch._standard_gamma_grad(*cpu))
    torch._standard_gamma_grad(*x)
    fallbacks = torch_tpu.metrics.snapshot()["fallbacks"]
    assert sum(n for op, n in fallbacks.items() if op.startswith("aten::_standard_gamma_grad")) == 2
    assert torch_tpu.metrics.fallback_count() == 2
    # out= results are written back through the fallback
    z = torch.empty(5, device="tpu")
    torch.ops.aten._standard_gamma_grad.out(*x, out=z)
    torch.testing.assert_close(z.cpu(), torch._standard_gamma_grad(*cpu))


def test_cpu_fallback_warns_once_per_op_and_process():
    # In a fresh process: the warning is once per process, and another test of the same
    # worker may have run the op through the fallback already.
    code = """
import json, warnings, torch, torch_tpu
torch_tpu.set_cpu_fallback(True)
x = [torch.rand(5).to("tpu") + 0.5, torch.rand(5).to("tpu") + 0.1]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch._standard_gamma_grad(*x)
    torch._standard_gamma_grad(*x)
print(json.dumps([str(w.message) for w in caught if w.category is UserWarning]))
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    messages = json.loads(r.stdout.strip().splitlines()[-1])
    assert sum("aten::_standard_gamma_grad" in m for m in messages) == 1, messages
    assert all("falls back to the CPU" in m for m in messages), messages


def test_bad_plugin_path_is_a_clear_error_and_import_still_works():
    code = """
import torch
print('imported')
try:
    torch.ones(2, device='tpu')
except RuntimeError as e:
    print('error:', e)
print('available:', torch.tpu.is_available())
"""
    r = run_python(code, {"TORCH_TPU_PJRT_PLUGIN": "/nonexistent/plugin.so"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "imported" in out
    assert "cannot load PJRT plugin '/nonexistent/plugin.so'" in out
    assert "available: False" in out


def test_out_of_memory_is_a_python_error():
    total = torch.tpu.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory"):
        torch.empty(total + 1024, dtype=torch.uint8, device="tpu")
    # the process survives and the device still works
    assert (torch.ones(2, device="tpu") * 3).cpu().tolist() == [3.0, 3.0]


def test_inplace_into_expanded_tensor_is_rejected():
    x = torch.zeros(3, device="tpu").expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.add_(1)


# What CPU's TensorIterator refuses (a written tensor that shares some, not all, of its
# elements with an input) and what it allows (the same elements, or an op that is not
# pointwise), in both eager modes; each call twice, so the second meets op mode's call
# memo. (CPU's results for mm and sum depend on the order it writes in: not compared.)
_OVERLAPS = {
    "add_ transposed self": lambda a: a.add_(a.t()),
    "add_ a row of self": lambda a: a.add_(a[0]),
    "mul_ shifted slices": lambda a: a[1:].mul_(a[:3]),
    "exp out= transposed": lambda a: torch.exp(a.t(), out=a),
    "addcmul_": lambda a: a.addcmul_(a.t(), a),
    "lerp_": lambda a: a.lerp_(a.t(), 0.5),
    "maximum out=": lambda a: torch.maximum(a, a.t(), out=a),
    "copy_ transposed": lambda a: a.copy_(a.t()),
    "foreach add_": lambda a: torch._foreach_add_([a.clone(), a], [a.clone(), a.t()]),
    # allowed
    "add_ self": lambda a: a.add_(a),
    "add_ the same view": lambda a: a.add_(a.view(4, 4)),
    "foreach add_ across positions": lambda a: torch._foreach_add_(
        [a, a.clone()], [a.clone(), a.t()]
    ),
    "mm out=": lambda a: torch.mm(a.t(), a, out=a),
    "sum out= a row": lambda a: torch.sum(a, 0, out=a[0]),
}
_ORDER_DEPENDENT = {"mm out=", "sum out= a row"}


@pytest.mark.parametrize("mode", ["op", "fused"])
@pytest.mark.parametrize("case", list(_OVERLAPS))
def test_partial_overlap_of_written_and_read_tensors_as_on_cpu(case, mode, set_eager_mode):
    def attempt(device):
        a = torch.arange(16.0, device=device).reshape(4, 4)
        try:
            _OVERLAPS[case](a)
        except RuntimeError as e:
            assert "refer to a single memory location" in str(e)
            return None
        return a.cpu()

    expected = attempt("cpu")
    set_eager_mode(mode)
    for _ in range(2):
        got = attempt("tpu")
        if expected is None:
            assert got is None, f"{case}: CPU refuses it, tpu computed {got}"
        else:
            assert got is not None, f"{case}: CPU computes it, tpu refused"
            if case not in _ORDER_DEPENDENT:
                torch.testing.assert_close(got, expected)


def test_shape_errors_match_cpu():
    a = torch.ones(2, 3, device="tpu")
    b = torch.ones(4, 5, device="tpu")
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ):
        a @ b
    with pytest.raises(RuntimeError, match="must match the size"):
        a + torch.ones(4, device="tpu")
