#include "distributed/coalescing.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>

namespace torch_tpu::distributed {

namespace {

using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;

// Done when every part is; result() and the Future's value are the parts' results in
// the order the collectives started.
class CoalescedWork : public Work {
 public:
  explicit CoalescedWork(std::vector<WorkPtr> parts)
      : Work(-1, c10d::OpType::COALESCED), parts_(std::move(parts)) {}

  bool isCompleted() override {
    for (auto& w : parts_)
      if (!w->isCompleted()) return false;
    return true;
  }
  bool isSuccess() const override {
    for (const auto& w : parts_)
      if (!w->isSuccess()) return false;
    return true;
  }
  std::exception_ptr exception() const override {
    for (const auto& w : parts_)
      if (auto e = w->exception()) return e;
    return nullptr;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : parts_) w->wait(timeout);  // each rethrows its own failure
    return true;
  }
  std::vector<at::Tensor> result() override {
    std::vector<at::Tensor> all;
    for (auto& w : parts_) {
      auto r = w->result();
      all.insert(all.end(), r.begin(), r.end());
    }
    return all;
  }
  // Needs every part to have a Future (host-staged send/recv have none: they complete
  // in wait()). Its value is every part's tensors, in order.
  FuturePtr getFuture() override {
    if (future_) return future_;
    std::vector<FuturePtr> parts;
    for (auto& w : parts_) parts.push_back(w->getFuture());  // raises where there is none
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    if (parts.empty()) {
      future_->markCompleted(c10::IValue(std::vector<at::Tensor>()));
      return future_;
    }
    auto left = std::make_shared<std::atomic<size_t>>(parts.size());
    FuturePtr all = future_;
    for (auto& f : parts) {
      // The parts' Futures, not their Works: a gloo Work's result() raises until the
      // Work itself is marked done, which is after its Future completes.
      f->addCallback([left, all, parts](c10::ivalue::Future& done) {
        if (done.hasError()) all->setErrorIfNeeded(done.exception_ptr());
        if (--*left > 0 || all->completed()) return;
        std::vector<at::Tensor> tensors;
        for (const auto& p : parts) {
          const c10::IValue& v = p->constValue();
          if (v.isTensorList())
            for (const auto& t : v.toTensorVector()) tensors.push_back(t);
        }
        all->markCompleted(c10::IValue(std::move(tensors)));
      });
    }
    return future_;
  }

 private:
  std::vector<WorkPtr> parts_;
  FuturePtr future_;
};

}  // namespace

WorkPtr combine_works(std::vector<WorkPtr> parts) {
  return c10::make_intrusive<CoalescedWork>(std::move(parts));
}

void Coalescing::start() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!works_, "tpu_dist: startCoalescing called twice without endCoalescing");
  works_.emplace();
}

WorkPtr Coalescing::record(WorkPtr work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (works_ && work) works_->push_back(work);
  return work;
}

WorkPtr Coalescing::end() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(works_, "tpu_dist: endCoalescing called without startCoalescing");
  auto work = c10::make_intrusive<CoalescedWork>(std::move(*works_));
  works_.reset();
  return work;
}

}  // namespace torch_tpu::distributed
