"""A training script written the way public CUDA scripts are, run by
test_distributed_cuda_convention.py under `torchrun --nproc-per-node 2` with nothing
exported: the device comes from torch.accelerator and LOCAL_RANK, the backend from
`get_default_backend_for_device`, and the group is bound with `device_id=`. No line
names tpu or torch_tpu.

    torchrun --standalone --nproc-per-node 2 dist_cuda_convention.py CHECKPOINT_DIR

Each part prints `<part> <step> <loss>` on rank 0: the global batch's loss, which equals
one process training on the full batch on CPU (`reference` below, used by the test)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 3
LR = 0.1
BATCH, SEQ, HIDDEN = 4, 4, 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 16)
        self.fc2 = nn.Linear(16, HIDDEN)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(self.norm(x))))


def make_model():
    torch.manual_seed(0)
    return Net()


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, SEQ, HIDDEN, generator=g), torch.randn(
        BATCH, SEQ, HIDDEN, generator=g
    )


def reference(model_fn=make_model, batch_fn=batch):
    """One process, CPU, the full batch: the loss of each step (SGD, LR, STEPS)."""
    model = model_fn()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        x, y = batch_fn(step)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def train(part, model, shard, device, scale=1.0):
    """SGD over `shard(x, y)`, this rank's share of each global batch; reports the mean
    of the ranks' losses (equal shares: the global batch's loss)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=False)
    for step in range(STEPS):
        x, y = shard(*batch(step))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        (loss * scale).backward()
        opt.step()
        report = loss.detach().clone()
        dist.all_reduce(report, op=dist.ReduceOp.AVG)
        if dist.get_rank() == 0:
            print(f"{part} {step} {report.item():.8f}", flush=True)


def main(checkpoint_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )
    from torch.nn.parallel import DistributedDataParallel as DDP

    accelerator = torch.accelerator.current_accelerator()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device(accelerator.type, local_rank)
    backend = dist.get_default_backend_for_device(device)
    dist.init_process_group(backend=backend, device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    # As with CUDA, nothing has touched the device yet, so the first DeviceMesh (FSDP2's
    # default one here) makes LOCAL_RANK's device the current one.
    assert not torch.get_device_module(device).is_initialized()

    def by_rank(x, y):
        return x.chunk(world)[rank], y.chunk(world)[rank]

    # FSDP2 with the default mesh, the model built on CPU
    model = make_model()
    fully_shard(model.fc1)
    fully_shard(model)
    assert torch.accelerator.current_device_index() == local_rank
    assert model.fc1.weight.device == device, model.fc1.weight.device
    train("fsdp", model, by_rank, device)

    # DDP on the device
    model = DDP(make_model().to(device), device_ids=[local_rank])
    train("ddp", model, by_rank, device)

    # FSDP2 mixed precision (bf16 parameters, f32 reduction), then a DCP round trip
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = make_model()
    fully_shard(model.fc1, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    train("fsdp_bf16", model, by_rank, device)
    dcp.save(model.state_dict(), checkpoint_id=checkpoint_dir)
    fresh = make_model()
    with torch.no_grad():
        for p in fresh.parameters():
            p.fill_(7)
    fully_shard(fresh.fc1, mp_policy=mp)
    fully_shard(fresh, mp_policy=mp)
    state = fresh.state_dict()
    dcp.load(state, checkpoint_id=checkpoint_dir)
    fresh.load_state_dict(state)
    saved = model.state_dict()
    for k, v in fresh.state_dict().items():
        assert v.device == device, (k, v.device)
        assert torch.equal(v.full_tensor().cpu(), saved[k].full_tensor().cpu()), k
    if rank == 0:
        print("dcp ok", flush=True)

    # DTensor tensor parallel: every rank sees the whole batch. A 2-D mesh of a group bound
    # to its device is built by splitting the group (split_group), as on CUDA.
    mesh = init_device_mesh(accelerator.type, (1, world), mesh_dim_names=("dp", "tp"))["tp"]
    model = parallelize_module(
        make_model().to(device), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    )
    train("tp", model, lambda x, y: (x, y), device)

    # Sequence parallel: each rank holds its part of the sequence; the objective is the
    # sum over ranks of their losses, scaled to the mean
    model = parallelize_module(
        make_model().to(device),
        mesh,
        {
            "norm": SequenceParallel(),
            "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1)),
        },
    )
    train(
        "sp",
        model,
        lambda x, y: (x.chunk(world, 1)[rank], y.chunk(world, 1)[rank]),
        device,
        scale=1.0 / world,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
