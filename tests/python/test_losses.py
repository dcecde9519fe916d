"""Loss functions, forward and backward, against CPU PyTorch."""

import pytest
import torch
import torch.nn.functional as F

from helpers import assert_same, tol

pytestmark = pytest.mark.op_by_op  # op mode only (pyproject.toml)

REDUCTIONS = ["none", "mean", "sum"]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def check(fn, inputs, grad_of=(0,), dtype=torch.float32):
    """fn(*inputs) and the gradients of inputs[grad_of] agree between tpu and CPU."""
    cpu = [
        x.detach().clone().requires_grad_(i in grad_of) if isinstance(x, torch.Tensor) else x
        for i, x in enumerate(inputs)
    ]
    tpu = [
        x.detach().to("tpu").requires_grad_(i in grad_of) if isinstance(x, torch.Tensor) else x
        for i, x in enumerate(inputs)
    ]
    cy, ty = fn(*cpu), fn(*tpu)
    assert_same(ty.detach(), cy.detach(), **tol(dtype))
    up = torch.randn(cy.shape, generator=gen(9)).to(cy.dtype)
    cy.backward(up)
    ty.backward(up.to("tpu"))
    for i in grad_of:
        assert_same(tpu[i].grad, cpu[i].grad, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction, dtype):
    logp = torch.randn(6, 5, generator=gen(0)).log_softmax(1).to(dtype)
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    weight = torch.rand(5, generator=gen(1)).to(dtype)
    for ignore in (-100, 2):
        check(
            lambda x, t: F.nll_loss(x, t, reduction=reduction, ignore_index=ignore),
            [logp, target],
            dtype=dtype,
        )
        check(
            lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction, ignore_index=ignore),
            [logp, target, weight],
            dtype=dtype,
        )
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), [logp[1], target[1]], dtype=dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_2d_and_nd(reduction):
    logp = torch.randn(2, 4, 3, 5, generator=gen(2)).log_softmax(1)
    target = torch.randint(0, 4, (2, 3, 5), generator=gen(3))
    target[0, 0, 0] = -100
    weight = torch.rand(4, generator=gen(4))
    check(lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction), [logp, target, weight])
    check(lambda x, t: F.nll_loss(x, t, reduction=reduction), [logp[:, :, 0], target[:, 0]])
    check(
        lambda x, t: F.nll_loss(x, t, reduction=reduction),
        [logp[:, :, :, 0].unsqueeze(-1).expand(2, 4, 3, 2), target[:, :, :2]],
    )


def test_nll_loss_all_ignored_mean_is_nan():
    logp = torch.randn(3, 4).log_softmax(1)
    target = torch.full((3,), -100)
    got = F.nll_loss(logp.to("tpu"), target.to("tpu"))
    assert_same(got, F.nll_loss(logp, target), equal_nan=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy(reduction):
    x = torch.randn(6, 5, generator=gen(5))
    target = torch.tensor([0, 4, 2, 2, 1, -100])
    weight = torch.rand(5, generator=gen(6))
    check(lambda a, t: F.cross_entropy(a, t, reduction=reduction), [x, target])
    check(lambda a, t, w: F.cross_entropy(a, t, w, reduction=reduction), [x, target, weight])
    check(
        lambda a, t, w: F.cross_entropy(a, t, w, label_smoothing=0.1, reduction=reduction),
        [x, target, weight],
    )
    check(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1, reduction=reduction), [x, target])
    probs = torch.rand(6, 5, generator=gen(7)).softmax(1)
    check(lambda a, p: F.cross_entropy(a, p, reduction=reduction), [x, probs], grad_of=(0, 1))
    check(lambda a, p: F.cross_entropy(a, p, label_smoothing=0.2, reduction=reduction), [x, probs])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss"])
def test_regression_losses(name, reduction, dtype):
    x = torch.randn(4, 5, generator=gen(10)).mul(2).to(dtype)
    y = torch.randn(4, 5, generator=gen(11)).mul(2).to(dtype)
    fn = getattr(F, name)
    check(lambda a, b: fn(a, b, reduction=reduction), [x, y], grad_of=(0, 1), dtype=dtype)
    if name == "smooth_l1_loss":
        for beta in (0.0, 0.5):
            check(lambda a, b: fn(a, b, reduction=reduction, beta=beta), [x, y], dtype=dtype)
    if name == "huber_loss":
        check(lambda a, b: fn(a, b, reduction=reduction, delta=0.3), [x, y], dtype=dtype)


def test_regression_losses_edges_and_views():
    x = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])  # differences exactly at beta / delta
    y = torch.zeros(6)
    check(lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), [x, y])
    check(lambda a, b: F.huber_loss(a, b, delta=1.0), [x, y])
    z = torch.randn(6, 8, generator=gen(12))
    check(lambda a, b: F.mse_loss(a.t()[::2], b), [z, torch.randn(4, 6)])
    e = torch.empty(0, 3)
    check(lambda a, b: F.mse_loss(a, b, reduction="sum"), [e, e])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction, dtype):
    p = torch.rand(4, 5, generator=gen(13)).to(dtype)
    p[0, 0], p[0, 1] = 0.0, 1.0  # logs clamp at -100
    t = torch.rand(4, 5, generator=gen(14)).to(dtype)
    w = torch.rand(5, generator=gen(15)).to(dtype)
    check(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), [p, t], dtype=dtype)
    check(
        lambda a, b, c: F.binary_cross_entropy(a, b, weight=c, reduction=reduction),
        [p, t, w.expand(4, 5)],
        dtype=dtype,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    x = torch.randn(4, 5, generator=gen(16)).mul(5)
    t = torch.rand(4, 5, generator=gen(17))
    w = torch.rand(5, generator=gen(18))
    pw = torch.rand(5, generator=gen(19)) * 3
    fn = F.binary_cross_entropy_with_logits
    check(lambda a, b: fn(a, b, reduction=reduction), [x, t], grad_of=(0, 1))
    check(
        lambda a, b, c, d: fn(a, b, weight=c, pos_weight=d, reduction=reduction),
        [x, t, w, pw],
        grad_of=(0, 1),
    )
    big = torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0])
    check(lambda a, b: fn(a, b, reduction=reduction), [big, torch.full((5,), 0.3)])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = torch.randn(4, 5, generator=gen(20)).log_softmax(1)
    t = torch.rand(4, 5, generator=gen(21)).softmax(1)
    if log_target:
        t = t.log()
    check(
        lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
        [x, t],
        grad_of=(0, 1),
    )


def forward(fn, *inputs, dtype=torch.float32):
    """fn on CPU and on tpu copies of the inputs: the values agree (no backward)."""
    want = fn(*inputs)
    got = fn(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in inputs])
    for g, w in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        assert_same(g, w, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss(reduction, dtype):
    x = torch.randn(7, 5, generator=gen(2)).to(dtype)
    target = torch.tensor([0, 4, 2, 2, 1, 3, 4])
    weight = torch.rand(5, generator=gen(3)).to(dtype)
    for p, margin in ((1, 1.0), (2, 0.7)):
        forward(
            lambda x, t: F.multi_margin_loss(x, t, p=p, margin=margin, reduction=reduction),
            x,
            target,
            dtype=dtype,
        )
        forward(
            lambda x, t, w: F.multi_margin_loss(
                x, t, p=p, margin=margin, weight=w, reduction=reduction
            ),
            x,
            target,
            weight,
            dtype=dtype,
        )
    forward(
        lambda x, t: F.multi_margin_loss(x, t, reduction=reduction), x[0], target[:1], dtype=dtype
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction):
    x = torch.randn(4, 5, generator=gen(4))
    # Labels end at the first negative entry; later entries are ignored.
    target = torch.tensor([[3, 0, -1, 1, 4], [0, 1, 2, 3, 4], [-1, 2, 2, 2, 2], [4, 4, 1, -1, -1]])
    forward(
        lambda x, t: torch.ops.aten.multilabel_margin_loss_forward(
            x, t, {"none": 0, "mean": 1, "sum": 2}[reduction]
        ),
        x,
        target,
    )
    forward(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x, target)
    forward(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), x[0], target[0])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss(reduction, concatenated):
    steps, batch, classes = 9, 3, 5
    logp = torch.randn(steps, batch, classes, generator=gen(5)).log_softmax(2)
    targets = torch.tensor([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 4, 1]])
    target_lengths = torch.tensor([4, 2, 3])
    input_lengths = torch.tensor([9, 6, 8])
    if concatenated:
        targets = torch.cat([t[:n] for t, n in zip(targets, target_lengths)])
    forward(
        lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, reduction=reduction),
        logp,
        targets,
        input_lengths,
        target_lengths,
    )
    forward(
        lambda lp, t: F.ctc_loss(lp, t, [9, 6, 8], [4, 2, 3], reduction=reduction), logp, targets
    )
    # Too short an input for its target: an infinite loss, or 0 with zero_infinity.
    for zero_infinity in (False, True):
        forward(
            lambda lp, t: F.ctc_loss(
                lp, t, [9, 2, 8], [4, 2, 3], reduction=reduction, zero_infinity=zero_infinity
            ),
            logp,
            targets,
        )
