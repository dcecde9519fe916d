"""torch_tpu.serving.paged_attention on tpu against a per-request reference attention
computed on the CPU in float64: prefill, decode and chunked-prefill rows in one batch,
GQA, sliding window, soft-capping, padding, and no new programs for a second batch of
other sizes in the same buckets."""

import numpy as np
import pytest
import torch

import torch_tpu
from torch_tpu.serving import paged_attention as pa

BLOCK, KV_HEADS, HEADS, D, NUM_BLOCKS = 4, 2, 4, 8, 32


def make_case(specs, seed, num_tokens):
    """specs: (context already cached, new query tokens) per request."""
    g = torch.Generator().manual_seed(seed)
    cache = torch.zeros(pa.kv_cache_shape(NUM_BLOCKS, BLOCK, KV_HEADS, D))
    free = list(torch.randperm(NUM_BLOCKS - 1, generator=g).add(1).tolist())  # not 0
    table = torch.zeros(8, 8, dtype=torch.int32)  # the runner's [max_reqs, max_blocks]
    keys, values, qs, slots, qsl, seq_lens = [], [], [], [], [0], []
    for r, (ctx, qlen) in enumerate(specs):
        total = ctx + qlen
        nblocks = -(-total // BLOCK)
        blocks = [free.pop() for _ in range(nblocks)]
        table[r, :nblocks] = torch.tensor(blocks)
        table[r, nblocks:] = torch.tensor(free[: 8 - nblocks])  # stale ids: must be masked
        k = torch.randn(total, KV_HEADS, D, generator=g)
        v = torch.randn(total, KV_HEADS, D, generator=g)
        for p in range(ctx):  # the cached context: plane 0 keys, plane 1 values
            cache[0, :, blocks[p // BLOCK], p % BLOCK] = k[p]
            cache[1, :, blocks[p // BLOCK], p % BLOCK] = v[p]
        keys.append(k), values.append(v)
        qs.append(torch.randn(qlen, HEADS, D, generator=g))
        slots += [blocks[p // BLOCK] * BLOCK + p % BLOCK for p in range(ctx, total)]
        qsl.append(qsl[-1] + qlen)
        seq_lens.append(total)
    n = qsl[-1]
    pad = num_tokens - n
    new_k = torch.cat([k[c:] for k, (c, _) in zip(keys, specs)])
    new_v = torch.cat([v[c:] for v, (c, _) in zip(values, specs)])
    query = torch.cat(qs)
    pad3 = lambda t: torch.cat([t, torch.randn(pad, *t.shape[1:], generator=g)])
    slot_mapping = torch.tensor(slots + [-1] * pad, dtype=torch.int64)
    return dict(
        cache=cache,
        table=table,
        query=pad3(query),
        key=pad3(new_k),
        value=pad3(new_v),
        slot_mapping=slot_mapping,
        qsl=np.array(qsl),
        seq_lens=np.array(seq_lens),
        keys=keys,
        values=values,
        qs=qs,
        specs=specs,
    )


def reference(case, scale, window=None, cap=None):
    outs = []
    for (ctx, qlen), k, v, q in zip(case["specs"], case["keys"], case["values"], case["qs"]):
        k = k.double().repeat_interleave(HEADS // KV_HEADS, 1)
        v = v.double().repeat_interleave(HEADS // KV_HEADS, 1)
        s = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
        if cap:
            s = cap * torch.tanh(s / cap)
        qpos = torch.arange(ctx, ctx + qlen)[:, None]
        kpos = torch.arange(ctx + qlen)[None, :]
        allowed = kpos <= qpos
        if window:
            allowed &= kpos > qpos - window
        s = s.masked_fill(~allowed, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", s.softmax(-1), v))
    return torch.cat(outs).float()


def run(case, device, window=None, cap=None):
    cache = case["cache"].to(device)
    # the engines pass views of their fixed-size buffers
    table = case["table"].to(device)[: len(case["specs"])]
    batch = pa.build_batch(
        case["qsl"],
        case["seq_lens"],
        table,
        case["slot_mapping"].to(device),
        case["query"].shape[0],
        BLOCK,
        torch.device(device),
    )
    pa.write_kv(cache, case["key"].to(device), case["value"].to(device), batch.slot_mapping)
    out = pa.paged_attention(case["query"].to(device), cache, batch, D**-0.5, window, cap)
    return out.cpu()[: case["qsl"][-1]], cache.cpu()


MIXED = [(0, 5), (7, 1), (3, 4), (10, 1)]  # prefill, decode, chunked prefill, decode


@pytest.mark.parametrize("device", ["cpu", "tpu"])
@pytest.mark.parametrize("window,cap", [(None, None), (3, None), (None, 5.0)])
def test_mixed_batch_matches_reference(device, window, cap):
    case = make_case(MIXED, seed=0, num_tokens=16)
    out, cache = run(case, device, window, cap)
    torch.testing.assert_close(out, reference(case, D**-0.5, window, cap), atol=1e-5, rtol=1e-5)
    # every new token's key and value landed in its slot (row of each plane and head)
    n = case["qsl"][-1]
    slots = cache.view(2, KV_HEADS, NUM_BLOCKS * BLOCK, D)[:, :, case["slot_mapping"][:n]]
    torch.testing.assert_close(slots[0].transpose(0, 1), case["key"][:n])
    torch.testing.assert_close(slots[1].transpose(0, 1), case["value"][:n])


def test_decode_only_batch():
    case = make_case([(5, 1), (12, 1), (1, 1)], seed=1, num_tokens=4)
    out, _ = run(case, "tpu")
    torch.testing.assert_close(out, reference(case, D**-0.5), atol=1e-5, rtol=1e-5)


def test_same_buckets_compile_nothing_new():
    run(make_case(MIXED, seed=2, num_tokens=16), "tpu")
    before = torch_tpu.metrics.snapshot()["compiles"]
    # other request count, query lengths and context lengths, same buckets (T=16 token
    # rows, W=4 blocks)
    case = make_case([(2, 6), (9, 1), (1, 2)], seed=3, num_tokens=16)
    out, _ = run(case, "tpu")
    assert torch_tpu.metrics.snapshot()["compiles"] == before
    torch.testing.assert_close(out, reference(case, D**-0.5), atol=1e-5, rtol=1e-5)


def test_table_rows_select_each_requests_row():
    """An engine's whole table of request slots (SGLang's req_to_token), each request
    reading its own row (`table_rows`), gives the same attention as a per-batch table."""
    case = make_case(MIXED, seed=4, num_tokens=16)
    rows = np.array([6, 2, 7, 0])
    table = torch.zeros_like(case["table"])
    table[torch.from_numpy(rows)] = case["table"][: len(rows)]
    cache = case["cache"].to("tpu")
    batch = pa.build_batch(
        case["qsl"],
        case["seq_lens"],
        table.to("tpu"),
        case["slot_mapping"].to("tpu"),
        16,
        BLOCK,
        torch.device("tpu"),
        table_rows=rows,
    )
    pa.write_kv(cache, case["key"].to("tpu"), case["value"].to("tpu"), batch.slot_mapping)
    out = pa.paged_attention(case["query"].to("tpu"), cache, batch, D**-0.5)
    torch.testing.assert_close(
        out.cpu()[: case["qsl"][-1]], reference(case, D**-0.5), atol=1e-5, rtol=1e-5
    )
