// An owned PJRT_Buffer: one array in device memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "pjrt/event.h"

namespace torch_tpu::pjrt {

class Buffer {
 public:
  // `borrowed`: the buffer is a view of memory the caller owns (Client::view_of_memory).
  Buffer(const Plugin* plugin, PJRT_Buffer* buffer, bool borrowed = false)
      : plugin_(plugin), buffer_(buffer), borrowed_(borrowed) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* raw() const { return buffer_; }
  // A view of memory PJRT does not own: never donate it to a program (XLA:CPU would
  // hand the memory on to the program's output, which outlives the view's on-delete).
  bool borrowed() const { return borrowed_; }
  PJRT_Buffer_Type element_type() const;
  std::vector<int64_t> dims() const;
  size_t on_device_size() const;

  // Copies the whole buffer, dense row-major, into `dst` (`size` bytes); blocks.
  void to_host(void* dst, size_t size) const;
  // The same copy, started: returns its completion event at once (the copy may first
  // wait for the buffer to be computed). `dst` and this buffer must outlive it.
  std::shared_ptr<Event> to_host_async(void* dst, size_t size) const;
  // The address of the buffer's memory (PJRT_Buffer_UnsafePointer), or null where the
  // plugin does not say. Only host memory on XLA:CPU; valid while the buffer lives.
  void* unsafe_pointer() const;
  // Blocks until the buffer's contents are computed.
  void await_ready() const;
  // Calls `callback` once they are (see Event::on_ready).
  void on_ready(std::function<void()> callback) const;

 private:
  const Plugin* plugin_;
  PJRT_Buffer* buffer_;
  bool borrowed_;
};

}  // namespace torch_tpu::pjrt
