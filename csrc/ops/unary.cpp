// Unary math. Float functions promote integer inputs (the meta kernel gives the result
// dtype) and compute bf16/f16 in f32, as PyTorch's CPU kernels do.
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;

Value math_input(Node& n, size_t i = 0) { return n.b.convert(n.in(i), math_dtype(n.out().dtype)); }

// op(x) on floats; `op` is any StableHLO or CHLO elementwise op name.
LowerFn float_unary(const char* op) {
  return [op](Node& n) {
    Value x = math_input(n);
    return V{n.b.emit(op, {x}, "", x.type)};
  };
}

// op(x) in the input's own dtype (neg, abs).
LowerFn same_unary(const char* op) {
  return [op](Node& n) {
    Value x = n.b.convert(n.in(0), n.out().dtype);
    return V{n.b.emit(op, {x}, "", x.type)};
  };
}

}  // namespace

TORCH_TPU_LOWERING(exp, {"exp", "exp_", "exp.out"}, float_unary("stablehlo.exponential"));
TORCH_TPU_LOWERING(log, {"log", "log_", "log.out"}, float_unary("stablehlo.log"));
TORCH_TPU_LOWERING(sqrt, {"sqrt", "sqrt_", "sqrt.out"}, float_unary("stablehlo.sqrt"));
TORCH_TPU_LOWERING(rsqrt, {"rsqrt", "rsqrt_", "rsqrt.out"}, float_unary("stablehlo.rsqrt"));
TORCH_TPU_LOWERING(sin, {"sin", "sin_", "sin.out"}, float_unary("stablehlo.sine"));
TORCH_TPU_LOWERING(cos, {"cos", "cos_", "cos.out"}, float_unary("stablehlo.cosine"));
TORCH_TPU_LOWERING(tanh, {"tanh", "tanh_", "tanh.out"}, float_unary("stablehlo.tanh"));
TORCH_TPU_LOWERING(sigmoid, {"sigmoid", "sigmoid_", "sigmoid.out"},
                   float_unary("stablehlo.logistic"));
TORCH_TPU_LOWERING(neg, {"neg", "neg_", "neg.out"}, same_unary("stablehlo.negate"));
TORCH_TPU_LOWERING(abs, {"abs", "abs_", "abs.out"}, same_unary("stablehlo.abs"));

}  // namespace torch_tpu::ops
