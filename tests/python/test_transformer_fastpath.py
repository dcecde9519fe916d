"""nn.MultiheadAttention's and nn.TransformerEncoder's inference fast path on tpu (eval,
no_grad: PyTorch calls _native_multi_head_attention / _transformer_encoder_layer_fwd for
the PrivateUse1 device), and the ops it is made of, against CPU."""

import pytest
import torch

import torch_tpu
from helpers import tol


def to_tpu(args):
    return [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]


def sample():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 5, generator=g)
    return {
        "x": x,
        "full": torch.rand(2, 3, 5, 5, generator=g) > 0.6,
        "padding": torch.rand(2, 5, generator=g) > 0.7,
        "attention": torch.rand(5, 5, generator=g) > 0.7,
    }


@pytest.mark.parametrize(
    "mask, dim, mask_type",
    [("full", 3, 2), ("padding", 3, 1), ("attention", 3, 0), ("full", 1, 2), ("full", None, 2)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_softmax_matches_cpu(mask, dim, mask_type, dtype):
    s = sample()
    x = s["x"].to(dtype)
    # Whole rows masked give NaN on CPU: the first row of the full mask is.
    s["full"][0, 0, 0] = True
    args = (x, s[mask], dim, mask_type)
    expected = torch._masked_softmax(*args)
    got = torch._masked_softmax(*to_tpu(args))
    torch.testing.assert_close(got.cpu(), expected, **tol(dtype, low=1e-2), equal_nan=True)


def test_masked_softmax_backward_matches_cpu():
    s = sample()
    g = torch.randn(2, 3, 5, 5)
    y = torch._masked_softmax(s["x"], s["full"], 3, 2)
    args = (g, y, s["full"], 3)
    expected = torch.ops.aten._masked_softmax_backward(*args)
    got = torch.ops.aten._masked_softmax_backward(*to_tpu(args))
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32), equal_nan=True)


@pytest.mark.parametrize(
    "args, message",
    [
        (lambda s: (s["x"], s["full"].float(), 3, 2), "Mask should be a boolean tensor"),
        (lambda s: (s["x"], s["padding"], 3, None), "Mask Type should be defined"),
        (lambda s: (s["x"], s["padding"][:, :3], 3, 1), r"mask_type == 1 mask shape"),
        (lambda s: (s["x"], s["full"][:1], 3, 2), r"mask_type == 2 mask shape"),
    ],
)
def test_masked_softmax_errors_match_cpu(args, message):
    s = sample()
    with pytest.raises(RuntimeError, match=message):
        torch._masked_softmax(*args(s))
    with pytest.raises(RuntimeError, match=message):
        torch._masked_softmax(*to_tpu(args(s)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transform_bias_rescale_qkv_matches_cpu(dtype):
    qkv, bias = torch.randn(2, 4, 24, dtype=dtype), torch.randn(24, dtype=dtype)
    expected = torch._transform_bias_rescale_qkv(qkv, bias, 2)
    got = torch._transform_bias_rescale_qkv(qkv.to("tpu"), bias.to("tpu"), 2)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e, **tol(dtype, low=1e-2))


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation_matches_cpu(use_gelu):
    a, m1, m2 = torch.randn(6), torch.randn(4, 5), torch.randn(5, 6)
    expected = torch._addmm_activation(a, m1, m2, beta=0.5, alpha=2.0, use_gelu=use_gelu)
    got = torch._addmm_activation(*to_tpu((a, m1, m2)), beta=0.5, alpha=2.0, use_gelu=use_gelu)
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32))
    out = torch.empty(4, 6, device="tpu")
    torch._addmm_activation(*to_tpu((a, m1, m2)), use_gelu=use_gelu, out=out)
    torch.testing.assert_close(out.cpu(), torch._addmm_activation(a, m1, m2, use_gelu=use_gelu))


def encoder(activation, norm_first):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def inputs():
    g = torch.Generator().manual_seed(1)
    src = torch.randn(3, 7, 16, generator=g)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[1, 5:] = True
    return src, padding


def calls(name, monkeypatch):
    """Counts the calls of aten op `name` on tpu tensors (the fast path is taken)."""
    seen = []
    original = getattr(torch, name)

    def counting(*args, **kwargs):
        seen.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch, name, counting)
    return seen


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_transformer_encoder_fast_path_matches_cpu(activation, norm_first, masked, monkeypatch):
    model = encoder(activation, norm_first)
    src, padding = inputs()
    kwargs = {"src_key_padding_mask": padding} if masked else {}
    with torch.no_grad():
        expected = model(src, **kwargs)
        seen = calls("_transformer_encoder_layer_fwd", monkeypatch)
        got = model.to("tpu")(src.to("tpu"), **{k: v.to("tpu") for k, v in kwargs.items()})
    assert len(seen) == 2  # both layers took the fast path
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32, f32=2e-5))


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("mask", [None, "key_padding_mask", "attn_mask"])
def test_multihead_attention_fast_path_matches_cpu(need_weights, mask, monkeypatch):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    src, padding = inputs()
    kwargs = {"need_weights": need_weights}
    if mask == "key_padding_mask":
        kwargs[mask] = padding
    elif mask == "attn_mask":
        kwargs[mask] = torch.rand(7, 7, generator=torch.Generator().manual_seed(2)) > 0.8
    with torch.no_grad():
        expected = mha(src, src, src, **kwargs)
        seen = calls("_native_multi_head_attention", monkeypatch)
        on_tpu = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        s = src.to("tpu")
        got = mha.to("tpu")(s, s, s, **on_tpu)
    assert len(seen) == 1
    torch.testing.assert_close(got[0].cpu(), expected[0], **tol(torch.float32, f32=2e-5))
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), expected[1], **tol(torch.float32))
    else:
        assert got[1] is None and expected[1] is None


@pytest.mark.single_mode
def test_compiled_transformer_encoder_matches_cpu(fresh_dynamo):
    model = encoder("gelu", False)
    src, padding = inputs()
    with torch.no_grad():
        expected = model(src, src_key_padding_mask=padding)
        compiled = torch.compile(model.to("tpu"), backend="tpu")
        got = compiled(src.to("tpu"), src_key_padding_mask=padding.to("tpu"))
    torch.testing.assert_close(got.cpu(), expected, **tol(torch.float32, f32=2e-5))
    metrics = torch_tpu.metrics.snapshot()
    assert metrics["graphs"] >= 1 and metrics["graph_splits"] == 0


@pytest.mark.single_mode
@pytest.mark.parametrize("need_weights", [False, True])
def test_compiled_multihead_attention_matches_cpu(fresh_dynamo, need_weights):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    src, padding = inputs()
    with torch.no_grad():
        expected = mha(src, src, src, key_padding_mask=padding, need_weights=need_weights)
        s = src.to("tpu")
        compiled = torch.compile(mha.to("tpu"), backend="tpu")
        got = compiled(s, s, s, key_padding_mask=padding.to("tpu"), need_weights=need_weights)
    torch.testing.assert_close(got[0].cpu(), expected[0], **tol(torch.float32, f32=2e-5))
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), expected[1], **tol(torch.float32))
    metrics = torch_tpu.metrics.snapshot()
    assert metrics["graphs"] >= 1 and metrics["graph_splits"] == 0
