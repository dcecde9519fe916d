#include "aten/schema_args.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_tpu::aten {

ArgKind classify(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  if (t->kind() == c10::TypeKind::TensorType) return ArgKind::Tensor;
  if (t->kind() == c10::TypeKind::NumberType) return ArgKind::Scalar;
  if (t->kind() == c10::TypeKind::GeneratorType) return ArgKind::Generator;
  if (auto list = t->cast<c10::ListType>()) {
    c10::TypePtr e = list->getElementType();
    if (auto opt = e->cast<c10::OptionalType>()) e = opt->getElementType();
    if (e->kind() == c10::TypeKind::TensorType) return ArgKind::TensorList;
    if (e->kind() == c10::TypeKind::NumberType) return ArgKind::ScalarList;
  }
  return ArgKind::Static;
}

ops::Attr to_attr(const c10::IValue& v) {
  if (v.isNone()) return std::monostate{};
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt();
  if (v.isDouble()) return v.toDouble();
  if (v.isString()) return std::string(v.toStringRef());
  if (v.isIntList()) return v.toIntVector();
  if (v.isDoubleList()) return v.toDoubleVector();
  if (v.isBoolList()) {
    std::vector<int64_t> out;
    for (bool b : v.toBoolList()) out.push_back(b);
    return out;
  }
  if (v.isDevice() || v.isGenerator()) return std::monostate{};
  TORCH_CHECK(false, "torch_tpu: unsupported argument kind ", v.tagKind());
}

const c10::FunctionSchema& schema_of(const std::string& name) {
  size_t dot = name.find('.');
  std::string base = "aten::" + name.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  auto op = c10::Dispatcher::singleton().findSchema({base, overload});
  TORCH_CHECK(op.has_value(), "torch_tpu: no ATen schema named ", name);
  return op->schema();
}

}  // namespace torch_tpu::aten
