"""Trains a DLRM-style recommendation model (Naumov et al. 2019) on synthetic click data,
then scores a batch, printing step time and throughput.

    python examples/dlrm/train.py --device tpu --steps 50
    python examples/dlrm/train.py --device tpu --compile
    python examples/dlrm/train.py --device tpu --amp bf16

Dense features go through a bottom MLP; each sparse feature is a bag of ids pooled by an
`nn.EmbeddingBag` table (sum with per-sample weights, or mean; offsets, padding ids, empty
bags); the pairwise dot products of all those vectors feed a top MLP that
predicts a click (binary cross-entropy). The tables learn with Adagrad, the MLPs with SGD.
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0  # id 0 of every table is padding: it pools to nothing and gets no gradient


def mlp(sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    def __init__(
        self,
        dense: int = 13,
        tables=(1000, 500, 200, 100),
        dim: int = 16,
        bottom=(64, 32),
        top=(64, 32),
    ):
        super().__init__()
        self.bottom = mlp([dense, *bottom, dim])
        # Even tables pool by weighted sum, odd ones by mean.
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum" if i % 2 == 0 else "mean", padding_idx=PAD)
            for i, rows in enumerate(tables)
        )
        features = len(tables) + 1
        self.top = mlp([dim + features * (features - 1) // 2, *top, 1])

    def forward(self, dense, bags):
        """`bags`: per table, (ids, offsets, per-sample weights or None)."""
        vectors = [self.bottom(dense)]
        for table, (ids, offsets, weights) in zip(self.tables, bags):
            vectors.append(table(ids, offsets, per_sample_weights=weights))
        z = torch.stack(vectors, 1)  # [batch, features, dim]
        dots = torch.bmm(z, z.transpose(1, 2))  # pairwise interactions
        i, j = torch.triu_indices(z.shape[1], z.shape[1], 1)
        inter = dots[:, i, j]
        return self.top(torch.cat([vectors[0], inter], 1)).squeeze(1)


def batches(model: DLRM, count: int, batch: int, seed: int, max_bag: int = 4):
    """Synthetic clicks that depend on the dense features and on the first table's ids.

    Each bag holds 0 to `max_bag` ids; the id list is padded with PAD to `max_bag` per
    sample, so every batch has the same shapes and compiles once, as XLA wants (padding
    ids pool to nothing and are left out of a mean)."""
    g = torch.Generator().manual_seed(seed)
    dense_in = model.bottom[0].in_features
    offsets = torch.arange(batch) * max_bag
    slot = torch.arange(max_bag).expand(batch, max_bag)
    for _ in range(count):
        dense = torch.randn(batch, dense_in, generator=g)
        bags, signal = [], None
        for table in model.tables:
            sizes = torch.randint(0, max_bag + 1, (batch, 1), generator=g)  # empty bags too
            ids = torch.randint(1, table.num_embeddings, (batch, max_bag), generator=g)
            ids = torch.where(slot < sizes, ids, PAD)
            weights = torch.rand(ids.shape, generator=g).flatten() if table.mode == "sum" else None
            bags.append((ids.flatten(), offsets, weights))
            if signal is None:
                signal = ((ids % 2) * (ids != PAD)).sum(1).float()
        logit = dense[:, 0] + dense[:, 1] - signal + 1
        yield dense, bags, (logit + 0.5 * torch.randn(batch, generator=g) > 0).float()


def to(device, dense, bags, y):
    return (
        dense.to(device),
        [(i.to(device), o.to(device), None if w is None else w.to(device)) for i, o, w in bags],
        y.to(device),
    )


def optimizers(model: DLRM, lr: float):
    return [
        torch.optim.Adagrad(model.tables.parameters(), lr=lr),
        torch.optim.SGD([*model.bottom.parameters(), *model.top.parameters()], lr=lr),
    ]


def train(
    model: DLRM,
    data,
    device: str,
    lr: float = 0.1,
    compile: str | None = None,
    amp: torch.dtype | None = None,
    on_step=None,
):
    """Trains `model` (already on `device`); returns the losses (device tensors)."""
    opts = optimizers(model, lr)
    step_model = torch.compile(model, backend=compile) if compile else model
    model.train()
    losses = []
    for step, batch in enumerate(data):
        dense, bags, y = to(device, *batch)
        with torch.autocast(device, dtype=amp, enabled=amp is not None):
            logits = step_model(dense, bags)
        loss = F.binary_cross_entropy_with_logits(logits.float(), y)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in opts:
            opt.step()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (backend tpu, or inductor on the CPU)",
    )
    p.add_argument("--amp", choices=("bf16",), help="autocast to bfloat16")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = DLRM()
    print(
        f"DLRM: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
        f"device {args.device}"
    )
    model.to(args.device)
    sync = torch.tpu.synchronize if args.device == "tpu" else (lambda: None)
    backend = ("tpu" if args.device == "tpu" else "inductor") if args.compile else None
    amp = torch.bfloat16 if args.amp else None
    times = []

    def log(step, loss):
        sync()
        times.append(time.perf_counter())
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)

    train(
        model,
        batches(model, args.steps, args.batch, args.seed),
        args.device,
        args.lr,
        backend,
        amp,
        log,
    )
    if len(times) > 2:
        step_s = (times[-1] - times[1]) / (len(times) - 2)
        print(f"train step {step_s * 1e3:.1f} ms, {args.batch / step_s:.0f} samples/s")

    model.eval()
    dense, bags, y = to(args.device, *next(batches(model, 1, args.batch, args.seed + 1)))
    with torch.no_grad():
        clicks = (model(dense, bags) > 0).float()
    print(f"inference accuracy on a fresh batch: {(clicks == y).float().mean().item():.3f}")


if __name__ == "__main__":
    main()
