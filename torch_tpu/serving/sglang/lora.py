"""SGLang's LoRA on tpu: the `torch_native` LoRA backend, per token and at the step's
padded size, so LoRA steps run compiled.

SGLang's torch_native backend loops in Python over a batch's segments of requests that
share an adapter, reading their lengths and ranks on the host: a compiled step would
guard on them (a graph per batch composition), and its rows stop at the real token
count while the step is padded to its token bucket. Here every LoRA op applies to each
row the adapter of its token, read from a buffer of the largest step's size whose rows
past the real tokens map to no adapter (-1), with each adapter's rank and scaling as
device tensors: one program per bucket serves every mix of adapters, and loading an
adapter only changes the weights the program reads. It enters SGLang's registry of
LoRA backends (`register_lora_backend`) under `torch_native`, the LoRA backend the tpu
platform selects, in the processes where that platform is active.

The layout is SGLang's: adapter slot l's A weights are [slices * rank_l, in] rows of
its [slices * max_rank, in] buffer, slice i at rows i * rank_l; its B weights
[out, max_rank] use the first rank_l columns. LoRA on the embeddings or the LM head
(their own lookups) is refused when the adapters' layers are chosen."""

from __future__ import annotations

import torch
from sglang.srt.lora.backend.torch_backend import TorchNativeLoRABackend
from sglang.srt.lora.utils import LoRABatchInfo, generate_sequence_lengths

NAME = "torch_native"
UNSUPPORTED_TARGETS = ("embed_tokens", "lm_head")


class TpuLoRABackend(TorchNativeLoRABackend):
    name = NAME

    def __init__(self, max_loras_per_batch: int, device: torch.device, **kwargs):
        super().__init__(max_loras_per_batch, device, **kwargs)
        self.token_slots = torch.full((0,), -1, dtype=torch.int64, device=device)
        self.ranks = torch.zeros(max_loras_per_batch, dtype=torch.int64, device=device)
        self.scalings = torch.zeros(max_loras_per_batch, dtype=torch.float32, device=device)
        # One object for every step: the LoRA layers test it for None, and a compiled
        # step's guards hold for the same object.
        self.step_info = LoRABatchInfo(
            bs=0,
            num_segments=0,
            max_len=0,
            use_cuda_graph=False,
            seg_lens=None,
            seg_indptr=None,
            weight_indices=None,
            lora_ranks=self.ranks,
            scalings=self.scalings,
            permutation=None,
        )

    def validate_lora_targets(self, base_model, target_modules) -> None:
        refused = sorted(set(target_modules) & set(UNSUPPORTED_TARGETS))
        if refused:
            raise ValueError(
                f"LoRA on {', '.join(refused)} is not supported on tpu; "
                "target the attention and MLP projections"
            )

    def reserve(self, max_tokens: int, model: torch.nn.Module | None = None) -> None:
        """Sizes the token-to-adapter buffer for steps of up to `max_tokens` (padded)
        tokens; the attention backend calls it with its largest token bucket and the
        model, whose LoRA layers' slice offsets (host tensors, set once when the
        layers get their buffers) become tuples: read as tensors, each compiled
        step would break its graph there."""
        if self.token_slots.shape[0] < max_tokens:
            self.token_slots = torch.full(
                (max_tokens,), -1, dtype=torch.int64, device=self.device
            )
        for module in model.modules() if model is not None else ():
            offsets = getattr(module, "output_offset_cpu", None)
            if getattr(module, "lora_backend", None) is self and isinstance(offsets, torch.Tensor):
                module.output_offset_cpu = tuple(offsets.tolist())

    def prepare_padding(self) -> None:
        """A step of padding only (warm-up): every row maps to no adapter."""
        self.token_slots.fill_(-1)
        self.batch_info = self.step_info

    def prepare_lora_batch(
        self, forward_batch, weight_indices, lora_ranks, scalings, use_cuda_graph, **kwargs
    ):
        lengths = generate_sequence_lengths(forward_batch, device="cpu")
        slots = torch.repeat_interleave(torch.tensor(weight_indices, dtype=torch.int64), lengths)
        self.reserve(slots.shape[0])
        self.token_slots.fill_(-1)
        self.token_slots[: slots.shape[0]].copy_(slots)
        self.ranks.copy_(torch.tensor(lora_ranks, dtype=torch.int64))
        self.scalings.copy_(torch.tensor(scalings, dtype=torch.float32))
        self.batch_info = self.step_info

    # --- the ops, per token ------------------------------------------------------

    def _slots(self, rows: int) -> torch.Tensor:
        slots = self.token_slots
        if slots.shape[0] < rows:  # a step past the reserved size (not expected)
            slots = torch.nn.functional.pad(slots, (0, rows - slots.shape[0]), value=-1)
        return slots[:rows]

    def _shrink(self, x: torch.Tensor, weights: torch.Tensor, num_slices: int):
        """x @ A^T of each row's adapter, scaled, its columns past slices * rank zero:
        [rows, slices * max_rank] in SGLang's layout."""
        slots = self._slots(x.shape[0])
        slot = slots.clamp_min(0)
        out = torch.einsum("ti,tci->tc", x, weights[slot].to(x.dtype))
        width = (self.ranks[slot] * num_slices).unsqueeze(-1)
        keep = (torch.arange(out.shape[1], device=x.device) < width) & (slots >= 0).unsqueeze(-1)
        return out * keep.to(out.dtype) * self.scalings[slot].unsqueeze(-1).to(out.dtype)

    def _expand(self, a: torch.Tensor, weights: torch.Tensor, offsets, base_output):
        """Adds (or returns) each slice's a_i @ B_i^T, a_i being the rank_l columns of
        slice i of the row's adapter l."""
        slots = self._slots(a.shape[0])
        slot = slots.clamp_min(0)
        max_rank = weights.shape[-1]
        rank = self.ranks[slot].unsqueeze(-1)
        k = torch.arange(max_rank, device=a.device)
        chosen = weights[slot].to(a.dtype)  # [rows, out, max_rank]
        offsets = [int(o) for o in offsets]  # a tuple (see reserve)
        if base_output is None:
            base_output = a.new_zeros(a.shape[0], offsets[-1])
        for i in range(len(offsets) - 1):
            cols = (i * rank + k).clamp_max(a.shape[1] - 1)
            part = torch.gather(a, 1, cols) * (k < rank).to(a.dtype)
            w = chosen[:, offsets[i] : offsets[i + 1]]
            base_output[:, offsets[i] : offsets[i + 1]] += torch.einsum("tk,tok->to", part, w)
        return base_output

    def run_lora_a_sgemm(self, x, weights, stack_num=1, *args, **kwargs):
        return self._shrink(x, weights, stack_num)

    def run_lora_b_sgemm(self, x, weights, output_offset_cpu, base_output=None, *args, **kwargs):
        return self._expand(x, weights, output_offset_cpu, base_output)

    def run_qkv_lora(
        self,
        x,
        qkv_lora_a,
        qkv_lora_b,
        output_offset,
        output_offset_cpu,
        max_qkv_out_dim,
        base_output=None,
        n_slices=3,
        *args,
        **kwargs,
    ):
        a = self._shrink(x, qkv_lora_a, n_slices)
        return self._expand(a, qkv_lora_b, output_offset_cpu, base_output)

    def run_gate_up_lora(
        self, x, gate_up_lora_a, gate_up_lora_b, output_offset_cpu, base_output=None, **kw
    ):
        a = self._shrink(x, gate_up_lora_a, len(output_offset_cpu) - 1)
        return self._expand(a, gate_up_lora_b, output_offset_cpu, base_output)


def register_backend() -> None:
    """Makes TpuLoRABackend SGLang's `torch_native` LoRA backend; idempotent."""
    from sglang.srt.lora.backend.lora_registry import register_lora_backend

    register_lora_backend(NAME)(lambda: TpuLoRABackend)
