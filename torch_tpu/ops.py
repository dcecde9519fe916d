"""`torch.tpu.ops`: TorchTPU 0.2's custom ops that this engine provides.

`optimization_barrier` is the custom op `torch.ops.tpu.optimization_barrier`: eagerly one
program through `stablehlo.optimization_barrier`, in a compiled graph part of its program.
`ragged_dot` and `ragged_dot_weight_grad` are written with tpu ops (masks built on the
device from `group_sizes`, batched products): no host read, differentiable by autograd,
traceable by `torch.compile`. They do g times the work of one product (every row is
multiplied by every group's matrix and masked), which suits a handful of groups.
`all_gather_dim` and `reduce_scatter_dim` are PyTorch's functional collectives, so they
run on `tpu_dist` eagerly and split compiled graphs around them. `ragged_all_to_all` is
the custom op `tpu::ragged_all_to_all` (its backward another), an uneven all-to-all over
torch.distributed: eager, and in a compiled graph a node the graph is split around.
`send` and `recv` are eager point-to-point exchanges returning a Work (a compiled
function breaks its graph around them). `max_pool*` and their backwards
(torch_tpu/_max_pool.py), the jagged helpers (_jagged.py) and `splash_sdpa` (_splash.py)
are written with tpu ops too."""

from __future__ import annotations

from typing import Optional

import torch

from torch_tpu import _C
from torch_tpu._jagged import align_jagged_to_multiple, strip_jagged_padding  # noqa: F401
from torch_tpu._max_pool import (  # noqa: F401
    max_pool1d,
    max_pool1d_backward,
    max_pool2d,
    max_pool2d_backward,
    max_pool3d,
    max_pool3d_backward,
)
from torch_tpu._splash import splash_sdpa  # noqa: F401


@torch.library.custom_op("tpu::optimization_barrier", mutates_args=())
def _barrier(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return _C._optimization_barrier(inputs)


@_barrier.register_fake
def _(inputs):
    return [torch.empty_like(t) for t in inputs]


def _barrier_backward(ctx, grads):
    # The gradients pass through a barrier of their own, as in JAX.
    present = [g for g in grads if g is not None]
    through = iter(_barrier(present)) if present else iter(())
    return [next(through) if g is not None else None for g in grads]


_barrier.register_autograd(_barrier_backward)

# What a compiled graph holds for a call (torch_tpu/_dynamo.py lowers it in the program).
barrier_op = torch.ops.tpu.optimization_barrier.default


def optimization_barrier(inputs) -> list:
    """`inputs` (tpu tensors) through one `stablehlo.optimization_barrier`: the same
    values, as new tensors in the same order, that XLA will not fuse with, move work
    across or deduplicate. Use the returned tensors afterwards. Eager (op and fused
    mode), differentiable, and inside `torch.compile` part of the graph's program."""
    inputs = list(inputs)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("optimization_barrier: expected a sequence of tensors")
    if not inputs:
        return []
    return list(_barrier(inputs))


def _check_ragged(lhs: torch.Tensor, group_sizes: torch.Tensor, g: int) -> None:
    if lhs.dim() != 2:
        raise ValueError(f"ragged_dot: lhs must be 2-D (m, k), got shape {tuple(lhs.shape)}")
    if group_sizes.dim() != 1 or group_sizes.shape[0] != g:
        raise ValueError(
            f"ragged_dot: group_sizes must have shape ({g},), got {tuple(group_sizes.shape)}"
        )
    if group_sizes.dtype.is_floating_point or group_sizes.dtype.is_complex:
        raise TypeError(f"ragged_dot: group_sizes must be integers, got {group_sizes.dtype}")


def _group_mask(group_sizes: torch.Tensor, m: int, like: torch.Tensor) -> torch.Tensor:
    """[g, m, 1]: 1 where row r belongs to group i (rows start_i .. end_i - 1)."""
    sizes = group_sizes.to(device=like.device, dtype=torch.int64)
    ends = torch.cumsum(sizes, 0)
    starts = ends - sizes
    rows = torch.arange(m, device=like.device)
    inside = (rows[None, :] >= starts[:, None]) & (rows[None, :] < ends[:, None])
    return inside.to(like.dtype).unsqueeze(-1)


def ragged_dot(
    lhs: torch.Tensor,
    rhs: torch.Tensor,
    group_sizes: torch.Tensor,
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """result[start_i:end_i] = lhs[start_i:end_i] @ rhs[i] for the g consecutive row groups
    of `lhs` (m, k) given by `group_sizes` (g,); `rhs` is (g, k, n). Rows past
    sum(group_sizes) are 0. Differentiable in `lhs` and `rhs` when `out` is not given."""
    if rhs.dim() != 3 or rhs.shape[1] != lhs.shape[-1]:
        raise ValueError(
            f"ragged_dot: rhs must be (g, k, n) with k = {lhs.shape[-1]}, got "
            f"shape {tuple(rhs.shape)}"
        )
    _check_ragged(lhs, group_sizes, rhs.shape[0])
    mask = _group_mask(group_sizes, lhs.shape[0], lhs)
    result = (mask * torch.matmul(lhs.unsqueeze(0), rhs)).sum(0)
    if out is None:
        return result
    with torch.no_grad():
        return out.copy_(result)


def ragged_dot_weight_grad(
    lhs: torch.Tensor, grad_output: torch.Tensor, group_sizes: torch.Tensor
) -> torch.Tensor:
    """The gradient of `ragged_dot` in `rhs`: (g, k, n), group i being
    lhs[start_i:end_i].T @ grad_output[start_i:end_i]."""
    if grad_output.dim() != 2 or grad_output.shape[0] != lhs.shape[0]:
        raise ValueError(
            f"ragged_dot_weight_grad: grad_output must be ({lhs.shape[0]}, n), "
            f"got shape {tuple(grad_output.shape)}"
        )
    _check_ragged(lhs, group_sizes, group_sizes.shape[0] if group_sizes.dim() == 1 else -1)
    mask = _group_mask(group_sizes, lhs.shape[0], lhs)
    return torch.matmul((mask * lhs).transpose(1, 2), grad_output)


def _group(group):
    import torch.distributed as dist

    group = dist.group.WORLD if group is None else group
    if group is None:
        raise ValueError(
            "torch.tpu.ops: the default process group is not initialized "
            "(call torch.distributed.init_process_group)"
        )
    return group


def all_gather_dim(input: torch.Tensor, dim: int, group=None) -> torch.Tensor:  # noqa: A002
    """Every rank's `input` concatenated along `dim` (no autograd)."""
    import torch.distributed._functional_collectives as funcol

    if input.dim() == 0:
        raise ValueError("all_gather_dim: input must have at least one dimension")
    out = funcol.all_gather_tensor(input.contiguous(), dim % input.dim(), _group(group))
    return funcol.wait_tensor(out) if isinstance(out, funcol.AsyncCollectiveTensor) else out


_REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


def reduce_scatter_dim(
    input: torch.Tensor,
    dim: int,
    group=None,  # noqa: A002
    reduce_op: str = "sum",
) -> torch.Tensor:
    """`input` reduced over the ranks; this rank's chunk along `dim` (no autograd)."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    if reduce_op not in _REDUCE_OPS:
        raise ValueError(
            f"reduce_scatter_dim: reduce_op must be one of {_REDUCE_OPS}, got {reduce_op!r}"
        )
    group = _group(group)
    d = dim % input.dim()
    if input.shape[d] % dist.get_world_size(group) != 0:
        raise ValueError(
            f"reduce_scatter_dim: size {input.shape[d]} of dim {dim} is not "
            f"divisible by the group size {dist.get_world_size(group)}"
        )
    out = funcol.reduce_scatter_tensor(input.contiguous(), reduce_op, d, group)
    return funcol.wait_tensor(out) if isinstance(out, funcol.AsyncCollectiveTensor) else out


class _Works:
    """One Work for several (what `send`/`recv` return for more than one tensor)."""

    def __init__(self, works):
        self.works = works

    def wait(self, timeout=None) -> bool:
        for w in self.works:
            w.wait() if timeout is None else w.wait(timeout)
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self.works)


def _p2p(kind: str, tensors, peer: int, tag: int):
    import torch.distributed as dist

    tensors = list(tensors)
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ValueError(f"torch.tpu.ops.{kind}: expected a non-empty sequence of tensors")
    group = _group(None)
    op = dist.isend if kind == "send" else dist.irecv
    works = dist.batch_isend_irecv([dist.P2POp(op, t, peer, group, tag) for t in tensors])
    return works[0] if len(works) == 1 else _Works(works)


def send(tensors, dst: int, tag: int = 0):
    """Sends `tensors` to rank `dst` of the default process group; the `recv` on `dst`
    with the same `tag` receives them in order. Returns a Work: `wait()` waits for it."""
    return _p2p("send", tensors, dst, tag)


def recv(tensors, src: int, tag: int = 0):
    """Receives into `tensors` (the shapes and dtypes `src` sent) what rank `src` sent with
    `tag`. Returns a Work: wait for it before reading `tensors`."""
    return _p2p("recv", tensors, src, tag)


def _rows(name: str, t: torch.Tensor, world: int) -> list:
    if (
        not isinstance(t, torch.Tensor)
        or t.dim() != 1
        or t.shape[0] != world
        or t.dtype.is_floating_point
        or t.dtype.is_complex
        or t.dtype == torch.bool
    ):
        raise ValueError(
            f"ragged_all_to_all: {name} must be a 1-D integer tensor with one "
            f"entry per rank ({world})"
        )
    values = t.tolist()
    if any(v < 0 for v in values):
        raise ValueError(f"ragged_all_to_all: {name} must not be negative, got {values}")
    return values


def _exchange(rows: torch.Tensor, sizes_out: list, sizes_in: list, group) -> torch.Tensor:
    """all_to_all of rows: `sizes_out[j]` rows of `rows` (in rank order) go to rank j,
    `sizes_in[j]` rows come from it."""
    import torch.distributed as dist

    out = rows.new_empty((sum(sizes_in),) + tuple(rows.shape[1:]))
    dist.all_to_all_single(
        out,
        rows.contiguous(),
        output_split_sizes=sizes_in,
        input_split_sizes=sizes_out,
        group=group,
    )
    return out


def _ragged_result(operand, output, plan) -> torch.Tensor:
    """`output` with the rows the other ranks send written in (the exchange itself)."""
    in_off, send, write_at, recv, group = plan
    chunks = [operand[o : o + n] for o, n in zip(in_off, send)]
    got = _exchange(torch.cat(chunks) if chunks else operand[:0], send, recv, group)
    result = output.clone()
    start = 0
    for at, n in zip(write_at, recv):
        result[at : at + n] = got[start : start + n]
        start += n
    return result


def _ragged_group(group_name: Optional[str]):
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _group(None) if group_name is None else _resolve_process_group(group_name)


def _ragged_plan(
    operand_rows, output_rows, input_offsets, send_sizes, output_offsets, recv_sizes, group, device
):
    """(input offsets, send sizes, where each sender's rows go here, receive sizes, group),
    checked; the third is exchanged with the other ranks (a collective)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    in_off = _rows("input_offsets", input_offsets, world)
    send = _rows("send_sizes", send_sizes, world)
    out_off = _rows("output_offsets", output_offsets, world)
    recv = _rows("recv_sizes", recv_sizes, world)
    if any(o + n > operand_rows for o, n in zip(in_off, send)):
        raise ValueError(
            "ragged_all_to_all: a slice to send ends past the operand's "
            f"{operand_rows} rows (input_offsets {in_off}, send_sizes {send})"
        )
    # Where each sender's rows go in this rank's result: sender j's output_offsets[me].
    write_at = (
        _exchange(
            torch.tensor(out_off, dtype=torch.int64, device=device).unsqueeze(1),
            [1] * world,
            [1] * world,
            group,
        )
        .view(-1)
        .tolist()
    )
    if any(at + n > output_rows for at, n in zip(write_at, recv)):
        raise ValueError(
            "ragged_all_to_all: received rows end past the output's "
            f"{output_rows} rows (offsets {write_at}, recv_sizes {recv})"
        )
    return in_off, send, write_at, recv, group


# ragged_all_to_all and its backward are custom ops: a compiled graph holds them as
# nodes (and is split around them: they run eagerly, reading the sizes on the host).
@torch.library.custom_op("tpu::ragged_all_to_all", mutates_args=())
def _ragged_all_to_all(
    operand: torch.Tensor,
    output: torch.Tensor,
    input_offsets: torch.Tensor,
    send_sizes: torch.Tensor,
    output_offsets: torch.Tensor,
    recv_sizes: torch.Tensor,
    group_name: Optional[str],
) -> torch.Tensor:
    sizes = (input_offsets, send_sizes, output_offsets, recv_sizes)
    group = _ragged_group(group_name)
    plan = _ragged_plan(operand.shape[0], output.shape[0], *sizes, group, operand.device)
    return _ragged_result(operand, output, plan)


@_ragged_all_to_all.register_fake
def _(operand, output, *sizes_and_group):
    return torch.empty_like(output)


@torch.library.custom_op("tpu::ragged_all_to_all_backward", mutates_args=())
def _ragged_all_to_all_backward(
    grad: torch.Tensor,
    input_offsets: torch.Tensor,
    send_sizes: torch.Tensor,
    output_offsets: torch.Tensor,
    recv_sizes: torch.Tensor,
    operand_rows: int,
    group_name: Optional[str],
) -> tuple[torch.Tensor, torch.Tensor]:
    """(gradient of the operand, of the output): the rows each rank received go back to
    their senders, which add them where they came from; the rows received overwrote
    `output`'s, which get no gradient."""
    sizes = (input_offsets, send_sizes, output_offsets, recv_sizes)
    in_off, send, write_at, recv, group = _ragged_plan(
        operand_rows, grad.shape[0], *sizes, _ragged_group(group_name), grad.device
    )
    back = _exchange(
        torch.cat([grad[at : at + n] for at, n in zip(write_at, recv)]), recv, send, group
    )
    grad_operand = grad.new_zeros((operand_rows,) + tuple(grad.shape[1:]))
    grad_output = grad.clone()
    start = 0
    for o, n in zip(in_off, send):
        grad_operand[o : o + n] += back[start : start + n]
        start += n
    for at, n in zip(write_at, recv):
        grad_output[at : at + n] = 0
    return grad_operand, grad_output


@_ragged_all_to_all_backward.register_fake
def _(grad, input_offsets, send_sizes, output_offsets, recv_sizes, operand_rows, group_name):
    return grad.new_empty((operand_rows,) + tuple(grad.shape[1:])), torch.empty_like(grad)


def _ragged_setup_context(ctx, inputs, output):
    operand, _, *sizes, group_name = inputs
    ctx.save_for_backward(*sizes)
    ctx.operand_rows, ctx.group_name = operand.shape[0], group_name


def _ragged_backward(ctx, grad):
    grad_operand, grad_output = _ragged_all_to_all_backward(
        grad, *ctx.saved_tensors, ctx.operand_rows, ctx.group_name
    )
    return grad_operand, grad_output, None, None, None, None, None


_ragged_all_to_all.register_autograd(_ragged_backward, setup_context=_ragged_setup_context)


def ragged_all_to_all(
    operand: torch.Tensor,
    output: torch.Tensor,
    input_offsets: torch.Tensor,
    send_sizes: torch.Tensor,
    output_offsets: torch.Tensor,
    recv_sizes: torch.Tensor,
    process_group_name: Optional[str] = None,
    *,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Exchanges ragged row slices among the ranks of a group: this rank sends rows
    `input_offsets[j]` to `input_offsets[j] + send_sizes[j]` of `operand` to rank j, which
    writes them to its result from row `output_offsets[j]` (the offset as this sender
    gives it); `recv_sizes[j]` rows come from rank j. The result has `output`'s shape,
    dtype and contents where nothing is received (into `out` if given). Differentiable
    with respect to `operand` and `output` when `out` is not given; eager and inside
    compiled graphs (the custom op `tpu::ragged_all_to_all`).
    `process_group_name`: a group's `group_name` (None: the default group)."""
    if (
        operand.dim() == 0
        or output.dim() != operand.dim()
        or output.shape[1:] != operand.shape[1:]
        or output.dtype != operand.dtype
    ):
        raise ValueError(
            f"ragged_all_to_all: operand {tuple(operand.shape)} {operand.dtype} "
            f"and output {tuple(output.shape)} {output.dtype} must have the same "
            "dtype and row shape"
        )
    sizes = (input_offsets, send_sizes, output_offsets, recv_sizes)
    if out is None:
        return _ragged_all_to_all(operand, output, *sizes, process_group_name)
    with torch.no_grad():
        out.copy_(_ragged_all_to_all(operand, output, *sizes, process_group_name))
    return out
