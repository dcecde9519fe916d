"""The assets torchtitan's llama3 debugmodel reads, made locally (no model hub here):
a byte-level BPE tokenizer of at most 2,048 tokens (the debugmodel's vocabulary) with
BOS/EOS, and a small text dataset in the layout of torchtitan's `c4_test` (a folder that
`datasets.load_dataset(path, split="train")` reads, records with a "text" field).

    python examples/torchtitan/make_assets.py OUT_DIR

writes OUT_DIR/tokenizer/{tokenizer.json,tokenizer_config.json} and
OUT_DIR/c4_test/train.jsonl. Deterministic: the same files every run.
"""

import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

WORDS = (
    "the a an model device program tensor compile graph step loss rank shard layer head "
    "token weight gradient optimizer memory cache buffer kernel value key query batch "
    "sequence attention norm linear embedding vocabulary train check point resume data "
    "parallel fully sharded tensor pipeline expert router scale bias output input run "
    "fast small large red green blue river mountain city music book light night morning"
).split()


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 400))]
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + ".")
    return out


def main(out: Path) -> None:
    texts = sentences(2000, seed=0)
    (out / "c4_test").mkdir(parents=True, exist_ok=True)
    with open(out / "c4_test" / "train.jsonl", "w") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"text": text, "timestamp": str(i), "url": f"local:{i}"}) + "\n")

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts[:500], trainer)
    assert tokenizer.get_vocab_size() <= 2048, tokenizer.get_vocab_size()
    (out / "tokenizer").mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer" / "tokenizer.json"))
    config = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (out / "tokenizer" / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"assets in {out}: vocabulary {tokenizer.get_vocab_size()}, {len(texts)} texts")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "assets"))
