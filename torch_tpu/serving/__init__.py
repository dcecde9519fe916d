"""Serving engines on `tpu`: out-of-tree platform plugins for vLLM (`serving.vllm`) and
SGLang (`serving.sglang`), registered by entry points. The shared pieces (paged attention
in plain torch ops, shape buckets) live here and import no engine."""
