"""Op mode's call memo (csrc/aten/call_memo.h): a call with the signature of an earlier
one runs that call's program directly. Every difference the program depends on (shapes,
dtypes, aliasing, literal scalars, views, devices, settings) must take the full path, and
what the memo holds must follow the program cache (clears, evictions)."""

import pytest
import torch

import torch_tpu
from helpers import run_python


@pytest.fixture(autouse=True)
def op_mode():
    old = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode("op")
    yield
    torch_tpu.set_eager_mode(old)


def _misses():
    return torch.tpu.cache_stats()["memory_misses"]


def _pair(shape=(4, 4), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g).to(dtype)
    b = torch.randn(shape, generator=g).to(dtype)
    return a, b


def test_repeated_calls_read_new_values():
    ops = [
        lambda a, b: a + b,
        lambda a, b: a * b,
        lambda a, b: torch.exp(a),
        lambda a, b: a.sum(1),
        lambda a, b: torch.maximum(a, b),
        lambda a, b: torch.where(a > b, a, b),
    ]
    for fn in ops:
        fn(*(t.to("tpu") for t in _pair(seed=99)))  # compiled here
    misses = _misses()
    for seed in range(5):
        a, b = _pair(seed=seed)
        ta, tb = a.to("tpu"), b.to("tpu")
        for fn in ops:
            torch.testing.assert_close(fn(ta, tb).cpu(), fn(a, b), rtol=1e-6, atol=1e-6)
    assert _misses() == misses


def test_storage_rewritten_in_place_between_calls():
    a, b = _pair()
    ta, tb = a.to("tpu"), b.to("tpu")
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    ta.add_(1)  # the storage gets a new buffer
    a.add_(1)
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    ta.copy_(b.to("tpu"))
    torch.testing.assert_close((ta + tb).cpu(), b + b)


def test_aliased_inputs():
    # One storage twice first (one parameter), then two storages with the same shapes.
    c, d = _pair((5, 3))
    tc, td = c.to("tpu"), d.to("tpu")
    torch.testing.assert_close((tc + tc).cpu(), c + c)
    torch.testing.assert_close((tc + td).cpu(), c + d)
    a, b = _pair()
    ta, tb = a.to("tpu"), b.to("tpu")
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    torch.testing.assert_close((ta + ta).cpu(), a + a)  # one storage, one parameter
    torch.testing.assert_close((tb + ta).cpu(), b + a)
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    v = ta.view(16)  # another tensor of the same storage
    torch.testing.assert_close((ta.view(16) * v).cpu(), a.view(16) * a.view(16))


def test_scalars_literal_and_runtime():
    a, _ = _pair()
    ta = a.to("tpu")
    ints = torch.arange(16, dtype=torch.int32).view(4, 4)
    ti = ints.to("tpu")
    values = [0.37, 0.5, 2, -1, 3, True, 0, 1.0, -0.5, 2.0, 7, 0.37]
    for k in values:
        torch.testing.assert_close((ta * k).cpu(), a * k)
        torch.testing.assert_close((ta + k).cpu(), a + k)
        if isinstance(k, bool):  # CPU's check, though alpha=1 ran before: another signature
            with pytest.raises(RuntimeError, match="Boolean alpha"):
                ta.add(ta, alpha=k)
        else:
            torch.testing.assert_close(ta.add(ta, alpha=k).cpu(), a.add(a, alpha=k))
        torch.testing.assert_close((ti * k).cpu(), ints * k)
        torch.testing.assert_close((ti + k).cpu(), ints + k)
        torch.testing.assert_close(torch.clamp(ta, min=k).cpu(), torch.clamp(a, min=k))
    # Values that are runtime operands compile nothing new.
    misses = _misses()
    for k in torch.rand(20).tolist():
        torch.testing.assert_close((ta * k).cpu(), a * k)
    assert _misses() == misses


def test_cpu_scalar_tensors():
    a, _ = _pair()
    ta = a.to("tpu")
    for s in [torch.tensor(1.5), torch.tensor(2), torch.tensor(0.5), torch.tensor(True)]:
        torch.testing.assert_close((ta + s).cpu(), a + s)
        torch.testing.assert_close((ta * s).cpu(), a * s)
    ti = torch.arange(6, dtype=torch.int64).to("tpu")
    torch.testing.assert_close((ti * torch.tensor(2.5)).cpu(), torch.arange(6) * 2.5)


def test_views_and_partial_storages():
    a, b = _pair((6, 6))
    ta, tb = a.to("tpu"), b.to("tpu")
    torch.testing.assert_close((ta + tb).cpu(), a + b)
    torch.testing.assert_close((ta.t() + tb).cpu(), a.t() + b)
    torch.testing.assert_close((ta[1:] + tb[1:]).cpu(), a[1:] + b[1:])
    torch.testing.assert_close((ta[:, ::2] * 2).cpu(), a[:, ::2] * 2)
    torch.testing.assert_close((ta[2] + tb[3]).cpu(), a[2] + b[3])
    torch.testing.assert_close((ta.view(36)[:6] + tb[0]).cpu(), a.view(36)[:6] + b[0])
    torch.testing.assert_close((ta + tb).cpu(), a + b)


def test_views_with_runtime_offsets():
    # Views of part of a storage take the memo too: the layout is in the signature, the
    # offset a parameter. Every offset must read its own elements, with no new programs.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 8, generator=g)
    w = torch.randn(8, 8, generator=g)
    tx, tw = x.to("tpu"), w.to("tpu")
    calls = [
        lambda x, w, i: x[i : i + 4] + w[:4],  # row slices of two storages
        lambda x, w, i: x[i : i + 4] * x[i + 1 : i + 5],  # two views of one storage
        lambda x, w, i: x[i : i + 8] @ w.t(),  # a transposed weight
        lambda x, w, i: x[i : i + 8].t() + w,  # a transposed slice
        lambda x, w, i: x[i, ::2] - w[0, 1::2],  # strided rows
        lambda x, w, i: x[i : i + 2, None, :].expand(2, 3, 8) * 2.5,  # a broadcast view
        lambda x, w, i: torch.exp(x.view(-1)[i : i + 5]),  # a flat window, odd length
        lambda x, w, i: x[i : i + 4].sum(1),
    ]
    for fn in calls:
        fn(tx, tw, 0)
    misses = _misses()
    for i in (0, 1, 7, 30, 55):
        for fn in calls:
            torch.testing.assert_close(fn(tx, tw, i).cpu(), fn(x, w, i), rtol=1e-5, atol=1e-5)
    assert _misses() == misses
    # The storage rewritten in place between calls: the views read the new contents.
    tx.mul_(-1)
    x.mul_(-1)
    for fn in calls:
        torch.testing.assert_close(fn(tx, tw, 3).cpu(), fn(x, w, 3), rtol=1e-5, atol=1e-5)


def test_in_place_ops_with_views_take_the_full_path():
    # A view as `self`, or a whole `self` read through a view as well: exact either way.
    g = torch.Generator().manual_seed(4)
    a = torch.randn(6, 6, generator=g)
    ta = a.to("tpu")
    for _ in range(3):
        ta[1:3].add_(ta[3:5])
        a[1:3].add_(a[3:5])
        ta.add_(ta.view(6, 6))
        a.add_(a.view(6, 6))
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            ta.add_(ta.t())  # a partial overlap, which CPU refuses as well
        torch.testing.assert_close(ta.cpu(), a)


def test_shapes_and_dtypes():
    for shape in [(4, 4), (2, 8), (16,), (1, 4, 4), (4, 4)]:
        a, b = _pair(shape)
        for dtype in [torch.float32, torch.bfloat16, torch.int32]:
            x, y = a.to(dtype), b.to(dtype)
            tx, ty = x.to("tpu"), y.to("tpu")
            got = (tx * ty).cpu()
            assert got.dtype == dtype and got.shape == x.shape
            torch.testing.assert_close(got, x * y)
    a, b = _pair()
    mixed = a.to("tpu") + b.to(torch.bfloat16).to("tpu")
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed.cpu(), a + b.to(torch.bfloat16))


def test_static_arguments_of_every_kind():
    # Each pair differs only in a static argument (int, int list, bool, string, float):
    # each call after the first of its kind runs the memo, and must not run another's.
    a, _ = _pair((4, 6))
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(5))
    ta, tx = a.to("tpu"), x.to("tpu")
    calls = [
        lambda t, u: t.sum(0),
        lambda t, u: t.sum(1),
        lambda t, u: t.sum([0, 1]),
        lambda t, u: t.sum(1, keepdim=True),
        lambda t, u: t.cumsum(1),
        lambda t, u: torch.div(t, 0.7, rounding_mode="floor"),
        lambda t, u: torch.div(t, 0.7, rounding_mode="trunc"),
        lambda t, u: torch.nn.functional.gelu(t, approximate="tanh"),
        lambda t, u: torch.nn.functional.gelu(t),
        lambda t, u: torch.nn.functional.layer_norm(u, (6,), eps=1e-5),
        lambda t, u: torch.nn.functional.layer_norm(u, (6,), eps=0.5),
        lambda t, u: torch.cat([t, u], 0),
        lambda t, u: torch.cat([u, t], 0),
    ]
    for fn in calls:
        fn(ta, tx)
    misses = _misses()
    for _ in range(2):
        for fn in calls:
            torch.testing.assert_close(fn(ta, tx).cpu(), fn(a, x), rtol=1e-5, atol=1e-5)
    assert _misses() == misses


def test_matmul_precision_is_part_of_the_signature():
    a, b = _pair((8, 8))
    ta, tb = a.to("tpu"), b.to("tpu")
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        (ta @ tb).cpu()
        misses = _misses()
        torch.set_float32_matmul_precision("medium")
        torch.testing.assert_close((ta @ tb).cpu(), a @ b, rtol=2e-2, atol=2e-2)
        assert _misses() == misses + 1  # another program
    finally:
        torch.set_float32_matmul_precision(old)


def test_clear_cache_and_hits():
    a, b = _pair((3, 5))
    ta, tb = a.to("tpu"), b.to("tpu")
    torch.testing.assert_close((ta - tb).cpu(), a - b)

    def sub_hits():
        entries = torch.tpu.cache_stats(entries=True)["entries"]
        return sum(e["hits"] for e in entries if e["label"] == "sub.Tensor")

    hits = sub_hits()
    for _ in range(3):
        ta - tb
    assert sub_hits() == hits + 3  # the memo's runs count as the program's hits
    torch.tpu.clear_cache()
    misses = _misses()
    torch.testing.assert_close((ta - tb).cpu(), a - b)
    assert _misses() == misses + 1  # the memo forgot the program with the cache


def test_device_mismatch_and_other_device():
    r = run_python(
        """
import torch, torch_tpu
torch_tpu.set_eager_mode("op")
a, b = torch.ones(4, 4), torch.full((4, 4), 2.0)
a0, b0, b1 = a.to("tpu:0"), b.to("tpu:0"), b.to("tpu:1")
for _ in range(3):
    assert torch.equal((a0 + b0).cpu(), a + b)
try:
    a0 + b1
    raise SystemExit("no error")
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), e
a1 = a.to("tpu:1")
for _ in range(3):
    c = a1 + b1
    assert c.device == torch.device("tpu:1") and torch.equal(c.cpu(), a + b)
print("ok")
""",
        {"TORCH_TPU_NUM_DEVICES": "2"},
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_small_program_cache_evicts_memoized_programs():
    # Four programs fit: the memo must drop what the cache evicts, and the results stay
    # right while programs come and go.
    r = run_python(
        """
import torch, torch_tpu
torch_tpu.set_eager_mode("op")
xs = [torch.randn(n, 3) for n in range(1, 11)]
txs = [x.to("tpu") for x in xs]
for _ in range(3):
    for x, tx in zip(xs, txs):
        for _ in range(2):
            assert torch.allclose((tx * tx + 1).cpu(), x * x + 1)
stats = torch.tpu.cache_stats()
assert stats["memory_entries"] <= 4, stats
assert stats["memory_evictions"] > 0, stats
print("ok")
""",
        {"TORCH_TPU_CACHE_ENTRIES": "4"},
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_in_place_ops():
    a, b = _pair()
    ta, tb = a.to("tpu"), b.to("tpu")
    view = ta[1]  # another tensor of the written storage sees every write
    for k in [0.3, 2, 0.3, -1.7]:
        ta.add_(tb, alpha=k)
        a.add_(b, alpha=k)
        ta.mul_(k)
        a.mul_(k)
        torch.testing.assert_close(ta.cpu(), a)
        torch.testing.assert_close(view.cpu(), a[1])
    ta.add_(ta)  # self as the other operand too
    a.add_(a)
    torch.testing.assert_close(ta.cpu(), a)
    torch.testing.assert_close(tb.cpu(), b)  # the read operand is untouched
    ints = torch.arange(6, dtype=torch.int32).to("tpu")
    for _ in range(2):
        ints.add_(3)
        with pytest.raises(RuntimeError, match="can't be cast"):
            ints.add_(0.5)
    torch.testing.assert_close(ints.cpu(), torch.arange(6, dtype=torch.int32) + 6)


def test_in_place_write_bumps_the_version():
    x = torch.randn(5, device="tpu", requires_grad=True)
    for _ in range(2):  # the second time from the memo
        y = x * 1
        z = y.sin()  # saves y for the backward
        version = y._version
        y.add_(1)
        assert y._version > version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_in_place_without_donation():
    r = run_python(
        """
import torch, torch_tpu
torch_tpu.set_eager_mode("op")
a = torch.randn(4, 4)
t = a.to("tpu")
for _ in range(3):
    t.mul_(1.5)
    a.mul_(1.5)
torch.testing.assert_close(t.cpu(), a)
print("ok")
""",
        {"TORCH_TPU_DONATE": "0"},
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
