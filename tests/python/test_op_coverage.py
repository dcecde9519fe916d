"""Every op CPU has a kernel for has one on tpu, by the dispatcher's own tables: a tpu
(PrivateUse1) kernel or a composite one that serves every backend. What exists only for
CPU's own engines is left out by the rule below; a new PyTorch's new ops show up here by
name."""

import re

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu kernels)

pytestmark = pytest.mark.single_mode

# Families that exist only for CPU's own engines and layouts, never for a device backend.
EXCLUDED = {
    "oneDNN (mkldnn) kernels and layout": r"mkldnn",
    "CPU-only reference kernels (named so)": r"_for_cpu$|_for_cpu_backward|^slow_conv|^_slow_conv",
    "quantized tensors (QuantizedCPU's dtypes, fbgemm packing)": (
        r"^quantize_per_|^dequantize\.self$|quantized|^_empty_(per_channel_)?affine_quantized$"
        r"|^_make_per_(tensor|channel)_quantized_tensor$"
    ),
    "KleidiAI / CPU 4-bit packed weights": r"^_dyn_quant_|^_convert_weight_to_int4pack",
    "sparse layouts": r"sparse|^_to_sparse|_csr|_coo|_bsr|_bsc|_csc|^_spdiags$|^sspaddmm",
    "nested tensors' storage": r"^_nested_",
    "test ops": r"^_test_|^_foobar$",
    "reading a file into host memory": r"^from_file$",
}

# Ops CPU has that tpu does not yet: the work left of issue 44 (docs/conformance.md).
# An op leaves this list when it gets its kernel; the test fails on a stale entry.
PENDING = {
    "_ctc_loss_backward", "_ctc_loss_backward.Tensor", "_dirichlet_grad",
    "_fake_quantize_learnable_per_channel_affine",
    "_fake_quantize_learnable_per_channel_affine_backward",
    "_fake_quantize_learnable_per_tensor_affine",
    "_fake_quantize_learnable_per_tensor_affine_backward", "_fused_moving_avg_obs_fq_helper",
    "_scaled_mm_v2", "_scaled_mm_v2.out", "_standard_gamma_grad", "_upsample_lanczos2d_aa.out",
    "_upsample_lanczos2d_aa_backward.grad_input", "grid_sampler_2d_backward",
    "grid_sampler_3d_backward",
}  # fmt: skip


def registered(key: str) -> set[str]:
    names = torch._C._dispatch_get_registrations_for_dispatch_key(key)
    return {n[len("aten::") :] for n in names if n.startswith("aten::")}


def missing_on_tpu() -> list[str]:
    covered = registered("PrivateUse1")
    for key in (
        "CompositeImplicitAutograd",
        "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional",
    ):
        covered |= registered(key)
    excluded = re.compile("|".join(f"(?:{p})" for p in EXCLUDED.values()))
    return sorted(n for n in registered("CPU") - covered if not excluded.search(n))


def test_every_cpu_op_has_a_tpu_kernel():
    missing = set(missing_on_tpu())
    new = sorted(missing - PENDING)
    assert not new, f"{len(new)} ops CPU has have no tpu kernel: {new}"


def test_pending_list_is_current():
    stale = sorted(PENDING - set(missing_on_tpu()))
    assert not stale, f"these ops have a tpu kernel now; take them off PENDING: {stale}"


def test_the_exclusion_rule_leaves_out_only_cpu_engine_families():
    # Each family of the rule matches something in this torch (no dead rule), and the
    # rule keeps ops every backend needs, such as the transformer fast path's.
    cpu = registered("CPU")
    for family, pattern in EXCLUDED.items():
        assert any(re.search(pattern, n) for n in cpu), f"no CPU op matches {family}"
    excluded = re.compile("|".join(f"(?:{p})" for p in EXCLUDED.values()))
    for kept in ("_native_multi_head_attention", "_int_mm", "poisson", "_unique"):
        assert kept in cpu and not excluded.search(kept)
