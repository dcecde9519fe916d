"""tpu_dist's collectives suite, one body for both transports (test_distributed_collectives.py).

`collectives(rank, W, dev, transport)` runs on every rank of a group of W ranks whose tpu
device is `dev`: as real processes over the host-staged transport (dist_launch, dev
"tpu"), or as threads of one process over the in-program transport (dist_threads, dev
"tpu:<rank>"). Every result is checked exactly against the same collective computed on
CPU tensors in the same process; bad calls must raise clear errors and leave the group
usable. The coalescing checks (coalesced_calls, ring_exchange) are shared the same way."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist


def exact(tpu_tensor, cpu_tensor):
    torch.testing.assert_close(tpu_tensor.cpu(), cpu_tensor, rtol=0, atol=0)


def raises(fn, match):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        assert match in str(e), f"expected {match!r} in: {e}"
        return str(e)
    raise AssertionError(f"no error (expected {match!r})")


def rank_tensor(rank, n, dtype=torch.float32, scale=1):
    # Distinct per rank and per element, exact in every dtype used.
    return (torch.arange(n, dtype=torch.int64) * scale + 100 * (rank + 1)).to(dtype)


def collectives(rank, W, dev, transport):
    import torch_tpu

    assert torch_tpu.metrics.dist_transport() == transport, torch_tpu.metrics.dist_transport()
    before = torch_tpu.metrics.snapshot()
    all_reduce(rank, W, dev)
    broadcast_and_reduce(rank, W, dev)
    gathers(rank, W, dev)
    reduce_scatters(rank, W, dev)
    all_to_alls(rank, W, dev)
    point_to_point(rank, W, dev)
    dist.barrier()
    bad_calls(rank, W, dev)
    results_stay(rank, W, dev)
    after = torch_tpu.metrics.snapshot()
    counter = "host_staged_collectives" if transport == "host_staged" else "in_program_collectives"
    assert after[counter] - before[counter] >= 25, (counter, before, after)
    groups_serve_both_devices(rank, W, dev)


def all_reduce(rank, W, dev):
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    # every op, floating; small factors for the product, so that it is exact in any order
    small = [p - 100 * (r + 1) + r + 1 for r, p in enumerate(per_rank)]
    for op, mine, ref in [
        (dist.ReduceOp.SUM, per_rank, sum(per_rank)),
        (dist.ReduceOp.AVG, per_rank, sum(per_rank) / W),
        (dist.ReduceOp.MIN, per_rank, torch.stack(per_rank).min(0).values),
        (dist.ReduceOp.MAX, per_rank, torch.stack(per_rank).max(0).values),
        (dist.ReduceOp.PRODUCT, small, torch.stack(small).prod(0)),
    ]:
        t = mine[rank].to(dev)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    # integers: bitwise ops, and AVG rounding toward zero
    ints = [torch.tensor([0b1100, 0b1010, 7 + r], dtype=torch.int32) * (r + 1) for r in range(W)]
    for op, fold in [
        (dist.ReduceOp.BAND, torch.bitwise_and),
        (dist.ReduceOp.BOR, torch.bitwise_or),
        (dist.ReduceOp.BXOR, torch.bitwise_xor),
        (dist.ReduceOp.SUM, torch.add),
    ]:
        ref = ints[0]
        for x in ints[1:]:
            ref = fold(ref, x)
        t = ints[rank].to(dev)
        dist.all_reduce(t, op=op)
        exact(t, ref)
    t = ints[rank].to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    exact(t, torch.div(sum(ints), W, rounding_mode="trunc").to(torch.int32))
    # bool, bf16
    b = torch.tensor([rank == 0, False, True]).to(dev)
    dist.all_reduce(b, op=dist.ReduceOp.MAX)
    exact(b, torch.tensor([True, False, True]))
    h = (torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16) * (rank + 1)).to(dev)
    dist.all_reduce(h)
    exact(h, sum(torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16) * (r + 1) for r in range(W)))
    # a non-contiguous view is reduced in place; the rest of its storage is untouched
    base = torch.arange(24.0).reshape(4, 6) + rank
    t = base.to(dev)
    dist.all_reduce(t[:, 2])
    ref = base.clone()
    ref[:, 2] = sum(torch.arange(24.0).reshape(4, 6)[:, 2] + r for r in range(W))
    exact(t, ref)
    # async: wait() orders later device work; the future carries the result
    t = per_rank[rank].to(dev)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    exact(t * 2, sum(per_rank) * 2)
    exact(fut.value()[0], sum(per_rank))
    # premul sum (what DDP's gradient averaging can use)
    t = per_rank[rank].to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    exact(t, sum(per_rank) * 0.5)
    # coalesced: several tensors, one transfer each way or one program (DDP's buckets)
    a, c = per_rank[rank][:4].to(dev), per_rank[rank].reshape(2, 3).to(dev)
    dist.all_reduce_coalesced([a, c])
    exact(a, sum(per_rank)[:4])
    exact(c, sum(per_rank).reshape(2, 3))


def broadcast_and_reduce(rank, W, dev):
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    for root in range(W):
        t = (per_rank[rank] * (-1) ** rank).to(dev)
        dist.broadcast(t, src=root)
        exact(t, per_rank[root] * (-1) ** root)
    # bit-exact: negative zero, NaN, infinity in bf16; integers and bool
    special = torch.tensor([-0.0, float("nan"), float("inf"), 1.5])
    t = (special if rank == 1 else torch.zeros(4)).to(torch.bfloat16).to(dev)
    dist.broadcast(t, src=1)
    assert torch.equal(t.cpu().view(torch.int16), special.to(torch.bfloat16).view(torch.int16))
    for dtype in (torch.int64, torch.bool, torch.uint8):
        t = rank_tensor(rank, 4, dtype=dtype).to(dev)
        dist.broadcast(t, src=W - 1)
        exact(t, rank_tensor(W - 1, 4, dtype=dtype))
    t = per_rank[rank].to(dev)
    dist.reduce(t, dst=0)
    exact(t, sum(per_rank) if rank == 0 else per_rank[rank])


def gathers(rank, W, dev):
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    out = [torch.empty(2, 3, device=dev) for _ in range(W)]
    dist.all_gather(out, per_rank[rank].reshape(2, 3).to(dev))
    for r in range(W):
        exact(out[r], per_rank[r].reshape(2, 3))
    out = torch.empty(W * 2, 3, device=dev)
    dist.all_gather_into_tensor(out, per_rank[rank].reshape(2, 3).to(dev))
    exact(out, torch.cat([p.reshape(2, 3) for p in per_rank]))
    out = torch.empty(W, 6, device=dev)
    dist.all_gather_into_tensor(out, per_rank[rank].to(dev))
    exact(out, torch.stack(per_rank))
    small = [torch.tensor([r * 1.0, -r * 1.0]) for r in range(W)]
    outs = [
        [torch.empty(6, device=dev) for _ in range(W)],
        [torch.empty(2, device=dev) for _ in range(W)],
    ]
    dist.all_gather_coalesced(outs, [per_rank[rank].to(dev), small[rank].to(dev)])
    for r in range(W):
        exact(outs[0][r], per_rank[r])
        exact(outs[1][r], small[r])
    obj = [None] * W
    dist.all_gather_object(obj, {"rank": rank})
    assert obj == [{"rank": r} for r in range(W)], obj
    # gather and scatter
    gl = [torch.empty(6, device=dev) for _ in range(W)] if rank == 0 else None
    dist.gather(per_rank[rank].to(dev), gl, dst=0)
    if rank == 0:
        for r in range(W):
            exact(gl[r], per_rank[r])
    t = torch.empty(6, device=dev)
    dist.scatter(t, [p.to(dev) for p in per_rank] if rank == W - 1 else None, src=W - 1)
    exact(t, per_rank[rank])


def reduce_scatters(rank, W, dev):
    full = [rank_tensor(r, 4 * W) for r in range(W)]
    t = torch.empty(4, device=dev)
    dist.reduce_scatter(t, list(full[rank].to(dev).chunk(W)))
    exact(t, sum(full).chunk(W)[rank])
    t = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(t, full[rank].to(dev), op=dist.ReduceOp.AVG)
    exact(t, (sum(full) / W).chunk(W)[rank])


def all_to_alls(rank, W, dev):
    ins = [rank_tensor(rank, 2, scale=10) + r for r in range(W)]
    outs = [torch.empty(2, device=dev) for _ in range(W)]
    dist.all_to_all(outs, [x.to(dev) for x in ins])
    for r in range(W):
        exact(outs[r], rank_tensor(r, 2, scale=10) + rank)
    out = torch.empty(2 * W, device=dev)
    dist.all_to_all_single(out, torch.cat(ins).to(dev))
    exact(out, torch.cat([rank_tensor(r, 2, scale=10) + rank for r in range(W)]))
    # uneven: rank r sends (j + 1) * (r + 1) elements to rank j
    in_splits = [(j + 1) * (rank + 1) for j in range(W)]
    out_splits = [(rank + 1) * (r + 1) for r in range(W)]
    src = torch.arange(sum(in_splits), dtype=torch.float32) + 1000 * rank
    out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(out, src.to(dev), out_splits, in_splits)
    expect = []
    for r in range(W):
        splits = [(j + 1) * (r + 1) for j in range(W)]
        start = sum(splits[:rank])
        expect.append(torch.arange(start, start + splits[rank], dtype=torch.float32) + 1000 * r)
    exact(out, torch.cat(expect))


def point_to_point(rank, W, dev):
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    # a ring, posted in both orders
    nxt, prv = (rank + 1) % W, (rank - 1) % W
    t = torch.empty(6, device=dev)
    reqs = [dist.irecv(t, src=prv), dist.isend(per_rank[rank].to(dev), dst=nxt)]
    for q in reqs:
        q.wait()
    exact(t, per_rank[prv])
    if rank % 2 == 0:
        dist.send(per_rank[rank].to(dev), dst=nxt)
        dist.recv(t, src=prv)
    else:
        dist.recv(t, src=prv)
        dist.send(per_rank[rank].to(dev), dst=nxt)
    exact(t, per_rank[prv])


def sends_waited_first(rank, W, dev):
    """Each rank waits for its send before its receive (the order pipeline code often
    uses): nothing may wait for the peer's wait(). Regression: a host-staged receive
    posted its payload's receive only in wait(), and a gloo send completes only once that
    receive is posted, so both ranks waited for ever. Then two messages of different
    sizes in flight from one peer on one tag: they arrive in the order sent. Then a
    receive whose wait(timeout) expired."""
    nxt, prv = (rank + 1) % W, (rank - 1) % W
    got = torch.empty(6, device=dev)
    s = dist.isend(rank_tensor(rank, 6).to(dev), dst=nxt)
    r = dist.irecv(got, src=prv)
    s.wait()
    r.wait()
    exact(got, rank_tensor(prv, 6))
    small, large = torch.empty(3, device=dev), torch.empty(7, device=dev)
    works = [
        dist.isend(torch.full((3,), 1.0 + rank).to(dev), dst=nxt),
        dist.isend(torch.full((7,), 2.0 + rank).to(dev), dst=nxt),
        dist.irecv(small, src=prv),
        dist.irecv(large, src=prv),
    ]
    for w in works:
        w.wait()
    exact(small, torch.full((3,), 1.0 + prv))
    exact(large, torch.full((7,), 2.0 + prv))
    # wait(timeout) on a receive with nothing sent yet raises; the receive stays posted
    # and takes the message sent later
    t = torch.empty(2, device=dev)
    if rank == 0:
        r = dist.irecv(t, src=1)
        raises(lambda: r.wait(timeout=datetime.timedelta(milliseconds=200)), "timed out")
        dist.barrier()  # rank 1 sends after it
        r.wait()
        exact(t, torch.tensor([5.0, 6.0]))
    else:
        dist.barrier()
        if rank == 1:
            dist.send(torch.tensor([5.0, 6.0]).to(dev), dst=0)
    return True


def bad_calls(rank, W, dev):
    """Clear errors, and the group stays usable afterwards."""
    message = raises(lambda: dist.all_reduce(torch.ones(3 + rank, device=dev)), "disagree")
    assert "every rank must make the same call" in message, message
    raises(
        lambda: dist.all_reduce(
            torch.ones(3, device=dev, dtype=torch.float32 if rank else torch.float64)
        ),
        "disagree",
    )
    if rank < 2:
        if rank == 0:
            dist.send(torch.ones(5, device=dev), dst=1)
        else:
            raises(lambda: dist.recv(torch.empty(4, device=dev), src=0), "expects 4")
    raises(
        lambda: dist.all_gather_into_tensor(torch.empty(5, device=dev), torch.ones(2, device=dev)),
        "world_size",
    )
    raises(
        lambda: dist.all_gather(
            [torch.empty(2, device=dev) for _ in range(W + 1)], torch.ones(2, device=dev)
        ),
        "world_size",
    )
    t = rank_tensor(rank, 6).to(dev)
    dist.all_reduce(t)
    exact(t, sum(rank_tensor(r, 6) for r in range(W)))


def results_stay(rank, W, dev):
    """A result stays put when later collectives of the same size run (host-staged:
    staging buffers are reused; results may live in them)."""
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    a, b = per_rank[rank].to(dev), (per_rank[rank] * 3).to(dev)
    dist.all_reduce(a)
    dist.all_reduce(b)
    g = [torch.empty(6, device=dev) for _ in range(W)]
    dist.all_gather(g, (per_rank[rank] * 5).to(dev))
    rs = torch.empty(6, device=dev)
    dist.reduce_scatter(rs, [(per_rank[rank] * (i + 7)).to(dev) for i in range(W)])
    dist.all_reduce(torch.ones(6, device=dev))
    exact(a, sum(per_rank))
    exact(b, sum(per_rank) * 3)
    # >= 8 MiB: host-staged writes the result into the tensor's own device buffer by a
    # program reading the host buffer in place; the host buffer is reused only after that.
    big = [rank_tensor(r, 2 << 20) for r in range(W)]
    a, b = big[rank].to(dev), (big[rank] * 3).to(dev)
    dist.all_reduce(a)
    c = a * 2  # queued on a's new contents
    dist.all_reduce(b)
    dist.broadcast(a, src=0)
    exact(c, sum(big) * 2)
    exact(a, sum(big))
    exact(b, sum(big) * 3)
    for r in range(W):
        exact(g[r], per_rank[r] * 5)
    exact(rs, sum(per_rank) * (rank + 7))
    # results are written in the caller's inference mode (on gloo's thread too)
    with torch.inference_mode():
        t, u = per_rank[rank].to(dev), per_rank[rank].to(dev)
        dist.all_reduce(t)
        dist.all_reduce(u, async_op=True).wait()
        exact(t, sum(per_rank))
        exact(u, sum(per_rank))


def groups_serve_both_devices(rank, W, dev):
    """A "tpu_dist" group serves CPU tensors through its gloo, and a "gloo" group tpu
    tensors through tpu_dist, as gloo serves cuda tensors on a GPU host."""
    per_rank = [rank_tensor(r, 6) for r in range(W)]
    for name in ("tpu_dist", "gloo"):
        group = dist.new_group(backend=name)
        t, c = per_rank[rank].to(dev), per_rank[rank].clone()
        dist.all_reduce(t, group=group)
        dist.all_reduce(c, group=group)
        exact(t, sum(per_rank))
        assert torch.equal(c, sum(per_rank)), name
        assert {"cpu", "tpu"} <= {d.type for d in group._device_types}, name


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
    return (
        sums
        + maxes
        + [
            torch.cat([e[0] for e in every]),
            torch.cat([e[1].reshape(4, 4) for e in every]),
            sums[0],
            sums[2].chunk(W)[rank],
        ]
    )


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
    ops = [
        dist.P2POp(dist.isend, send, (rank + 1) % W),
        dist.P2POp(dist.irecv, recv, (rank - 1) % W),
    ]
    if batched:
        works = dist.batch_isend_irecv(ops)
    else:  # gloo on CPU tensors: no coalescing there, so plain isend/irecv
        works = [op.op(op.tensor, op.peer) for op in ops]
    for w in works:
        w.wait()
    return recv.cpu()


def coalescing(rank, W, dev):
    """_coalescing_manager (without and with a device) and batch_isend_irecv on tpu
    tensors give what the same calls compute on the CPU."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    want = coalesced_reference(rank, W)
    device = torch.device(dev)
    for manager in (
        _coalescing_manager,
        lambda: _coalescing_manager(device=device, async_ops=False),
    ):
        got = coalesced_calls(rank, W, dev, manager)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # async, with a non-fast-path op inside (one Work for all)
    ts = [(torch.arange(4.0) + rank).to(dev), torch.full((3,), float(rank)).to(dev)]
    root = torch.full((2,), float(rank)).to(dev)
    with _coalescing_manager(device=device, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
        dist.broadcast(root, src=W - 1)
        dist.reduce(torch.ones(2, device=dev), dst=0)
    cm.wait()
    exact(ts[0], sum(torch.arange(4.0) + r for r in range(W)))
    exact(ts[1], torch.full((3,), float(sum(range(W)))))
    exact(root, torch.full((2,), float(W - 1)))
    exact(
        ring_exchange(rank, W, dev, True),
        torch.arange(7, dtype=torch.float32) + 10 * ((rank - 1) % W),
    )

    # c10d's own checks still apply: mixed collectives in one manager
    def mixed():
        with _coalescing_manager():
            dist.all_reduce(torch.ones(2, device=dev))
            dist.all_gather_single(torch.empty(2 * W, device=dev), torch.ones(2, device=dev))

    raises(mixed, "same type")
    # and the backend's: endCoalescing without startCoalescing
    backend = dist.group.WORLD._get_backend(device)
    assert backend.supports_coalescing
    raises(lambda: backend._end_coalescing(), "without startCoalescing")
    dist.barrier()
    return True
