#include "distributed/work.h"

namespace torch_tpu::distributed {

FutureWork::FutureWork(c10d::OpType type, FuturePtr future)
    : Work(-1, type), future_(std::move(future)) {}

bool FutureWork::isCompleted() { return future_->completed(); }

bool FutureWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr FutureWork::exception() const {
  return future_->hasError() ? future_->exception_ptr() : nullptr;
}

bool FutureWork::wait(std::chrono::milliseconds) {
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

std::vector<at::Tensor> FutureWork::result() { return future_->value().toTensorVector(); }

FutureWork::FuturePtr FutureWork::getFuture() { return future_; }

FutureWork::FuturePtr FutureWork::pending() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
}

}  // namespace torch_tpu::distributed
