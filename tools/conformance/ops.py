"""What the sweep runs: the op families and subsets (OpInfo names, name.variant), the
dtypes, the tolerances, and the ops whose values cannot be compared with CPU's."""

# The op families of the native eager mode (issue 3 of the project) mapped to OpInfo names.
FAMILIES = {
    "unary": [
        "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
        "erf", "abs", "neg", "sign", "floor", "ceil", "round", "reciprocal",
    ],
    "binary": [
        "add", "sub", "mul", "div.no_rounding_mode", "div.trunc_rounding",
        "div.floor_rounding", "pow", "remainder", "fmod", "maximum", "minimum", "atan2",
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
        "bitwise_right_shift", "logical_and", "logical_or", "logical_xor", "logical_not",
    ],
    "comparison": ["eq", "ne", "lt", "le", "gt", "ge"],
    "ternary": ["where", "clamp", "clamp_min", "clamp_max", "lerp", "addcmul", "addcdiv"],
    "activation": [
        "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
        "nn.functional.softplus", "nn.functional.leaky_relu", "nn.functional.elu",
        "nn.functional.hardtanh", "nn.functional.mish",
    ],
    "reduction": [
        "sum", "mean", "prod", "max.reduction_no_dim", "max.reduction_with_dim",
        "min.reduction_no_dim", "min.reduction_with_dim", "argmax", "argmin", "amax",
        "amin", "var", "std", "logsumexp", "norm", "linalg.vector_norm", "cumsum",
        "cumprod", "any", "all",
    ],
    "softmax": ["softmax", "log_softmax", "_softmax_backward_data"],
    "loss": [
        "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
        "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits", "nn.functional.smooth_l1_loss",
    ],
    "matmul": [
        "mm", "bmm", "addmm", "baddbmm", "addmv", "matmul", "nn.functional.linear", "einsum",
    ],
    "conv_pool_upsample": [
        "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
        "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
        "nn.functional.conv_transpose3d", "nn.functional.max_pool1d",
        "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.avg_pool1d",
        "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
        "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool2d",
        "nn.functional.adaptive_avg_pool3d", "nn.functional.adaptive_max_pool1d",
        "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d",
        "nn.functional.interpolate.nearest", "nn.functional.interpolate.bilinear",
        "nn.functional.upsample_nearest", "nn.functional.upsample_bilinear",
    ],
    "norm": [
        "native_batch_norm", "nn.functional.batch_norm", "native_layer_norm",
        "nn.functional.layer_norm", "native_group_norm", "nn.functional.group_norm",
        "nn.functional.rms_norm",
    ],
    "indexing": [
        "nn.functional.embedding", "nn.functional.embedding_bag", "index_select", "gather",
        "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod",
        "scatter_reduce.mean", "scatter_reduce.amax", "scatter_reduce.amin", "__getitem__",
        "index_put", "masked_fill", "masked_select", "nonzero",
    ],
    "shape": [
        "cat", "stack", "split", "chunk", "narrow", "nn.functional.pad.constant",
        "nn.functional.pad.reflect", "nn.functional.pad.replicate", "repeat", "expand",
        "permute", "transpose", "flip", "roll", "tril", "triu", "unfold",
    ],
    "factory": [
        "arange", "full", "zeros", "ones", "eye", "linspace", "zeros_like", "ones_like",
        "full_like", "scalar_tensor",
    ],
    "sort": ["sort", "argsort", "topk"],
    "attention": ["nn.functional.scaled_dot_product_attention"],
    "random": [
        "rand_like", "randn", "randn_like", "randint", "randint_like", "uniform", "normal",
        "bernoulli", "multinomial", "nn.functional.dropout",
    ],
}
# The default selection, "issue set" in reports and on docs/conformance.md.
ISSUE_SET = [name for names in FAMILIES.values() for name in names]

# Pinned CI subset: ops from most families with few samples each, so the sweep is quick.
CI_SUBSET = [
    "exp", "sqrt", "sigmoid", "abs", "floor", "add", "mul", "div.no_rounding_mode",
    "maximum", "eq", "lt", "logical_not", "where", "clamp", "lerp", "nn.functional.relu",
    "nn.functional.silu", "sum", "mean", "amax", "argmax", "any", "cumsum", "softmax",
    "nn.functional.mse_loss", "mm", "bmm", "addmm", "nn.functional.linear",
    "nn.functional.layer_norm", "index_select", "gather", "masked_fill", "cat",
    "permute", "transpose", "flip", "zeros", "full", "sort",
]

# Outputs that cannot be compared with CPU: random numbers from another generator, and
# uninitialized memory. Their samples are compared by structure, shape and dtype only, as
# are samples of any op with a positive `dropout_p` keyword.
NONDETERMINISTIC = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
    "normal", "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn",
    "randn_like", "randint", "randint_like", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank", "empty", "empty_like", "empty_strided",
    "empty_permuted", "new_empty", "new_empty_strided", "resize_", "resize_as_",
}

DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "bool"]

# (rtol, atol) by output dtype: torch.testing.assert_close's defaults, except the atol of
# the half types, raised as OpInfo tests' toleranceOverride usually does: the device and
# CPU round intermediate results at different points, which shows near zero (cancellation).
# Integer and bool outputs must be equal.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "complex128": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
}


def op_key(op) -> str:
    """An OpInfo's name as the lists above spell it."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")

