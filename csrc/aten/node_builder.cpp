#include "aten/node_builder.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>

#include <mutex>

namespace torch_tpu::aten {

void Promotion::add(const at::Tensor& tensor) {
  if (c10::isFloat8Type(tensor.scalar_type())) return;
  state_ = at::native::update_result_type_state(tensor, state_);
}

void Promotion::add(const c10::Scalar& scalar) {
  state_ = at::native::update_result_type_state(scalar, state_);
}

c10::ScalarType Promotion::compute() const {
  c10::ScalarType type = at::native::result_type(state_);
  return type == c10::ScalarType::Undefined ? at::kFloat : type;
}

c10::ScalarType Promotion::scalar_type() const {
  c10::ScalarType type = compute();
  return type == at::kBFloat16 || type == at::kHalf ? at::kFloat : type;
}

c10::ScalarType compute_type(const ops::OpDef& def, const Promotion& promotion,
                             bool rounding_mode) {
  c10::ScalarType type = promotion.compute();
  if (def.promote == ops::Promote::TrueDivide && !rounding_mode &&
      c10::isIntegralType(type, /*includeBool=*/true))
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  return type;
}

uint64_t rng_counters(const std::vector<hlo::TensorType>& outputs) {
  uint64_t numel = 0;
  for (const hlo::TensorType& type : outputs) numel += static_cast<uint64_t>(type.numel());
  return (numel + 3) / 4 * 4;
}

RngDraw take_counters(at::Generator gen, uint64_t counters) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  RngDraw draw{gen.current_seed(), gen.get_offset()};
  gen.set_offset(draw.offset + counters);
  return draw;
}

hlo::Value rng_state(hlo::Builder& b, const hlo::Value& seed, const hlo::Value& offset) {
  return b.bitcast_convert(b.concatenate({b.reshape(seed, {1}), b.reshape(offset, {1})}, 0),
                           {hlo::DType::U64, {2}});
}

std::vector<std::optional<hlo::Value>> lower_node(const ops::OpDef& def, ops::Node& node,
                                                  const std::string& name,
                                                  const std::vector<bool>& skip) {
  if (!ops::complex_ok(name)) {
    bool complex = false;
    for (const hlo::TensorType& t : node.outputs) complex |= hlo::is_complex(t.dtype);
    for (const ops::Operand& a : node.args) {
      if (a.value) complex |= hlo::is_complex(a.value->type.dtype);
      for (const auto& v : a.values) complex |= v && hlo::is_complex(v->type.dtype);
    }
    if (complex) throw ops::Unsupported("no tpu lowering for complex dtypes");
  }
  std::vector<hlo::Value> results = def.lower(node);
  TORCH_CHECK(results.size() == node.outputs.size(), "torch_tpu: aten::", name,
              ": the lowering gave ", results.size(), " results, the op has ", node.outputs.size());
  std::vector<std::optional<hlo::Value>> out(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (skip.at(i)) continue;
    const hlo::TensorType& want = node.outputs[i];
    TORCH_CHECK(results[i].type.shape == want.shape, "torch_tpu: aten::", name,
                ": the lowering's result ", i, " has type ", results[i].type.str(), ", expected ",
                want.str());
    out[i] = node.b.convert(results[i], want.dtype);
  }
  return out;
}

}  // namespace torch_tpu::aten
