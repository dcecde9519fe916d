"""What the serving engines are told about a tpu device (engine-free, shared by the
vLLM and SGLang plugins)."""

from __future__ import annotations

import os

import torch

# XLA:CPU's buffers are host memory, shared with the engine, the tokenizer and anything
# else on the machine: it is reported as this share of the host's memory, so the
# default KV cache (the engine's memory fraction of it) fits beside them.
CPU_DEVICE_SHARE = 0.25


def _host_memory_bytes() -> int:
    pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return pages * page_size


def device_total_memory(device_id: int = 0, devices_on_host: int = 1) -> int:
    """The device's memory as the engines should budget it. A host-backed (XLA:CPU)
    device gets its part of the host's share: `devices_on_host` engine workers (tensor
    parallel ranks on this machine) split it."""
    props = torch.tpu.get_device_properties(device_id)
    total = int(props.total_memory)
    if props.platform.lower() in ("cpu", "host") or total <= 0:
        total = int(_host_memory_bytes() * CPU_DEVICE_SHARE) // max(devices_on_host, 1)
    return total


def raise_virtual_devices(count: int) -> None:
    """Makes processes spawned after this see at least `count` tpu devices: one
    engine worker per device, rank r on tpu:r. The XLA:CPU plugin gives each process
    TORCH_TPU_NUM_DEVICES virtual devices (default 1); each worker uses its own, and
    the device groups between the processes are tpu_dist's host-staged ones. A plugin
    with real devices ignores the variable."""
    try:
        from torch_tpu import _settings

        current = _settings.get("TORCH_TPU_NUM_DEVICES") or 1
    except (ImportError, ValueError):
        current = 1  # torch_tpu reports the bad value (or its broken install) when a worker starts
    if current < count:
        os.environ["TORCH_TPU_NUM_DEVICES"] = str(count)


def tpu_available() -> bool:
    """Whether torch_tpu imports and a tpu device exists: the plugins' activation
    test. A broken install answers False rather than stopping the engine on other
    platforms."""
    try:
        import torch_tpu  # noqa: F401  (registers the device)

        return bool(torch.tpu.is_available())
    except Exception:
        return False
