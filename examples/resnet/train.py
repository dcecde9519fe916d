"""Trains a ResNet on synthetic images (SGD with momentum, batch norm in training mode),
then runs inference, printing step time and throughput.

    python examples/resnet/train.py --device tpu --model small --steps 20
    python examples/resnet/train.py --device tpu --model resnet50 --batch 8 --compile
    python examples/resnet/train.py --device tpu --channels-last --amp bf16

The model is initialised on the CPU from the seed and the batches come from a seeded CPU
generator, so `--device tpu` and `--device cpu` train the same network on the same data.
"""

import argparse
import time

import torch
import torch.nn.functional as F

from model import resnet50, resnet_small


def batches(count: int, batch: int, size: int, classes: int, seed: int):
    """Synthetic images whose class shifts their mean, so the loss can fall."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(count):
        y = torch.randint(0, classes, (batch,), generator=g)
        x = torch.randn(batch, 3, size, size, generator=g) + y.view(-1, 1, 1, 1) / classes
        yield x, y


def train(
    model,
    data,
    device: str,
    lr: float = 0.05,
    compile: str | None = None,
    amp: torch.dtype | None = None,
    channels_last: bool = False,
    on_step=None,
):
    """Trains `model` (already on `device`) on `data`; returns the losses (device
    tensors). `on_step(step, loss)` runs after each step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    step_model = torch.compile(model, backend=compile) if compile else model
    model.train()
    losses = []
    for step, (x, y) in enumerate(data):
        x, y = x.to(device), y.to(device)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(step_model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--model", choices=("small", "resnet50"), default="small")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=64, help="image height and width")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (backend tpu, or inductor on the CPU)",
    )
    p.add_argument("--amp", choices=("bf16",), help="autocast to bfloat16")
    p.add_argument("--channels-last", action="store_true")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = (resnet50 if args.model == "resnet50" else resnet_small)(args.classes)
    print(
        f"ResNet ({args.model}): {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
        f"parameters, device {args.device}"
    )
    model.to(args.device)
    if args.channels_last:
        model.to(memory_format=torch.channels_last)
    sync = torch.tpu.synchronize if args.device == "tpu" else (lambda: None)
    backend = ("tpu" if args.device == "tpu" else "inductor") if args.compile else None
    amp = torch.bfloat16 if args.amp else None

    times = []

    def log(step, loss):
        sync()
        times.append(time.perf_counter())
        print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)

    train(
        model,
        batches(args.steps, args.batch, args.size, args.classes, args.seed),
        args.device,
        args.lr,
        backend,
        amp,
        args.channels_last,
        log,
    )
    if len(times) > 2:
        step_s = (times[-1] - times[1]) / (len(times) - 2)  # the first steps compile
        print(f"train step {step_s * 1e3:.1f} ms, {args.batch / step_s:.1f} images/s")

    model.eval()
    x, _ = next(batches(1, args.batch, args.size, args.classes, args.seed + 1))
    x = x.to(args.device)
    with torch.no_grad(), torch.autocast(args.device, dtype=amp, enabled=amp is not None):
        infer = torch.compile(model, backend=backend) if backend else model
        infer(x)
        sync()
        start = time.perf_counter()
        pred = infer(x).argmax(1)
        sync()
    print(
        f"inference {(time.perf_counter() - start) * 1e3:.1f} ms, predictions "
        f"{pred.cpu().tolist()}"
    )


if __name__ == "__main__":
    main()
