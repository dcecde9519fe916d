"""Distributed training of the tiny Hugging Face Llama (examples/hf_tiny.py) on `tpu`
over the c10d backend `tpu_dist`, written as for CUDA (device from LOCAL_RANK), with no
environment variable to set:

    torchrun --standalone --nproc-per-node 2 examples/distributed/train.py --dp 2
    torchrun --standalone --nproc-per-node 2 examples/distributed/train.py --fsdp
    torchrun --standalone --nproc-per-node 2 examples/distributed/train.py --tp 2
    torchrun --standalone --nproc-per-node 4 examples/distributed/train.py --dp 2 --tp 2
    python examples/distributed/train.py --reference     # one process, the full batch

`--dp` alone is DistributedDataParallel; `--fsdp` shards parameters with FSDP2
(`fully_shard`) over the data-parallel ranks; `--tp` splits attention and MLP
projections across ranks with DTensor (ColwiseParallel for q/k/v/gate/up,
RowwiseParallel for o/down) and FSDP2 shards over the other dimension of the 2-D
(dp, tp) mesh, of size 1 for `--tp` alone. Every run trains on the same global
batches and prints the global mean loss per step, which equals the one-process run's.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hf_tiny import batches, build, train  # noqa: E402


def parallelize(model, args, world):
    from torch.distributed.device_mesh import init_device_mesh

    dp = args.dp or world // args.tp
    if dp * args.tp != world:
        raise SystemExit(f"--dp {dp} x --tp {args.tp} must equal the {world} processes")
    mesh = init_device_mesh(
        torch.accelerator.current_accelerator().type, (dp, args.tp), mesh_dim_names=("dp", "tp")
    )
    if args.tp > 1:
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            RowwiseParallel,
            parallelize_module,
        )

        plan = {
            "self_attn.q_proj": ColwiseParallel(),
            "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(),
            "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(),
        }
        for layer in model.model.layers:
            parallelize_module(layer, mesh["tp"], plan)
    # With --tp, FSDP2 also manages the parameters (over a dp dimension of size 1 for
    # --tp alone): it makes every parameter a DTensor, and PyTorch's optimizers and
    # gradient clipping refuse a mix of DTensors and plain tensors.
    if args.fsdp or args.tp > 1:
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    elif dp > 1:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model)
    return model, mesh["dp"]


def clip_grad_norm(params, max_norm):
    """torch.nn.utils.clip_grad_norm_ for DTensor gradients on different meshes (the
    tensor-parallel ones on (dp, tp), the others on dp), which PyTorch's refuses to
    combine: each gradient's norm is its full tensor's (DTensor reduces the shards)."""
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in params if p.grad is not None]
    norms = [g.norm().full_tensor() if isinstance(g, DTensor) else g.norm() for g in grads]
    coef = torch.clamp(max_norm / (torch.stack(norms).norm() + 1e-6), max=1.0)
    for g in grads:
        (g.to_local() if isinstance(g, DTensor) else g).mul_(coef)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dp", type=int, default=0, help="data-parallel ranks (default: the rest)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks")
    p.add_argument("--fsdp", action="store_true", help="shard parameters with FSDP2")
    p.add_argument("--reference", action="store_true", help="one process, no distribution")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=4, help="global batch size")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    data = batches(args.steps, args.batch, args.seq, args.seed)
    if args.reference:
        model = build("llama", args.seed).to("tpu")
        report = lambda step, loss: print(f"step {step} loss {loss.item():.6f}", flush=True)
        train(model, data, "tpu", on_step=report)
        return

    # CUDA's convention: one process per device, tpu:LOCAL_RANK (under torchrun the
    # XLA:CPU engine has one device per local process), the device's default backend
    # (tpu_dist, with gloo for CPU tensors), the group bound to the device.
    device = torch.device(
        torch.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK", 0))
    )
    torch.accelerator.set_device_index(device.index)
    dist.init_process_group(dist.get_default_backend_for_device(device), device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build("llama", args.seed).to(device)
    model, dp_mesh = parallelize(model, args, world)
    dp, dp_rank = dp_mesh.size(), dp_mesh.get_local_rank()
    if args.batch % dp:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {dp} dp ranks")

    def report(step, loss):
        # Each dp rank's loss is the mean over its equal share of tokens: their mean is
        # the global batch's loss.
        loss = loss.clone()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=dp_mesh.get_group())
        if rank == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)

    clip = clip_grad_norm if args.tp > 1 else torch.nn.utils.clip_grad_norm_
    train(model, [b.chunk(dp)[dp_rank] for b in data], device, on_step=report, clip_grad_norm=clip)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
