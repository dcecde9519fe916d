"""Fine-tunes a tiny Hugging Face Llama (random init, nothing downloaded) with
`transformers.Trainer` on synthetic token sequences, on the `tpu` device.

    python examples/hf_trainer.py --steps 30
    python examples/hf_trainer.py --device cpu

Accelerate (which the Trainer runs on) picks a custom device from the environment
variable `ACCELERATE_TORCH_DEVICE`, as Hugging Face documents for devices it does not
detect itself; this script sets it to `tpu` unless it is already set. The data is learnable:
each sequence counts up from a random start with a random stride (mod the vocabulary), so
the loss falls well below that of guessing.
"""

import argparse
import os
import tempfile
import time

import torch

from hf_tiny import VOCAB, build

FIRST = 3  # ids below are pad / bos / eos


class CountingSequences(torch.utils.data.Dataset):
    """`size` sequences of `seq` ids: start + i * stride, wrapped into [FIRST, VOCAB)."""

    def __init__(self, size: int, seq: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB - FIRST, (size, 1), generator=g)
        stride = torch.randint(1, 4, (size, 1), generator=g)
        self.ids = FIRST + (start + stride * torch.arange(seq)) % (VOCAB - FIRST)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        # The model shifts the labels itself.
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def fine_tune(
    device: str,
    steps: int,
    batch: int = 8,
    seq: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    output_dir: str | None = None,
):
    """Runs `Trainer.train` for `steps` steps; returns (trainer, per-step losses)."""
    from transformers import Trainer, TrainingArguments

    if device != "cpu":
        os.environ.setdefault("ACCELERATE_TORCH_DEVICE", device)
    model = build("llama", seed=seed)
    args = TrainingArguments(
        output_dir=output_dir or tempfile.mkdtemp(prefix="hf_trainer_"),
        use_cpu=device == "cpu",
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model, args=args, train_dataset=CountingSequences(steps * batch, seq, seed)
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    start = time.perf_counter()
    trainer, losses = fine_tune(args.device, args.steps, args.batch, args.seq, args.lr, args.seed)
    seconds = time.perf_counter() - start
    print(
        f"trained on {trainer.args.device}: loss {losses[0]:.3f} -> {losses[-1]:.3f} in "
        f"{len(losses)} steps, {seconds:.1f} s "
        f"({args.steps * args.batch * args.seq / seconds:.0f} tokens/s, compiles included)"
    )
    if args.device == "tpu":
        import torch_tpu

        fallbacks = torch_tpu.metrics.snapshot()["fallbacks"]
        print(f"CPU fallbacks: {fallbacks or 'none'}")


if __name__ == "__main__":
    main()
