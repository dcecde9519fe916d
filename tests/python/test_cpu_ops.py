"""Ops CPU has that no OpInfo covers (test_op_coverage.py lists what is left): each
against CPU on the same inputs, in the eager mode of the run and compiled."""

import warnings

import pytest
import torch

import torch_tpu
from helpers import tol

A = torch.ops.aten


def to_tpu(x):
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    return x


def out_like(device, dtype=torch.float32):
    return torch.empty(0, device=device, dtype=dtype)


def g(seed=0):
    return torch.Generator().manual_seed(seed)


def inputs():
    gen = g()
    x = torch.randn(4, 6, generator=gen)
    return {
        "x": x,
        "y": torch.randn(4, 6, generator=gen),
        "im": torch.randn(2, 3, 8, 8, generator=gen),
        "vol": torch.randn(2, 3, 4, 6, 6, generator=gen),
        "c": torch.rand(3, generator=gen) + 0.5,
        "i8a": torch.randint(-128, 127, (32, 64), dtype=torch.int8, generator=gen),
        "i8b": torch.randint(-128, 127, (64, 32), dtype=torch.int8, generator=gen),
        "w8": torch.randint(-128, 127, (16, 64), dtype=torch.int8, generator=gen),
        "a64": torch.randn(8, 64, generator=gen),
        "s16": torch.rand(16, generator=gen),
        "v": torch.randn(5, 3, 2, 2, generator=gen),
        "gv": torch.rand(5, 1, 1, 1, generator=gen) + 0.5,
        "gg": torch.randn(4, 3, generator=gen),
        "dx": torch.randn(4, 6, generator=gen),
        "q": torch.randn(4, 6, 5, generator=gen) * 3,
        "qscale": torch.rand(6, generator=gen) * 0.1 + 0.01,
        "qzero": torch.randint(-5, 5, (6,), dtype=torch.int32, generator=gen),
    }


def bn_stats(im, c):
    return im, c, c * 0.5, torch.zeros(3), torch.ones(3)


def batch_norm_out(op, t, d, *training, **more_outs):
    """An out= batch norm in training (`training` is the flag for ops that take one): its
    results and the running statistics it updates."""
    im, w, b, rm, rv = to_device(bn_stats(t["im"], t["c"]), d)
    outs = dict(out=out_like(d), save_mean=out_like(d), save_invstd=out_like(d), **more_outs)
    return (*op(im, w, b, rm, rv, *training, 0.1, 1e-5, **outs), rm, rv)


# name: (function of the inputs dict and the device, compiled too)
CASES = {
    "_compute_linear_combination": (
        lambda t, d: A._compute_linear_combination(t["v"], t["x"][:2, :5]),
        True,
    ),
    "_compute_linear_combination.out": (
        lambda t, d: A._compute_linear_combination.out(
            t["v"],
            t["x"][:2, :5],
            out=torch.ones(2, 3, 2, 2, device=d),  # it adds to out
        ),
        False,
    ),
    "fake_quantize_per_tensor_affine_cachemask": (
        lambda t, d: A.fake_quantize_per_tensor_affine_cachemask(t["q"], 0.1, 3, -128, 127),
        True,
    ),
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams": (
        lambda t, d: [
            A._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
                t["q"],
                torch.tensor([0.05], device=d),
                torch.tensor([100], dtype=torch.int32, device=d),
                torch.tensor([enabled], device=d),
                0,
                255,
            )
            for enabled in (1, 0)
        ],
        True,
    ),
    "fake_quantize_per_channel_affine_cachemask": (
        lambda t, d: A.fake_quantize_per_channel_affine_cachemask(
            t["q"], t["qscale"], t["qzero"], 1, -128, 127
        ),
        True,
    ),
    "_add_relu.Tensor": (lambda t, d: A._add_relu.Tensor(t["x"], t["y"], alpha=2), True),
    "_add_relu.Scalar": (lambda t, d: A._add_relu.Scalar(t["x"], 0.5), True),
    "_add_relu_.Tensor": (lambda t, d: A._add_relu_.Tensor(t["x"].clone(), t["y"]), False),
    "_add_relu.out": (
        lambda t, d: A._add_relu.out(t["x"], t["y"], out=out_like(d)),
        False,
    ),
    "_aminmax": (lambda t, d: A._aminmax(t["x"]), True),
    "_aminmax.dim": (lambda t, d: A._aminmax.dim(t["x"], 1, True), True),
    "_logcumsumexp": (lambda t, d: A._logcumsumexp(t["x"], 1), True),
    "_logcumsumexp.out": (lambda t, d: A._logcumsumexp.out(t["x"], 0, out=out_like(d)), False),
    "adaptive_avg_pool2d.out": (
        lambda t, d: A.adaptive_avg_pool2d.out(t["im"], [3, 3], out=out_like(d)),
        False,
    ),
    "adaptive_avg_pool3d.out": (
        lambda t, d: A.adaptive_avg_pool3d.out(t["vol"], [2, 3, 3], out=out_like(d)),
        False,
    ),
    "adaptive_avg_pool3d_backward.grad_input": (
        lambda t, d: A.adaptive_avg_pool3d_backward.grad_input(
            A._adaptive_avg_pool3d(t["vol"], [2, 3, 3]) * 0 + 1, t["vol"], grad_input=out_like(d)
        ),
        False,
    ),
    "_native_batch_norm_legit.out": (
        lambda t, d: batch_norm_out(A._native_batch_norm_legit.out, t, d, True),
        False,
    ),
    "native_batch_norm.out": (
        lambda t, d: batch_norm_out(A.native_batch_norm.out, t, d, True),
        False,
    ),
    "_batch_norm_with_update.out": (
        lambda t, d: batch_norm_out(
            A._batch_norm_with_update.out, t, d, reserve=out_like(d, torch.uint8)
        ),
        False,
    ),
    "batch_norm_update_stats": (
        lambda t, d: (
            lambda im, w, b, rm, rv: (*A.batch_norm_update_stats(im, rm, rv, 0.1), rm, rv)
        )(*to_device(bn_stats(t["im"], t["c"]), d)),
        False,
    ),
    "batch_norm_backward": (
        lambda t, d: (
            lambda im, w, b, rm, rv: A.batch_norm_backward(
                im * 0.5,
                im,
                w,
                rm,
                rv,
                *A.native_batch_norm(im, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)[1:],
                True,
                1e-5,
                [True, True, True],
                torch.empty(0, dtype=torch.uint8, device=d),
            )
        )(*to_device(bn_stats(t["im"], t["c"]), d)),
        False,
    ),
    "glu_jvp": (
        lambda t, d: A.glu_jvp(torch.nn.functional.glu(t["x"], 1), t["x"], t["dx"], 1),
        True,
    ),
    "glu_backward_jvp": (
        lambda t, d: A.glu_backward_jvp(
            A.glu_backward(t["gg"], t["x"], 1), t["gg"], t["x"], t["gg"] * 0.5, t["dx"], 1
        ),
        True,
    ),
    "narrow_copy.out": (lambda t, d: A.narrow_copy.out(t["x"], 1, -4, 3, out=out_like(d)), False),
    "mvlgamma.out": (lambda t, d: A.mvlgamma.out(t["x"].abs() + 2, 3, out=out_like(d)), False),
    "_int_mm": (lambda t, d: A._int_mm(t["i8a"], t["i8b"]), True),
    "_int_mm.out": (
        lambda t, d: A._int_mm.out(
            t["i8a"], t["i8b"], out=torch.empty(32, 32, dtype=torch.int32, device=d)
        ),
        False,
    ),
    "_weight_int8pack_mm": (lambda t, d: A._weight_int8pack_mm(t["a64"], t["w8"], t["s16"]), True),
    "_weight_int8pack_mm.bf16": (
        lambda t, d: A._weight_int8pack_mm(
            t["a64"].bfloat16(), t["w8"], t["s16"].bfloat16()
        ).float(),
        True,
    ),
    "_weight_norm_interface": (lambda t, d: A._weight_norm_interface(t["v"], t["gv"], 0), True),
    "_weight_norm_interface.last": (
        lambda t, d: A._weight_norm_interface(t["v"], t["v"][:1, :1, :1] + 1, 3),
        True,
    ),
    "_weight_norm_interface_backward": (
        lambda t, d: A._weight_norm_interface_backward(
            t["v"] * 0.5, t["v"], t["gv"], A._weight_norm_interface(t["v"], t["gv"], 0)[1], 0
        ),
        True,
    ),
}


def to_device(values, device):
    return tuple(v.to(device) for v in values)


# A float32 dot product of length k may differ by k ulps of its terms' magnitude between
# summation orders: the int8-weight product sums 64 terms of |a| <= 4, |w| <= 128.
ATOL = {"_weight_int8pack_mm": 64 * torch.finfo(torch.float32).eps * 4 * 128}


def close(got, expected, atol=None):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            close(a, b, atol)
        return
    if expected.dtype == torch.bool:
        assert got.device.type == "tpu" and torch.equal(got.cpu(), expected)
        return
    assert got.device.type == "tpu"
    assert got.dtype == expected.dtype and got.shape == expected.shape
    bounds = tol(expected.dtype, f32=2e-5)
    if atol is not None and expected.dtype == torch.float32:
        bounds["atol"] = atol
    torch.testing.assert_close(got.cpu(), expected, **bounds, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_cpu(name):
    fn, _ = CASES[name]
    t = inputs()
    expected = fn(t, "cpu")
    got = fn({k: v.to("tpu") for k, v in t.items()}, "tpu")
    close(got, expected, ATOL.get(name))


@pytest.mark.single_mode
@pytest.mark.parametrize("name", sorted(n for n, (_, compiled) in CASES.items() if compiled))
def test_compiled_matches_cpu(name, fresh_dynamo):
    fn, _ = CASES[name]
    t = inputs()
    expected = fn(t, "cpu")
    on_tpu = {k: v.to("tpu") for k, v in t.items()}
    got = torch.compile(lambda t: fn(t, "tpu"), backend="tpu", fullgraph=True)(on_tpu)
    close(got, expected, ATOL.get(name))
    assert torch_tpu.metrics.snapshot()["graph_splits"] == 0


def test_host_linear_algebra_matches_cpu():
    # geev and sytrf run on the host, as CUDA's backend runs them (csrc/aten/host_kernels).
    a = torch.randn(3, 5, 5, generator=g(2))
    s = a @ a.transpose(-1, -2)
    b = torch.randn(3, 5, 2, generator=g(3))
    values, vectors = torch.linalg.eig(a.to("tpu"))
    close((values, vectors), torch.linalg.eig(a))
    close(torch.linalg.eigvals(a.to("tpu")), torch.linalg.eigvals(a))
    out = (torch.empty(0, dtype=torch.complex64, device="tpu"),) * 2
    close(torch.linalg.eig(a.to("tpu"), out=(out[0], out[1].clone())), torch.linalg.eig(a))
    ld, pivots = torch.linalg.ldl_factor(s)
    ld_t, pivots_t = torch.linalg.ldl_factor(s.to("tpu"))
    close((ld_t, pivots_t), (ld, pivots))
    close(
        torch.linalg.ldl_solve(ld_t, pivots_t, b.to("tpu")), torch.linalg.ldl_solve(ld, pivots, b)
    )


@pytest.mark.parametrize(
    "args, dtype",
    [((0, 5), torch.float32), ((1, 4, 0.5), torch.float32), ((10, 1, -3), torch.int64),
     ((0.1, 1.0, 0.3), torch.float64), ((-2, 7, 2), torch.int32)],
)  # fmt: skip
def test_range_matches_cpu(args, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.range is deprecated
        close(torch.range(*args, dtype=dtype, device="tpu"), torch.range(*args, dtype=dtype))
        for bad, message in (((0, 5, 0), "step must be nonzero"), ((5, 0, 1), "inconsistent")):
            with pytest.raises(RuntimeError, match=message):
                torch.range(*bad, device="tpu")


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist_backward_match_cpu(p):
    gen = g(7)
    x1, x2 = torch.randn(2, 5, 3, generator=gen), torch.randn(2, 4, 3, generator=gen)
    x = torch.randn(6, 3, generator=gen)

    def grads(device):
        a = x1.to(device).requires_grad_()
        d = torch.cdist(a, x2.to(device), p=p, compute_mode="donot_use_mm_for_euclid_dist")
        w = torch.arange(d.numel(), dtype=d.dtype).reshape(d.shape).to(device) / d.numel() - 0.3
        (ga,) = torch.autograd.grad(d, a, w)
        b = x.to(device).requires_grad_()
        pd = torch.pdist(b, p=p)
        (gb,) = torch.autograd.grad(pd, b, torch.linspace(-1, 1, pd.numel()).to(device))
        return ga, gb

    close(grads("tpu"), grads("cpu"))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4, 5), (5,)])
def test_margin_loss_backward_matches_cpu(reduction, shape):
    F = torch.nn.functional
    gen = g(8)
    x = torch.randn(*shape, generator=gen)
    target = torch.randint(0, 5, shape[:-1], generator=gen)
    labels = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1], [4, -1, 0, 0, 0]])
    labels = labels[: shape[0]] if len(shape) > 1 else labels[0]
    weight = torch.rand(5, generator=gen)
    losses = [
        lambda x, d: F.multi_margin_loss(x, target.to(d), p=1, margin=0.7, reduction=reduction),
        lambda x, d: F.multi_margin_loss(
            x, target.to(d), p=2, weight=weight.to(d), reduction=reduction
        ),
        lambda x, d: F.multilabel_margin_loss(x, labels.to(d), reduction=reduction),
    ]
    for loss in losses:
        grads = []
        for device in ("cpu", "tpu"):
            a = x.to(device).requires_grad_()
            out = loss(a, device)
            # (A 1-d input's unreduced loss is 0-d on CPU, [1] on tpu: the meta kernel's.)
            weights = torch.linspace(0.5, 1.5, out.numel()).reshape(out.shape).to(device)
            grads.append(torch.autograd.grad(out, a, weights)[0])
        close(grads[1], grads[0])


@pytest.mark.parametrize("trailing", [(), (3,)])
def test_jagged_and_padded_conversions_match_cpu(trailing):
    values = torch.randn(7, *trailing, generator=g(9))
    offsets = torch.tensor([0, 2, 2, 7])
    for max_length, pad in (([5], -1.0), ([3], 0.5), ([8], 0.0)):
        padded = A._jagged_to_padded_dense_forward(values, [offsets], max_length, pad)
        got = A._jagged_to_padded_dense_forward(
            values.to("tpu"), [offsets.to("tpu")], max_length, pad
        )
        close(got, padded)
    padded = A._jagged_to_padded_dense_forward(values, [offsets], [5], -1.0)
    for total in (None, 7):
        expected = A._padded_dense_to_jagged_forward(padded, [offsets], total)
        close(
            A._padded_dense_to_jagged_forward(padded.to("tpu"), [offsets.to("tpu")], total),
            expected,
        )
    short = A._jagged_to_padded_dense_forward(values, [offsets], [4], -1.0).to("tpu")
    with pytest.raises(RuntimeError, match="found batch item of length 5 when max length"):
        A._padded_dense_to_jagged_forward(short, [offsets.to("tpu")], None)


@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_backward_matches_cpu(reduce, by):
    # Ties (max/min split the gradient) and zeros (prod) on purpose.
    cases = [
        (torch.tensor([1.0, 3.0, 3.0, 2.0, 0.0, 5.0, 0.0, 4.0]), torch.tensor([3, 2, 0, 3]), 0),
        (
            torch.randn(2, 8, 3, generator=g(10)).round(),
            torch.tensor([[3, 2, 0, 3], [1, 1, 4, 2]]),
            1,
        ),
    ]
    for data, lengths, axis in cases:
        if by == "offsets":
            start = torch.zeros(lengths.shape[:-1] + (1,), dtype=torch.long)
            bounds = {"offsets": torch.cat([start, lengths.cumsum(-1)], -1)}
        else:
            bounds = {"lengths": lengths}
        grads = []
        for device in ("cpu", "tpu"):
            d = data.to(device).requires_grad_()
            on = {k: v.to(device) for k, v in bounds.items()}
            out = torch.segment_reduce(d, reduce, axis=axis, unsafe=True, **on)
            weights = torch.linspace(0.5, 1.5, out.numel()).reshape(out.shape).to(device)
            grads.append(torch.autograd.grad(out, d, weights)[0])
        close(grads[1], grads[0])


def test_old_unique_forms_match_cpu():
    y = torch.tensor([3, 1, 1, 2, 3, 3, 0])
    z = torch.tensor([[1, 2], [1, 2], [3, 4], [1, 2]])
    for got, expected in (
        (A._unique(y.to("tpu"), True, True), A._unique(y, True, True)),
        (
            A.unique_dim_consecutive(z.to("tpu"), 0, True, True),
            A.unique_dim_consecutive(z, 0, True, True),
        ),
    ):
        for a, b in zip(got, expected):
            assert a.device.type == "tpu" and torch.equal(a.cpu(), b)


@pytest.mark.parametrize("form", ["functional", "in_place", "out"])
def test_rrelu_with_noise_draws_slopes_from_the_range(form):
    # Random: the slopes' distribution is checked (uniform on [0.1, 0.3): mean 0.2, std
    # 0.2 / sqrt(12)), and everything that follows from them exactly.
    x = torch.randn(20000, generator=g(4))
    noise = torch.empty(20000, device="tpu")
    if form == "functional":
        out = A.rrelu_with_noise(x.to("tpu"), noise, 0.1, 0.3, True)
    elif form == "in_place":
        out = x.to("tpu")
        A.rrelu_with_noise_(out, noise, 0.1, 0.3, True)
    else:
        out = torch.empty(0, device="tpu")
        A.rrelu_with_noise.out(x.to("tpu"), noise, 0.1, 0.3, True, out=out)
    out, noise = out.cpu(), noise.cpu()
    negative = x <= 0
    assert torch.equal(out[~negative], x[~negative]) and bool((noise[~negative] == 1).all())
    slopes = noise[negative]
    assert bool(((slopes >= 0.1) & (slopes < 0.3)).all())
    n = slopes.numel()
    assert abs(slopes.mean().item() - 0.2) < 5 * (0.2 / 12**0.5) / n**0.5
    assert abs(slopes.std().item() - 0.2 / 12**0.5) < 0.01
    torch.testing.assert_close(out, x * noise)
    # A Kolmogorov-Smirnov distance to the uniform distribution below its 0.1% critical value.
    ranked = ((slopes.sort().values - 0.1) / 0.2).double()
    ks = (ranked - torch.arange(1, n + 1, dtype=torch.double) / n).abs().max().item()
    assert ks < 1.95 / n**0.5


def test_rrelu_with_noise_evaluation_matches_cpu():
    x = torch.randn(100, generator=g(5))
    noise = torch.randn(100, generator=g(6))
    kept = noise.to("tpu")
    got = A.rrelu_with_noise(x.to("tpu"), kept, 0.1, 0.3, False)
    close(got, A.rrelu_with_noise(x, noise.clone(), 0.1, 0.3, False))
    assert torch.equal(kept.cpu(), noise)
    torch.manual_seed(0)
    assert torch.nn.RReLU(0.1, 0.3).train()(x.to("tpu")).shape == x.shape


def test_is_set_to_matches_cpu():
    x = torch.randn(3, 4)
    t = x.to("tpu")
    assert t.is_set_to(t) == x.is_set_to(x)
    assert t.is_set_to(t.clone()) == x.is_set_to(x.clone())
    assert t.is_set_to(t.view(4, 3)) == x.is_set_to(x.view(4, 3))


def test_fused_sdp_choice_is_the_one_sdpa_makes():
    q = torch.randn(1, 2, 4, 8, device="tpu")
    overrideable = int(torch.nn.attention.SDPBackend.OVERRIDEABLE)
    math = int(torch.nn.attention.SDPBackend.MATH)
    assert A._fused_sdp_choice(q, q, q) == overrideable
    assert A._fused_sdp_choice(q, q, q, dropout_p=0.5) == math
