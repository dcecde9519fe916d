// A program that calls StableHLO functions written elsewhere (torch.tpu.pallas.jax_op:
// a JAX function exported to StableHLO). Eager and fused mode alike: in fused mode the
// call is one more op of the recorded group.
#include "aten/stablehlo_call_kernel.h"

#include <cstdlib>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "hlo/builder.h"

namespace torch_tpu::aten {

std::vector<at::Tensor> call_stablehlo(const std::string& functions, const std::string& callee,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<ResultType>& results) {
  TORCH_CHECK(!results.empty(), "jax_op: the function returns no arrays");
  OpCall call("jax_op");
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device().is_privateuseone(), "jax_op: expected tpu tensors, got one on ",
                t.device());
    call.input(t);
  }
  std::vector<hlo::TensorType> types;
  for (const auto& [shape, dtype] : results) {
    check_supported(dtype);
    types.push_back(hlo::TensorType{to_hlo(dtype), shape});
  }
  // The key: what the functions are and which one main calls (the inputs' types are in
  // the key already; the results' follow from them).
  const std::string fp = hlo::fingerprint(functions + "\n@" + callee);
  call.key(static_cast<int64_t>(std::strtoull(fp.substr(0, 16).c_str(), nullptr, 16)));
  call.key(static_cast<int64_t>(std::strtoull(fp.substr(16).c_str(), nullptr, 16)));
  // By value: in fused mode the lowering runs when the group is flushed.
  return call.run([functions, callee, types](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    b.add_functions(functions);
    return b.emit_multi("func.call", in, "callee = @" + callee, types);
  });
}

}  // namespace torch_tpu::aten
