// native_batch_norm, the op F.batch_norm reaches, updates its running statistics in
// training although its schema does not mark them as written. The lowering table writes
// only what a schema marks, so this kernel forwards to the _native_batch_norm_legit
// variants (lowered in ops/norm.cpp), whose schemas do. In evaluation it returns empty
// saved statistics, as CPU's kernel does. _batch_norm_with_update (the training form
// F.batch_norm takes in graphs exported for training) forwards there too.
#include <ATen/ops/_native_batch_norm_legit.h>
#include <ATen/ops/_native_batch_norm_legit_no_training.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  bool stats = running_mean && running_mean->defined() && running_var && running_var->defined();
  if (!stats) return at::_native_batch_norm_legit(input, weight, bias, training, momentum, eps);
  if (!training) {
    auto result = at::_native_batch_norm_legit_no_training(input, weight, bias, *running_mean,
                                                           *running_var, momentum, eps);
    return {std::get<0>(result), at::empty({0}, std::get<1>(result).options()),
            at::empty({0}, std::get<2>(result).options())};
  }
  at::Tensor mean = *running_mean, var = *running_var;
  // Autograd saved the running statistics at their current versions, and CPU's kernel
  // updates them without a version bump: so must this one.
  int64_t mean_version = mean._version(), var_version = var._version();
  auto result =
      at::_native_batch_norm_legit(input, weight, bias, mean, var, training, momentum, eps);
  c10::VariableVersion(mean.unsafeGetTensorImpl()->version_counter()).set_version(mean_version);
  c10::VariableVersion(var.unsafeGetTensorImpl()->version_counter()).set_version(var_version);
  return result;
}

// The batch statistics, the running ones updated in place, and an empty reserve buffer
// (CPU's has none either).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    double momentum, double eps) {
  auto [out, mean, invstd] = at::_native_batch_norm_legit(input, weight, bias, running_mean,
                                                          running_var, true, momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
}

}  // namespace torch_tpu::aten
