"""Random LoRA adapters in PEFT's format for the tiny models, and the Hugging Face
reference for them on the CPU: the base model with each adapter merged into its
weights (W + alpha / r * B @ A, what PEFT's merge computes), greedy `generate`."""

import json
import pathlib

import torch
from conftest import greedy_tokens

TARGETS = ("q_proj", "v_proj", "down_proj")
LAYER_PREFIX = {"q_proj": "self_attn", "v_proj": "self_attn", "down_proj": "mlp"}


def make_adapter(base: str, out: pathlib.Path, seed: int, rank: int = 8, alpha: int = 16) -> str:
    """Writes an adapter of `rank` on TARGETS of every layer of the model at `base`,
    with random A and B (PEFT initialises B to zero; random here, so the adapter
    changes the tokens). Returns its directory."""
    from safetensors.torch import save_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base)
    head_dim = config.hidden_size // config.num_attention_heads
    shapes = {  # (in, out) of each target
        "q_proj": (config.hidden_size, config.num_attention_heads * head_dim),
        "v_proj": (config.hidden_size, config.num_key_value_heads * head_dim),
        "down_proj": (config.intermediate_size, config.hidden_size),
    }
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for layer in range(config.num_hidden_layers):
        for name in TARGETS:
            fan_in, fan_out = shapes[name]
            key = f"base_model.model.model.layers.{layer}.{LAYER_PREFIX[name]}.{name}"
            weights[f"{key}.lora_A.weight"] = torch.randn(rank, fan_in, generator=gen) * 0.3
            weights[f"{key}.lora_B.weight"] = torch.randn(fan_out, rank, generator=gen) * 0.3
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": base,
                "r": rank,
                "lora_alpha": alpha,
                "lora_dropout": 0.0,
                "target_modules": list(TARGETS),
                "bias": "none",
                "fan_in_fan_out": False,
                "inference_mode": True,
            }
        )
    )
    return str(out)


def hf_greedy_lora(base: str, adapter: str | None, prompts, max_new_tokens: int):
    """HF greedy continuations of the base model with `adapter` merged (None: the base
    model), one prompt at a time, as token ids."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    if adapter is not None:
        config = json.loads((pathlib.Path(adapter) / "adapter_config.json").read_text())
        scale = config["lora_alpha"] / config["r"]
        weights = load_file(str(pathlib.Path(adapter) / "adapter_model.safetensors"))
        params = dict(model.named_parameters())
        with torch.no_grad():
            for key, a in weights.items():
                if not key.endswith(".lora_A.weight"):
                    continue
                module = key.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
                b = weights[key.replace("lora_A", "lora_B")]
                params[f"{module}.weight"] += scale * (b @ a)
    return greedy_tokens(model, tok, prompts, max_new_tokens)
