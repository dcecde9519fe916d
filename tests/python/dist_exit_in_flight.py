"""Run under `torchrun --nproc-per-node 2`: rank 0 starts an all_reduce of a tpu tensor,
drops the Work and the tensor, and exits; rank 1 joins the collective 2 s later, so it
completes on rank 0's gloo worker while rank 0 is on its way out. An object freed while
the interpreter finalizes sleeps, which puts the completion inside finalization unless
torch_tpu waited for it at exit (before, the worker died in std::terminate there)."""

import os
import time

import torch
import torch.distributed as dist


class SleepsWhileFinalizing:
    def __del__(self):
        time.sleep(4)


def main():
    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    t = torch.ones(1 << 16, device=torch.device("tpu", int(os.environ["LOCAL_RANK"])))
    if dist.get_rank() == 1:
        time.sleep(2)
        dist.all_reduce(t)
        assert t.cpu().eq(2).all()
        dist.destroy_process_group()
        print("rank 1 ok", flush=True)
    else:
        dist.all_reduce(t, async_op=True)
        print("rank 0 leaves", flush=True)


# A module global: freed while the interpreter finalizes (after the atexit handlers).
_freed_late = SleepsWhileFinalizing()
main()
