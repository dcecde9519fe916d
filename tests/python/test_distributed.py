"""tpu_dist across real processes: DDP, FSDP2 (with CPU offload), DCP, tensor parallel,
DTensor attention, staged results, CPU gloo and a killed rank, each checked against CPU
PyTorch (see dist_training.py). The collectives themselves: test_distributed_collectives.py."""

import pytest
import torch
import torch.distributed as dist

import dist_training as w
from dist_launch import launch

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="torch.distributed with gloo is required",
    ),
]


def test_staged_results_stay():
    launch(w.staged_results, 2, timeout=120)


def test_checkpointed_collectives():
    launch(w.checkpointed_collectives, 2, timeout=150)


def test_ddp_and_tensor_parallel():
    launch(w.ddp_and_tensor_parallel, 2, timeout=150)


def test_fsdp2_and_checkpoint(tmp_path):
    launch(w.fsdp, 2, str(tmp_path / "ckpt"), timeout=150)


def test_dtensor_attention():
    launch(w.dtensor_attention, 2, timeout=120)


def test_fsdp_tp_attention_2d():
    launch(w.fsdp_tp_attention, 4, timeout=200)


def test_cpu_gloo_unchanged_by_torch_tpu():
    """Installing torch_tpu makes torch.accelerator report tpu; CPU training over gloo
    must still work and give the very same parameters as without it (DDP, FSDP2 on a CPU
    mesh). FSDP2 without a mesh takes the accelerator's, as on a GPU host: it trains on
    tpu, served by the gloo group's tpu_dist, and matches the CPU run."""
    with_tpu = launch(w.cpu_gloo, 2, timeout=120)
    without = launch(w.cpu_gloo, 2, timeout=120, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert with_tpu[0][0] and not without[0][0]
    for rank in (0, 1):
        for a, b in zip(with_tpu[rank][1:3], without[rank][1:3]):
            assert a.keys() == b.keys()
            for k in a:
                assert torch.equal(a[k], b[k]), k
        a, b = with_tpu[rank][3], without[rank][3]
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-6, msg=k)


def test_killed_rank_raises_within_timeout():
    out = launch(w.killed_rank, 2, 10, timeout=90, allow_failures=True)
    assert out[1][0] == "died", out
    elapsed, message = out[0]
    assert elapsed < 10 + 5, (elapsed, message)
