// How the lowering table sees an ATen schema's arguments: which are tensors and scalars
// (values in the program) and which are static attributes (part of the program). Shared
// by the eager kernel (aten/lowered_kernel) and compiled graphs (compile/graph).
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include "ops/registry.h"

namespace torch_tpu::aten {

enum class ArgKind { Tensor, TensorList, Scalar, ScalarList, Generator, Static };

ArgKind classify(const c10::TypePtr& type);

// A static argument as the lowering sees it. Devices, layouts, memory formats and
// generators do not change the program and become None.
ops::Attr to_attr(const c10::IValue& v);

// The schema registered for a lowering-table name ("add.Tensor", "exp"); throws if none.
const c10::FunctionSchema& schema_of(const std::string& name);

}  // namespace torch_tpu::aten
