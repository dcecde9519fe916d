// ATen kernels for elementwise ops; the math is in ops/elementwise.
#include <ATen/ExpandUtils.h>
#include <ATen/native/BinaryOps.h>
#include <torch/library.h>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "aten/out_args.h"
#include "ops/elementwise.h"

namespace torch_tpu::aten {

namespace {

using BinaryLowering =
    std::function<hlo::Value(hlo::Builder&, const std::vector<hlo::Value>&, hlo::DType)>;

// One program serves the functional form (out == nullptr) and in-place/out= forms.
at::Tensor binary(const char* name, const BinaryLowering& lower, const at::Tensor& a,
                  const at::Tensor& b, const std::optional<c10::Scalar>& alpha,
                  c10::ScalarType compute, const at::Tensor* out, int64_t mode = 0,
                  bool buckets = true) {
  std::vector<int64_t> shape = at::infer_size(a.sizes(), b.sizes());  // PyTorch's message
  OpCall call(name);
  // A functional form runs at the bound of inputs stored padded (ops/bounded.h).
  if (buckets && out == nullptr) call.buckets();
  call.input(a).input(b);
  if (alpha) call.scalar(*alpha, compute);
  call.key(static_cast<int64_t>(compute)).key(mode);
  if (call.bucketed()) {
    std::vector<int64_t> bound, probe;
    try {
      bound = at::infer_size(call.bound_sizes(a), call.bound_sizes(b));
      probe = at::infer_size(call.probe_sizes(a), call.probe_sizes(b));
    } catch (const c10::Error&) {
      // A padded size against the same size unpadded: run at the real sizes.
      return binary(name, lower, a, b, alpha, compute, out, mode, /*buckets=*/false);
    }
    call.pad_outputs({shape}, {bound}, OpCall::differ({bound}, {probe}));
  }
  Lowering lowering = [lower, compute](hlo::Builder& builder, const std::vector<hlo::Value>& in) {
    return std::vector<hlo::Value>{lower(builder, in, to_hlo(compute))};
  };
  if (out == nullptr) return call.run(lowering)[0];
  call.write(lowering, {*out});
  return *out;
}

std::vector<int64_t> result_shape(const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size(a.sizes(), b.sizes());
}

hlo::Value lower_add_in(hlo::Builder& b, const std::vector<hlo::Value>& in, hlo::DType dtype) {
  return ops::lower_add(b, in[0], in[1], in[2], dtype);
}
hlo::Value lower_sub_in(hlo::Builder& b, const std::vector<hlo::Value>& in, hlo::DType dtype) {
  return ops::lower_sub(b, in[0], in[1], in[2], dtype);
}
hlo::Value lower_mul_in(hlo::Builder& b, const std::vector<hlo::Value>& in, hlo::DType dtype) {
  return ops::lower_mul(b, in[0], in[1], dtype);
}
BinaryLowering div_lowering(ops::DivMode mode) {
  return [mode](hlo::Builder& b, const std::vector<hlo::Value>& in, hlo::DType dtype) {
    return ops::lower_div(b, in[0], in[1], dtype, mode);
  };
}

// --- add / sub ---------------------------------------------------------------

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {
  auto dtype = at::result_type(a, b);
  at::native::alpha_check(dtype, alpha);
  return binary("add", lower_add_in, a, b, alpha, dtype, nullptr);
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  auto dtype = at::result_type(self, other);
  at::native::alpha_check(dtype, alpha);
  check_inplace(self, result_shape(self, other), dtype);
  binary("add", lower_add_in, self, other, alpha, dtype, &self);
  return self;
}
at::Tensor& add_out(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                    at::Tensor& out) {
  auto dtype = at::result_type(a, b);
  at::native::alpha_check(dtype, alpha);
  prepare_out(out, result_shape(a, b), dtype);
  binary("add", lower_add_in, a, b, alpha, dtype, &out);
  return out;
}

at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {
  at::native::sub_check(a, b);
  auto dtype = at::result_type(a, b);
  at::native::alpha_check(dtype, alpha);
  return binary("sub", lower_sub_in, a, b, alpha, dtype, nullptr);
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  at::native::sub_check(self, other);
  auto dtype = at::result_type(self, other);
  at::native::alpha_check(dtype, alpha);
  check_inplace(self, result_shape(self, other), dtype);
  binary("sub", lower_sub_in, self, other, alpha, dtype, &self);
  return self;
}
at::Tensor& sub_out(const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                    at::Tensor& out) {
  at::native::sub_check(a, b);
  auto dtype = at::result_type(a, b);
  at::native::alpha_check(dtype, alpha);
  prepare_out(out, result_shape(a, b), dtype);
  binary("sub", lower_sub_in, a, b, alpha, dtype, &out);
  return out;
}

// --- mul ---------------------------------------------------------------------

at::Tensor mul(const at::Tensor& a, const at::Tensor& b) {
  return binary("mul", lower_mul_in, a, b, std::nullopt, at::result_type(a, b), nullptr);
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  auto dtype = at::result_type(self, other);
  check_inplace(self, result_shape(self, other), dtype);
  binary("mul", lower_mul_in, self, other, std::nullopt, dtype, &self);
  return self;
}
at::Tensor& mul_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  auto dtype = at::result_type(a, b);
  prepare_out(out, result_shape(a, b), dtype);
  binary("mul", lower_mul_in, a, b, std::nullopt, dtype, &out);
  return out;
}

// --- div ---------------------------------------------------------------------

ops::DivMode div_mode(std::optional<c10::string_view> mode) {
  if (!mode) return ops::DivMode::True;
  if (*mode == "trunc") return ops::DivMode::Trunc;
  if (*mode == "floor") return ops::DivMode::Floor;
  TORCH_CHECK(false,
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
}

c10::ScalarType div_dtype(const at::Tensor& a, const at::Tensor& b, ops::DivMode mode) {
  auto dtype = at::result_type(a, b);
  TORCH_CHECK_NOT_IMPLEMENTED(mode == ops::DivMode::True || !c10::isComplexType(dtype), "\"div_",
                              mode == ops::DivMode::Floor ? "floor" : "trunc",
                              "\" not implemented for '", c10::toString(dtype), "'");
  // True division of integers gives the default float dtype.
  if (mode == ops::DivMode::True && c10::isIntegralType(dtype, /*includeBool=*/true))
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  return dtype;
}

at::Tensor div_mode_fn(const at::Tensor& a, const at::Tensor& b,
                       std::optional<c10::string_view> rounding) {
  auto mode = div_mode(rounding);
  return binary("div", div_lowering(mode), a, b, std::nullopt, div_dtype(a, b, mode), nullptr,
                static_cast<int64_t>(mode));
}
at::Tensor div(const at::Tensor& a, const at::Tensor& b) { return div_mode_fn(a, b, std::nullopt); }
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other,
                      std::optional<c10::string_view> rounding) {
  auto mode = div_mode(rounding);
  auto dtype = div_dtype(self, other, mode);
  check_inplace(self, result_shape(self, other), dtype);
  binary("div", div_lowering(mode), self, other, std::nullopt, dtype, &self,
         static_cast<int64_t>(mode));
  return self;
}
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return div_mode_(self, other, std::nullopt);
}
at::Tensor& div_mode_out(const at::Tensor& a, const at::Tensor& b,
                         std::optional<c10::string_view> rounding, at::Tensor& out) {
  auto mode = div_mode(rounding);
  auto dtype = div_dtype(a, b, mode);
  prepare_out(out, result_shape(a, b), dtype);
  binary("div", div_lowering(mode), a, b, std::nullopt, dtype, &out, static_cast<int64_t>(mode));
  return out;
}
at::Tensor& div_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return div_mode_out(a, b, std::nullopt, out);
}

// --- relu --------------------------------------------------------------------

Lowering relu_lowering() {
  return [](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    return std::vector<hlo::Value>{ops::lower_relu(b, in[0])};
  };
}

void check_relu(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "clamp is not supported for complex types");
}

at::Tensor relu(const at::Tensor& self) {
  check_relu(self);
  return OpCall("relu").input(self).run(relu_lowering())[0];
}
at::Tensor& relu_(at::Tensor& self) {
  check_relu(self);
  OpCall("relu").input(self).write(relu_lowering(), {self});
  return self;
}

at::Tensor threshold_backward_impl(const at::Tensor& grad, const at::Tensor& self,
                                   const c10::Scalar& threshold, const at::Tensor* out) {
  auto dtype = at::result_type(grad, self);
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(dtype), "\"threshold\" not implemented for '",
                              c10::toString(dtype), "'");
  auto shape = at::infer_size(grad.sizes(), self.sizes());
  OpCall call("threshold_backward");
  call.input(grad).input(self).scalar(threshold, dtype).key(static_cast<int64_t>(dtype));
  Lowering lower = [dtype](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    return std::vector<hlo::Value>{
        ops::lower_threshold_backward(b, in[0], in[1], in[2], to_hlo(dtype))};
  };
  if (out == nullptr) return call.run(lower)[0];
  prepare_out(*out, shape, dtype);
  call.write(lower, {*out});
  return *out;
}

at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self,
                              const c10::Scalar& threshold) {
  return threshold_backward_impl(grad, self, threshold, nullptr);
}
at::Tensor& threshold_backward_out(const at::Tensor& grad, const at::Tensor& self,
                                   const c10::Scalar& threshold, at::Tensor& out) {
  threshold_backward_impl(grad, self, threshold, &out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("add.out", add_out);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("sub.out", sub_out);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("mul.out", mul_out);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("div.out", div_out);
  m.impl("div.Tensor_mode", div_mode_fn);
  m.impl("div_.Tensor_mode", div_mode_);
  m.impl("div.out_mode", div_mode_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("threshold_backward", threshold_backward);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
}

}  // namespace torch_tpu::aten
