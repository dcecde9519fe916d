// Ops that PyTorch implements per backend but which are plain compositions of lowered
// ops on `tpu`: the host-side answer of torch.equal; nn.MultiheadAttention's and
// nn.TransformerEncoderLayer's inference fast paths, whose ATen kernels (CPU's and CUDA's
// are one device-generic function each) call ops that are lowered here
// (_transform_bias_rescale_qkv, _masked_softmax, linear, layer_norm, ...); is_set_to, which
// compares storages and metadata only; _compute_linear_combination.out, which adds the
// lowered functional form's result to `out` (CPU's kernel accumulates into it).
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/ops/_compute_linear_combination.h>
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/is_set_to_native.h>
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

// torch.equal: same sizes and equal elements (after type promotion, as on CPU; NaN is
// never equal). One program compares and reduces; its bool is read back.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Cannot compare two tensors on different devices. Got: ", self.device(), " and ",
              other.device());
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

at::Tensor& linear_combination_out(const at::Tensor& input, const at::Tensor& coefficients,
                                   at::Tensor& out) {
  return out.add_(at::_compute_linear_combination(input, coefficients));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", equal);
  m.impl("_compute_linear_combination.out", linear_combination_out);
  m.impl("is_set_to", at::native::is_set_to);
  m.impl("_native_multi_head_attention", at::native::native_multi_head_attention_cpu);
  m.impl("_transformer_encoder_layer_fwd", at::native::transformer_encoder_layer_forward);
}

}  // namespace torch_tpu::aten
