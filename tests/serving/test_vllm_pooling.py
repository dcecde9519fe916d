"""vLLM's pooling models (`runner="pooling"`) on tpu: the worker warms up through the
pooler instead of the sampler (torch_tpu/serving/vllm/worker.py), and the outputs equal
Hugging Face's on the CPU:
- embed (compiled steps): the tiny Llama as an embedding model, vLLM's pooler for it
  being the last token's hidden state, L2-normalized;
- classify and score (eager): a tiny LlamaForSequenceClassification with one label,
  whose pooler gives the sigmoid of the last token's logit, for single texts and for
  (query, document) pairs."""

import pytest
import torch

vllm = pytest.importorskip("vllm")
pytestmark = pytest.mark.vllm  # runs in the engine's venv (scripts/test.sh)

import vllm_engine  # noqa: E402
from conftest import PROMPTS  # noqa: E402


def make_llm(path, eager):
    return vllm_engine.make_llm(path, eager, runner="pooling")


def test_embed_matches_hf(model_dir):
    from transformers import AutoModel, AutoTokenizer

    path = model_dir("llama")
    llm = make_llm(path, eager=False)
    config = llm.llm_engine.vllm_config.model_config.pooler_config
    assert config.seq_pooling_type == "LAST"
    got = torch.tensor([o.outputs.embedding for o in llm.embed(PROMPTS)])
    del llm
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        last = [model(**tok(p, return_tensors="pt")).last_hidden_state[0, -1] for p in PROMPTS]
    want = torch.nn.functional.normalize(torch.stack(last), dim=-1)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def classifier(model_dir, tmp_path_factory):
    """A one-label LlamaForSequenceClassification of the tiny Llama's shape (random
    weights, seed 0), saved with its tokenizer; returns (path, HF model, tokenizer)."""
    from transformers import AutoConfig, AutoTokenizer, LlamaForSequenceClassification

    base = model_dir("llama")
    config = AutoConfig.from_pretrained(base)
    tok = AutoTokenizer.from_pretrained(base)
    config.num_labels = 1
    config.architectures = ["LlamaForSequenceClassification"]
    config.pad_token_id = tok.pad_token_id
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(config).eval()
    path = tmp_path_factory.mktemp("llama-classifier")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path), model, tok


def test_classify_and_score_match_hf(classifier):
    path, model, tok = classifier
    llm = make_llm(path, eager=True)
    probs = [o.outputs.probs for o in llm.classify(PROMPTS)]
    query, docs = "What is a tensor?", [PROMPTS[2], PROMPTS[3]]
    scores = [o.outputs.score for o in llm.score(query, docs)]
    del llm

    def hf(*texts):
        with torch.no_grad():
            return model(**tok(*texts, return_tensors="pt")).logits[0].sigmoid()

    torch.testing.assert_close(torch.tensor(probs), torch.stack([hf(p) for p in PROMPTS]))
    want = torch.stack([hf(query, d)[0] for d in docs])
    torch.testing.assert_close(torch.tensor(scores), want)
