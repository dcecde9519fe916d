// Linear algebra that no XLA program expresses, computed on the host as PyTorch's CUDA
// backend computes it: the general eigendecomposition (LAPACK geev; CUDA runs MAGMA's on
// the CPU too) and the LDL factorization with Bunch-Kaufman pivoting (sytrf) and its
// solve. The input is read back, CPU's kernel runs, and the results go to the device; a
// synchronizing call, like any read of device data. Error texts are CPU's.
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_eigvals.h>
#include <ATen/ops/linalg_eig.h>
#include <ATen/ops/linalg_ldl_factor_ex.h>
#include <ATen/ops/linalg_ldl_solve.h>
#include <torch/library.h>

#include "aten/op_call.h"

namespace torch_tpu::aten {

namespace {

// Writes a host result into `out` (resized as an out= kernel does) on `out`'s device.
void deliver(at::Tensor& out, const at::Tensor& host) {
  at::native::resize_output(out, host.sizes());
  out.copy_(host);
}

std::tuple<at::Tensor, at::Tensor> linalg_eig(const at::Tensor& self) {
  auto [values, vectors] = at::linalg_eig(to_host(self));
  return {values.to(self.device()), vectors.to(self.device())};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_eig_out(const at::Tensor& self, at::Tensor& values,
                                                    at::Tensor& vectors) {
  auto [v, w] = at::linalg_eig(to_host(self));
  deliver(values, v), deliver(vectors, w);
  return {values, vectors};
}

at::Tensor linalg_eigvals(const at::Tensor& self) {
  return at::_linalg_eigvals(to_host(self)).to(self.device());
}

at::Tensor& linalg_eigvals_out(const at::Tensor& self, at::Tensor& out) {
  deliver(out, at::_linalg_eigvals(to_host(self)));
  return out;
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> ldl_factor_ex_out(
    const at::Tensor& self, bool hermitian, bool check_errors, at::Tensor& LD,
    at::Tensor& pivots, at::Tensor& info) {
  auto [ld, piv, inf] = at::linalg_ldl_factor_ex(to_host(self), hermitian, check_errors);
  deliver(LD, ld), deliver(pivots, piv), deliver(info, inf);
  return {LD, pivots, info};
}

at::Tensor& ldl_solve_out(const at::Tensor& LD, const at::Tensor& pivots, const at::Tensor& B,
                          bool hermitian, at::Tensor& out) {
  deliver(out, at::linalg_ldl_solve(to_host(LD), to_host(pivots), to_host(B), hermitian));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eig", linalg_eig);
  m.impl("linalg_eig.out", linalg_eig_out);
  m.impl("_linalg_eigvals", linalg_eigvals);
  m.impl("linalg_eigvals.out", linalg_eigvals_out);
  m.impl("linalg_ldl_factor_ex.out", ldl_factor_ex_out);
  m.impl("linalg_ldl_solve.out", ldl_solve_out);
}

}  // namespace torch_tpu::aten
