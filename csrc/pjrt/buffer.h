// An owned PJRT_Buffer: one array in device memory.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pjrt/event.h"

namespace torch_tpu::pjrt {

class Buffer {
 public:
  Buffer(const Plugin* plugin, PJRT_Buffer* buffer) : plugin_(plugin), buffer_(buffer) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* raw() const { return buffer_; }
  PJRT_Buffer_Type element_type() const;
  std::vector<int64_t> dims() const;
  size_t on_device_size() const;

  // Copies the whole buffer, dense row-major, into `dst` (`size` bytes); blocks.
  void to_host(void* dst, size_t size) const;
  // Blocks until the buffer's contents are computed.
  void await_ready() const;
  // Calls `callback` once they are (see Event::on_ready).
  void on_ready(std::function<void()> callback) const;

 private:
  const Plugin* plugin_;
  PJRT_Buffer* buffer_;
};

}  // namespace torch_tpu::pjrt
