// The kernels every tpu tensor needs: creation, views, resize/set, copies, fill.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/host_allocator.h"
#include "aten/op_call.h"
#include "aten/storage.h"

namespace torch_tpu::aten {

namespace {

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex device_index(std::optional<c10::Device> device) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_device(index);
  return index;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  c10::ScalarType st = c10::dtype_or_default(dtype);
  check_supported(st);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_index(device)));
  return at::detail::empty_generic(size, allocator(), kTpuKeys, st, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  c10::ScalarType st = c10::dtype_or_default(dtype);
  check_supported(st);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_index(device)));
  return at::detail::empty_strided_generic(size, stride, allocator(), kTpuKeys, st);
}

void ensure_storage(const at::Tensor& self) {
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                   self.dtype().itemsize(), self.storage_offset());
  if (self.numel() > 0 && needed > self.storage().nbytes()) {
    resize_storage_bytes(self.storage(), needed);
  }
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
    if (memory_format) impl->empty_tensor_restride(*memory_format);
  } else if (memory_format) {
    impl->empty_tensor_restride(*memory_format);
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, allocate_on(self.device().index(), 0),
                       allocator(), true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

// Copies the values `src` stands for into `dst`. The stored values differ from them by
// the conjugate and negative bits (lazy conj() and _neg_view()), so where the two
// tensors' bits differ the copy conjugates or negates.
at::Tensor identity_copy(const at::Tensor& src, const at::Tensor& dst) {
  const bool conj = src.is_conj() != dst.is_conj(), neg = src.is_neg() != dst.is_neg();
  OpCall("copy")
      .key(int64_t{conj} | int64_t{neg} << 1)
      .input(src)
      .write(
          [conj, neg](hlo::Builder& b, const std::vector<hlo::Value>& in) {
            hlo::Value v = in.at(0);
            if (conj && hlo::is_complex(v.type.dtype))
              v = b.complex(b.real(v), b.unary(hlo::Unary::Negate, b.imag(v)));
            if (neg) v = b.unary(hlo::Unary::Negate, v);
            return std::vector<hlo::Value>{v};
          },
          {dst});
  return dst;
}

// The like of a value stored padded (ops/bounded.h) is stored padded too, so what fills it
// (full_like, zeros_like: masks over a growing cache) compiles once per bucket.
at::Tensor empty_like(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                      std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                      std::optional<bool> pin_memory,
                      std::optional<c10::MemoryFormat> memory_format) {
  at::Tensor out = at::native::empty_like(self, dtype, layout, device, pin_memory, memory_format);
  if (!self.device().is_privateuseone() || out.device() != self.device() || out.numel() == 0 ||
      !out.is_contiguous() || !self.is_contiguous() || self.storage_offset() != 0)
    return out;
  const auto& padding = device_buffer(self).padding;
  if (padding && self.sizes() == padding->logical && ops::bucket_rule() != 0)
    device_buffer(out).padding = padding;
  return out;
}

// A contiguous clone of a value stored padded (ops/bounded.h) is itself stored padded and
// compiled once per bucket (a reshape that cannot be a view clones: repeat_kv's GQA
// expansion over a growing cache). Anything else clones as PyTorch does.
at::Tensor clone(const at::Tensor& self, std::optional<c10::MemoryFormat> format) {
  const c10::MemoryFormat f = format.value_or(c10::MemoryFormat::Preserve);
  const bool contiguous_result = f == c10::MemoryFormat::Contiguous ||
                                 (f == c10::MemoryFormat::Preserve &&
                                  (self.is_contiguous() || !self.is_non_overlapping_and_dense()));
  if (contiguous_result && !self.is_conj() && !self.is_neg() && self.numel() > 0 &&
      device_buffer(self).padding) {
    OpCall call("clone");
    call.buckets().input(self);
    if (call.bucketed()) {
      std::vector<int64_t> bound = call.bound_sizes(self);
      call.pad_outputs({self.sizes().vec()}, {bound},
                       OpCall::differ({bound}, {call.probe_sizes(self)}));
      return call.run([](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; })[0];
    }
  }
  return at::native::clone(self, format);
}

// The host tensor of `src`'s values (its stored values with its conj/neg bits, lazily).
at::Tensor host_values(const at::Tensor& src) {
  at::Tensor host = to_host(src);
  if (src.is_conj()) host = host.conj();
  if (src.is_neg()) host = host._neg_view();
  return host;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.numel() == 0 && dst.numel() == 0) return dst;
  const bool src_tpu = self.device().is_privateuseone();
  const bool dst_tpu = dst.device().is_privateuseone();
  if (src_tpu && dst_tpu) {
    if (self.device() == dst.device()) {
      // CPU's copy_ refuses it too (its TensorIterator): `a.copy_(a.t())`.
      at::assert_no_partial_overlap(dst, self);
      return identity_copy(self, dst);
    }
    // Across devices: through the host.
    return identity_copy(
        from_host(host_values(self).resolve_conj().resolve_neg(), dst.device().index()), dst);
  }
  if (dst_tpu) {
    TORCH_CHECK(self.device().is_cpu(), "torch_tpu: cannot copy from ", self.device(), " to ",
                dst.device());
    check_supported(dst.scalar_type());
    // What dst stores: the values, conjugated or negated where dst carries those bits.
    at::Tensor host = self.to(dst.scalar_type()).expand(dst.sizes()).resolve_conj().resolve_neg();
    if (dst.is_conj()) host = host.conj_physical();
    if (dst.is_neg()) host = host.neg();
    at::Tensor staged = from_host(host, dst.device().index());
    if (dst.is_contiguous() && dst.storage_offset() == 0 && dst.numel() > 0 &&
        dst.storage().nbytes() == dst.nbytes()) {
      // The copy covers the whole storage: adopt the uploaded buffer, no program runs.
      runtime::DeviceBuffer& staged_buffer = device_buffer(staged);
      device_buffer(dst).assign(staged_buffer.buffer, staged_buffer.dtype, staged_buffer.numel);
      dst.unsafeGetTensorImpl()->bump_version();
      return dst;
    }
    return identity_copy(staged, dst);
  }
  TORCH_CHECK(dst.device().is_cpu(), "torch_tpu: cannot copy from ", self.device(), " to ",
              dst.device());
  // As on CUDA, a non-blocking copy into pinned memory returns before the data is there.
  if (non_blocking && is_pinned(dst.storage().data()) && dst.is_contiguous() &&
      dst.scalar_type() == self.scalar_type() && dst.sizes() == self.sizes() &&
      !self.is_conj() && !self.is_neg() && to_host_async_into(self, dst))
    return dst;
  dst.copy_(host_values(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (dst.device().is_privateuseone()) {
      resize_(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  return to_host(self).item();
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  OpCall("fill")
      .buckets()
      .scalar(value, self.scalar_type(), /*literal=*/true)
      .write([](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; }, {self});
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  OpCall("fill").buckets().input(value).write(
      [](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; }, {self});
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

// Lets `param.data = tpu_tensor` (and so Module.to) swap a CPU parameter's storage for a
// tpu one in place, as between CPU and CUDA; otherwise Module.to replaces parameters and
// unties shared ones. c10's own check lists only built-in backends.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.device().is_cpu() || t.device().is_privateuseone());
  };
  return dense(self) && dense(from);
}

}  // namespace

// copy_from applies the conjugate and negative bits itself. Without these fallthroughs
// the Conjugate/Negative fallbacks would materialize its source with clone(), which copies
// through _copy_from again, without end.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("clone", clone);
  m.impl("empty_like", empty_like);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
}

}  // namespace torch_tpu::aten
