"""tpu_dist's collectives suite (dist_collectives.py), one body on both transports:
host-staged across real processes (dist_launch.launch, dist_training.py), in-program
across threads of one process on 4 virtual devices (dist_launch.run_threads,
dist_threads.py; one subprocess runs every in-program case, each test checks its own)."""

import pytest
import torch.distributed as dist

import dist_training as w
from dist_launch import launch, run_threads

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="torch.distributed with gloo is required",
    ),
]

TRANSPORTS = ["host_staged", "in_program"]
IN_PROGRAM = ["collectives_2", "collectives_4", "coalescing", "sends_waited_first"]


@pytest.fixture(scope="module")
def in_program():
    return run_threads(IN_PROGRAM, timeout=360)


def check(transport, request, scenario, fn, world_size, timeout):
    if transport == "host_staged":
        launch(fn, world_size, timeout=timeout)
    else:
        result = request.getfixturevalue("in_program")[scenario]
        assert result == "ok", result


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_collectives(transport, world_size, request):
    """Every collective's values, the bad-call errors, results that stay put; on 4
    host-staged ranks tensor parallelism on a (2, 2) mesh runs in the same processes."""
    check(transport, request, f"collectives_{world_size}", w.collectives, world_size, 240)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_coalescing(transport, request):
    """_coalescing_manager (with and without a device) and batch_isend_irecv (in-program:
    on 2 and 4 ranks)."""
    check(transport, request, "coalescing", w.coalescing, 2, 150)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sends_waited_first(transport, request):
    """Regression: isend; irecv; send.wait(); recv.wait() on both ranks deadlocked on the
    host-staged transport. The launch's timeout turns a deadlock into a failure."""
    check(transport, request, "sends_waited_first", w.sends_waited_first, 2, 60)
