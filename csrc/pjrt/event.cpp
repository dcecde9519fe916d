#include "pjrt/event.h"

#include <memory>

namespace torch_tpu::pjrt {

Event::~Event() {
  if (event_ == nullptr) return;
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = event_;
  if (PJRT_Error* error = plugin_->api()->PJRT_Event_Destroy(&args)) {
    try {
      plugin_->check(error, "PJRT_Event_Destroy");
    } catch (...) {
      // A destructor must not throw; a failed destroy only leaks the event.
    }
  }
}

void Event::await() {
  if (event_ == nullptr) return;
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event_;
  plugin_->check(plugin_->api()->PJRT_Event_Await(&args), "PJRT_Event_Await");
  auto err = TORCH_TPU_PJRT_ARGS(PJRT_Event_Error_Args);
  err.event = event_;
  plugin_->check(plugin_->api()->PJRT_Event_Error(&err), "asynchronous device work");
}

bool Event::is_ready() const {
  if (event_ == nullptr) return true;
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Event_IsReady_Args);
  args.event = event_;
  plugin_->check(plugin_->api()->PJRT_Event_IsReady(&args), "PJRT_Event_IsReady");
  return args.is_ready;
}

void Event::on_ready(std::function<void()> callback) const {
  if (event_ == nullptr) {
    callback();
    return;
  }
  struct Context {
    const Plugin* plugin;
    std::function<void()> callback;
  };
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Event_OnReady_Args);
  args.event = event_;
  args.user_arg = new Context{plugin_, std::move(callback)};
  args.callback = [](PJRT_Error* error, void* arg) {
    std::unique_ptr<Context> context(static_cast<Context*>(arg));
    if (error != nullptr) {
      auto destroy = TORCH_TPU_PJRT_ARGS(PJRT_Error_Destroy_Args);
      destroy.error = error;
      context->plugin->api()->PJRT_Error_Destroy(&destroy);
    }
    context->callback();
  };
  if (PJRT_Error* error = plugin_->api()->PJRT_Event_OnReady(&args)) {
    delete static_cast<Context*>(args.user_arg);
    plugin_->check(error, "PJRT_Event_OnReady");
  }
}

}  // namespace torch_tpu::pjrt
