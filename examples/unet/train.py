"""Trains a diffusers UNet2DModel as a DDPM noise predictor on synthetic images, then
samples images with N ancestral denoising steps, printing step time and throughput.

    python examples/unet/train.py --device tpu --steps 20
    python examples/unet/train.py --device tpu --compile --sample-steps 50
    python examples/unet/train.py --device tpu --model base --amp bf16

The model is initialised on the CPU from the seed, and images, timesteps and noise come
from a seeded CPU generator, so `--device tpu` and `--device cpu` train the same network
on the same data and sample from the same noise.
"""

import argparse
import time

import torch
import torch.nn.functional as F

from model import DDPM, unet_base, unet_small


def batches(count: int, batch: int, size: int, schedule_steps: int, seed: int):
    """(images, timesteps, noise): blurred random images (smooth, so there is structure to
    learn), uniform timesteps and the noise to add."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(count):
        x = torch.randn(batch, 3, size // 4, size // 4, generator=g)
        x0 = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).tanh()
        t = torch.randint(0, schedule_steps, (batch,), generator=g)
        yield x0, t, torch.randn(x0.shape, generator=g)


def train(
    model,
    schedule: DDPM,
    data,
    device: str,
    lr: float = 1e-3,
    compile: str | None = None,
    amp: torch.dtype | None = None,
    on_step=None,
    optimizer: str = "adamw",
):
    """Trains `model` (already on `device`, `schedule` too) to predict the added noise;
    returns the losses (device tensors). `on_step(step, loss)` runs after each step.
    Gradients are clipped to norm 1 as in the DDPM recipe.

    `optimizer="sgd"` (with momentum) is for parity checks: the attention key biases get
    gradients that are zero up to rounding (softmax ignores a shift shared by all keys),
    and Adam turns rounding noise of any size into a full step of either sign."""
    if optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    step_model = torch.compile(model, backend=compile) if compile else model
    model.train()
    losses = []
    for step, (x0, t, noise) in enumerate(data):
        x0, t, noise = x0.to(device), t.to(device), noise.to(device)
        xt = schedule.add_noise(x0, noise, t)
        with torch.autocast(device, dtype=amp, enabled=amp is not None):
            eps = step_model(xt, t).sample
        loss = F.mse_loss(eps.float(), noise)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # DDPM's recipe clips the gradient norm to 1.
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


@torch.no_grad()
def sample(
    model,
    schedule: DDPM,
    shape,
    device: str,
    steps: int,
    seed: int,
    compile: str | None = None,
    amp: torch.dtype | None = None,
    on_step=None,
):
    """Runs the last `steps` timesteps of the reverse process from seeded noise (all of it
    when `steps` is the schedule length); returns the images."""
    model.eval()
    step_model = torch.compile(model, backend=compile) if compile else model
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(device)
    for i, t in enumerate(reversed(range(steps))):
        # The timestep is a tensor operand, so a compiled step is one program for every t.
        ts = torch.full((shape[0],), t, dtype=torch.long).to(device)
        with torch.autocast(device, dtype=amp, enabled=amp is not None):
            eps = step_model(x, ts).sample.float()
        x = schedule.step(eps, t, x, torch.randn(shape, generator=g).to(device))
        if on_step is not None:
            on_step(i, x)
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--model", choices=("small", "base"), default="small")
    p.add_argument("--steps", type=int, default=20, help="training steps")
    p.add_argument("--sample-steps", type=int, default=20, help="denoising steps")
    p.add_argument("--schedule", type=int, default=1000, help="timesteps of the DDPM schedule")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=None, help="image size (16 small, 32 base)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (backend tpu, or inductor on the CPU)",
    )
    p.add_argument("--amp", choices=("bf16",), help="autocast to bfloat16")
    args = p.parse_args()

    size = args.size or (16 if args.model == "small" else 32)
    torch.manual_seed(args.seed)
    model = (unet_small if args.model == "small" else unet_base)(size)
    print(
        f"UNet2DModel ({args.model}): {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
        f"parameters, {size}x{size} images, device {args.device}"
    )
    model.to(args.device)
    schedule = DDPM(args.schedule).to(args.device)
    sync = torch.tpu.synchronize if args.device == "tpu" else (lambda: None)
    backend = ("tpu" if args.device == "tpu" else "inductor") if args.compile else None
    amp = torch.bfloat16 if args.amp else None

    def timed(label, unit, per_step, report):
        times = []

        def on_step(step, value):
            sync()
            times.append(time.perf_counter())
            if report:
                print(f"step {step:3d}  loss {value.item():.4f}", flush=True)

        def summary():
            if len(times) > 2:
                step_s = (times[-1] - times[1]) / (len(times) - 2)  # the first steps compile
                print(f"{label} step {step_s * 1e3:.1f} ms, {per_step / step_s:.1f} {unit}/s")

        return on_step, summary

    on_step, summary = timed("train", "images", args.batch, report=True)
    train(
        model,
        schedule,
        batches(args.steps, args.batch, size, args.schedule, args.seed),
        args.device,
        args.lr,
        backend,
        amp,
        on_step,
        args.optimizer,
    )
    summary()

    on_step, summary = timed("denoising", "images", args.batch, report=False)
    start = time.perf_counter()
    images = sample(
        model,
        schedule,
        (args.batch, 3, size, size),
        args.device,
        min(args.sample_steps, args.schedule),
        args.seed + 1,
        backend,
        amp,
        on_step,
    )
    images = images.cpu()
    print(
        f"sampled {args.batch} images in {args.sample_steps} steps, "
        f"{time.perf_counter() - start:.2f} s; pixel mean {images.mean():.4f}, "
        f"std {images.std():.4f}"
    )
    summary()


if __name__ == "__main__":
    main()
