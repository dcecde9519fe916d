// The Work of both tpu_dist transports' collectives: its state is a Future, which the
// transport completes on its own (the rendezvous's last rank, a gloo worker), so c10d's
// callers that chain on it (DDP's comm hook, `get_future().then`) need nobody to call
// wait(). (Host-staged collectives whose gloo work has no Future complete in wait().)
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
