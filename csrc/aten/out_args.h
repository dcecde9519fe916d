// Checks shared by in-place and out= kernels, with PyTorch's messages.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

namespace torch_tpu::aten {

inline void check_inplace(const at::Tensor& self, c10::IntArrayRef result_shape,
                          c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, self.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(result_shape == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", result_shape);
}

inline void prepare_out(const at::Tensor& out, c10::IntArrayRef result_shape,
                        c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, result_shape);
}

}  // namespace torch_tpu::aten
