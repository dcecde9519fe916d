// Ops that PyTorch implements per backend but which are plain compositions of lowered
// ops on `tpu`: the host-side answer of torch.equal.
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("equal", equal); }

}  // namespace torch_tpu::aten
