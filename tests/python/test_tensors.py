import io

import pytest
import torch

import torch_tpu  # noqa: F401  (registers the tpu device)
from helpers import assert_same

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


def sample(shape, dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(dtype):
    cpu = sample((3, 5), dtype)
    assert_same(cpu.to("tpu"), cpu)


def test_empty_and_zero_size():
    e = torch.empty(0, 3, device="tpu")
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    s = torch.tensor(3.5).to("tpu")
    assert s.dim() == 0 and s.item() == 3.5


def test_copy_with_dtype_conversion_and_broadcast():
    cpu = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    dst = torch.zeros(2, 3, dtype=torch.float32, device="tpu")
    dst.copy_(cpu)
    assert_same(dst, cpu.float())
    dst2 = torch.empty(4, 3, dtype=torch.float64, device="tpu")
    dst2.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert_same(dst2, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).expand(4, 3))
    t = cpu.to("tpu")
    dev_copy = torch.empty(2, 3, dtype=torch.float16, device="tpu").copy_(t)
    assert_same(dev_copy, cpu.half())
    assert_same(t.to(torch.bfloat16), cpu.bfloat16())


def test_strided_views_read_like_cpu():
    cpu = torch.arange(120, dtype=torch.float32).reshape(4, 5, 6)
    t = cpu.to("tpu")
    views = [
        lambda x: x.transpose(0, 2),
        lambda x: x[1:3, ::2, 1:5],
        lambda x: x[:, 2],
        lambda x: x[2],
        lambda x: x.permute(2, 0, 1)[1:, :, ::3],
        lambda x: x[..., 1:4].transpose(1, 2)[:, ::2],
        lambda x: x[1, 1:, 1:],
        lambda x: x[:1, :1].expand(3, 4, 6),
        lambda x: x.as_strided((3, 3), (1, 1), 2),  # overlapping: gather path
        lambda x: x.view(-1)[7:100:9],
        lambda x: x.unsqueeze(1)[:, :, 2:4],
        lambda x: x.flatten(0, 1).t(),
    ]
    for view in views:
        assert_same(view(t), view(cpu))
        assert_same(view(t).contiguous(), view(cpu).contiguous())
        assert_same(view(t).clone(), view(cpu).clone())


def test_inplace_writes_through_views_reach_every_alias():
    cpu = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    t = cpu.to("tpu")
    alias = t.view(30)
    writes = [
        lambda x: x[1:3, 2:5].fill_(-1),
        lambda x: x.t()[2].add_(100),
        lambda x: x[::2, ::3].mul_(2),
        lambda x: x[4].zero_(),
        lambda x: x.transpose(0, 1)[1:4, 1:3].copy_(torch.full((3, 2), 7.0)),
        lambda x: x.view(-1)[3:20:4].sub_(1.5),
        lambda x: x[:, 5:][1:].div_(4),
    ]
    for write in writes:
        write(t)
        write(cpu)
        assert_same(t, cpu)
        assert_same(alias, cpu.view(30))


def test_views_of_views_and_version_counter():
    cpu = torch.randn(6, 8)
    t = cpu.to("tpu")
    v1, c1 = t[1:5], cpu[1:5]
    v2, c2 = v1.transpose(0, 1)[2:7], c1.transpose(0, 1)[2:7]
    version = t._version
    v2.add_(torch.ones(5, 4).to("tpu"))
    c2.add_(torch.ones(5, 4))
    assert t._version > version
    assert_same(t, cpu)
    assert_same(v1, c1)


def test_copy_from_cpu_into_view():
    cpu = torch.zeros(4, 4)
    t = cpu.to("tpu")
    src = torch.arange(4.0)
    t[:, 1].copy_(src)
    cpu[:, 1].copy_(src)
    assert_same(t, cpu)


def test_partial_write_into_fresh_empty():
    t = torch.empty(3, 4, device="tpu")
    t[1].fill_(2.0)
    assert t[1].cpu().tolist() == [2.0] * 4


def test_resize_and_set():
    t = torch.arange(4.0).to("tpu")
    t.resize_(2, 3)
    assert t.shape == (2, 3)
    assert t.view(-1)[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    u = torch.empty(0, device="tpu")
    u.set_(t)
    assert u.shape == t.shape and u.data_ptr() == t.data_ptr()
    v = torch.empty(0, device="tpu").set_(t.untyped_storage(), 1, (3,), (1,))
    assert v.cpu().tolist() == [1.0, 2.0, 3.0]
    s = torch.arange(3.0).to("tpu").untyped_storage()
    s.resize_(24)
    assert s.nbytes() == 24


def test_item_and_printing():
    t = torch.tensor([[1.5, -2.0], [3.25, 4.0]]).to("tpu")
    assert t[1, 0].item() == 3.25
    assert str(t) == "tensor([[ 1.5000, -2.0000],\n        [ 3.2500,  4.0000]], device='tpu:0')"
    assert repr(torch.tensor([1, 2]).to("tpu")) == "tensor([1, 2], device='tpu:0')"
    assert "device='tpu:0'" in repr(torch.zeros(0, device="tpu"))


def test_save_and_load(tmp_path):
    cpu = torch.randn(3, 4)
    t = cpu.to("tpu")
    obj = {"a": t, "view": t[1:, ::2], "ints": torch.arange(5).to("tpu")}
    path = tmp_path / "t.pt"
    torch.save(obj, path)
    loaded_cpu = torch.load(path, map_location="cpu")
    torch.testing.assert_close(loaded_cpu["a"], cpu)
    torch.testing.assert_close(loaded_cpu["view"], cpu[1:, ::2])
    loaded = torch.load(path, map_location="tpu")
    assert loaded["a"].device.type == "tpu"
    assert_same(loaded["a"], cpu)
    assert_same(loaded["view"], cpu[1:, ::2])
    assert_same(loaded["ints"], torch.arange(5))
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).to("tpu").state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location="tpu")
    assert sd["weight"].device.type == "tpu"


def test_dtype_view_reinterprets_bits():
    cpu = torch.tensor([1.0, -2.0, 0.5])
    t = cpu.to("tpu")
    assert_same(t.view(torch.int32), cpu.view(torch.int32))


def test_module_to_keeps_parameter_identity_and_ties():
    emb, head = torch.nn.Embedding(5, 4), torch.nn.Linear(4, 5, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, head)
    param = emb.weight
    model.to("tpu")
    assert emb.weight is param and head.weight is emb.weight
    assert param.device.type == "tpu" and isinstance(param, torch.nn.Parameter)
    model(torch.tensor([1, 3]).to("tpu")).sum().backward()
    assert param.grad.device.type == "tpu"
    model.to("cpu")
    assert head.weight is emb.weight and param.device.type == "cpu"
