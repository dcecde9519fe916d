"""Samples text from minGPT: from a checkpoint written by train.py --out, or from a fresh
model initialised from --seed (which produces noise, but exercises the same code path).

    python examples/mingpt/generate.py --checkpoint /tmp/mingpt.pt --prompt "12+34="
    python examples/mingpt/generate.py --temperature 0.8 --device cpu
"""

import argparse

import torch

from data import CharDataset, make_text
from model import GPT, GPTConfig


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--checkpoint")
    p.add_argument("--prompt", default="12+34=")
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (argmax)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    if args.checkpoint:
        ckpt = torch.load(args.checkpoint)
        dataset = CharDataset("".join(ckpt["chars"]))
        model = GPT(GPTConfig(**ckpt["config"]))
        model.load_state_dict(ckpt["state_dict"])
    else:
        dataset = CharDataset(make_text())
        model = GPT(GPTConfig(vocab_size=dataset.vocab_size))
    model.to(args.device).eval()

    prompt = dataset.encode(args.prompt).unsqueeze(0).to(args.device)
    sampler = torch.Generator(args.device).manual_seed(args.seed)
    out = model.generate(prompt, args.max_new_tokens, args.temperature, sampler)
    print(dataset.decode(out[0].cpu()))


if __name__ == "__main__":
    main()
