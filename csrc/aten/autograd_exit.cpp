#include "aten/autograd_exit.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/node.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "aten/device.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

// The root of a drain's backward: takes a gradient on its device, runs nothing.
struct DrainRoot final : torch::autograd::Node {
  explicit DrainRoot(const at::Tensor& like) { add_input_metadata(like); }
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override { return {}; }
};

constexpr std::chrono::seconds kDrainWait{30};

}  // namespace

void drain_autograd_workers() noexcept {
  if (!runtime::Runtime::started_in_this_process()) return;
  try {
    auto drained = std::make_shared<std::promise<void>>();
    std::future<void> done = drained->get_future();
    std::thread([drained] {
      try {
        for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
          const auto options = at::TensorOptions(at::kFloat).device(c10::kPrivateUse1, d);
          const at::Tensor grad = at::empty({1}, options);
          auto root = c10::make_intrusive<DrainRoot>(grad);
          // The engine queues the root on the worker of its gradient's device.
          torch::autograd::Engine::get_default_engine().execute(
              {torch::autograd::Edge(root, 0)}, {grad}, /*keep_graph=*/false,
              /*create_graph=*/false, /*accumulate_grad=*/true);
        }
      } catch (...) {
        // The process is ending; the drain is best effort.
      }
      drained->set_value();
    }).detach();
    // A worker still in a backward that never ends (a collective whose peer is gone, in
    // a daemon thread) must not keep the process from exiting: past the wait the exit
    // goes on as it would without the drain.
    done.wait_for(kDrainWait);
  } catch (...) {
  }
}

}  // namespace torch_tpu::aten
