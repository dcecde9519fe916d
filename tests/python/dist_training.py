"""Worker functions for the multi-process tests over the host-staged transport
(test_distributed.py, and test_distributed_collectives.py's host-staged half): training
(DDP, FSDP2, DCP, tensor parallel, DTensor attention) and what only real processes show.

Each runs in its own process (dist_launch.launch) and checks its results against CPU
PyTorch on the same inputs, computed in the same process."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import dist_collectives as c
from dist_collectives import exact, rank_tensor

TPU = "tpu"  # a string: this module also runs where torch_tpu is not loaded


def init(rank, world_size, init_method, backend="cpu:gloo,tpu:tpu_dist", timeout=60):
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout),
    )


# --- the shared suites (dist_collectives.py) over the host-staged transport -------------


def collectives(rank, world_size, init_method):
    init(rank, world_size, init_method)
    c.collectives(rank, world_size, TPU, "host_staged")
    if world_size == 4:  # 4 start-ups cost more than the tensor parallel run
        tensor_parallel(rank, world_size, None, dp=2)


def coalescing(rank, world_size, init_method):
    init(rank, world_size, init_method)
    return c.coalescing(rank, world_size, TPU)


def sends_waited_first(rank, world_size, init_method):
    init(rank, world_size, init_method)
    return c.sends_waited_first(rank, world_size, TPU)


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
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("tpu", (world_size,))
    model = parallelize_module(
        make_model().to(TPU), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    )
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
        torch.testing.assert_close(
            p.grad.full_tensor().cpu(), ref_grad, rtol=1e-5, atol=1e-6, msg=name
        )
    m = torch_tpu.metrics.snapshot()
    assert m["graph_fallbacks"] == 0 and m["graph_splits"] >= 1 and m["graphs"] >= 2, m


def ddp(rank, world_size, init_method):
    from torch.nn.parallel import DistributedDataParallel as DDP

    init(rank, world_size, init_method)
    ref = reference(world_size)
    for kwargs in [
        {},
        {"find_unused_parameters": True},
        {"static_graph": True},
        {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.0001},
    ]:
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
    _train(torch.compile(compiled, backend="tpu"), rank, world_size, TPU, optimizer_of=compiled)
    _close(compiled.module.state_dict(), reference(world_size))
    assert torch_tpu.metrics.snapshot()["graph_runs"] >= runs + 2 * STEPS

    # DDP's runtime statistics come from tpu timing events (csrc/distributed/ddp_timer.cpp)
    stats = model._get_ddp_logging_data()
    assert stats.get("avg_backward_compute_time", 0) > 0, stats
    assert stats.get("avg_backward_comm_time", 0) > 0, stats
    del ref


def _fsdp_model(device, mp=None, offload=False):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    model = make_model().to(device)
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    kw = {"mp_policy": mp} if mp is not None else {}
    kw["mesh"] = mesh
    if offload:
        kw["offload_policy"] = CPUOffloadPolicy()
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

    # CPU offload: the sharded parameters and gradients live in pinned host memory; the
    # reduced gradients reach it by non-blocking copies, which FSDP2 waits for.
    offloaded = _fsdp_model(TPU, offload=True)
    _train(offloaded, rank, world_size, TPU)
    assert all(p.to_local().device.type == "cpu" for p in offloaded.parameters())
    _close(offloaded.state_dict(), reference(world_size))

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
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    if init_method is not None:
        init(rank, world_size, init_method)
    tp = world_size // dp
    mesh = init_device_mesh("tpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(
        make_model().to(TPU), mesh["tp"], {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    )
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
        torch.testing.assert_close(
            p.grad.full_tensor().cpu(), ref_grad, rtol=1e-5, atol=1e-6, msg=name
        )

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
    attention): plain, causal, grouped-query and masked, eager and compiled (the graph
    holds tpu's fused attention, which the sharding rule splits over heads); the output
    stays sharded over heads, and output and gradients match CPU."""
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    init(rank, world_size, init_method)
    mesh = init_device_mesh("tpu", (world_size,))
    g = torch.Generator().manual_seed(0)
    compiled = torch.compile(
        F.scaled_dot_product_attention, backend="tpu", fullgraph=True, dynamic=False
    )
    for attend, hkv, causal, mask in [
        (f, *case)
        for f in (F.scaled_dot_product_attention, compiled)
        for case in [
            (4, False, None),
            (4, True, None),
            (2, True, None),
            (4, False, "bool"),
            (2, False, "float"),
        ]
    ]:
        q = torch.randn(2, 4, 5, 8, generator=g)
        k, v = torch.randn(2, hkv, 6, 8, generator=g), torch.randn(2, hkv, 6, 8, generator=g)
        m = (
            None
            if mask is None
            else (
                torch.rand(5, 6, generator=g) > 0.3
                if mask == "bool"
                else torch.randn(2, 1, 5, 6, generator=g)
            )
        )
        grad = torch.randn(2, 4, 5, 8, generator=g)
        kw = dict(is_causal=causal, enable_gqa=hkv != 4)
        cpu = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = F.scaled_dot_product_attention(*cpu, attn_mask=m, **kw)
        ref.backward(grad)
        dt = [distribute_tensor(t.to(TPU), mesh, [Shard(1)]).requires_grad_() for t in (q, k, v)]
        dm = None if m is None else distribute_tensor(m.to(TPU), mesh, [Replicate()])
        out = attend(*dt, attn_mask=dm, **kw)
        assert out.placements == (Shard(1),), out.placements
        out.backward(distribute_tensor(grad.to(TPU), mesh, [Shard(1)]))
        case = (attend is compiled, hkv, causal, mask)
        torch.testing.assert_close(
            out.full_tensor().cpu(), ref.detach(), rtol=1e-5, atol=1e-5, msg=str(case)
        )
        for name, a, b in zip("qkv", dt, cpu):
            torch.testing.assert_close(
                a.grad.full_tensor().cpu(), b.grad, rtol=1e-5, atol=1e-5, msg=f"{case} grad {name}"
            )


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
        q, k, v = (
            w(h).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv)
        )
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
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    import dist_cuda_convention as ref  # the one-process CPU training to match

    init(rank, world_size, init_method)
    mesh = init_device_mesh("tpu", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
    model = _attention_block().to(TPU)
    colwise = ColwiseParallel(use_local_output=False)
    parallelize_module(
        model,
        mesh["tp"],
        {
            "wq": colwise,
            "wk": colwise,
            "wv": colwise,
            "wo": RowwiseParallel(),
            "fc1": ColwiseParallel(),
            "fc2": RowwiseParallel(),
        },
    )
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
    torch.testing.assert_close(
        torch.tensor(losses),
        torch.tensor(ref.reference(_attention_block, _attention_batch)),
        rtol=1e-5,
        atol=1e-6,
    )


def staged_results(rank, world_size, init_method):
    """Host-staged results on XLA:CPU are views of pooled host memory (no copy back). A
    result must keep its values while later collectives reuse the pool, through in-place
    ops on it (which must not hand its memory to another buffer), views of it, and
    its death (the memory goes back to the pool). Checked against gloo on CPU tensors."""
    import torch_tpu

    init(rank, world_size, init_method)
    for n in (1 << 10, 3 << 20):
        cpu = [rank_tensor(rank, n, scale=k + 1) for k in range(4)]
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
        again = rank_tensor(rank, n, scale=7).to(TPU)
        dist.all_reduce(again)
        ref = rank_tensor(rank, n, scale=7)
        dist.all_reduce(ref)
        exact(again, ref)
        exact(kept[0], cpu[0] + 1)
        exact(kept[1], torch.cat([cpu[1][: n // 2] * 2, cpu[1][n // 2 :]]))
        exact(kept[2], cpu[3])
        # a result read by a program, then reduced again in place
        y = kept[0] * 3
        dist.all_reduce(kept[0])
        exact(y, (cpu[0] + 1) * 3)
        exact(kept[0], (cpu[0] + 1) * world_size)
    # 20 MiB and a few elements: staged in 4 uneven pieces, each its own gloo call
    n = (5 << 20) + 3
    cpu = rank_tensor(rank, n)
    summed = cpu.clone()
    dist.all_reduce(summed)
    for op, want in [
        (dist.ReduceOp.SUM, summed),
        (dist.ReduceOp.AVG, summed / world_size),
        (dist._make_nccl_premul_sum(0.5), summed * 0.5),
        (dist.ReduceOp.MAX, None),
    ]:
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


def checkpointed_collectives(rank, world_size, init_method):
    """Selective activation checkpointing that saves collectives' outputs (torchtitan's
    policy for tensor parallelism): a collective's result is written into its output at
    completion without moving the output's version (as on CPU and CUDA), or the
    checkpoint refuses its cached copy as mutated; and the host staging buffers go back
    to their pool while the recompute's dispatch mode is active. Checked against gloo."""
    from functools import partial

    import torch.distributed._functional_collectives as funcol
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    init(rank, world_size, init_method)
    group = dist.group.WORLD

    def policy(ctx, op, *args, **kwargs):
        if op in (
            torch.ops._c10d_functional.all_reduce.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default,
        ):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def block(x, w):
        y = funcol.all_reduce(x @ w, "sum", group)
        z = funcol.reduce_scatter_tensor(y.tanh(), "sum", 0, group)  # torchtitan's
        return (z * z).sum()

    results = {}
    for device in ("cpu", TPU):
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(4 * world_size, 8, generator=g).to(device)
        w = torch.randn(8, 8, generator=g).to(device).requires_grad_()
        out = funcol.all_reduce(x, "sum", group)
        version = out._version
        funcol.wait_tensor(out)
        results[device, "version"] = out._version - version
        for _ in range(2):  # the second step reuses the staging buffers of the first
            w.grad = None
            loss = checkpoint(
                block,
                x,
                w,
                use_reentrant=False,
                context_fn=partial(create_selective_checkpoint_contexts, policy),
            )
            loss.backward()
        results[device, "loss"] = loss.detach().cpu()
        results[device, "grad"] = w.grad.cpu()
    assert results["cpu", "version"] == results[TPU, "version"] == 0, results
    torch.testing.assert_close(results[TPU, "loss"], results["cpu", "loss"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results[TPU, "grad"], results["cpu", "grad"], rtol=1e-5, atol=1e-5)
    dist.destroy_process_group()
