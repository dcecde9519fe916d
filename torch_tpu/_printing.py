"""Printing tpu tensors: format a host copy, as PyTorch does for XLA tensors.

PyTorch's formatter runs a dozen small ops (masked_select, isfinite, abs, max, ...) on
the tensor's own device; on an XLA device each is a compile. One transfer is cheaper
and gives exactly CPU's text. The device suffix is computed before this point, so the
printed text still says device='tpu:0'.
"""

import torch._tensor_str as _tensor_str

_original = _tensor_str._tensor_str


def _tensor_str_on_host(self, indent):
    if self.device.type == "tpu":
        self = self.cpu()
    return _original(self, indent)


def install() -> None:
    if _tensor_str._tensor_str is not _tensor_str_on_host:
        _tensor_str._tensor_str = _tensor_str_on_host
