// Meta kernels for the two convolution ops PyTorch leaves to out-of-tree backends. The
// lowering table learns output shapes from meta kernels, and PyTorch has none for these.
#include <ATen/native/ConvUtils.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

at::Tensor convolution_meta(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>&, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                            c10::IntArrayRef output_padding, int64_t groups) {
  std::vector<int64_t> shape =
      transposed
          ? at::native::conv_input_size(input.sizes(), weight.sizes(), padding, output_padding,
                                        stride, dilation, groups)
          : at::native::conv_output_size(input.sizes(), weight.sizes(), padding, stride, dilation);
  return at::empty(shape, input.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_meta(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, bool, c10::IntArrayRef, int64_t,
    std::array<bool, 3> output_mask) {
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options());
  if (output_mask[1]) grad_weight = at::empty(weight.sizes(), weight.options());
  if (output_mask[2]) grad_bias = at::empty({grad_output.size(1)}, grad_output.options());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("convolution_overrideable", convolution_meta);
  m.impl("convolution_backward_overrideable", convolution_backward_meta);
}

}  // namespace torch_tpu::aten
