// ATen kernels for matrix products; the math is in ops/matmul.
#include <torch/library.h>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "aten/out_args.h"
#include "ops/matmul.h"

namespace torch_tpu::aten {

namespace {

void check_mm(const at::Tensor& a, const at::Tensor& b, int64_t rank, const char* what) {
  TORCH_CHECK(a.dim() == rank, what, ": Expected ", rank, "-D tensor for self, got ", a.dim(),
              "-D");
  TORCH_CHECK(b.dim() == rank, what, ": Expected ", rank, "-D tensor for mat2, got ", b.dim(),
              "-D");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(),
              " != ", b.scalar_type());
  TORCH_CHECK(a.size(-1) == b.size(-2), "mat1 and mat2 shapes cannot be multiplied (", a.size(-2),
              "x", a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  if (rank == 3) {
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
  }
}

std::vector<int64_t> product_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                   bool batched) {
  return batched ? std::vector<int64_t>{a[0], a[1], b[2]} : std::vector<int64_t>{a[0], b[1]};
}

at::Tensor product(const char* name, const at::Tensor& a, const at::Tensor& b, bool batched,
                   const at::Tensor* out, bool buckets = true) {
  check_mm(a, b, batched ? 3 : 2, name);
  OpCall call(name);
  // A functional form runs at the bound of inputs stored padded (ops/bounded.h).
  if (buckets && out == nullptr) call.buckets();
  call.input(a).input(b);
  if (call.bucketed()) {
    std::vector<int64_t> ba = call.bound_sizes(a), bb = call.bound_sizes(b);
    // The contraction must be padded alike on both sides, else run at the real sizes.
    if (ba.back() != bb[bb.size() - 2] || (batched && ba[0] != bb[0]))
      return product(name, a, b, batched, out, /*buckets=*/false);
    std::vector<int64_t> bound = product_shape(ba, bb, batched);
    std::vector<int64_t> probe = product_shape(call.probe_sizes(a), call.probe_sizes(b), batched);
    call.pad_outputs({product_shape(a.sizes().vec(), b.sizes().vec(), batched)}, {bound},
                     OpCall::differ({bound}, {probe}));
  }
  runtime::Emit lower = [batched](hlo::Builder& builder, const std::vector<hlo::Value>& in) {
    return std::vector<hlo::Value>{batched ? ops::lower_bmm(builder, in[0], in[1])
                                           : ops::lower_mm(builder, in[0], in[1])};
  };
  if (out == nullptr) return call.run(lower)[0];
  prepare_out(*out, product_shape(a.sizes().vec(), b.sizes().vec(), batched), a.scalar_type());
  call.write(lower, {*out});
  return *out;
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  return product("mm", a, b, false, nullptr);
}
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  product("mm", a, b, false, &out);
  return out;
}
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  return product("bmm", a, b, true, nullptr);
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  product("bmm", a, b, true, &out);
  return out;
}

at::Tensor addmm_impl(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor* out) {
  check_mm(m1, m2, 2, "addmm");
  c10::ScalarType dtype = m1.scalar_type();
  // beta == 0 ignores the bias entirely (NaN in it must not propagate).
  const bool use_bias = !(beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0);
  OpCall call("addmm");
  call.input(m1).input(m2).scalar(alpha, dtype).key(use_bias);
  if (use_bias) call.input(self).scalar(beta, dtype);
  runtime::Emit lower = [use_bias](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    hlo::TensorType result{in[0].type.dtype, {in[0].type.shape[0], in[1].type.shape[1]}};
    hlo::Value bias = use_bias ? in[3] : b.full(0, result);
    hlo::Value beta = use_bias ? in[4] : b.constant(0, result.dtype);
    return std::vector<hlo::Value>{ops::lower_addmm(b, bias, in[0], in[1], beta, in[2])};
  };
  if (out == nullptr) return call.run(lower)[0];
  call.write(lower, {*out});
  return *out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  return addmm_impl(self, m1, m2, beta, alpha, nullptr);
}
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  prepare_out(out, {m1.size(0), m2.size(1)}, m1.scalar_type());
  addmm_impl(self, m1, m2, beta, alpha, &out);
  return out;
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_inplace(self, {m1.size(0), m2.size(1)}, m1.scalar_type());
  addmm_impl(self, m1, m2, beta, alpha, &self);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("addmm_", addmm_);
}

}  // namespace torch_tpu::aten
