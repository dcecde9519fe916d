#include "pjrt/buffer.h"

#include <cstddef>

#include "pjrt/error.h"

namespace torch_tpu::pjrt {

Buffer::~Buffer() {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer_;
  if (PJRT_Error* error = plugin_->api()->PJRT_Buffer_Destroy(&args)) {
    try {
      plugin_->check(error, "PJRT_Buffer_Destroy");
    } catch (...) {
      // Destructors do not throw; the plugin already reported the problem.
    }
  }
}

PJRT_Buffer_Type Buffer::element_type() const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  args.buffer = buffer_;
  plugin_->check(plugin_->api()->PJRT_Buffer_ElementType(&args), "PJRT_Buffer_ElementType");
  return args.type;
}

std::vector<int64_t> Buffer::dims() const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  args.buffer = buffer_;
  plugin_->check(plugin_->api()->PJRT_Buffer_Dimensions(&args), "PJRT_Buffer_Dimensions");
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

size_t Buffer::on_device_size() const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  args.buffer = buffer_;
  plugin_->check(plugin_->api()->PJRT_Buffer_OnDeviceSizeInBytes(&args),
                 "PJRT_Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

void Buffer::to_host(void* dst, size_t size) const { to_host_async(dst, size)->await(); }

std::shared_ptr<Event> Buffer::to_host_async(void* dst, size_t size) const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = size;
  plugin_->check(plugin_->api()->PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer");
  return std::make_shared<Event>(plugin_, args.event);
}

void* Buffer::unsafe_pointer() const {
  const PJRT_Api* api = plugin_->api();
  if (api->struct_size <= offsetof(PJRT_Api, PJRT_Buffer_UnsafePointer) ||
      api->PJRT_Buffer_UnsafePointer == nullptr)
    return nullptr;
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args);
  args.buffer = buffer_;
  try {
    plugin_->check(api->PJRT_Buffer_UnsafePointer(&args), "PJRT_Buffer_UnsafePointer");
  } catch (const Error&) {
    return nullptr;  // not every plugin can say
  }
  return reinterpret_cast<void*>(args.buffer_pointer);
}

void Buffer::await_ready() const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer_;
  plugin_->check(plugin_->api()->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  Event(plugin_, args.event).await();
}

void Buffer::on_ready(std::function<void()> callback) const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer_;
  plugin_->check(plugin_->api()->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  Event(plugin_, args.event).on_ready(std::move(callback));
}

}  // namespace torch_tpu::pjrt
