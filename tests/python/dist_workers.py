"""Worker functions for the multi-process tests (tests/python/test_distributed.py).

Each runs in its own process (dist_launch.launch) and checks its results against CPU
PyTorch on the same inputs, computed in the same process."""

from __future__ import annotations

import copy
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

TPU = "tpu"  # a string: this module also runs where torch_tpu is not loaded


def init(rank, world_size, init_method, backend="cpu:gloo,tpu:tpu_dist", timeout=60):
    dist.init_process_group(backend, init_method=init_method, rank=rank,
                            world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout))


def exact(tpu_tensor, cpu_tensor):
    torch.testing.assert_close(tpu_tensor.cpu(), cpu_tensor, rtol=0, atol=0)


def raises(fn, match):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        assert match in str(e), f"expected {match!r} in: {e}"
        return str(e)
    raise AssertionError(f"no error (expected {match!r})")


# --- every collective, values checked exactly -------------------------------------

def _rank_tensor(rank, n, dtype=torch.float32, scale=1):
    # Distinct per rank and per element, exact in every dtype used.
    return (torch.arange(n, dtype=torch.int64) * scale + 100 * (rank + 1)).to(dtype)


def collectives_and_tensor_parallel_2d(rank, world_size, init_method):
    """(Both in one group of processes: 4 start-ups cost more than either.)"""
    message = collectives(rank, world_size, init_method)
    tensor_parallel(rank, world_size, None, dp=2)
    return message


def collectives(rank, world_size, init_method):
    init(rank, world_size, init_method)
    W = world_size
    ranks = range(W)
    per_rank = [_rank_tensor(r, 6) for r in ranks]

    # all_reduce: every op, floating and integer
    for op, ref in [(dist.ReduceOp.SUM, sum(per_rank)),
                    (dist.ReduceOp.AVG, sum(per_rank) / W),
                    (dist.ReduceOp.MIN, torch.stack(per_rank).min(0).values),
                    (dist.ReduceOp.MAX, torch.stack(per_rank).max(0).values),
                    (dist.ReduceOp.PRODUCT, None)]:
        t = per_rank[rank].to(TPU)
        if ref is None:  # small factors, so that the product is exact in any order
            t = t - 100 * (rank + 1) + rank + 1
            ref = torch.stack([p - 100 * (r + 1) + r + 1 for r, p in enumerate(per_rank)]).prod(0)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    ints = [torch.tensor([0b1100, 0b1010, 7 + r], dtype=torch.int32) * (r + 1) for r in ranks]
    for op, fold in [(dist.ReduceOp.BAND, torch.bitwise_and),
                     (dist.ReduceOp.BOR, torch.bitwise_or),
                     (dist.ReduceOp.BXOR, torch.bitwise_xor),
                     (dist.ReduceOp.SUM, torch.add)]:
        ref = ints[0]
        for x in ints[1:]:
            ref = fold(ref, x)
        t = ints[rank].to(TPU)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    # bf16 and a non-contiguous view written in place
    b = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16) * (rank + 1)
    t = b.to(TPU)
    dist.all_reduce(t)
    exact(t, sum(torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16) * (r + 1) for r in ranks))
    base = torch.zeros(4, 6, device=TPU)
    col = base[:, 2]
    col.copy_(torch.full((4,), float(rank + 1)))
    dist.all_reduce(col)
    expect = torch.zeros(4, 6)
    expect[:, 2] = sum(range(1, W + 1))
    exact(base, expect)

    # async work: wait() orders later device work; the future carries the result
    t = per_rank[rank].to(TPU)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    exact(t * 2, sum(per_rank) * 2)
    exact(fut.value()[0], sum(per_rank))

    # coalesced all_reduce (one transfer each way)
    a, c = per_rank[rank][:4].to(TPU), per_rank[rank].reshape(2, 3).to(TPU)
    dist.all_reduce_coalesced([a, c])
    exact(a, sum(per_rank)[:4])
    exact(c, sum(per_rank).reshape(2, 3))

    # broadcast from every root
    for root in ranks:
        t = per_rank[rank].to(TPU)
        dist.broadcast(t, src=root)
        exact(t, per_rank[root])

    # reduce
    t = per_rank[rank].to(TPU)
    dist.reduce(t, dst=0)
    exact(t, sum(per_rank) if rank == 0 else per_rank[rank])

    # all_gather: list, into tensor, coalesced
    out = [torch.empty(6, device=TPU) for _ in ranks]
    dist.all_gather(out, per_rank[rank].to(TPU))
    for r in ranks:
        exact(out[r], per_rank[r])
    out = torch.empty(W * 2, 3, device=TPU)
    dist.all_gather_into_tensor(out, per_rank[rank].reshape(2, 3).to(TPU))
    exact(out, torch.cat([p.reshape(2, 3) for p in per_rank]))
    small = [torch.tensor([r * 1.0, -r * 1.0]) for r in ranks]
    outs = [[torch.empty(6, device=TPU) for _ in ranks], [torch.empty(2, device=TPU) for _ in ranks]]
    dist.all_gather_coalesced(outs, [per_rank[rank].to(TPU), small[rank].to(TPU)])
    for r in ranks:
        exact(outs[0][r], per_rank[r])
        exact(outs[1][r], small[r])

    # reduce_scatter: list and tensor, SUM and AVG
    full = [_rank_tensor(r, 4 * W) for r in ranks]
    t = torch.empty(4, device=TPU)
    dist.reduce_scatter(t, list(full[rank].to(TPU).chunk(W)))
    exact(t, sum(full).chunk(W)[rank])
    t = torch.empty(4, device=TPU)
    dist.reduce_scatter_tensor(t, full[rank].to(TPU), op=dist.ReduceOp.AVG)
    exact(t, (sum(full) / W).chunk(W)[rank])

    # all_to_all: list, single even, single uneven
    ins = [_rank_tensor(rank, 2, scale=10) + r for r in ranks]
    outs = [torch.empty(2, device=TPU) for _ in ranks]
    dist.all_to_all(outs, [x.to(TPU) for x in ins])
    for r in ranks:
        exact(outs[r], _rank_tensor(r, 2, scale=10) + rank)
    out = torch.empty(2 * W, device=TPU)
    dist.all_to_all_single(out, torch.cat(ins).to(TPU))
    exact(out, torch.cat([_rank_tensor(r, 2, scale=10) + rank for r in ranks]))
    # rank r sends (j + 1) * (r + 1) elements to rank j
    in_splits = [(j + 1) * (rank + 1) for j in ranks]
    out_splits = [(rank + 1) * (r + 1) for r in ranks]
    src = torch.arange(sum(in_splits), dtype=torch.float32) + 1000 * rank
    out = torch.empty(sum(out_splits), device=TPU)
    dist.all_to_all_single(out, src.to(TPU), out_splits, in_splits)
    expect = []
    for r in ranks:
        splits = [(j + 1) * (r + 1) for j in ranks]
        start = sum(splits[:rank])
        expect.append(torch.arange(start, start + splits[rank], dtype=torch.float32) + 1000 * r)
    exact(out, torch.cat(expect))

    # gather / scatter
    gl = [torch.empty(6, device=TPU) for _ in ranks] if rank == 0 else None
    dist.gather(per_rank[rank].to(TPU), gl, dst=0)
    if rank == 0:
        for r in ranks:
            exact(gl[r], per_rank[r])
    t = torch.empty(6, device=TPU)
    dist.scatter(t, [p.to(TPU) for p in per_rank] if rank == W - 1 else None, src=W - 1)
    exact(t, per_rank[rank])

    # send / recv in a ring, posted in both orders
    nxt, prv = (rank + 1) % W, (rank - 1) % W
    t = torch.empty(6, device=TPU)
    reqs = [dist.irecv(t, src=prv), dist.isend(per_rank[rank].to(TPU), dst=nxt)]
    for q in reqs:
        q.wait()
    exact(t, per_rank[prv])
    if rank % 2 == 0:
        dist.send(per_rank[rank].to(TPU), dst=nxt)
        dist.recv(t, src=prv)
    else:
        dist.recv(t, src=prv)
        dist.send(per_rank[rank].to(TPU), dst=nxt)
    exact(t, per_rank[prv])

    dist.barrier()

    # bad input: clear errors, and the group stays usable afterwards
    raises(lambda: dist.all_reduce(torch.ones(3 + rank, device=TPU)), "disagree")
    raises(lambda: dist.all_reduce(
        torch.ones(3, device=TPU, dtype=torch.float32 if rank else torch.float64)), "disagree")
    if rank < 2:
        other = 1 - rank
        if rank == 0:
            dist.send(torch.ones(5, device=TPU), dst=other)
        else:
            raises(lambda: dist.recv(torch.empty(4, device=TPU), src=other), "expects 4")
    raises(lambda: dist.all_gather_into_tensor(torch.empty(5, device=TPU),
                                               torch.ones(2, device=TPU)), "world_size")
    t = per_rank[rank].to(TPU)
    dist.all_reduce(t)
    exact(t, sum(per_rank))

    # Host staging buffers are reused: a result stays put when later collectives of
    # the same size run (all_reduce, all_gather, reduce_scatter in turn).
    a, b = per_rank[rank].to(TPU), (per_rank[rank] * 3).to(TPU)
    dist.all_reduce(a)
    dist.all_reduce(b)
    g = [torch.empty(6, device=TPU) for _ in ranks]
    dist.all_gather(g, (per_rank[rank] * 5).to(TPU))
    rs = torch.empty(6, device=TPU)
    dist.reduce_scatter(rs, [(per_rank[rank] * (i + 7)).to(TPU) for i in ranks])
    dist.all_reduce(torch.ones(6, device=TPU))
    exact(a, sum(per_rank))
    exact(b, sum(per_rank) * 3)
    # >= 8 MiB: the result is written into the tensor's own device buffer by a program
    # reading the host buffer in place; the host buffer is reused only after that.
    big = [_rank_tensor(r, 2 << 20) for r in ranks]
    a, b = big[rank].to(TPU), (big[rank] * 3).to(TPU)
    dist.all_reduce(a)
    c = a * 2  # queued on a's new contents
    dist.all_reduce(b)
    dist.broadcast(a, src=0)
    exact(c, sum(big) * 2)
    exact(a, sum(big))
    exact(b, sum(big) * 3)
    for r in ranks:
        exact(g[r], per_rank[r] * 5)
    exact(rs, sum(per_rank) * (rank + 7))

    # Results are written back in the caller's inference mode (on gloo's thread too).
    with torch.inference_mode():
        t, u = per_rank[rank].to(TPU), per_rank[rank].to(TPU)
        dist.all_reduce(t)
        dist.all_reduce(u, async_op=True).wait()
        exact(t, sum(per_rank))
        exact(u, sum(per_rank))

    import torch_tpu

    m = torch_tpu.metrics.snapshot()
    assert m["host_staged_collectives"] >= 25 and m["host_staged_bytes"] > 0, m

    # a "tpu_dist" group serves CPU tensors through its gloo, and a "gloo" group tpu
    # tensors through tpu_dist (host-staged), as gloo serves cuda tensors on a GPU host
    for name in ("tpu_dist", "gloo"):
        group = dist.new_group(backend=name)
        t, c = per_rank[rank].to(TPU), per_rank[rank].clone()
        dist.all_reduce(t, group=group)
        dist.all_reduce(c, group=group)
        exact(t, sum(per_rank))
        assert torch.equal(c, sum(per_rank)), name
        assert {"cpu", "tpu"} <= {d.type for d in group._device_types}, name


# --- training: DDP, FSDP2, DCP, tensor parallel, against one-process CPU training -----

STEPS = 3
LR = 0.1


class MLP(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        # a parameter no forward uses: DDP's find_unused_parameters must cope
        self.spare = nn.Linear(4, 4) if unused else None

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make_model(unused=False):
    torch.manual_seed(0)
    return MLP(unused)


def batch(world_size, per_rank=4, step=0):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(world_size * per_rank, 8, generator=g)
    y = torch.randn(world_size * per_rank, 4, generator=g)
    return x, y


def reference(world_size, micro=1, unused=False):
    """One process, CPU: the full batch's loss is the mean over ranks of each rank's
    (sum over micro-batches of) mean loss, which is what data parallelism computes."""
    model = make_model(unused)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(world_size * micro, step=step)
        opt.zero_grad()
        loss = 0
        for piece_x, piece_y in zip(x.chunk(world_size * micro), y.chunk(world_size * micro)):
            loss = loss + nn.functional.mse_loss(model(piece_x), piece_y) / world_size
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def _shard(rank, world_size, micro, step):
    x, y = batch(world_size * micro, step=step)
    xs, ys = x.chunk(world_size * micro), y.chunk(world_size * micro)
    return [(xs[rank * micro + m], ys[rank * micro + m]) for m in range(micro)]


def _train(model, rank, world_size, device, micro=1, no_sync=False, optimizer_of=None):
    opt = torch.optim.SGD((optimizer_of or model).parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        pieces = _shard(rank, world_size, micro, step)
        for m, (x, y) in enumerate(pieces):
            last = m == len(pieces) - 1
            ctx = model.no_sync() if no_sync and not last else _null()
            with ctx:
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
        opt.step()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _close(state, ref, atol=1e-5):
    for k, v in ref.items():
        got = state[k]
        got = got.full_tensor() if hasattr(got, "full_tensor") else got
        torch.testing.assert_close(got.detach().cpu(), v, rtol=1e-5, atol=atol, msg=k)


def ddp_and_tensor_parallel(rank, world_size, init_method):
    """(Both in one group of processes: a start-up costs more than either.)"""
    ddp(rank, world_size, init_method)
    tensor_parallel(rank, world_size, None)
    compiled_tensor_parallel(rank, world_size)


def compiled_tensor_parallel(rank, world_size):
    """torch.compile of a tensor-parallel model: the functional collectives DTensor puts in
    the graphs run eagerly over tpu_dist (host-staged here) between programs; no graph
    runs op by op. Outputs and gradients against CPU."""
    import torch_tpu
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("tpu", (world_size,))
    model = parallelize_module(make_model().to(TPU), mesh,
                               {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    torch._dynamo.reset()
    torch_tpu.metrics.reset()
    compiled = torch.compile(model, backend="tpu")
    ref = make_model()
    x, y = batch(1, step=1)
    out = compiled(x.to(TPU))
    ref_out = ref(x)
    torch.testing.assert_close(out.cpu(), ref_out.detach(), rtol=1e-5, atol=1e-6)
    nn.functional.mse_loss(out, y.to(TPU)).backward()
    nn.functional.mse_loss(ref_out, y).backward()
    for name, p in model.named_parameters():
        ref_grad = dict(ref.named_parameters())[name].grad
        torch.testing.assert_close(p.grad.full_tensor().cpu(), ref_grad, rtol=1e-5, atol=1e-6,
                                   msg=name)
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] >= 1 and m["graphs"] >= 2, m


def ddp(rank, world_size, init_method):
    from torch.nn.parallel import DistributedDataParallel as DDP

    init(rank, world_size, init_method)
    ref = reference(world_size)
    for kwargs in [{}, {"find_unused_parameters": True}, {"static_graph": True},
                   {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.0001}]:
        unused = kwargs.get("find_unused_parameters", False)
        model = DDP(make_model(unused).to(TPU), **kwargs)
        _train(model, rank, world_size, TPU)
        _close(model.module.state_dict(), reference(world_size, unused=unused))
    # no_sync: gradients of two micro-batches accumulate locally, then one all-reduce
    model = DDP(make_model().to(TPU))
    _train(model, rank, world_size, TPU, micro=2, no_sync=True)
    _close(model.module.state_dict(), reference(world_size, micro=2))
    # torch.compile(DDP(model), backend="tpu"): DDP's hooks all-reduce the compiled
    # backward's gradients (DDPOptimizer splits the graph at bucket boundaries)
    import torch_tpu

    runs = torch_tpu.metrics.snapshot()["graph_runs"]
    compiled = DDP(make_model().to(TPU))
    _train(torch.compile(compiled, backend="tpu"), rank, world_size, TPU,
           optimizer_of=compiled)
    _close(compiled.module.state_dict(), reference(world_size))
    assert torch_tpu.metrics.snapshot()["graph_runs"] >= runs + 2 * STEPS

    # DDP's runtime statistics come from tpu timing events (csrc/distributed/ddp_timer.cpp)
    stats = model._get_ddp_logging_data()
    assert stats.get("avg_backward_compute_time", 0) > 0, stats
    assert stats.get("avg_backward_comm_time", 0) > 0, stats
    del ref


def _fsdp_model(device, mp=None):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = make_model().to(device)
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    kw = {"mp_policy": mp} if mp is not None else {}
    kw["mesh"] = mesh
    fully_shard(model.fc1, **kw)
    fully_shard(model.fc2, **kw)
    fully_shard(model, **kw)
    return model


def fsdp(rank, world_size, init_method, tmpdir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import MixedPrecisionPolicy

    init(rank, world_size, init_method)
    model = _fsdp_model(TPU)
    _train(model, rank, world_size, TPU)
    _close(model.state_dict(), reference(world_size))

    # bf16 parameters, f32 reduction: the same policy on CPU (gloo) is the reference
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    on_tpu, on_cpu = _fsdp_model(TPU, mp), _fsdp_model("cpu", mp)
    _train(on_tpu, rank, world_size, TPU)
    _train(on_cpu, rank, world_size, "cpu")
    cpu_state = {k: v.full_tensor() for k, v in on_cpu.state_dict().items()}
    _close(on_tpu.state_dict(), cpu_state, atol=1e-2)

    # DCP: save the sharded state dict, load it into a differently initialised model
    dcp.save(model.state_dict(), checkpoint_id=tmpdir)
    torch.manual_seed(123 + rank)
    fresh = _fsdp_model(TPU)
    for p in fresh.parameters():
        with torch.no_grad():
            p.mul_(0).add_(7)
    state = fresh.state_dict()
    dcp.load(state, checkpoint_id=tmpdir)
    fresh.load_state_dict(state)
    _close(fresh.state_dict(), {k: v.full_tensor().cpu() for k, v in model.state_dict().items()})
    for v in fresh.state_dict().values():
        assert v.to_local().device.type == "tpu"


def tensor_parallel(rank, world_size, init_method, dp=1):
    """Colwise fc1, rowwise fc2 on a (dp, tp) mesh; with dp > 1, data parallel over the
    other mesh dimension by FSDP2. Outputs, gradients and trained parameters against CPU."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    if init_method is not None:
        init(rank, world_size, init_method)
    tp = world_size // dp
    mesh = init_device_mesh("tpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(make_model().to(TPU), mesh["tp"],
                               {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    if dp > 1:
        from torch.distributed.fsdp import fully_shard

        fully_shard(model, mesh=mesh["dp"])
    dp_rank = mesh["dp"].get_local_rank()

    # one forward/backward: outputs and gradients
    ref = make_model()
    x, y = batch(dp, step=0)
    xs, ys = x.chunk(dp), y.chunk(dp)
    out = model(xs[dp_rank].to(TPU))
    ref_out = ref(xs[dp_rank])
    torch.testing.assert_close(out.cpu(), ref_out.detach(), rtol=1e-5, atol=1e-6)
    nn.functional.mse_loss(out, ys[dp_rank].to(TPU)).backward()
    ref_loss = sum(nn.functional.mse_loss(ref(a), b) for a, b in zip(xs, ys)) / dp
    ref_loss.backward()
    for name, p in model.named_parameters():
        ref_grad = dict(ref.named_parameters())[name].grad
        torch.testing.assert_close(p.grad.full_tensor().cpu(), ref_grad, rtol=1e-5, atol=1e-6,
                                   msg=name)

    # and training
    model.zero_grad()
    _train(model, dp_rank, dp, TPU)
    _close(model.state_dict(), reference(dp))


def cpu_gloo(rank, world_size, init_method):
    """DDP and FSDP2 on CPU tensors over gloo; returns the trained parameters, and
    whether torch_tpu was loaded (torch.accelerator then reports tpu)."""
    import sys

    from torch.nn.parallel import DistributedDataParallel as DDP

    init(rank, world_size, init_method, backend="gloo")
    model = DDP(make_model())
    _train(model, rank, world_size, "cpu")
    ddp_state = {k: v.clone() for k, v in model.module.state_dict().items()}
    _close(ddp_state, reference(world_size))
    fsdp_model = _fsdp_model("cpu")
    _train(fsdp_model, rank, world_size, "cpu")
    fsdp_state = {k: v.full_tensor() for k, v in fsdp_model.state_dict().items()}
    return "torch_tpu" in sys.modules, ddp_state, fsdp_state, _fsdp_default_mesh(rank, world_size)


def _fsdp_default_mesh(rank, world_size):
    """FSDP2 on a CPU model without a mesh: the default mesh is the accelerator's (tpu once
    torch_tpu is installed, as cuda on a GPU host), so the model moves there and the
    group's gloo must serve it; the loss is taken where the output is."""
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    for module in (model.fc1, model.fc2, model):
        fully_shard(module)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        ((x, y),) = _shard(rank, world_size, 1, step)
        out = model(x)
        nn.functional.mse_loss(out, y.to(out.device)).backward()
        opt.step()
    return {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}


def killed_rank(rank, world_size, init_method, timeout):
    """The last rank dies after one collective; the others' next collective must raise
    (not hang, not abort) within the process group's timeout."""
    import signal
    import time

    # No backend named: torch.accelerator reports tpu, which maps to tpu_dist (and gloo
    # serves the group's CPU tensors).
    init(rank, world_size, init_method, backend=None, timeout=timeout)
    assert dist.get_backend_config() == "cpu:gloo,tpu:tpu_dist", dist.get_backend_config()
    t = torch.ones(4, device=TPU)
    dist.all_reduce(t)
    exact(t, torch.full((4,), float(world_size)))
    if rank == world_size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        return time.monotonic() - start, str(e)
    raise AssertionError("all_reduce with a dead rank returned")


def dtensor_attention(rank, world_size, init_method):
    """F.scaled_dot_product_attention on DTensors sharded over heads (tensor parallel
    attention): plain, causal, grouped-query and masked; the output stays sharded over
    heads, and output and gradients match CPU."""
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    init(rank, world_size, init_method)
    mesh = init_device_mesh("tpu", (world_size,))
    g = torch.Generator().manual_seed(0)
    for hkv, causal, mask in [(4, False, None), (4, True, None), (2, True, None),
                              (4, False, "bool"), (2, False, "float")]:
        q = torch.randn(2, 4, 5, 8, generator=g)
        k, v = torch.randn(2, hkv, 6, 8, generator=g), torch.randn(2, hkv, 6, 8, generator=g)
        m = None if mask is None else (torch.rand(5, 6, generator=g) > 0.3 if mask == "bool"
                                       else torch.randn(2, 1, 5, 6, generator=g))
        grad = torch.randn(2, 4, 5, 8, generator=g)
        kw = dict(is_causal=causal, enable_gqa=hkv != 4)
        cpu = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = F.scaled_dot_product_attention(*cpu, attn_mask=m, **kw)
        ref.backward(grad)
        dt = [distribute_tensor(t.to(TPU), mesh, [Shard(1)]).requires_grad_() for t in (q, k, v)]
        dm = None if m is None else distribute_tensor(m.to(TPU), mesh, [Replicate()])
        out = F.scaled_dot_product_attention(*dt, attn_mask=dm, **kw)
        assert out.placements == (Shard(1),), out.placements
        out.backward(distribute_tensor(grad.to(TPU), mesh, [Shard(1)]))
        case = (hkv, causal, mask)
        torch.testing.assert_close(out.full_tensor().cpu(), ref.detach(), rtol=1e-5, atol=1e-5,
                                   msg=str(case))
        for name, a, b in zip("qkv", dt, cpu):
            torch.testing.assert_close(a.grad.full_tensor().cpu(), b.grad, rtol=1e-5, atol=1e-5,
                                       msg=f"{case} grad {name}")


class _AttentionBlock(nn.Module):
    """A pre-norm transformer block with grouped-query causal attention (4 query heads,
    2 key/value heads) and an MLP, in the layout tensor parallelism shards."""

    def __init__(self, dim=16, heads=4, kv_heads=2):
        super().__init__()
        self.head_dim = dim // heads
        self.norm = nn.LayerNorm(dim)
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.fc1 = nn.Linear(dim, 32)
        self.fc2 = nn.Linear(32, dim)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.norm(x)
        q, k, v = (w(h).view(b, s, -1, self.head_dim).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, -1))
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


def _attention_batch(step):
    g = torch.Generator().manual_seed(200 + step)
    return torch.randn(4, 6, 16, generator=g), torch.randn(4, 6, 16, generator=g)


def _attention_block():
    torch.manual_seed(0)
    return _AttentionBlock()


def fsdp_tp_attention(rank, world_size, init_method):
    """2-D parallelism on a (dp=2, tp=2) mesh: attention heads and the MLP split over tp
    (q/k/v stay DTensors, so scaled_dot_product_attention runs on DTensors sharded over
    heads), FSDP2 over dp. The losses equal one CPU process on the full batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    import dist_cuda_convention as ref  # the one-process CPU training to match

    init(rank, world_size, init_method)
    mesh = init_device_mesh("tpu", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
    model = _attention_block().to(TPU)
    colwise = ColwiseParallel(use_local_output=False)
    parallelize_module(model, mesh["tp"], {"wq": colwise, "wk": colwise, "wv": colwise,
                                           "wo": RowwiseParallel(), "fc1": ColwiseParallel(),
                                           "fc2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    dp = mesh["dp"].get_local_rank()
    opt = torch.optim.SGD(model.parameters(), lr=ref.LR, foreach=False)
    losses = []
    for step in range(ref.STEPS):
        x, y = (t.chunk(2)[dp].to(TPU) for t in _attention_batch(step))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        report = loss.detach().clone()
        dist.all_reduce(report, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        losses.append(report.item())
    torch.testing.assert_close(torch.tensor(losses),
                               torch.tensor(ref.reference(_attention_block, _attention_batch)),
                               rtol=1e-5, atol=1e-6)


# --- c10d's coalescing manager and batch_isend_irecv ---------------------------------

def coalesced_inputs(rank, W):
    # Integers in float32: every summation order gives the same bits, so results on tpu
    # and on CPU compare exactly.
    g = torch.Generator().manual_seed(rank)
    return [torch.randint(-1000, 1000, (n,), generator=g).float() for n in (5, 16, 3 * W)]


def coalesced_reference(rank, W):
    """What coalesced_calls returns, computed from every rank's inputs on the CPU."""
    every = [coalesced_inputs(r, W) for r in range(W)]
    sums = [sum(e[i] for e in every) for i in range(3)]
    maxes = [torch.stack([e[i] for e in every]).amax(0) for i in range(3)]
    return sums + maxes + [
        torch.cat([e[0] for e in every]), torch.cat([e[1].reshape(4, 4) for e in every]),
        sums[0], sums[2].chunk(W)[rank]]


def coalesced_calls(rank, W, device, manager):
    """The collectives FSDP-style code issues inside `_coalescing_manager`, on tensors on
    `device`; `manager()` opens it. Returns every result, moved to the CPU."""
    ints = coalesced_inputs(rank, W)
    results = []
    # all_reduce, SUM and MAX (gloo has no AVG): one allreduce_coalesced call each
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        ts = [t.to(device, copy=True) for t in ints]
        with manager():
            for t in ts:
                dist.all_reduce(t, op=op)
        results += [t.cpu() for t in ts]
    # all_gather_single and reduce_scatter_single (formerly *_into_tensor / *_tensor):
    # FSDP's shapes, 1-d and 2-d shards
    ins = [ints[0].to(device, copy=True), ints[1].reshape(4, 4).to(device, copy=True)]
    outs = [torch.empty(5 * W, device=device), torch.empty(4 * W, 4, device=device)]
    with manager():
        for o, i in zip(outs, ins):
            dist.all_gather_single(o, i)
    results += [o.cpu() for o in outs]
    ins = [torch.cat([ints[0]] * W).to(device), ints[2].to(device, copy=True)]
    outs = [torch.empty(5, device=device), torch.empty(3, device=device)]
    with manager():
        for o, i in zip(outs, ins):
            dist.reduce_scatter_single(o, i, op=dist.ReduceOp.SUM)
    results += [o.cpu() for o in outs]
    return results


def ring_exchange(rank, W, device, batched):
    """Each rank sends to the next and receives from the previous, as pipeline-parallel
    code does with batch_isend_irecv."""
    send = (torch.arange(7, dtype=torch.float32) + 10 * rank).to(device)
    recv = torch.empty(7, device=device)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % W),
           dist.P2POp(dist.irecv, recv, (rank - 1) % W)]
    if batched:
        works = dist.batch_isend_irecv(ops)
    else:  # gloo on CPU tensors: no coalescing there, so plain isend/irecv
        works = [op.op(op.tensor, op.peer) for op in ops]
    for w in works:
        w.wait()
    return recv.cpu()


def coalescing(rank, world_size, init_method):
    """tpu tensors through tpu_dist's coalescing against gloo on CPU tensors, same group."""
    import contextlib

    from torch.distributed.distributed_c10d import _coalescing_manager

    init(rank, world_size, init_method)
    W = world_size
    backend = dist.group.WORLD._get_backend(torch.device(TPU))
    assert backend.supports_coalescing

    # Fast path (no device): the manager joins the calls into one *_coalesced call.
    got = coalesced_calls(rank, W, TPU, _coalescing_manager)
    # gloo, one call at a time, on CPU tensors
    want = coalesced_calls(rank, W, "cpu", contextlib.nullcontext)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    # With a device: the backend's startCoalescing/endCoalescing around the same calls,
    # then async with a non-fast-path op inside (one Work for all)
    device = torch.device(TPU)
    got = coalesced_calls(rank, W, TPU,
                          lambda: _coalescing_manager(device=device, async_ops=False))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    ts = [(torch.arange(4.0) + rank).to(TPU), torch.full((3,), float(rank)).to(TPU)]
    root = torch.full((2,), float(rank)).to(TPU)
    with _coalescing_manager(device=device, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
        dist.broadcast(root, src=W - 1)  # not a fast-path op: starts at once, in the Work
    cm.wait()
    cpu = [torch.arange(4.0) + rank, torch.full((3,), float(rank))]
    cpu_root = torch.full((2,), float(rank))
    for t in cpu:
        dist.all_reduce(t)
    dist.broadcast(cpu_root, src=W - 1)
    for a, b in zip(ts + [root], cpu + [cpu_root]):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)

    # batch_isend_irecv goes through the coalescing manager (supports_coalescing)
    torch.testing.assert_close(ring_exchange(rank, W, TPU, True),
                               ring_exchange(rank, W, "cpu", False), rtol=0, atol=0)

    # c10d's own checks still apply: mixed collectives in one manager
    def mixed():
        with _coalescing_manager():
            dist.all_reduce(torch.ones(2, device=TPU))
            dist.all_gather_single(torch.empty(2 * W, device=TPU), torch.ones(2, device=TPU))
    raises(mixed, "same type")
    # and the backend's: endCoalescing without startCoalescing
    raises(lambda: backend._end_coalescing(), "without startCoalescing")
    dist.barrier()
    return True


def p2p_sends_waited_first(rank, world_size, init_method):
    """Both ranks post a send and a receive and wait for the send first (the order pipeline
    code often uses): nothing may wait for the peer's wait(). Then two messages of
    different sizes in flight from one peer on one tag: they arrive in the order sent.
    Checked against gloo on CPU tensors, which runs the same calls."""
    init(rank, world_size, init_method)
    peer = 1 - rank
    results = {}
    for device in ("cpu", TPU):
        mine = (torch.arange(5, dtype=torch.float32) + 10 * rank).to(device)
        got = torch.empty(5, device=device)
        s = dist.isend(mine, dst=peer)
        r = dist.irecv(got, src=peer)
        s.wait()
        r.wait()
        small, large = torch.empty(3, device=device), torch.empty(7, device=device)
        sends = [dist.isend(torch.full((3,), 1.0 + rank).to(device), dst=peer),
                 dist.isend(torch.full((7,), 2.0 + rank).to(device), dst=peer)]
        recvs = [dist.irecv(small, src=peer), dist.irecv(large, src=peer)]
        for w in sends + recvs:
            w.wait()
        results[device] = [got.cpu(), small.cpu(), large.cpu()]
    exact(results[TPU][0], torch.arange(5, dtype=torch.float32) + 10 * peer)
    for a, b in zip(results[TPU], results["cpu"]):
        exact(a, b)
    return True


def staged_results(rank, world_size, init_method):
    """Host-staged results on XLA:CPU are views of pooled host memory (no copy back). A
    result must keep its values while later collectives reuse the pool, through in-place
    ops on it (which must not hand its memory to another buffer), views of it, and
    its death (the memory goes back to the pool). Checked against gloo on CPU tensors."""
    import torch_tpu

    init(rank, world_size, init_method)
    for n in (1 << 10, 3 << 20):
        cpu = [_rank_tensor(rank, n, scale=k + 1) for k in range(4)]
        tpu = [t.to(TPU) for t in cpu]
        for t in cpu:
            dist.all_reduce(t)
        kept = []
        uploaded = torch_tpu.metrics.snapshot()["host_to_device_bytes"]
        for t in tpu:
            dist.all_reduce(t)
            kept.append(t)
        torch.tpu.synchronize()
        # nothing was copied back to the device: the results are the host buffers
        assert torch_tpu.metrics.snapshot()["host_to_device_bytes"] == uploaded
        for a, b in zip(kept, cpu):
            exact(a, b)
        # in place on a result, then more collectives of the same size (pool reuse)
        kept[0].add_(1)
        kept[1][: n // 2].mul_(2)
        del kept[2], tpu  # kept[2]'s memory returns to the pool
        again = _rank_tensor(rank, n, scale=7).to(TPU)
        dist.all_reduce(again)
        ref = _rank_tensor(rank, n, scale=7)
        dist.all_reduce(ref)
        exact(again, ref)
        exact(kept[0], cpu[0] + 1)
        exact(kept[1], torch.cat([cpu[1][: n // 2] * 2, cpu[1][n // 2:]]))
        exact(kept[2], cpu[3])
        # a result read by a program, then reduced again in place
        y = kept[0] * 3
        dist.all_reduce(kept[0])
        exact(y, (cpu[0] + 1) * 3)
        exact(kept[0], (cpu[0] + 1) * world_size)
    # 20 MiB and a few elements: staged in 4 uneven pieces, each its own gloo call
    n = (5 << 20) + 3
    cpu = _rank_tensor(rank, n)
    summed = cpu.clone()
    dist.all_reduce(summed)
    for op, want in [(dist.ReduceOp.SUM, summed), (dist.ReduceOp.AVG, summed / world_size),
                     (dist._make_nccl_premul_sum(0.5), summed * 0.5),
                     (dist.ReduceOp.MAX, None)]:
        t = cpu.to(TPU)
        backend = dist.group.WORLD._get_backend(torch.device(TPU))
        seq = backend._get_sequence_number_for_group()
        dist.all_reduce(t, op=op)
        # the agreement check and four pieces: five host collectives
        assert backend._get_sequence_number_for_group() - seq == 5
        if want is None:  # gloo on CPU tensors for the reference
            want = cpu.clone()
            dist.all_reduce(want, op=op)
        exact(t, want)
    return True
