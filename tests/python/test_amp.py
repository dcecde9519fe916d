"""torch.autocast('tpu') cast policy and torch.amp.GradScaler('tpu'), against CPU."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401  (registers the tpu device)
from helpers import assert_same

LOW = [torch.bfloat16, torch.float16]


def tpu_and_cpu(*shape, seed=0):
    cpu = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return cpu.to("tpu"), cpu


@pytest.mark.parametrize("dtype", LOW)
def test_matmuls_run_in_the_autocast_dtype(dtype):
    a, a_c = tpu_and_cpu(4, 5)
    b, b_c = tpu_and_cpu(5, 3, seed=1)
    bias, bias_c = tpu_and_cpu(3, seed=2)
    x3, x3_c = tpu_and_cpu(2, 4, 5, seed=3)
    y3, y3_c = tpu_and_cpu(2, 5, 3, seed=4)
    z3, z3_c = tpu_and_cpu(2, 4, 3, seed=5)
    with torch.autocast("tpu", dtype=dtype):
        results = {
            "mm": (torch.mm(a, b), a_c.to(dtype) @ b_c.to(dtype)),
            "matmul": (a @ b, a_c.to(dtype) @ b_c.to(dtype)),
            "linear": (
                F.linear(a, b.t(), bias),
                F.linear(a_c.to(dtype), b_c.t().to(dtype), bias_c.to(dtype)),
            ),
            "addmm": (
                torch.addmm(bias, a, b),
                torch.addmm(bias_c.to(dtype), a_c.to(dtype), b_c.to(dtype)),
            ),
            "bmm": (torch.bmm(x3, y3), torch.bmm(x3_c.to(dtype), y3_c.to(dtype))),
            "baddbmm": (
                torch.baddbmm(z3, x3, y3),
                torch.baddbmm(z3_c.to(dtype), x3_c.to(dtype), y3_c.to(dtype)),
            ),
        }
    for name, (got, expected) in results.items():
        assert got.dtype == dtype, name
        assert_same(got, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", LOW)
def test_sensitive_ops_run_in_f32(dtype):
    x, x_c = tpu_and_cpu(3, 6)
    xl, xl_c = x.to(dtype), x_c.to(dtype)  # a low-precision activation
    target = torch.tensor([1, 0, 5])
    with torch.autocast("tpu", dtype=dtype):
        results = {
            "softmax": (torch.softmax(xl, 1), torch.softmax(xl_c.float(), 1)),
            "log_softmax": (F.log_softmax(xl, 1), F.log_softmax(xl_c.float(), 1)),
            "exp": (torch.exp(xl), torch.exp(xl_c.float())),
            "log": (torch.log(xl.abs()), torch.log(xl_c.float().abs())),
            "sum": (xl.sum(), xl_c.float().sum()),
            "layer_norm": (F.layer_norm(xl, (6,)), F.layer_norm(xl_c.float(), (6,))),
            "mse_loss": (F.mse_loss(xl, x), F.mse_loss(xl_c.float(), x_c)),
            "nll_loss": (F.nll_loss(xl, target.to("tpu")), F.nll_loss(xl_c.float(), target)),
        }
    for name, (got, expected) in results.items():
        assert got.dtype == torch.float32, name
        assert_same(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", LOW)
def test_other_ops_pass_through_and_promote(dtype):
    x, x_c = tpu_and_cpu(3, 4)
    with torch.autocast("tpu", dtype=dtype):
        low = torch.mm(x, torch.eye(4).to("tpu"))
        assert torch.relu(low).dtype == dtype  # not in any list: unchanged
        assert (x + x).dtype == torch.float32
        assert torch.addcmul(x, low, low).dtype == torch.float32  # promote to the widest
        with torch.autocast("tpu", enabled=False):
            assert torch.mm(x, x.t()).dtype == torch.float32
    assert torch.mm(x, x.t()).dtype == torch.float32  # outside the region


def test_autocast_dtype_setting_and_backward():
    model = torch.nn.Linear(4, 2)
    tpu_model = copy.deepcopy(model).to("tpu")
    x, x_c = tpu_and_cpu(5, 4)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
        assert torch.is_autocast_enabled("tpu")
        out = tpu_model(x)
        loss = F.mse_loss(out, torch.zeros(5, 2, device="tpu"))
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        F.mse_loss(model(x_c), torch.zeros(5, 2)).backward()
    for p, p_c in zip(tpu_model.parameters(), model.parameters()):
        assert p.grad.dtype == torch.float32
        assert_same(p.grad, p_c.grad, rtol=2e-2, atol=2e-2)


# ---- grad scaler kernels ----------------------------------------------------------------


def test_non_finite_check_and_unscale_matches_cpu():
    cases = [
        [torch.tensor([1.0, 2.0]), torch.tensor([[4.0], [8.0]]), torch.tensor(3.0).double()],
        [torch.tensor([1.0, math.inf]), torch.tensor([2.0]).bfloat16()],
        [torch.tensor([math.nan]), torch.empty(0)],
    ]
    for grads in cases:
        found_c, inv_c = torch.zeros(()), torch.full((), 0.25)
        tpu = [g.to("tpu") for g in grads]
        found, inv = found_c.to("tpu"), inv_c.to("tpu")
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_c, inv_c)
        torch._amp_foreach_non_finite_check_and_unscale_(tpu, found, inv)
        assert_same(found, found_c)
        for g, g_c in zip(tpu, grads):
            assert_same(g, g_c, equal_nan=True)
    # found_inf is never reset by a clean list
    found = torch.ones((), device="tpu")
    torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(3, device="tpu")], found, torch.ones((), device="tpu")
    )
    assert found.item() == 1.0


@pytest.mark.parametrize(
    "scale, tracker, found, growth",
    [
        (1024.0, 0, 0.0, 2.0),  # a clean step: the tracker counts
        (1024.0, 2, 0.0, 2.0),  # the third clean step of three: grow
        (1024.0, 1, 1.0, 2.0),  # an overflow: back off, reset
        (3.0e38, 2, 0.0, 2.0),  # growing would overflow: keep the scale
    ],
)
def test_update_scale_matches_cpu(scale, tracker, found, growth):
    s_c, t_c, f_c = (
        torch.tensor(scale),
        torch.tensor(tracker, dtype=torch.int32),
        torch.tensor(found),
    )
    s, t, f = s_c.to("tpu"), t_c.to("tpu"), f_c.to("tpu")
    torch._amp_update_scale_(s_c, t_c, f_c, growth, 0.5, 3)
    out = torch._amp_update_scale_(s, t, f, growth, 0.5, 3)
    assert out is s
    assert_same(s, s_c)
    assert_same(t, t_c)


# ---- a training loop with GradScaler ----------------------------------------------------


def test_grad_scaler_training_matches_cpu_and_skips_overflows():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    tpu_model = copy.deepcopy(model).to("tpu")
    runs = []
    for m, device in ((model, "cpu"), (tpu_model, "tpu")):
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**12, growth_interval=2)
        scales, skipped = [], []
        g = torch.Generator().manual_seed(1)
        for step in range(6):
            x = torch.randn(16, 4, generator=g).to(device)
            opt.zero_grad()
            out = m(x)
            loss = (out * out).mean()
            scaler.scale(loss).backward()
            if step == 3:  # an overflowing gradient: the step must be skipped
                next(m.parameters()).grad[0, 0] = math.inf
            before = [p.detach().cpu().clone() for p in m.parameters()]
            scaler.step(opt)
            scaler.update()
            after = [p.detach().cpu() for p in m.parameters()]
            skipped.append(all(torch.equal(b, a) for b, a in zip(before, after)))
            scales.append(scaler.get_scale())
        runs.append((scales, skipped, [p.detach().cpu() for p in m.parameters()]))
    (cpu_scales, cpu_skipped, cpu_params), (scales, skipped, params) = runs
    assert skipped == [False, False, False, True, False, False] == cpu_skipped
    assert scales == cpu_scales
    assert scales[3] == scales[2] / 2  # backed off after the overflow
    assert scales[1] == 2 * scales[0]  # grown after growth_interval clean steps
    for p, p_c in zip(params, cpu_params):
        torch.testing.assert_close(p, p_c, rtol=1e-4, atol=1e-5)
