"""Writes a tiny Hugging Face model directory (config, random weights, tokenizer) that
vLLM and SGLang load offline (HF_HUB_OFFLINE=1): nothing is downloaded.

    python examples/serving/tiny_model.py ./tiny-llama [--arch llama|qwen3] [--size tiny|30m]

The tokenizer is a byte-level BPE trained with `tokenizers` on a small built-in corpus,
wrapped in PreTrainedTokenizerFast with a chat template, so chat requests work too.
"""

from __future__ import annotations

import argparse
import pathlib

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A tensor is a multi-dimensional array of numbers on a device.",
    "Paged attention stores keys and values in fixed-size blocks of a cache.",
    "Serving engines batch many requests together to use the accelerator well.",
    "Hello, how are you today? I am fine, thank you for asking.",
    "Once upon a time there was a small model that learned to count: one two three four.",
    "XLA compiles programs ahead of time; shapes decide how many programs exist.",
    "user assistant system: answer the question briefly and politely.",
] * 20

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

SIZES = {
    # name: hidden, layers, heads, kv heads, intermediate
    "tiny": (64, 2, 4, 2, 128),
    "30m": (512, 10, 8, 4, 1536),  # ~32M parameters
}


def make_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|bos|>", "<|eos|>", "<|pad|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_model(
    path: str | pathlib.Path,
    arch: str = "llama",
    size: str = "tiny",
    seed: int = 0,
    vocab_size: int = 512,
    max_position_embeddings: int = 2048,
) -> pathlib.Path:
    """Saves a random-weight `arch` model of `size` with its tokenizer under `path`
    (float32, so engines and HF compare exactly) and returns the path."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    path = pathlib.Path(path)
    tokenizer = make_tokenizer(vocab_size)
    hidden, layers, heads, kv_heads, inter = SIZES[size]
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=inter,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    if arch == "llama":
        config = LlamaConfig(**common)
    elif arch == "qwen3":
        config = Qwen3Config(head_dim=hidden // heads, **common)
    else:
        raise ValueError(f"unknown arch {arch!r}: expected llama or qwen3")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init gives near-uniform logits, where greedy picks are decided by rounding
    # noise; larger output weights make the argmax clear, so engine and HF tokens compare.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--arch", default="llama", choices=["llama", "qwen3"])
    parser.add_argument("--size", default="tiny", choices=sorted(SIZES))
    args = parser.parse_args()
    print(make_tiny_model(args.path, args.arch, args.size))


if __name__ == "__main__":
    main()
