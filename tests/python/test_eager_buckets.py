"""Bounded dynamic shapes in eager mode (csrc/ops/bounded.h): a tensor that grows one
step at a time (a KV cache, generated ids) is stored padded at its bucket size, and the
ops that read it run at the bound with the real size as a runtime operand, so a decode
loop compiles once per bucket, not once per step. Every result equals CPU PyTorch, for
sizes on, between and at the ends of buckets, in value and gradient; ops that are not
exact at the bound read the real values and compile per shape as before."""

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from helpers import run_python

# Cache lengths around the buckets 8, 16, 32 and 64.
LENGTHS = [9, 15, 16, 17, 31, 32, 33, 40]


def compiles() -> int:
    return torch_tpu.metrics.snapshot()["compiles"]


def grown(length, seed=0, start=4, width=8):
    """A [1, 2, length, width] cache built as decode loops build it (one cat per step),
    on tpu, and the same values on the CPU."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(1, 2, length, width, generator=g)
    cache = rows[:, :, :start].to("tpu")
    for n in range(start, length):
        cache = torch.cat([cache, rows[:, :, n : n + 1].to("tpu")], dim=2)
    return cache, rows


def bucket(n):
    return _C._shape_bucket(n, -1)


@pytest.mark.parametrize("length", LENGTHS)
def test_growing_cache_is_stored_padded(length):
    cache, rows = grown(length)
    assert cache.shape == rows.shape and cache.is_contiguous()
    assert _C._padded_shape(cache) == [1, 2, bucket(length), 8]
    assert torch.equal(cache.cpu(), rows)
    assert cache[0, 1, -1, 3].item() == rows[0, 1, -1, 3].item()
    assert torch.equal(cache[:, :, 2:5].cpu(), rows[:, :, 2:5])


def attend(q, cache, mask_value=None):
    """One decode step of attention over the cache (keys = values = cache)."""
    scores = q @ cache.transpose(-1, -2) * 0.25
    if mask_value is not None:
        scores = torch.where(scores > 1.5, torch.full_like(scores, mask_value), scores)
    return torch.softmax(scores, -1) @ cache


# name -> f(cache): ops on a padded [1, 2, n, 8] cache, the dynamic dimension 2.
FAMILIES = {
    "elementwise": lambda c: torch.where(c > 0, c.exp() * 2 - 1, c.abs().sqrt()),
    "matmul": lambda c: c @ c.transpose(-1, -2),
    "contraction": lambda c: c.transpose(-1, -2) @ c,
    "sum": lambda c: c.sum(2),
    "mean": lambda c: c.mean(2),
    "max": lambda c: c.amax(2) - c.amin(-2),
    "argmax": lambda c: c.argmax(2).float(),
    "softmax": lambda c: torch.softmax(c, 2),
    "log_softmax": lambda c: F.log_softmax(c, 2),
    "logsumexp": lambda c: torch.logsumexp(c, 2),
    "layer_norm": lambda c: F.layer_norm(c, (8,)),
    "rms_norm": lambda c: F.rms_norm(c, (8,)),
    "cross_entropy": lambda c: F.cross_entropy(
        c[0, 0], torch.arange(c.shape[2], device=c.device) % 8
    ),
    "cumsum": lambda c: c.cumsum(2),
    "sort": lambda c: c.sort(2).values,
    "topk": lambda c: c.topk(2, dim=2).values,
    "index": lambda c: c[:, :, torch.tensor([0, 1, 1], device=c.device)],
    "gather": lambda c: c.gather(2, torch.zeros(1, 2, 3, 8, dtype=torch.long, device=c.device)),
    "scatter": lambda c: torch.zeros_like(c).scatter(2, torch.ones_like(c, dtype=torch.long), c),
    "attention": lambda c: attend(c[:, :, -1:], c),
    "masked_attention": lambda c: attend(c[:, :, -1:], c, float("-inf")),
    "sdpa": lambda c: F.scaled_dot_product_attention(c[:, :, -3:], c, c),
    "repeat_kv": lambda c: c[:, :, None].expand(1, 2, 2, c.shape[2], 8).reshape(1, 4, -1, 8) * 3,
    "cat_more": lambda c: torch.cat([c, c * 2], dim=2),
    "slices": lambda c: c[:, :, 1:-1] + c[:, :, :1],
}


@pytest.mark.parametrize("length", [9, 16, 17, 33])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_ops_on_padded_values_equal_cpu(family, length):
    cache, rows = grown(length)
    f = FAMILIES[family]
    torch.testing.assert_close(f(cache).cpu(), f(rows), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["elementwise", "repeat_kv", "cat_more", "slices", "max"])
def test_exact_ops_are_bit_identical_to_the_unbucketed_program(family):
    cache, _ = grown(21)
    plain = cache.clone()
    try:
        _C._set_bucket_rule(0)
        plain = torch.cat([plain[:, :, :1], plain[:, :, 1:]], dim=2)  # not padded
    finally:
        _C._set_bucket_rule(-1)
    assert _C._padded_shape(cache) and not _C._padded_shape(plain)
    f = FAMILIES[family]
    assert torch.equal(f(cache).cpu(), f(plain).cpu())


def decode(cache, steps, seed=1):
    """A decode loop: append a row, attend over the cache; returns the step outputs."""
    g = torch.Generator().manual_seed(seed)
    outs = []
    for _ in range(steps):
        new = torch.randn(1, 2, 1, 8, generator=g).to(cache.device)
        cache = torch.cat([cache, new], dim=2)
        outs.append(attend(new, cache, float("-inf")).sum(-1))
    return cache, outs


def test_decode_loop_compiles_once_per_bucket():
    cache, _ = grown(6, seed=3)
    cpu_cache, _ = grown(6, seed=3)
    cpu_cache = cpu_cache.cpu()
    cache, _ = decode(cache, 4)  # the cache becomes padded on its way through 8..10
    before = compiles()
    cache, out = decode(cache, 5)  # 11..15: bucket 16, every program known from 9, 10
    within = compiles() - before
    cache, out2 = decode(cache, 17)  # 16..32, one new bucket
    per_bucket = compiles() - before - within
    cpu_cache, _ = decode(cpu_cache, 4)
    cpu_cache, cpu_out = decode(cpu_cache, 5)
    cpu_cache, cpu_out2 = decode(cpu_cache, 17)
    for a, b in zip(out + out2, cpu_out + cpu_out2):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-5)
    assert torch.equal(cache.cpu(), cpu_cache)
    assert within == 0, f"{within} compiles at lengths 11..15 of a bucket seen before"
    assert per_bucket <= 12, f"{per_bucket} compiles for the 16..32 buckets"


def test_fused_decode_loop_compiles_once_per_bucket():
    before_mode = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("fused")
    try:
        cache, _ = grown(6, seed=4)
        cache, _ = decode(cache, 4)
        cache.cpu()
        before = compiles()
        outs = []
        for _ in range(5):  # one flush per step, as a generate loop reads its token
            cache, out = decode(cache, 1, seed=len(outs))
            outs.append(out[0].cpu())
        within = compiles() - before
    finally:
        torch_tpu.set_eager_mode(before_mode)
    cpu_cache, _ = grown(6, seed=4)
    cpu_cache, _ = decode(cpu_cache.cpu(), 4)
    for k in range(5):
        cpu_cache, cpu_out = decode(cpu_cache, 1, seed=k)
        torch.testing.assert_close(outs[k], cpu_out[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(cache.cpu(), cpu_cache)
    assert within <= 1, f"{within} fused programs for 5 steps inside one bucket"


def test_fused_steps_that_read_where_the_cache_ends_compile_once_per_bucket():
    # A step that reads its padded cache where it now ends (the last two rows, as a decode
    # step reads the position it just wrote), in the same fused group as the cat: that
    # view's offset moves every step, so it is a runtime operand of the step's program, not
    # built into it (HF generate compiled one program per token so).
    def step(cache, new):
        cache = torch.cat([cache, new], dim=2)
        return cache, (cache[:, :, -1:] * 2 + cache[:, :, -2:-1]).sum(-1)

    rows = torch.randn(1, 2, 16, 8, generator=torch.Generator().manual_seed(6))
    before_mode = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("fused")
    try:
        cache, outs = rows[:, :, :8].to("tpu"), []
        # Lengths 9..12: the cache becomes padded (11) and is first read so (12); 13..16
        # are steps of one bucket whose programs are all known.
        for n in range(8, 16):
            if n == 12:
                before = compiles()
            cache, out = step(cache, rows[:, :, n : n + 1].to("tpu"))
            outs.append(out.cpu())
        within = compiles() - before
    finally:
        torch_tpu.set_eager_mode(before_mode)
    assert _C._padded_shape(cache) == [1, 2, 16, 8]
    cpu_cache = rows[:, :, :8]
    for n in range(8, 16):
        cpu_cache, cpu_out = step(cpu_cache, rows[:, :, n : n + 1])
        torch.testing.assert_close(outs[n - 8], cpu_out)  # a sum: f32's tolerance
    assert within == 0, f"{within} fused programs for 4 steps inside one bucket"


def test_gradients_through_a_padded_cache():
    rows = torch.randn(1, 2, 19, 8, generator=torch.Generator().manual_seed(5))
    grads = []
    for device in ("tpu", "cpu"):
        leaf = rows.clone().to(device).requires_grad_()
        cache = leaf[:, :, :4]
        for n in range(4, 19):
            cache = torch.cat([cache, leaf[:, :, n : n + 1] * 1.0], dim=2)
        if device == "tpu":
            assert _C._padded_shape(cache) == [1, 2, 32, 8]
        loss = (attend(cache[:, :, -1:], cache) ** 2).sum() + cache.logsumexp(2).sum()
        loss.backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-5)


def test_in_place_writes_and_resizes_of_a_padded_tensor():
    cache, rows = grown(13)
    alias = cache.view(2, 13, 8)
    cache[:, :, 3] = 7.0
    rows = rows.clone()
    rows[:, :, 3] = 7.0
    assert torch.equal(alias.cpu(), rows.view(2, 13, 8))
    cache.add_(1)
    assert torch.equal(cache.cpu(), rows + 1)
    cache.resize_(1, 2, 14, 8)  # keeps the storage's elements in order, as on the CPU
    assert torch.equal(cache.view(-1)[:208].cpu(), (rows + 1).view(-1))


def test_random_draws_do_not_depend_on_padding():
    cache, _ = grown(11)
    plain = cache.cpu().to("tpu")
    torch.manual_seed(7)
    a = F.dropout(cache, 0.5) + torch.rand_like(cache)
    torch.manual_seed(7)
    b = F.dropout(plain, 0.5) + torch.rand_like(plain)
    assert torch.equal(a.cpu(), b.cpu())


def test_padded_size_against_the_same_size_unpadded():
    cache, rows = grown(12)
    plain = rows.to("tpu")
    assert torch.equal((cache + plain).cpu(), rows * 2)
    torch.testing.assert_close(
        (cache @ plain.transpose(-1, -2)).cpu(), rows @ rows.transpose(-1, -2)
    )


def test_a_bound_the_meta_kernel_refused_is_not_asked_again():
    # At the bound the cache is [1, 2, 16, 8] against [1, 2, 12, 8]: add's meta kernel
    # refuses the pair, and the op runs at the real sizes. The refusal is kept with the
    # program key: the next equal call asks no meta kernel at all.
    cache, rows = grown(12)
    plain = rows.to("tpu")
    torch.tpu.synchronize()  # fused mode: both calls read the cache computed
    assert torch.equal((cache + plain).cpu(), rows * 2)
    before = torch_tpu.metrics.snapshot()["meta_calls"]
    assert torch.equal((cache + plain).cpu(), rows * 2)
    assert torch_tpu.metrics.snapshot()["meta_calls"] == before


def test_concatenations_of_unrelated_sizes_are_not_a_growing_cache():
    # rotate_half of a GQA layer's queries (4 heads) then keys (2 heads), step after step:
    # the sizes differ within one bucket, but not along the joined dimension, so neither
    # result is stored padded (the keys' was padded to 8 heads, and every op reading it
    # asked the meta kernel again).
    def rotate_half(x):
        return torch.cat((-x[..., 4:], x[..., :4]), dim=-1)

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 6, 8, generator=g), torch.randn(2, 2, 6, 8, generator=g)
    for _ in range(3):
        for x in (q, k):
            out = rotate_half(x.to("tpu"))
            assert _C._padded_shape(out) is None
            assert torch.equal(out.cpu(), rotate_half(x))
    # Along the joined dimension a changing size is still a growing cache.
    grown_cache, _ = grown(12)
    assert _C._padded_shape(grown_cache) == [1, 2, 16, 8]


@pytest.mark.parametrize("setting, padded", [("off", "None"), ("10", "[1, 20]")])
def test_the_setting_turns_buckets_off_or_sets_a_multiple(setting, padded):
    r = run_python(
        "import torch, torch_tpu\n"
        "c = torch.zeros(1, 4, device='tpu')\n"
        "for _ in range(12): c = torch.cat([c, torch.ones(1, 1, device='tpu')], 1)\n"
        "print(torch_tpu._C._padded_shape(c), '|', c.sum().item())\n",
        env={"TORCH_TPU_SHAPE_BUCKETS": setting},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{padded} | 12.0"
