#include "aten/call_memo.h"

#include <c10/util/Exception.h>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "runtime/metrics.h"

namespace torch_tpu::aten {

std::vector<at::Tensor> run_plan(const CallPlan& plan, c10::ArrayRef<MemoInput> inputs,
                                 int device, const char* name) {
  runtime::Runtime& rt = runtime::Runtime::get();
  runtime::metrics().cache_hits++;
  // The argument list, kept per thread between calls (its capacity, not its buffers).
  thread_local std::vector<std::shared_ptr<pjrt::Buffer>> scratch;
  struct Release {
    std::vector<std::shared_ptr<pjrt::Buffer>>& v;
    ~Release() { v.clear(); }
  } release{scratch};
  std::vector<std::shared_ptr<pjrt::Buffer>>& buffers = scratch;
  buffers.resize(plan.num_params);
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    const CallPlan::Input& in = plan.inputs[k];
    if (in.param < 0) continue;
    const MemoInput& value = inputs[k];
    buffers[in.param] =
        value.storage != nullptr
            ? value.storage->buffer
            : rt.scalar(device, in.dtype, scalar_bits(value.scalar, to_torch(in.dtype)));
    if (in.offset_param >= 0)
      buffers[in.offset_param] =
          rt.scalar(device, hlo::DType::S64, static_cast<uint64_t>(value.offset));
  }
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  try {
    results = rt.execute(*plan.program, buffers, device);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: running ", name, " failed: ", e.what());
  }
  const std::vector<hlo::TensorType>& types = plan.program->outputs;
  const size_t fresh = results.size() - plan.writes.size();
  std::vector<at::Tensor> out;
  out.reserve(fresh);
  for (size_t i = 0; i < fresh; ++i)
    out.push_back(wrap_buffer(std::move(results[i]), types[i].dtype, types[i].shape,
                              static_cast<c10::DeviceIndex>(device)));
  for (size_t i = 0; i < plan.writes.size(); ++i) {
    const CallPlan::Write& w = plan.writes[i];
    inputs[w.input].storage->assign(std::move(results[fresh + i]), w.dtype, w.numel);
  }
  return out;
}

}  // namespace torch_tpu::aten
