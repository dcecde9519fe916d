// The Work of both tpu_dist transports' collectives: its state is a Future, which the
// transport completes on its own (the rendezvous's last rank, a gloo worker), so c10d's
// callers that chain on it (DDP's comm hook, `get_future().then`) need nobody to call
// wait(). (Host-staged collectives whose gloo work has no Future complete in wait().)
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <utility>
#include <vector>

namespace torch_tpu::distributed {

// Keeps the version counters of a collective's outputs while its results are written
// into them. c10d's op bumped them when it was called (its outputs are `Tensor(a!)`), as
// on CUDA, where NCCL's later write bumps nothing; the write at completion goes through
// ATen (copy_, a buffer swap) and must not count as a second change: activation
// checkpointing caches a collective's output and refuses it if its version moved.
class SameVersions {
 public:
  template <typename Tensors>
  explicit SameVersions(const Tensors& tensors) {
    for (const at::Tensor& t : tensors)
      if (t.defined() && !t.is_inference()) kept_.emplace_back(t, t._version());
  }
  ~SameVersions() {
    for (auto& [t, version] : kept_) {
      c10::VariableVersion counter = t.unsafeGetTensorImpl()->version_counter();  // shared
      counter.set_version(version);
    }
  }
  SameVersions(const SameVersions&) = delete;
  SameVersions& operator=(const SameVersions&) = delete;

 private:
  std::vector<std::pair<at::Tensor, int64_t>> kept_;
};

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
