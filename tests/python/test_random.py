"""Random ops: reproducibility from the seed, generator state round trips, and the
distributions themselves (tolerances a few standard errors wide, far tighter than any
wrong distribution could meet)."""

import math

import pytest
import torch

import torch_tpu
from helpers import run_python, FLOATS

N = 200_000


def host(t):
    return t.cpu().double()


# ---- reproducibility ----------------------------------------------------------------------


def test_same_seed_same_numbers_and_draws_advance():
    torch.manual_seed(123)
    a, b = torch.rand(1000, device="tpu"), torch.randn(7, 5, device="tpu")
    torch.manual_seed(123)
    a2, b2 = torch.rand(1000, device="tpu"), torch.randn(7, 5, device="tpu")
    assert torch.equal(a.cpu(), a2.cpu()) and torch.equal(b.cpu(), b2.cpu())
    c = torch.rand(1000, device="tpu")
    assert not torch.equal(a.cpu(), c.cpu())
    torch.manual_seed(124)
    assert not torch.equal(a.cpu(), torch.rand(1000, device="tpu").cpu())


def test_tpu_manual_seed_and_initial_seed():
    torch.tpu.manual_seed(7)
    assert torch.tpu.initial_seed() == 7
    x = torch.randint(0, 1000, (50,), device="tpu")
    torch.tpu.manual_seed(7)
    assert torch.equal(x.cpu(), torch.randint(0, 1000, (50,), device="tpu").cpu())


def test_rng_state_round_trip_replays():
    torch.manual_seed(5)
    torch.rand(3, device="tpu")
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = [
        torch.rand(100, device="tpu").cpu(),
        torch.randn(10, device="tpu").cpu(),
        torch.randperm(20, device="tpu").cpu(),
    ]
    torch.tpu.set_rng_state(state)
    again = [
        torch.rand(100, device="tpu").cpu(),
        torch.randn(10, device="tpu").cpu(),
        torch.randperm(20, device="tpu").cpu(),
    ]
    for x, y in zip(first, again):
        assert torch.equal(x, y)


def test_explicit_generator():
    g = torch.Generator(device="tpu")
    g.manual_seed(99)
    a = torch.rand(64, device="tpu", generator=g)
    state = g.get_state()
    b = torch.randn(64, device="tpu", generator=g)
    g.manual_seed(99)
    assert torch.equal(a.cpu(), torch.rand(64, device="tpu", generator=g).cpu())
    g.set_state(state)
    assert torch.equal(b.cpu(), torch.randn(64, device="tpu", generator=g).cpu())
    # The default generator is untouched by draws from g.
    torch.manual_seed(1)
    x = torch.rand(8, device="tpu")
    torch.manual_seed(1)
    torch.rand(8, device="tpu", generator=g)
    assert torch.equal(x.cpu(), torch.rand(8, device="tpu").cpu())


def test_same_numbers_in_another_process_and_on_every_device():
    code = (
        "import torch, torch_tpu\n"
        "torch.manual_seed(2024)\n"
        "a = torch.rand(6, device='tpu:0')\n"
        "b = torch.rand(6, device='tpu:1')\n"
        "assert torch.equal(a.cpu(), b.cpu())\n"  # manual_seed seeds every device
        "torch.tpu.set_device(1); torch.tpu.manual_seed(3)\n"
        "c = torch.rand(6, device='tpu:0')\n"  # device 0 keeps its own stream
        "assert not torch.equal(a.cpu(), c.cpu())\n"
        "print(' '.join(f'{v:.8f}' for v in a.cpu().tolist()))\n"
    )
    env = {"TORCH_TPU_NUM_DEVICES": "2"}
    r1 = run_python(code, env)
    assert r1.returncode == 0, r1.stderr
    torch.manual_seed(2024)
    here = torch.rand(6, device="tpu").cpu().tolist()
    assert r1.stdout.split() == [f"{v:.8f}" for v in here]


def test_repeated_draws_do_not_recompile():
    torch.rand(100, device="tpu")
    torch_tpu.metrics.reset()
    for _ in range(5):
        torch.rand(100, device="tpu")
    assert torch_tpu.metrics.snapshot()["compiles"] == 0


# ---- uniform --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_moments_range_and_histogram(dtype):
    torch.manual_seed(0)
    x = torch.rand(N, device="tpu", dtype=dtype)
    assert x.dtype == dtype
    u = host(x)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.004
    assert abs(u.var() - 1 / 12) < 0.002
    hist = torch.histc(u.float(), bins=8, min=0, max=1) / N
    assert torch.all((hist - 0.125).abs() < 0.006), hist


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_bounds(dtype):
    torch.manual_seed(1)
    x = torch.empty(N, device="tpu", dtype=dtype).uniform_(-3, 5)
    u = host(x)
    assert u.min() >= -3 and u.max() < 5
    assert abs(u.mean() - 1) < 0.04
    assert abs(u.std() - 8 / math.sqrt(12)) < 0.03


def test_uniform_into_a_strided_view():
    base = torch.zeros(6, 8, device="tpu")
    base[:, ::2].uniform_(2, 3)
    h = base.cpu()
    assert torch.all(h[:, 1::2] == 0)
    assert torch.all((h[:, ::2] >= 2) & (h[:, ::2] < 3))


def test_rand_like_and_empty():
    x = torch.rand_like(torch.empty(3, 4, device="tpu", dtype=torch.bfloat16))
    assert x.shape == (3, 4) and x.dtype == torch.bfloat16
    assert torch.rand(0, 3, device="tpu").cpu().shape == (0, 3)
    assert torch.randn((), device="tpu").cpu().shape == ()


# ---- normal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_moments_and_tails(dtype):
    torch.manual_seed(2)
    z = host(torch.randn(N, device="tpu", dtype=dtype))
    assert abs(z.mean()) < 0.01
    assert abs(z.std() - 1) < 0.01
    assert abs((z.abs() < 1).double().mean() - 0.6827) < 0.005
    assert abs((z.abs() > 2).double().mean() - 0.0455) < 0.003
    assert abs((z.abs() > 3).double().mean() - 0.0027) < 0.0008
    skew = (z**3).mean()
    kurt = (z**4).mean()
    assert abs(skew) < 0.05 and abs(kurt - 3) < 0.1


def test_normal_overloads():
    torch.manual_seed(3)
    mean = torch.tensor([-10.0, 0.0, 10.0]).repeat(N // 3, 1).to("tpu")
    std = torch.tensor([0.5, 1.0, 2.0]).repeat(N // 3, 1).to("tpu")
    for z in (torch.normal(mean, std), torch.normal(mean, 2.0), torch.normal(1.0, std)):
        assert z.shape == mean.shape
    z = host(torch.normal(mean, std))
    torch.testing.assert_close(
        z.mean(0), torch.tensor([-10.0, 0.0, 10.0]).double(), atol=0.04, rtol=0
    )
    torch.testing.assert_close(z.std(0), torch.tensor([0.5, 1.0, 2.0]).double(), atol=0.03, rtol=0)
    z = host(torch.normal(mean, 2.0))
    torch.testing.assert_close(z.std(0), torch.full((3,), 2.0).double(), atol=0.03, rtol=0)
    z = host(torch.normal(1.0, std))
    torch.testing.assert_close(z.mean(0), torch.ones(3).double(), atol=0.04, rtol=0)
    z = host(torch.empty(N, device="tpu").normal_(4, 3))
    assert abs(z.mean() - 4) < 0.03 and abs(z.std() - 3) < 0.03
    out = torch.empty(N // 3, 3, device="tpu")
    torch.normal(mean, std, out=out)
    assert abs(host(out).mean(0)[2] - 10) < 0.05
    r = torch.randn_like(mean)
    assert r.shape == mean.shape and abs(host(r).std() - 1) < 0.01


# ---- bernoulli and dropout ------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool]
)
def test_bernoulli_float_p(dtype):
    torch.manual_seed(4)
    x = torch.empty(N, device="tpu", dtype=dtype).bernoulli_(0.3)
    h = x.cpu()
    assert h.dtype == dtype
    assert set(h.double().unique().tolist()) <= {0.0, 1.0}
    assert abs(h.double().mean() - 0.3) < 0.005


def test_bernoulli_tensor_p_and_functional():
    torch.manual_seed(5)
    p = torch.tensor([0.0, 0.25, 0.9, 1.0]).repeat(N // 4, 1)
    x = torch.bernoulli(p.to("tpu"))
    assert x.dtype == torch.float32
    freq = host(x).mean(0)
    assert freq[0] == 0 and freq[3] == 1
    assert abs(freq[1] - 0.25) < 0.008 and abs(freq[2] - 0.9) < 0.006
    y = torch.zeros(N // 4, 4, device="tpu", dtype=torch.float16).bernoulli_(p.to("tpu"))
    assert abs(host(y).mean(0)[1] - 0.25) < 0.008
    z = torch.bernoulli(torch.zeros(N, device="tpu"), 0.6)
    assert abs(host(z).mean() - 0.6) < 0.005


@pytest.mark.parametrize("p", [0.1, 0.8])
def test_dropout_keep_rate_scale_and_backward(p):
    torch.manual_seed(6)
    cpu = torch.rand(400, 500) + 0.5
    x = cpu.to("tpu").requires_grad_()
    y = torch.nn.functional.dropout(x, p)
    y.backward(torch.ones_like(y))
    out = y.detach().cpu()
    kept = out != 0
    assert abs(kept.double().mean() - (1 - p)) < 0.005
    torch.testing.assert_close(out[kept], cpu[kept] / (1 - p))
    torch.testing.assert_close(x.grad.cpu(), kept.float() / (1 - p))


def test_native_dropout_mask_and_eval():
    torch.manual_seed(7)
    x = torch.randn(1000, device="tpu", dtype=torch.bfloat16)
    out, mask = torch.ops.aten.native_dropout(x, 0.25, True)
    assert mask.dtype == torch.bool and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), (x.cpu().float() * mask.cpu() / 0.75).bfloat16())
    out, mask = torch.ops.aten.native_dropout(x, 0.25, False)
    assert torch.equal(out.cpu(), x.cpu()) and bool(mask.cpu().all())
    assert torch.equal(torch.nn.functional.dropout(x, 0.3, training=False).cpu(), x.cpu())
    assert torch.equal(
        torch.nn.functional.dropout(x, 1.0).cpu(), torch.zeros(1000, dtype=torch.bfloat16)
    )
    assert torch.equal(torch.nn.functional.dropout(x, 0.0).cpu(), x.cpu())
    g = torch.ops.aten.native_dropout_backward(x, mask, 2.0)
    torch.testing.assert_close(g.cpu(), x.cpu() * 2)


def test_dropout_module_is_reproducible():
    layer = torch.nn.Dropout(0.5)
    x = torch.ones(64, 64, device="tpu")
    torch.manual_seed(8)
    a = layer(x).cpu()
    torch.manual_seed(8)
    assert torch.equal(a, layer(x).cpu())


# ---- integers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32, torch.bfloat16]
)
def test_randint_bounds_and_frequencies(dtype):
    torch.manual_seed(9)
    x = torch.randint(3, 13, (N,), device="tpu", dtype=dtype)
    h = x.cpu()
    assert h.dtype == dtype
    counts = torch.bincount(h.long() - 3, minlength=10).double() / N
    assert counts.numel() == 10  # nothing outside [3, 13)
    assert torch.all((counts - 0.1).abs() < 0.005), counts


def test_randint_negative_and_large_ranges():
    torch.manual_seed(10)
    h = torch.randint(-5, 0, (N,), device="tpu").cpu()
    assert h.min() == -5 and h.max() == -1
    big = torch.randint(-(2**40), 2**40, (N,), device="tpu").cpu().double()
    assert abs(big.mean()) / 2**40 < 0.01
    assert abs((big < 0).double().mean() - 0.5) < 0.005
    full = torch.empty(N, device="tpu", dtype=torch.int64).random_(-(2**63), None).cpu()
    assert abs((full < 0).double().mean() - 0.5) < 0.005
    assert full.double().abs().max() > 2**62
    like = torch.randint_like(torch.empty(10, device="tpu", dtype=torch.int32), 4)
    assert like.dtype == torch.int32 and like.cpu().max() < 4


@pytest.mark.parametrize(
    "dtype, high",
    [
        (torch.uint8, 255),
        (torch.int8, 127),
        (torch.int16, 2**15 - 1),
        (torch.bool, 1),
        (torch.float16, 2**11),
        (torch.bfloat16, 2**8),
    ],
)
def test_random_default_range(dtype, high):
    torch.manual_seed(11)
    h = torch.empty(N, device="tpu", dtype=dtype).random_().cpu().double()
    assert h.min() >= 0 and h.max() <= high
    assert abs(h.mean() - high / 2) < 0.01 * high + 0.01
    if high < 1000:
        assert h.max() == high and h.min() == 0


def test_random_to_and_from():
    torch.manual_seed(12)
    h = torch.empty(N, device="tpu").random_(7).cpu()
    assert set(h.unique().tolist()) == set(range(7))
    h = torch.empty(N, device="tpu", dtype=torch.int8).random_(-100, None).cpu()
    assert h.min() == -100 and h.max() == 127


# ---- exponential ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_exponential(dtype):
    torch.manual_seed(13)
    e = host(torch.empty(N, device="tpu", dtype=dtype).exponential_(2.0))
    assert e.min() > 0
    assert abs(e.mean() - 0.5) < 0.006
    assert abs(e.std() - 0.5) < 0.01
    assert abs((e > 1).double().mean() - math.exp(-2)) < 0.004


def test_log_normal_cauchy_geometric():
    torch.manual_seed(19)
    x = host(torch.empty(N, device="tpu").log_normal_(0.0, 0.5))
    assert x.min() > 0
    assert abs(x.mean() - math.exp(0.125)) < 0.01
    assert abs((x < 1).double().mean() - 0.5) < 0.005
    c = host(torch.empty(N, device="tpu").cauchy_(2.0, 3.0))
    assert abs((c < 2).double().mean() - 0.5) < 0.005
    assert abs(((c - 2).abs() < 3).double().mean() - 0.5) < 0.005
    assert abs(((c - 2).abs() < 3 * math.tan(0.45 * math.pi)).double().mean() - 0.9) < 0.004
    for dtype in (torch.float32, torch.int64):
        g = torch.empty(N, device="tpu", dtype=dtype).geometric_(0.3).cpu()
        assert g.dtype == dtype and g.min() == 1
        assert abs(g.double().mean() - 1 / 0.3) < 0.03
        assert abs((g == 1).double().mean() - 0.3) < 0.005
        assert abs((g == 2).double().mean() - 0.21) < 0.005


def test_invalid_arguments_raise_like_cpu():
    x = torch.zeros(3, device="tpu")
    with pytest.raises(RuntimeError, match="from=2.* > to=1"):
        x.uniform_(2, 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.zeros(3, dtype=torch.long, device="tpu").uniform_()
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        x.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        x.random_(5, 2)
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        x.random_(0)
    with pytest.raises(RuntimeError, match="geometric_ expects p"):
        x.geometric_(1.5)


# ---- randperm -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_randperm_is_a_permutation(n):
    torch.manual_seed(14)
    p = torch.randperm(n, device="tpu")
    assert p.dtype == torch.int64
    assert torch.equal(p.cpu().sort().values, torch.arange(n))


def test_randperm_is_uniform_and_dtypes():
    torch.manual_seed(15)
    first = torch.stack([torch.randperm(5, device="tpu").cpu() for _ in range(1000)])
    # each value lands in each position with probability 1/5
    freq = torch.stack([(first == v).double().mean(0) for v in range(5)])
    assert torch.all((freq - 0.2).abs() < 0.05), freq
    p = torch.randperm(100, device="tpu", dtype=torch.int32)
    assert p.dtype == torch.int32 and torch.equal(
        p.cpu().sort().values, torch.arange(100, dtype=torch.int32)
    )


# ---- multinomial ----------------------------------------------------------------------------


def test_multinomial_with_replacement_frequencies():
    torch.manual_seed(16)
    p = torch.tensor([0.1, 0.0, 0.6, 0.3, 0.0])
    s = torch.multinomial(p.to("tpu") * 7, N, replacement=True).cpu()
    assert s.dtype == torch.int64 and s.shape == (N,)
    freq = torch.bincount(s, minlength=5).double() / N
    torch.testing.assert_close(freq, p.double(), atol=0.005, rtol=0)


def test_multinomial_batched_with_replacement():
    torch.manual_seed(17)
    p = torch.tensor([[1.0, 3.0], [0.0, 1.0], [5.0, 0.0]])
    s = torch.multinomial(p.to("tpu"), 20_000, replacement=True).cpu()
    assert s.shape == (3, 20_000)
    assert abs(s[0].double().mean() - 0.75) < 0.015
    assert torch.all(s[1] == 1) and torch.all(s[2] == 0)


def test_multinomial_without_replacement():
    torch.manual_seed(18)
    p = torch.tensor([0.5, 0.2, 0.2, 0.1, 0.0])
    s = torch.multinomial(p.repeat(20_000, 1).to("tpu"), 3).cpu()
    assert s.shape == (20_000, 3)
    # three distinct categories, never the empty one
    assert torch.all(s.sort(1).values.diff(dim=1) > 0) and not torch.any(s == 4)
    first = torch.bincount(s[:, 0], minlength=5).double() / 20_000
    torch.testing.assert_close(first, p.double(), atol=0.012, rtol=0)
    # P(second = 0 | first = 1) = 0.5 / 0.8
    second = s[s[:, 0] == 1][:, 1]
    assert abs((second == 0).double().mean() - 0.625) < 0.03
    full = torch.multinomial(torch.tensor([1.0, 2.0, 3.0], device="tpu"), 3).cpu()
    assert sorted(full.tolist()) == [0, 1, 2]


@pytest.mark.parametrize("alpha", [0.3, 1.0, 2.5, 20.0])
def test_standard_gamma_is_gamma_distributed(alpha):
    # Random: the Kolmogorov-Smirnov distance to Gamma(alpha, 1)'s CDF (CPU's regularized
    # incomplete gamma) below its 0.1% critical value, and the moments (mean = var = alpha).
    torch.manual_seed(0)
    n = 20000
    samples = torch._standard_gamma(torch.full((n,), alpha, device="tpu")).cpu().double()
    cdf = torch.special.gammainc(torch.tensor(alpha, dtype=torch.double), samples.sort().values)
    ks = (cdf - torch.arange(1, n + 1, dtype=torch.double) / n).abs().max().item()
    assert ks < 1.95 / n**0.5
    assert abs(samples.mean().item() - alpha) < 5 * (alpha / n) ** 0.5
    assert bool((samples > 0).all())


def test_sample_dirichlet_moments_and_simplex():
    torch.manual_seed(0)
    alpha = torch.tensor([0.5, 1.0, 3.0])
    n = 20000
    samples = torch._sample_dirichlet(alpha.expand(n, 3).contiguous().to("tpu")).cpu().double()
    total = alpha.sum().item()
    mean = alpha.double() / total
    var = mean * (1 - mean) / (total + 1)
    torch.testing.assert_close(samples.sum(1), torch.ones(n, dtype=torch.double), rtol=0, atol=1e-5)
    assert bool(((samples.mean(0) - mean).abs() < 5 * (var / n).sqrt()).all())
    assert bool(((samples.var(0) - var).abs() < 0.1 * var).all())


def test_gamma_draws_follow_the_generator():
    torch.manual_seed(1)
    a = torch._standard_gamma(torch.full((64,), 2.0, device="tpu")).cpu()
    torch.manual_seed(1)
    b = torch._standard_gamma(torch.full((64,), 2.0, device="tpu")).cpu()
    c = torch._standard_gamma(torch.full((64,), 2.0, device="tpu")).cpu()
    assert torch.equal(a, b) and not torch.equal(b, c)
    beta = torch.distributions.Beta(
        torch.tensor([2.0], device="tpu"), torch.tensor([3.0], device="tpu")
    )
    draws = beta.sample((4000,)).cpu()
    assert bool(((draws > 0) & (draws < 1)).all()) and abs(draws.mean().item() - 0.4) < 0.02


@pytest.mark.parametrize("rate", [0.3, 2.0, 9.5, 35.0, 500.0])
def test_poisson_is_poisson_distributed(rate):
    # Random: both samplers (CDF inversion below 10, PTRS above). The largest distance
    # between the empirical CDF and P(X <= k) = Q(k + 1, rate) over the integers stays
    # below the KS 0.1% critical value; the samples are whole numbers.
    torch.manual_seed(0)
    n = 20000
    samples = torch.poisson(torch.full((n,), rate, device="tpu")).cpu().double()
    assert bool((samples == samples.round()).all()) and bool((samples >= 0).all())
    ks = torch.arange(samples.max().item() + 1, dtype=torch.double)
    empirical = (samples.unsqueeze(1) <= ks).double().mean(0)
    exact = torch.special.gammaincc(ks + 1, torch.tensor(rate, dtype=torch.double))
    assert (empirical - exact).abs().max().item() < 1.95 / n**0.5
    assert abs(samples.mean().item() - rate) < 5 * (rate / n) ** 0.5


def test_poisson_of_zero_rates_and_the_generator():
    torch.manual_seed(2)
    rates = torch.tensor([0.0, 1.0, 50.0] * 10, device="tpu")
    a = torch.poisson(rates).cpu()
    torch.manual_seed(2)
    assert torch.equal(torch.poisson(rates).cpu(), a)
    assert bool((a[::3] == 0).all())


@pytest.mark.parametrize(
    "count, prob", [(5, 0.9), (20, 0.2), (100, 0.5), (1000, 0.01), (1000, 0.97), (7, 0.0), (9, 1.0)]
)
def test_binomial_is_binomial_distributed(count, prob):
    # Random: inversion (mean below 10) and BTRS, reflected for prob > 1/2. The empirical
    # CDF against the exact one (from torch.distributions on CPU, float64) below the KS
    # 0.1% critical value; counts stay whole and within [0, count].
    torch.manual_seed(0)
    n = 20000
    counts = torch.full((n,), float(count), device="tpu")
    samples = torch.binomial(counts, torch.full((n,), prob, device="tpu")).cpu().double()
    assert bool((samples == samples.round()).all())
    assert bool((samples >= 0).all()) and bool((samples <= count).all())
    ks = torch.arange(count + 1, dtype=torch.double)
    if prob in (0.0, 1.0):
        assert bool((samples == count * prob).all())
        return
    exact = torch.distributions.Binomial(count, torch.tensor(prob, dtype=torch.double))
    cdf = exact.log_prob(ks).exp().cumsum(0)
    empirical = (samples.unsqueeze(1) <= ks).double().mean(0)
    assert (empirical - cdf).abs().max().item() < 1.95 / n**0.5
