#include "aten/autograd_exit.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <thread>

#include "aten/device.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

void drain_autograd_workers() noexcept {
  if (!runtime::Runtime::started_in_this_process()) return;
  try {
    std::thread([] {
      try {
        for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
          const auto options = at::TensorOptions(at::kFloat).device(c10::kPrivateUse1, d);
          at::Tensor leaf = at::empty({1}, options).requires_grad_(true);
          // The root is the leaf's AccumulateGrad: it stores the gradient, nothing runs.
          torch::autograd::backward({leaf}, {at::empty({1}, options)});
        }
      } catch (...) {
        // The process is ending; the drain is best effort.
      }
    }).join();
  } catch (...) {
  }
}

}  // namespace torch_tpu::aten
