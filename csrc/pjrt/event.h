// An owned PJRT_Event: completion of an asynchronous transfer or execution.
#pragma once

#include <functional>

#include "pjrt/plugin.h"

namespace torch_tpu::pjrt {

class Event {
 public:
  Event(const Plugin* plugin, PJRT_Event* event) : plugin_(plugin), event_(event) {}
  Event(Event&& other) noexcept : plugin_(other.plugin_), event_(other.event_) {
    other.event_ = nullptr;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  // Blocks until the event fires; throws the plugin's error if the work failed.
  void await();
  bool is_ready() const;
  // Calls `callback` once the event fires (at once, on this thread, if it already has),
  // on whichever thread the plugin completes it; the work's error, if any, is dropped:
  // await() reports it.
  void on_ready(std::function<void()> callback) const;

 private:
  const Plugin* plugin_;
  PJRT_Event* event_;
};

}  // namespace torch_tpu::pjrt
