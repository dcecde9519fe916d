// The c10d backend class both tpu_dist transports derive from: what they answer the same
// way lives here once. c10d's single-tensor forms of all_gather_into_tensor and
// reduce_scatter_tensor are their coalesced forms with one tensor.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <vector>

namespace torch_tpu::distributed {

class Backend : public c10d::Backend {
 public:
  using c10d::Backend::Backend;

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return allgather_into_tensor_coalesced(outs, ins, opts);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> outs{output}, ins{input};
    return reduce_scatter_tensor_coalesced(outs, ins, opts);
  }
};

}  // namespace torch_tpu::distributed
