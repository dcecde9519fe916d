"""Trains minGPT on the generated character-level addition text and prints each step's loss.

    python examples/mingpt/train.py --device tpu --steps 300 --out /tmp/mingpt.pt
    python examples/mingpt/train.py --device tpu --steps 300 --compile   # torch.compile
    python examples/mingpt/generate.py --checkpoint /tmp/mingpt.pt --prompt "12+34="

The model is built and initialised on the CPU from the seed, then moved to the device, so
`--device tpu` and `--device cpu` start from the same weights and see the same batches.
"""

import argparse
import dataclasses
import time

import torch

from data import CharDataset, make_text
from model import GPT, GPTConfig


def build(vocab_size: int, block: int, layers: int, heads: int, d: int, seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(
        GPTConfig(vocab_size=vocab_size, block_size=block, n_layer=layers, n_head=heads, n_embd=d)
    )


def make_optimizer(model: GPT, lr: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def train_step(
    model: GPT, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """One optimisation step; returns the loss, still on the model's device."""
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


def train(
    model: GPT,
    dataset: CharDataset,
    device: str,
    steps: int,
    batch: int,
    lr: float = 1e-3,
    seed: int = 0,
    on_step=None,
    compile: str | None = None,
) -> list[torch.Tensor]:
    """Trains `model` (already on `device`) for `steps` steps; returns the per-step losses
    as device tensors. `on_step(step, loss)` is called after each step. With `compile`
    (a torch.compile backend name), the model's forward and backward run compiled."""
    optimizer = make_optimizer(model, lr)
    batches = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    step_model = torch.compile(model, backend=compile) if compile else model
    for step in range(steps):
        x, y = dataset.batch(batch, model.config.block_size, batches)
        loss = train_step(step_model, optimizer, x.to(device), y.to(device))
        losses.append(loss)
        if on_step is not None:
            on_step(step, loss)
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (backend tpu, or inductor on the CPU)",
    )
    p.add_argument("--out", help="save the trained model here (for generate.py)")
    p.add_argument(
        "--cpu-fallback",
        action="store_true",
        help="run ops without a tpu lowering on the CPU and list them at the end",
    )
    args = p.parse_args()

    if args.device == "tpu":
        import torch_tpu

        torch_tpu.set_cpu_fallback(args.cpu_fallback)

    dataset = CharDataset(make_text())
    model = build(dataset.vocab_size, args.block, args.layers, args.heads, args.d, args.seed)
    print(
        f"minGPT: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
        f"vocab {dataset.vocab_size}, device {args.device}"
    )
    model.to(args.device)

    start = time.perf_counter()

    def log(step, loss):
        print(
            f"step {step:4d}  loss {loss.item():.4f}  ({time.perf_counter() - start:.1f} s)",
            flush=True,
        )

    backend = ("tpu" if args.device == "tpu" else "inductor") if args.compile else None
    train(model, dataset, args.device, args.steps, args.batch, args.lr, args.seed, log, backend)

    if args.out:
        torch.save(
            {
                "config": dataclasses.asdict(model.config),
                "chars": dataset.chars,
                "state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
            },
            args.out,
        )
        print(f"saved {args.out}")
    if args.device == "tpu":
        print(torch_tpu.metrics.report())


if __name__ == "__main__":
    main()
