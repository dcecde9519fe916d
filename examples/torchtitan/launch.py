"""torchtitan 0.3.0's trainer (`python -m torchtitan.train`) on torch 2.13, under torchrun:

    torchrun --nproc_per_node=N examples/torchtitan/launch.py --module llama3 --config ...

torchtitan 0.3.0 targets a newer torch than 2.13 (its README asks for a nightly). What it
needs from torch that 2.13 lacks is supplied here, for any device; nothing here is about
tpu, which torchtitan picks by itself (torch._utils._get_available_device_type()):
- `torch.distributed.set_timeout(timeout, group)` (torch 2.14+; called after the first
  step): torch 2.13 has the same operation as `distributed_c10d._set_pg_timeout`.
Everything else torchtitan is given on the command line, unchanged.

`TITAN_REFERENCE_DEVICE=cpu` runs the same training on CPU PyTorch (torch_tpu not loaded),
as the reference run the tpu losses are compared with: torchtitan has no CPU setting (it
falls back to cuda when it finds no accelerator), and CPU PyTorch refuses FlexAttention's
backward (Inductor has no CPU kernel for it), so the reference runs FlexAttention's own
dense math (the HOP's eager implementation) and compiles nothing: plain PyTorch. gloo has
no PREMUL_SUM, which FSDP2 reduce-scatters gradients with when torchtitan sets a divide
factor: the reference sums and divides instead (FSDP2's own option for such backends).
"""

import os
import runpy
import sys

if os.environ.get("TITAN_REFERENCE_DEVICE") == "cpu":
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # before torch is imported
    import types

    import torch._utils

    torch._utils._get_available_device_type = lambda: "cpu"
    # What torchtitan's memory monitor asks of the device module, which torch.cpu lacks.
    torch.cpu.get_device_name = lambda device=None: "cpu"
    torch.cpu.get_device_properties = lambda device=None: types.SimpleNamespace(
        total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    )
    torch.cpu.memory_stats = lambda device=None: {}
    torch.cpu.reset_peak_memory_stats = lambda device=None: None
    torch.cpu.empty_cache = lambda: None
    torch.cpu.current_device = lambda: 0  # an index, as barrier(device_ids=...) takes
    from torch.nn.attention import flex_attention

    flex_attention._validate_device = lambda *args, **kwargs: None
    compile_fn = torch.compile

    def eager_compile(model=None, **kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("backend", "mode", "options")}
        return (
            compile_fn(model, backend="eager", **kwargs)
            if model is not None
            else (lambda m: compile_fn(m, backend="eager", **kwargs))
        )

    torch.compile = eager_compile
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    divide_factors = _fsdp_collectives._get_gradient_divide_factors

    def summed_divide_factors(*args, **kwargs):
        kwargs["force_sum_reduction_for_comms"] = True
        return divide_factors(*args[:5], **kwargs)

    _fsdp_collectives._get_gradient_divide_factors = summed_divide_factors

import torch.distributed as dist
from torch.distributed import distributed_c10d

if not hasattr(dist, "set_timeout"):

    def set_timeout(timeout, group=None):
        distributed_c10d._set_pg_timeout(timeout, group)

    dist.set_timeout = set_timeout

sys.argv[0] = "torchtitan.train"
runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)
