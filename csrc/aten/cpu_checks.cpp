#include "aten/cpu_checks.h"

#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/mm_meta_dispatch.h>

#include <unordered_map>

namespace torch_tpu::aten {

namespace {

// A meta tensor with `v`'s sizes, strides and dtype.
at::Tensor meta(const c10::IValue& v) {
  const at::Tensor& t = v.toTensor();
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// An empty meta tensor with an out= argument's dtype: the checks see its dtype (CPU's
// "Expected out tensor to have dtype ..."), and its resizing stays the kernel's.
at::Tensor meta_out(const c10::IValue& v) {
  return at::empty({0}, v.toTensor().options().device(c10::kMeta));
}

// The dtype checks CPU's kernels make after the meta function (with their words).
void same_dtype_mm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dtype() == b.dtype(), "expected m1 and m2 to have the same dtype, but got: ",
              a.dtype(), " != ", b.dtype());
}
void same_dtype_bmm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dtype() == b.dtype(), "expected scalar type ", a.scalar_type(), " but found ",
              b.scalar_type());
}

// CPU's matrix-product kernels have no bool instantiation (mm and addmm run addmm's).
void not_bool(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.scalar_type() != at::kBool, "\"", kernel,
                              "\" not implemented for 'Bool'");
}

// (self, mat2[, out]) and (self, mat1, mat2, beta, alpha[, out]) in schema order.
void mm(const std::vector<c10::IValue>& a) {
  at::Tensor x = meta(a[0]), y = meta(a[1]);
  at::meta::mm(x, y);
  same_dtype_mm(x, y);
  not_bool(x, "addmm_impl_cpu_");
}
void mm_out(const std::vector<c10::IValue>& a) {
  at::Tensor out = meta_out(a[2]), x = meta(a[0]), y = meta(a[1]);
  at::meta::mm_out(out, x, y);
  same_dtype_mm(x, y);
  not_bool(x, "addmm_impl_cpu_");
}
void bmm(const std::vector<c10::IValue>& a) {
  at::Tensor x = meta(a[0]), y = meta(a[1]);
  at::meta::bmm(x, y);
  same_dtype_bmm(x, y);
  not_bool(x, "bmm");
}
void bmm_out(const std::vector<c10::IValue>& a) {
  at::Tensor out = meta_out(a[2]), x = meta(a[0]), y = meta(a[1]);
  at::meta::bmm_out(out, x, y);
  same_dtype_bmm(x, y);
  not_bool(x, "bmm");
}
void addmm(const std::vector<c10::IValue>& a) {
  at::meta::addmm(meta(a[0]), meta(a[1]), meta(a[2]), a[3].toScalar(), a[4].toScalar());
  not_bool(a[1].toTensor(), "addmm_impl_cpu_");
}
void addmm_(const std::vector<c10::IValue>& a) {
  at::Tensor self = meta(a[0]);
  at::meta::addmm_(self, meta(a[1]), meta(a[2]), a[3].toScalar(), a[4].toScalar());
  not_bool(self, "addmm_impl_cpu_");
}
void addmm_out(const std::vector<c10::IValue>& a) {
  at::Tensor out = meta_out(a[5]);
  at::meta::addmm_out(out, meta(a[0]), meta(a[1]), meta(a[2]), a[3].toScalar(), a[4].toScalar());
  not_bool(a[1].toTensor(), "addmm_impl_cpu_");
}

}  // namespace

CpuCheck cpu_check(std::string_view schema_name) {
  static const std::unordered_map<std::string_view, CpuCheck> checks = {
      {"mm", mm},       {"mm.out", mm_out}, {"bmm", bmm},         {"bmm.out", bmm_out},
      {"addmm", addmm}, {"addmm_", addmm_}, {"addmm.out", addmm_out},
  };
  auto it = checks.find(schema_name);
  return it == checks.end() ? nullptr : it->second;
}

}  // namespace torch_tpu::aten
