// torch.tpu.ops.optimization_barrier in eager mode: one program passing its operands
// through stablehlo.optimization_barrier, which XLA neither fuses across nor moves work
// over. In fused mode it sits inside the recorded group, where that matters.
#include "aten/barrier_kernel.h"

#include "aten/op_call.h"

namespace torch_tpu::aten {

std::vector<at::Tensor> optimization_barrier(const std::vector<at::Tensor>& inputs) {
  if (inputs.empty()) return {};
  OpCall call("optimization_barrier");
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device().is_privateuseone(),
                "torch.tpu.ops.optimization_barrier: expected tpu tensors, got one on ",
                t.device());
    call.input(t);
  }
  return call.run([](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    std::vector<hlo::TensorType> types;
    for (const hlo::Value& v : in) types.push_back(v.type);
    return b.emit_multi("stablehlo.optimization_barrier", in, "", types);
  });
}

}  // namespace torch_tpu::aten
