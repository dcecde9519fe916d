"""Meta kernels PyTorch lacks or gets wrong for ops torch_tpu lowers.

The lowering table reads output shapes from meta kernels, and compiled graphs trace with
them. PyTorch has none for the fused GRU cell ops nn.GRU calls on accelerators (CUDA
computes their shapes itself); its LSTM cell one reads `.device` of the optional biases,
so it fails for `nn.LSTM(bias=False)`; its `_grouped_mm` one follows CUDA and takes only
bf16, where CPU's kernel and ours (csrc/ops/matmul.cpp) take every float dtype. These
replace them: they check sizes and give empty tensors of the right shapes, nothing else.
PyTorch also has none for the in-place helpers and fused optimizer steps we lower
(`_cummax_helper`, `_fused_sgd_`, `_fused_adagrad_`, the `.tensor_lr` overloads): theirs
check the arguments and return nothing. `geqrf` has none either (its CPU kernel sizes
the results itself): the factored matrix has the input's shape, tau one entry per
reflector. Nor has `linalg_lstsq.out` (the functional form calls it): its results are sized
as CPU's for the driver, residuals for full-rank matrices (CPU leaves them empty when
gelsd / gelss find A rank-deficient, which only the values tell). `histogram`, the
`_histogramdd_*` ops and `fractional_max_pool3d_backward` have none either (their output
sizes are the bin counts, and the input's); `multilabel_margin_loss_forward`'s sizes a 1-d
input's unreduced loss [1] where CPU's is 0-d. The inference fast path of
nn.MultiheadAttention calls `_transform_bias_rescale_qkv` and `_masked_softmax` (and its
backward), which have none: theirs make CPU's checks, with CPU's messages. Other ops CPU
has and tpu lowers lack one too: deprecated aliases (`_aminmax`, `_logcumsumexp`), out=
forms whose functional form has one (`adaptive_avg_pool2d.out`, ...), `_add_relu.Scalar`,
the glu JVPs and `batch_norm_update_stats`: theirs ask the functional form's meta kernel.
"""

import torch

_lib = None


def _check_cell(name, input_gates, hidden_gates, hx, gates):
    hidden = hx.shape[-1] if hx.dim() == 2 else -1
    torch._check(hx.dim() == 2, lambda: f"{name}: the state must be 2-d, got {tuple(hx.shape)}")
    for what, t in (("input_gates", input_gates), ("hidden_gates", hidden_gates)):
        torch._check(
            t.dim() == 2 and tuple(t.shape) == (hx.shape[0], gates * hidden),
            lambda: (
                f"{name}: {what} must be [{hx.shape[0]}, {gates * hidden}], got {tuple(t.shape)}"
            ),
        )


def _empty(shape, like):
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4)
    return _empty(cx.shape, cx), _empty(cx.shape, cx), _empty(input_gates.shape, input_gates)


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3)
    batch, hidden = hx.shape
    return _empty(hx.shape, input_gates), _empty((batch, 5 * hidden), input_gates)


def gru_cell_backward(grad_hy, workspace, has_bias):
    batch, hidden = grad_hy.shape
    gates = _empty((batch, 3 * hidden), grad_hy)
    bias = (
        (_empty((3 * hidden,), grad_hy), _empty((3 * hidden,), grad_hy))
        if has_bias
        else (None, None)
    )
    return gates, _empty(gates.shape, grad_hy), _empty(grad_hy.shape, grad_hy), *bias


def grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    torch._check(
        mat_a.dtype == mat_b.dtype and mat_a.dtype.is_floating_point,
        lambda: (
            f"_grouped_mm: expected float inputs of one dtype, got {mat_a.dtype} and {mat_b.dtype}"
        ),
    )
    torch._check(
        mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
        lambda: "_grouped_mm: multiplicands must be 2D or 3D",
    )
    torch._check(
        (offs is None) == (mat_a.dim() == 3 and mat_b.dim() == 3),
        lambda: "_grouped_mm: offs is needed exactly when an input is 2D",
    )
    torch._check(
        mat_a.shape[-1] == mat_b.shape[-2] or mat_a.dim() == mat_b.dim() == 2,
        lambda: (
            f"_grouped_mm: contraction sizes differ: {tuple(mat_a.shape)} and {tuple(mat_b.shape)}"
        ),
    )
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        shape = (offs.shape[0], mat_a.shape[0], mat_b.shape[1])
    elif mat_a.dim() == 2:
        shape = (mat_a.shape[0], mat_b.shape[-1])
    elif mat_b.dim() == 2:
        shape = (mat_a.shape[1], mat_b.shape[1])
    else:
        shape = (mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1])
    return torch.empty(shape, dtype=out_dtype or mat_a.dtype, device=mat_a.device)


def cumulative_extreme_helper(self, values, indices, dim):
    # cummax / cummin size `values` and `indices` like `self` before calling the helper.
    torch._check(
        values.shape == self.shape and indices.shape == self.shape,
        lambda: "cummax/cummin: values and indices must have the shape of the input",
    )


def _check_lists(name, *lists):
    torch._check(
        all(len(t) in (0, len(lists[0])) for t in lists),
        lambda: f"{name}: the tensor lists must have one entry per parameter",
    )


def fused_step(self, grads, *state, **kwargs):
    """The fused optimizer steps (SGD, Adagrad; Adam/AdamW with a tensor lr) update their
    arguments in place and return nothing."""
    _check_lists("fused optimizer step", self, grads, *state)


def geqrf(self):
    torch._check(
        self.dim() >= 2, lambda: "geqrf: The input tensor A must have at least 2 dimensions."
    )
    torch._check(
        self.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
        lambda: f"geqrf: Expected a floating point or complex tensor as input. Got {self.dtype}",
    )
    k = min(self.shape[-2], self.shape[-1])
    return _empty(self.shape, self), _empty((*self.shape[:-2], k), self)


def lstsq_out(self, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    torch._check(
        self.dim() >= 2, lambda: "torch.linalg.lstsq: input must have at least 2 dimensions."
    )
    vector = b.dim() == self.dim() - 1
    other = b.unsqueeze(-1) if vector else b
    torch._check(
        other.dim() >= 2, lambda: "torch.linalg.lstsq: other must have at least 1 dimension."
    )
    m, n = self.shape[-2], self.shape[-1]
    torch._check(
        other.shape[-2] == m,
        lambda: (
            f"torch.linalg.lstsq: input.size(-2) should match "
            f"other.size(-2), got {m} and {other.shape[-2]}"
        ),
    )
    torch._check(
        self.dtype == b.dtype,
        lambda: (
            f"torch.linalg.lstsq: Expected input and other to "
            f"have the same dtype, got {self.dtype} and {b.dtype}"
        ),
    )
    drv = driver or "gelsy"
    torch._check(
        drv in ("gels", "gelsy", "gelsd", "gelss"),
        lambda: (
            f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, "
            f"gelsd, gelss), got {drv}"
        ),
    )
    batch = tuple(torch.broadcast_shapes(self.shape[:-2], other.shape[:-2]))
    k = other.shape[-1]
    solution.resize_((*batch, n) if vector else (*batch, n, k))
    residuals.resize_((*batch, k) if m > n and drv != "gelsy" else (0,))
    rank.resize_(batch if drv != "gels" else (0,))
    singular_values.resize_((*batch, min(m, n)) if drv in ("gelsd", "gelss") else (0,))
    return solution, residuals, rank, singular_values


def _check_histogram(self, weight):
    torch._check(
        self.dtype.is_floating_point,
        lambda: f"torch.histogram: input tensor must be float, got {self.dtype}",
    )
    torch._check(
        weight is None or weight.shape == self.shape,
        lambda: "torch.histogram: weight should have the same shape as input",
    )


def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    _check_histogram(self, weight)
    torch._check(bins > 0, lambda: "torch.histogram(): bins must be > 0")
    return _empty((bins,), self), _empty((bins + 1,), self)


def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    _check_histogram(self, weight)
    torch._check(
        bins.dim() == 1 and bins.numel() > 0,
        lambda: "torch.histogram(): bins tensor should have one dimension and at least 1 element",
    )
    return _empty((bins.numel() - 1,), self), _empty((bins.numel(),), self)


def _check_histogramdd(self, bins, weight):
    torch._check(
        self.dtype.is_floating_point,
        lambda: f"torch.histogramdd: input tensor must be float, got {self.dtype}",
    )
    torch._check(
        self.dim() >= 2 and self.shape[-1] == len(bins),
        lambda: (
            "torch.histogramdd: expected input of shape [..., D] with one bin specification per dim"
        ),
    )
    torch._check(
        weight is None or weight.shape == self.shape[:-1],
        lambda: "torch.histogramdd: weight should have the input's shape without its last dim",
    )


def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    _check_histogramdd(self, bins, weight)
    return [_empty((k + 1,), self) for k in bins]


def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    _check_histogramdd(self, bins, weight)
    return _empty(tuple(bins), self)


def histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    _check_histogramdd(self, bins, weight)
    return _empty(tuple(e.numel() - 1 for e in bins), self)


def fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    torch._check(
        grad_output.shape == indices.shape,
        lambda: "fractional_max_pool3d_backward(): gradOutput and indices shapes differ",
    )
    return _empty(self.shape, self)


def multilabel_margin_loss_forward(self, target, reduction):
    torch._check(
        self.dim() <= 2 and target.shape == self.shape,
        lambda: (
            f"multilabel_margin_loss: inconsistent target size {tuple(target.shape)} "
            f"for input of size {tuple(self.shape)}"
        ),
    )
    # CPU's loss is 0-d for a 0-d or 1-d input even without reduction (PyTorch's meta
    # kernel gives [1] there).
    rows = self.shape[0] if self.dim() == 2 else 1
    shape = (rows,) if reduction == 0 and self.dim() == 2 else ()
    return _empty(shape, self), torch.empty(target.shape, dtype=self.dtype, device=self.device)


def transform_bias_rescale_qkv(qkv, qkv_bias, num_heads):
    torch._check(qkv.dim() == 3, lambda: f"expected 3-D `qkv`, got {qkv.dim()}-D tensor")
    batch, t, three_d = qkv.shape
    torch._check(three_d % 3 == 0, lambda: "_transform_bias_rescale_qkv: 3 * D expected")
    d = three_d // 3
    torch._check(d % num_heads == 0, lambda: "_transform_bias_rescale_qkv: D % num_head == 0")
    torch._check(
        qkv_bias.shape == (three_d,),
        lambda: f"expected `qkv_bias` of shape ({three_d},), got {tuple(qkv_bias.shape)}",
    )
    return tuple(_empty((batch, num_heads, t, d // num_heads), qkv) for _ in range(3))


def masked_softmax(self, mask, dim=None, mask_type=None):
    torch._check(mask.dtype == torch.bool, lambda: "Mask should be a boolean tensor")
    if mask.dim() != 2 or self.dim() != 4:
        mask_type = 2  # CPU's rule: types 0 and 1 are for 2-d masks of 4-d inputs
    torch._check(mask_type is not None, lambda: "Mask Type should be defined")
    if mask_type == 2:
        torch._check(
            mask.shape == self.shape,
            lambda: "For mask_type == 2 mask shape should match input shape",
        )
    elif mask_type == 1:
        torch._check(
            self.shape[0] == mask.shape[0] and self.shape[2] == mask.shape[1],
            lambda: "For mask_type == 1 mask shape should be (B, L)",
        )
    else:
        torch._check(
            mask_type == 0 and self.shape[2] == mask.shape[0] == mask.shape[1],
            lambda: "For mask_type == 0 mask shape should be (L, L)",
        )
    torch._check(self.dtype.is_floating_point, lambda: "masked_softmax: float input expected")
    return _empty(self.shape, self)


def masked_softmax_backward(grad_output, output, mask, dim=None):
    torch._check(
        grad_output.shape == output.shape, lambda: "grad_output and output must have one shape"
    )
    torch._check(mask.shape == grad_output.shape, lambda: "Mask shape should match grad shape")
    torch._check(mask.dtype == torch.bool, lambda: "Mask should be a boolean tensor")
    return _empty(grad_output.shape, grad_output)


aten = torch.ops.aten


def _into(out, result):
    """An out= meta kernel's write: `out` takes the result's shape (as resize_output)."""
    if out.shape != result.shape:
        out.resize_(result.shape)
    return out


def add_relu_scalar(self, other, alpha=1):
    return aten.add.Scalar(self, other, alpha)


def add_relu_out(self, other, *, alpha=1, out):
    return _into(out, aten.add.Tensor(self, other, alpha=alpha))


def aminmax_all(self):
    return aten.aminmax(self)


def aminmax_dim(self, dim, keepdim=False):
    return aten.aminmax(self, dim=dim, keepdim=keepdim)


def logcumsumexp(self, dim):
    return aten.logcumsumexp(self, dim)


def logcumsumexp_out(self, dim, *, out):
    return _into(out, aten.logcumsumexp(self, dim))


def adaptive_avg_pool2d_out(self, output_size, *, out):
    return _into(out, aten._adaptive_avg_pool2d(self, output_size))


def adaptive_avg_pool3d_out(self, output_size, *, out):
    return _into(out, aten._adaptive_avg_pool3d(self, output_size))


def adaptive_avg_pool3d_backward_out(grad_output, self, *, grad_input):
    return _into(grad_input, aten._adaptive_avg_pool3d_backward(grad_output, self))


def batch_norm_legit_out(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    training,
    momentum,
    eps,
    *,
    out,
    save_mean,
    save_invstd,
):
    results = aten._native_batch_norm_legit(
        input, weight, bias, running_mean, running_var, training, momentum, eps
    )
    return tuple(_into(o, r) for o, r in zip((out, save_mean, save_invstd), results))


def scaled_mm(
    self,
    mat2,
    scale_a,
    scale_b,
    bias=None,
    scale_result=None,
    out_dtype=None,
    use_fast_accum=False,
):
    # CPU's checks: PyTorch's meta kernel has CUDA's (sizes divisible by 16, ...).
    torch._check(self.dim() == 2 and mat2.dim() == 2, lambda: "self and mat2 must be matrices")
    torch._check(
        self.shape[1] == mat2.shape[0],
        lambda: (
            f"mat1 and mat2 shapes cannot be multiplied "
            f"({self.shape[0]}x{self.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})"
        ),
    )
    dtype = out_dtype if out_dtype is not None else self.dtype
    return torch.empty((self.shape[0], mat2.shape[1]), dtype=dtype, device=self.device)


def scaled_mm_out(*args, out, **kwargs):
    return _into(out, scaled_mm(*args, **kwargs))


def fake_quantize_cachemask(self, *args):
    # The values and the in-range mask, of self's shape (fake quantization's three ops).
    return _empty(self.shape, self), torch.empty(self.shape, dtype=torch.bool, device=self.device)


def linear_combination(input, coefficients):
    torch._check(
        coefficients.dim() == 2 and input.dim() >= 1 and coefficients.shape[1] == input.shape[0],
        lambda: "_compute_linear_combination: coefficients must be [m, n] for an input of n rows",
    )
    return _empty((coefficients.shape[0], *input.shape[1:]), input)


def linear_combination_out(input, coefficients, *, out):
    return _into(out, linear_combination(input, coefficients))


def margin_loss_backward(grad_output, self, *args, **kwargs):
    # The gradient of multi_margin_loss and multilabel_margin_loss: self's shape.
    return _empty(self.shape, self)


def margin_loss_backward_out(grad_output, self, *args, grad_input, **kwargs):
    return _into(grad_input, _empty(self.shape, self))


def sample_dirichlet(self, generator=None):
    return _empty(self.shape, self)


def binomial(count, prob, generator=None):
    shape = torch.broadcast_shapes(count.shape, prob.shape)
    return _empty(shape, count)


def glu_jvp(glu, x, dx, dim):
    return _empty(glu.shape, glu)


def glu_backward_jvp(grad_x, grad_glu, x, dgrad_glu, dx, dim):
    return _empty(grad_x.shape, grad_x)


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    channels = (input.shape[1],)
    dtype = torch.float32 if input.dtype in (torch.bfloat16, torch.float16) else input.dtype
    return tuple(torch.empty(channels, dtype=dtype, device=input.device) for _ in range(2))


def register() -> None:
    global _lib
    if _lib is not None:
        return
    from torch._decomp import meta_table

    _lib = torch.library.Library("aten", "IMPL")
    for name, fn in (
        ("_thnn_fused_lstm_cell", lstm_cell),
        ("_thnn_fused_gru_cell", gru_cell),
        ("_thnn_fused_gru_cell_backward", gru_cell_backward),
        ("_grouped_mm", grouped_mm),
        ("geqrf", geqrf),
        ("linalg_lstsq.out", lstsq_out),
        ("_cummax_helper", cumulative_extreme_helper),
        ("_cummin_helper", cumulative_extreme_helper),
        ("_fused_sgd_", fused_step),
        ("_fused_sgd_.tensor_lr", fused_step),
        ("_fused_adagrad_", fused_step),
        ("_fused_adagrad_.tensor_lr", fused_step),
        ("_fused_adam_.tensor_lr", fused_step),
        ("_fused_adamw_.tensor_lr", fused_step),
        ("histogram.bin_ct", histogram_bin_ct),
        ("histogram.bins_tensor", histogram_bins_tensor),
        ("_histogramdd_bin_edges", histogramdd_bin_edges),
        ("_histogramdd_from_bin_cts", histogramdd_from_bin_cts),
        ("_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors),
        ("fractional_max_pool3d_backward", fractional_max_pool3d_backward),
        ("multilabel_margin_loss_forward", multilabel_margin_loss_forward),
        ("_transform_bias_rescale_qkv", transform_bias_rescale_qkv),
        ("_masked_softmax", masked_softmax),
        ("_masked_softmax_backward", masked_softmax_backward),
        ("_add_relu.Scalar", add_relu_scalar),
        ("_add_relu.out", add_relu_out),
        ("_aminmax", aminmax_all),
        ("_aminmax.dim", aminmax_dim),
        ("_logcumsumexp", logcumsumexp),
        ("_logcumsumexp.out", logcumsumexp_out),
        ("adaptive_avg_pool2d.out", adaptive_avg_pool2d_out),
        ("adaptive_avg_pool3d.out", adaptive_avg_pool3d_out),
        ("adaptive_avg_pool3d_backward.grad_input", adaptive_avg_pool3d_backward_out),
        ("_native_batch_norm_legit.out", batch_norm_legit_out),
        ("_scaled_mm", scaled_mm),
        ("_scaled_mm.out", scaled_mm_out),
        ("fake_quantize_per_tensor_affine_cachemask", fake_quantize_cachemask),
        ("fake_quantize_per_channel_affine_cachemask", fake_quantize_cachemask),
        ("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", fake_quantize_cachemask),
        ("_compute_linear_combination", linear_combination),
        ("_compute_linear_combination.out", linear_combination_out),
        ("multi_margin_loss_backward", margin_loss_backward),
        ("multi_margin_loss_backward.grad_input", margin_loss_backward_out),
        ("multilabel_margin_loss_backward", margin_loss_backward),
        ("multilabel_margin_loss_backward.grad_input", margin_loss_backward_out),
        ("_sample_dirichlet", sample_dirichlet),
        ("binomial", binomial),
        ("glu_jvp", glu_jvp),
        ("glu_backward_jvp", glu_backward_jvp),
        ("batch_norm_update_stats", batch_norm_update_stats),
    ):
        # PyTorch keeps a Python meta kernel in three places: the dispatcher's Meta key
        # (eager meta tensors, our lowering table), the table FakeTensor reads, and the
        # op's Python-dispatcher kernels (both used while torch.compile traces).
        _lib.impl(name, fn, "Meta", allow_override=True)
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        if op in meta_table:
            meta_table[op] = fn
        if torch._C.DispatchKey.Meta in op.py_kernels:
            op.py_kernels[torch._C.DispatchKey.Meta] = fn
            op._dispatch_cache.clear()
