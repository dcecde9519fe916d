// native_batch_norm, the op F.batch_norm reaches, updates its running statistics in
// training although its schema does not mark them as written. The lowering table writes
// only what a schema marks, so this kernel forwards to the _native_batch_norm_legit
// variants (lowered in ops/norm.cpp), whose schemas do. In evaluation it returns empty
// saved statistics, as CPU's kernel does. _batch_norm_with_update (the training form
// F.batch_norm takes in graphs exported for training) forwards there too, and so do the
// out= forms (the table's line for an out= form would return the running statistics
// first, and the saved ones are sized by the functional form's results), batch_norm_backward (to native_batch_norm_backward, as CPU's does) and
// batch_norm_update_stats (the running statistics of SyncBatchNorm's single-process path,
// written in place, also unmarked).
#include <ATen/native/Resize.h>
#include <ATen/ops/_native_batch_norm_legit.h>
#include <ATen/ops/_native_batch_norm_legit_no_training.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/var_mean.h>
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

void write(at::Tensor& out, const at::Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> native_batch_norm_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
    at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
  auto [y, mean, invstd] = torch_tpu::aten::native_batch_norm(
      input, weight, bias, running_mean, running_var, training, momentum, eps);
  write(out, y), write(save_mean, mean), write(save_invstd, invstd);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps, at::Tensor& out, at::Tensor& save_mean,
    at::Tensor& save_invstd) {
  auto [y, mean, invstd] = at::_native_batch_norm_legit(input, weight, bias, running_mean,
                                                        running_var, training, momentum, eps);
  write(out, y), write(save_mean, mean), write(save_invstd, invstd);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_with_update_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    double momentum, double eps, at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd,
    at::Tensor& reserve) {
  auto [y, mean, invstd, r] =
      batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps);
  write(out, y), write(save_mean, mean), write(save_invstd, invstd), write(reserve, r);
  return {out, save_mean, save_invstd, reserve};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var,
    bool update, double eps, std::array<bool, 3> output_mask, const at::Tensor& reserve) {
  return at::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,
                                        save_mean, save_var, update, eps, output_mask);
}

// The batch's mean and (biased) variance per channel; the running statistics, when given,
// move towards them (the variance unbiased), in place and without a version bump (CPU).
std::tuple<at::Tensor, at::Tensor> batch_norm_update_stats(
    const at::Tensor& input, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, double momentum) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  auto [var, mean] = at::var_mean(input, dims, /*correction=*/0);
  int64_t count = input.numel() / std::max<int64_t>(input.size(1), 1);
  auto update = [&](const std::optional<at::Tensor>& running, const at::Tensor& batch,
                    double scale) {
    if (!running || !running->defined()) return;
    at::Tensor r = *running;
    int64_t version = r._version();
    r.mul_(1 - momentum).add_(batch.to(r.scalar_type()), momentum * scale);
    c10::VariableVersion(r.unsafeGetTensorImpl()->version_counter()).set_version(version);
  };
  update(running_mean, mean, 1.0);
  update(running_var, var, count > 1 ? double(count) / double(count - 1) : 1.0);
  return {mean, var};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm.out", native_batch_norm_out);
  m.impl("_native_batch_norm_legit.out", batch_norm_legit_out);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("_batch_norm_with_update.out", batch_norm_with_update_out);
  m.impl("batch_norm_backward", batch_norm_backward);
  m.impl("batch_norm_update_stats", batch_norm_update_stats);
}

}  // namespace torch_tpu::aten
