"""Hugging Face `LlamaForCausalLM`, `Qwen3ForCausalLM` and `Qwen3MoeForCausalLM` (mixture
of experts) from tiny configs with random weights (nothing is downloaded): a few AdamW training steps, then greedy generation.

    python examples/hf_tiny.py --model qwen3 --device tpu --steps 20 [--compile]

The model is initialised on the CPU from the seed and then moved, so `--device tpu` and
`--device cpu` start from the same weights and train on the same random token batches.
"""

import argparse
import time

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

VOCAB = 128


def build(name: str, seed: int = 0, layers: int = 2, hidden: int = 64) -> torch.nn.Module:
    """A randomly initialised model on the CPU. All use grouped-query attention
    (4 query heads sharing 2 key/value heads); Qwen3 ties its embedding and head; Qwen3-MoE
    routes each token to 2 of 4 experts (Hugging Face's grouped_mm experts: sort, histc,
    _grouped_mm)."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    if name == "llama":
        config, cls = LlamaConfig(**common), LlamaForCausalLM
    elif name == "qwen3":
        config = Qwen3Config(head_dim=hidden // 4, tie_word_embeddings=True, **common)
        cls = Qwen3ForCausalLM
    elif name == "qwen3_moe":
        config = Qwen3MoeConfig(
            head_dim=hidden // 4,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=hidden // 2,
            **common,
        )
        cls = Qwen3MoeForCausalLM
    else:
        raise ValueError(f"unknown model {name!r} (llama, qwen3 or qwen3_moe)")
    torch.manual_seed(seed)
    return cls(config)


def batches(steps: int, batch: int, seq: int, seed: int = 0) -> list[torch.Tensor]:
    """Random token ids (from a CPU generator, so every device gets the same ones)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (batch, seq), generator=g) for _ in range(steps)]


def train(
    model: torch.nn.Module,
    data: list[torch.Tensor],
    device: str,
    lr: float = 1e-3,
    on_step=None,
    compile: str | None = None,
    clip_grad_norm=torch.nn.utils.clip_grad_norm_,
) -> list[torch.Tensor]:
    """One AdamW step per batch of `data` (the labels are the inputs: the model shifts them);
    returns the per-step losses as tensors on `device`. With `compile` (a torch.compile
    backend name) the model's forward and backward run compiled. `clip_grad_norm(params,
    max_norm)` clips the gradients (examples/distributed passes one for DTensors)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    model.train()
    step_model = torch.compile(model, backend=compile) if compile else model
    losses = []
    for step, ids in enumerate(data):
        ids = ids.to(device)
        loss = step_model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, losses[-1])
    return losses


def greedy(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    model.eval()
    return model.generate(prompt, max_new_tokens=new_tokens, do_sample=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("llama", "qwen3", "qwen3_moe"), default="llama")
    p.add_argument("--device", choices=("tpu", "cpu"), default="tpu")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (backend tpu, or inductor on the CPU)",
    )
    args = p.parse_args()

    model = build(args.model, args.seed).to(args.device)
    print(
        f"{type(model).__name__}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
        f"parameters, device {args.device}"
    )
    start = time.perf_counter()
    backend = ("tpu" if args.device == "tpu" else "inductor") if args.compile else None
    train(
        model,
        batches(args.steps, args.batch, args.seq, args.seed),
        args.device,
        on_step=lambda step, loss: print(
            f"step {step:3d}  loss {loss.item():.4f}  ({time.perf_counter() - start:.1f} s)"
        ),
        compile=backend,
    )
    prompt = batches(1, 1, 8, args.seed + 1)[0].to(args.device)
    print("greedy:", greedy(model, prompt, 16)[0].tolist())
    if args.device == "tpu":
        import torch_tpu

        print(torch_tpu.metrics.report())


if __name__ == "__main__":
    main()
