"""float8_e4m3fn and float8_e5m2 tensors on tpu: conversions as CPU rounds them (once, to
nearest even; e4m3fn saturating), and the float8 matrix product _scaled_mm."""

import pytest
import torch

import torch_tpu
from helpers import tol

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def values():
    g = torch.Generator().manual_seed(0)
    special = [68.01642608642578, -84.0208, 0.0, -0.0, float("nan"), float("inf"), float("-inf")]
    special += [448.0, 449.0, 464.0, 465.0, 1e6, 57344.0, 61439.0, 61440.0, 2**-10, 2**-17]
    return torch.cat(
        [
            torch.randn(20000, generator=g) * 100,
            torch.randn(20000, generator=g) * 0.01,
            torch.randn(5000, generator=g) * 1e-4,
            torch.tensor(special),
        ]
    )


@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("dtype", FLOAT8)
def test_conversion_matches_cpu(dtype, source):
    x = values().to(source)
    expected = x.to(dtype)
    got = x.to("tpu").to(dtype)
    assert got.dtype == dtype
    # Bit for bit (NaNs as NaNs): float8 values read back through float32.
    a, b = expected.float(), got.cpu().float()
    assert ((a == b) | (a.isnan() & b.isnan())).all()
    assert torch.equal(
        got.cpu().view(torch.uint8)[~a.isnan()], expected.view(torch.uint8)[~a.isnan()]
    )


@pytest.mark.parametrize("dtype", FLOAT8)
def test_float8_tensors_move_and_widen(dtype):
    x = values()[:100].to(dtype)
    t = x.to("tpu")
    assert torch.equal(t.cpu().view(torch.uint8), x.view(torch.uint8))
    torch.testing.assert_close((t.float() * 2).cpu(), x.float() * 2, equal_nan=True)


def scaled_mm_inputs(a_dtype, b_dtype, rowwise):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(16, 32, generator=g).to(a_dtype)
    b = torch.randn(8, 32, generator=g).to(b_dtype).t()  # column-major, as cuBLAS wants
    if rowwise:
        return a, b, torch.rand(16, 1, generator=g) + 0.5, torch.rand(1, 8, generator=g) + 0.5
    return a, b, torch.tensor(0.5), torch.tensor(2.0)


@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("types", [(torch.float8_e4m3fn,) * 2, FLOAT8])
def test_scaled_mm_matches_cpu(types, out_dtype, rowwise):
    a, b, sa, sb = scaled_mm_inputs(*types, rowwise)
    bias = torch.randn(8).to(out_dtype) if out_dtype == torch.bfloat16 and not rowwise else None
    expected = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    on_tpu = [t.to("tpu") for t in (a, b, sa, sb)]
    got = torch._scaled_mm(
        *on_tpu, bias=None if bias is None else bias.to("tpu"), out_dtype=out_dtype
    )
    assert got.dtype == out_dtype
    torch.testing.assert_close(got.cpu(), expected, **tol(out_dtype))
    out = torch.empty(0, dtype=out_dtype, device="tpu")
    torch._scaled_mm(
        *on_tpu, bias=None if bias is None else bias.to("tpu"), out_dtype=out_dtype, out=out
    )
    torch.testing.assert_close(out.cpu(), expected, **tol(out_dtype))


@pytest.mark.single_mode
def test_compiled_scaled_mm_matches_cpu(fresh_dynamo):
    a, b, sa, sb = scaled_mm_inputs(torch.float8_e4m3fn, torch.float8_e4m3fn, True)

    def f(x, w, sx, sw):
        y = torch._scaled_mm(x.float().to(torch.float8_e4m3fn), w, sx, sw, out_dtype=torch.float32)
        return y.relu().sum(1)

    expected = f(a.float(), b, sa, sb)
    got = torch.compile(f, backend="tpu")(
        a.float().to("tpu"), b.to("tpu"), sa.to("tpu"), sb.to("tpu")
    )
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32))
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0
