"""`torch.tpu.ops.align_jagged_to_multiple` and `strip_jagged_padding` (TorchTPU 0.2):
a `torch.jagged` nested tensor whose flat values buffer is padded to a multiple of a
size, and back.

Padding the values once at a model's input gives every batch of ragged sequences one of
few buffer sizes (few programs to compile) and lets the layers after it run on a dense
buffer; the offsets do not change, so the padding rows belong to no sequence. Strip them
before anything that reads the buffer as sequences (a loss, `unbind`, a collective)."""

from __future__ import annotations

from typing import Optional, Union

import torch


def _check(op: str, nt) -> None:
    if not isinstance(nt, torch.Tensor) or not nt.is_nested or nt.layout != torch.jagged:
        raise ValueError(f"{op}: expected a torch.jagged nested tensor")
    if nt._ragged_idx != 1:
        raise ValueError(f"{op}: the ragged dimension must be dimension 1")


def _with_values(nt: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    # The same offsets tensor, so the result has the same ragged size as `nt`.
    return torch.nested.nested_tensor_from_jagged(values, offsets=nt.offsets())


def align_jagged_to_multiple(
    nt: torch.Tensor, multiple: int = 128, padding_value: Union[float, int, bool] = 0.0
) -> torch.Tensor:
    """`nt` (a `torch.jagged` nested tensor) with its values buffer padded with
    `padding_value` rows to a multiple of `multiple` rows (`nt` itself when it already
    is one). The sequences and their offsets are unchanged: the new rows lie past the
    last offset. 128 suits a TPU's matrix units; any multiple bounds the buffer sizes a
    program is compiled for."""
    _check("align_jagged_to_multiple", nt)
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
        raise ValueError(
            f"align_jagged_to_multiple: multiple must be a positive int, got {multiple!r}"
        )
    values = nt.values()
    extra = -values.shape[0] % multiple
    if extra == 0:
        return nt
    padding = values.new_full((extra,) + tuple(values.shape[1:]), padding_value)
    return _with_values(nt, torch.cat([values, padding]))


def strip_jagged_padding(nt: torch.Tensor, valid_tokens: Optional[int] = None) -> torch.Tensor:
    """`nt` without the rows of its values buffer past its last offset (padding such as
    `align_jagged_to_multiple` adds): its first `valid_tokens` rows, a view. Without
    `valid_tokens` the count is read from the device (`offsets[-1]`, a host read that
    waits for the work before it); pass it when the host knows it."""
    _check("strip_jagged_padding", nt)
    if valid_tokens is None:
        offsets = nt.offsets()
        valid_tokens = int(offsets[-1].item()) if offsets.numel() else 0
    values = nt.values()
    if not 0 <= valid_tokens <= values.shape[0]:
        raise ValueError(
            f"strip_jagged_padding: valid_tokens must be within the values' "
            f"{values.shape[0]} rows, got {valid_tokens}"
        )
    if valid_tokens == values.shape[0]:
        return nt
    return _with_values(nt, values[:valid_tokens])
