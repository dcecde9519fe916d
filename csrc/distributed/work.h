// The Work both tpu_dist transports return: its state is a Future, so c10d's callers that
// chain on it (DDP's comm hook, `get_future().then`) need nobody to call wait().
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <vector>

namespace torch_tpu::distributed {

class FutureWork : public c10d::Work {
 public:
  using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;
  FutureWork(c10d::OpType type, FuturePtr future);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // Waits for the Future (bounded by the transport: a watchdog or gloo's timeout) and
  // rethrows its error.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override;
  FuturePtr getFuture() override;

  // A Future for a Work's tensors, not yet completed.
  static FuturePtr pending();

 protected:
  FuturePtr future_;
};

}  // namespace torch_tpu::distributed
