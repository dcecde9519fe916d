#include "aten/storage.h"

#include <c10/util/Exception.h>

#include "aten/allocator.h"
#include "ops/bounded.h"
#include "ops/strided.h"
#include "runtime/fused_group.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  runtime::DeviceBuffer& old = device_buffer(storage);
  c10::DataPtr fresh = allocate_on(old.device, nbytes);
  auto& next = *static_cast<runtime::DeviceBuffer*>(fresh.get_context());
  runtime::FusedGroup::get().ready(old);
  runtime::Runtime& rt = runtime::Runtime::get();
  if (old.buffer && old.padding) {
    // Stored padded (ops/bounded.h): the plain values first.
    const runtime::Padding& pad = *old.padding;
    runtime::ProgramKey key;
    key.add("unpad");
    key.add(static_cast<int64_t>(old.dtype));
    key.add(pad.logical);
    key.add(pad.physical);
    auto program = rt.cache().get(key, [&] {
      hlo::Builder b;
      hlo::Value out =
          ops::unpad_flat(b, b.parameter({old.dtype, {old.numel}}), pad.logical, pad.physical);
      return runtime::Program{b.module({out}), {out.type}, "unpad"};
    });
    int64_t n = 1;
    for (int64_t s : pad.logical) n *= s;
    old.assign(rt.execute(*program, {old.buffer}, old.device).at(0), old.dtype, n);
  }
  if (old.buffer && nbytes > 0) {
    // Copy the common prefix as bytes when the new size is not a whole number of elements.
    int width = hlo::byte_width(old.dtype);
    hlo::DType dtype = nbytes % width == 0 ? old.dtype : hlo::DType::U8;
    int64_t old_n = static_cast<int64_t>(old.nbytes) / hlo::byte_width(dtype);
    int64_t new_n = static_cast<int64_t>(nbytes) / hlo::byte_width(dtype);
    runtime::ProgramKey key;
    key.add("resize_storage");
    key.add(static_cast<int64_t>(old.dtype));
    key.add(old.numel);
    key.add(static_cast<int64_t>(dtype));
    key.add(new_n);
    auto program = rt.cache().get(key, [&] {
      hlo::Builder b;
      hlo::Value in = b.parameter({old.dtype, {old.numel}});
      hlo::Value flat = ops::reinterpret_flat(b, in, dtype);
      hlo::Value out = new_n <= old_n
                           ? b.slice(flat, {0}, {new_n}, {1})
                           : b.pad(flat, b.constant(0, dtype), {0}, {new_n - old_n}, {0});
      return runtime::Program{b.module({out}), {out.type}, "resize_storage"};
    });
    next.assign(rt.execute(*program, {old.buffer}, old.device).at(0), dtype, new_n);
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

}  // namespace torch_tpu::aten
