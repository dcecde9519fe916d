"""Character-level training data, generated here (no downloads): lines of two-digit
additions such as "17+25=42". The text has structure a small model can learn in a few
hundred steps, and sampling from a trained model shows whether it did ("31+4=" -> "35").
"""

import random

import torch


def make_text(lines: int = 20000, seed: int = 1234) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        a, b = rng.randrange(100), rng.randrange(100)
        out.append(f"{a}+{b}={a + b}\n")
    return "".join(out)


class CharDataset:
    """The text as a 1-D tensor of token ids, with the char <-> id maps."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = self.encode(text)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> torch.Tensor:
        return torch.tensor([self.stoi[c] for c in s], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def batch(self, batch_size: int, block_size: int, generator: torch.Generator):
        """Random windows (inputs, next-char targets), each (batch_size, block_size), on the
        CPU: drawing them from a CPU generator makes every device see the same batches."""
        starts = torch.randint(len(self.data) - block_size - 1, (batch_size,), generator=generator)
        x = torch.stack([self.data[s : s + block_size] for s in starts.tolist()])
        y = torch.stack([self.data[s + 1 : s + 1 + block_size] for s in starts.tolist()])
        return x, y
