// isin: whether each element occurs among the test elements (generate()'s end-of-sequence
// check in Hugging Face transformers). Every element is compared with every test element,
// as PyTorch's CPU kernel does for small test sets; NaN matches nothing.
#include <numeric>

#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;

// Arguments: elements, test_elements (each a tensor or a scalar), assume_unique, invert.
std::vector<Value> lower_isin(Node& n) {
  hlo::Builder& b = n.b;
  const std::vector<int64_t>& shape = n.out().shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const Value& tests = n.in(1);
  std::vector<int64_t> pairs = shape;
  pairs.push_back(tests.type.numel());
  std::vector<int64_t> element_dims(rank);
  std::iota(element_dims.begin(), element_dims.end(), 0);
  Value x = b.broadcast_in_dim(b.convert(n.in(0), n.compute), pairs, element_dims);
  Value t =
      b.broadcast_in_dim(b.reshape(b.convert(tests, n.compute), {pairs.back()}), pairs, {rank});
  Value found = reduce_extreme(b, b.compare(hlo::Compare::EQ, x, t), {rank}, /*max=*/true);
  return {n.flag(3) ? b.unary(Unary::Not, found) : found};
}

}  // namespace

TORCH_TPU_LOWERING(isin,
                   {"isin.Tensor_Tensor", "isin.Tensor_Tensor_out", "isin.Tensor_Scalar",
                    "isin.Tensor_Scalar_out", "isin.Scalar_Tensor", "isin.Scalar_Tensor_out"},
                   lower_isin);

}  // namespace torch_tpu::ops
