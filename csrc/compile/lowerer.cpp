#include "compile/lowerer.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "aten/dtype.h"
#include "aten/node_builder.h"
#include "aten/schema_args.h"
#include "compile/control_flow.h"
#include "distributed/collective_program.h"
#include "ops/registry.h"

namespace py = pybind11;

namespace torch_tpu::compile {

namespace {

using aten::ArgKind;

c10::ScalarType dtype_of(const py::handle& h) {
  TORCH_CHECK(THPDtype_Check(h.ptr()), "torch_tpu: expected a torch.dtype in the graph spec");
  return reinterpret_cast<THPDtype*>(h.ptr())->scalar_type;
}

bool is_ref(const py::handle& h) { return py::isinstance<py::tuple>(h) && py::len(h) == 1; }
int ref_id(const py::handle& h) { return h.cast<py::tuple>()[0].cast<int>(); }

std::optional<c10::Scalar> as_scalar(const py::handle& h) {
  if (py::isinstance<py::bool_>(h)) return c10::Scalar(h.cast<bool>());
  if (py::isinstance<py::int_>(h)) return c10::Scalar(h.cast<int64_t>());
  if (py::isinstance<py::float_>(h)) return c10::Scalar(h.cast<double>());
  return std::nullopt;
}

ops::Attr static_attr(const py::handle& h, const std::string& op, size_t i) {
  if (h.is_none()) return std::monostate{};
  if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
  if (py::isinstance<py::int_>(h)) return h.cast<int64_t>();
  if (py::isinstance<py::float_>(h)) return h.cast<double>();
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  if (THPDtype_Check(h.ptr())) return static_cast<int64_t>(dtype_of(h));
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    bool any_float = false;
    for (py::handle e : h) any_float |= py::isinstance<py::float_>(e);
    if (any_float) return h.cast<std::vector<double>>();
    std::vector<int64_t> ints;
    for (py::handle e : h)
      ints.push_back(py::isinstance<py::bool_>(e) ? e.cast<bool>() : e.cast<int64_t>());
    return ints;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: ", op, ": argument ", i,
                              " has an unsupported type ", std::string(py::str(h.get_type())));
}

// One schema argument of a node, as the spec gives it.
struct Arg {
  ArgKind kind = ArgKind::Static;
  std::vector<int> ids;              // tensors (-1: None)
  std::vector<c10::Scalar> scalars;  // Python numbers, in scalar or tensor positions
  bool wrapped = false;              // a number where the schema wants a tensor
  ops::Attr attr;
};

struct SchemaInfo {
  std::vector<ArgKind> kinds;
  bool writes = false;  // an in-place or out= form: compiled graphs are functional
};

const SchemaInfo& schema_info(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, SchemaInfo> infos;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = infos.find(name);
  if (it != infos.end()) return it->second;
  SchemaInfo info;
  for (const c10::Argument& a : aten::schema_of(name).arguments()) {
    info.kinds.push_back(aten::classify(a.type()));
    info.writes |= a.alias_info() && a.alias_info()->isWrite();
  }
  return infos.emplace(name, std::move(info)).first->second;
}

Arg parse_arg(const py::handle& h, ArgKind kind, const std::string& op, size_t i) {
  Arg arg;
  arg.kind = kind;
  switch (kind) {
    case ArgKind::Tensor:
      if (is_ref(h)) {
        arg.ids.push_back(ref_id(h));
      } else if (auto s = as_scalar(h)) {
        arg.scalars.push_back(*s);
        arg.wrapped = true;
      } else {
        TORCH_CHECK(h.is_none(), "torch_tpu: ", op, ": argument ", i, " is not a tensor");
      }
      break;
    case ArgKind::TensorList:
      for (py::handle e : h) arg.ids.push_back(e.is_none() ? -1 : ref_id(e));
      break;
    case ArgKind::Scalar:
      if (!h.is_none()) {
        auto s = as_scalar(h);
        TORCH_CHECK(s.has_value(), "torch_tpu: ", op, ": argument ", i, " is not a number");
        arg.scalars.push_back(*s);
      }
      break;
    case ArgKind::ScalarList:
      for (py::handle e : h) {
        auto s = as_scalar(e);
        TORCH_CHECK(s.has_value(), "torch_tpu: ", op, ": argument ", i, " is not a number list");
        arg.scalars.push_back(*s);
      }
      break;
    case ArgKind::Generator:
      TORCH_CHECK_NOT_IMPLEMENTED(h.is_none(), "torch_tpu: ", op,
                                  ": explicit generators are not supported in "
                                  "compiled graphs");
      break;
    case ArgKind::Static: arg.attr = static_attr(h, op, i); break;
  }
  return arg;
}

// A compile-time constant holding exactly what the eager kernel would pass as a runtime
// scalar: `value` converted to `dtype` by PyTorch's rules, written bit for bit.
hlo::Value scalar_constant(hlo::Builder& b, const c10::Scalar& value, c10::ScalarType dtype) {
  hlo::DType type = aten::to_hlo(dtype);
  if (hlo::is_complex(type)) {
    const c10::ScalarType part = c10::toRealValueType(dtype);
    const c10::complex<double> z = value.toComplexDouble();
    return b.complex(scalar_constant(b, z.real(), part), scalar_constant(b, z.imag(), part));
  }
  if (!hlo::is_float(type)) {
    if (dtype == c10::kBool) return b.constant_int(value.toBool() ? 1 : 0, type);
    if (dtype == c10::kUInt64) return b.constant_int(static_cast<int64_t>(value.toUInt64()), type);
    return b.constant_int(value.toLong(), type);
  }
  uint64_t bits = aten::scalar_bits(value, dtype);
  char literal[32];
  std::snprintf(literal, sizeof literal, "0x%0*llX", 2 * hlo::byte_width(type),
                static_cast<unsigned long long>(bits));
  hlo::TensorType t{type, {}};
  return b.emit("stablehlo.constant", {},
                std::string("value = dense<") + literal + "> : " + t.str(), t);
}

at::Tensor meta_of(const hlo::TensorType& type) {
  return at::empty(type.shape,
                   at::TensorOptions().dtype(aten::to_torch(type.dtype)).device(c10::kMeta));
}

}  // namespace

hlo::TensorType type_of(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  c10::ScalarType dtype = dtype_of(t[0]);
  aten::check_supported(dtype);
  return {aten::to_hlo(dtype), t[1].cast<std::vector<int64_t>>()};
}

std::vector<std::optional<hlo::TensorType>> value_types(const py::list& values) {
  std::vector<std::optional<hlo::TensorType>> types;
  for (py::handle v : values) {
    if (v.is_none())
      types.emplace_back();
    else
      types.push_back(type_of(v));
  }
  return types;
}

// A tensor constant from its raw little-endian contents. Bools are written as bytes:
// MLIR packs i1 hex data by bits.
hlo::Value tensor_constant(hlo::Builder& b, const hlo::TensorType& type, const std::string& bytes) {
  if (type.numel() == 0) return b.full(0, type);
  TORCH_CHECK(bytes.size() == static_cast<size_t>(type.numel() * hlo::byte_width(type.dtype)),
              "torch_tpu: a graph constant of type ", type.str(), " has ", bytes.size(), " bytes");
  static const char* digits = "0123456789ABCDEF";
  std::string hex = "0x";
  hex.reserve(2 + 2 * bytes.size());
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  bool pred = type.dtype == hlo::DType::Pred;
  hlo::TensorType stored{pred ? hlo::DType::U8 : type.dtype, type.shape};
  hlo::Value v =
      b.emit("stablehlo.constant", {}, "value = dense<\"" + hex + "\"> : " + stored.str(), stored);
  return pred ? b.compare(hlo::Compare::NE, v, b.full(0, stored)) : v;
}

const hlo::Value& Lowerer::value(int id, const std::string& op) const {
  TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < vals.size() && vals[id].has_value(),
              "torch_tpu: ", op, " reads a value the graph has not produced (", id, ")");
  return *vals[id];
}

void Lowerer::lower(const py::handle& node_handle) {
  auto node = node_handle.cast<py::tuple>();
  std::string name = node[0].cast<std::string>();
  py::list py_args = node[1];
  std::vector<int> outs = node[2].cast<std::vector<int>>();
  if (name == "@collective") {
    // (input, kind, reduce op or None, group size, group name, devices): graph.h.
    TORCH_CHECK(py::len(py_args) == 6 && outs.size() == 1,
                "torch_tpu: a collective node of the graph spec is malformed");
    const hlo::Value& x = value(ref_id(py_args[0]), name);
    const std::string kind = py_args[1].cast<std::string>();
    const std::string reduce = py_args[2].is_none() ? "" : py_args[2].cast<std::string>();
    try {
      vals[outs[0]] = distributed::lower_graph_collective(b, kind, reduce, py_args[3].cast<int>(),
                                                          x, types.at(outs[0]).value());
    } catch (const ops::Unsupported& e) {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: _c10d_functional::", kind, ": ", e.what());
    }
    return;
  }
  if (is_structured(name)) {
    std::vector<hlo::TensorType> out_types;
    for (int id : outs) out_types.push_back(types.at(id).value());
    std::vector<hlo::Value> results = lower_structured(*this, name, py_args, out_types);
    for (size_t k = 0; k < outs.size(); ++k) vals[outs[k]] = results.at(k);
    return;
  }
  const ops::OpDef* def = ops::find_lowering(name);
  TORCH_CHECK_NOT_IMPLEMENTED(def != nullptr, "torch_tpu: no tpu lowering for aten::", name,
                              " in a compiled graph");
  const SchemaInfo& info = schema_info(name);
  TORCH_CHECK_NOT_IMPLEMENTED(!info.writes, "torch_tpu: compiled graphs are functional; ",
                              "the in-place op aten::", name, " is not supported");
  TORCH_CHECK(py::len(py_args) == info.kinds.size(), "torch_tpu: aten::", name, " takes ",
              info.kinds.size(), " arguments, the graph gives ", py::len(py_args));

  std::vector<Arg> args;
  aten::Promotion promotion;
  for (size_t i = 0; i < info.kinds.size(); ++i) {
    args.push_back(parse_arg(py_args[i], info.kinds[i], name, i));
    const Arg& a = args.back();
    if (!aten::promotes(*def, i)) continue;
    for (int id : a.ids)
      if (id >= 0) promotion.add(meta_of(value(id, name).type));
    for (const c10::Scalar& s : a.scalars) promotion.add(s);
  }
  c10::ScalarType scalar_type = promotion.scalar_type();

  ops::Node n{b};
  bool rounding_mode = args.size() > 2 && std::holds_alternative<std::string>(args[2].attr);
  n.compute = aten::to_hlo(aten::compute_type(*def, promotion, rounding_mode));
  std::vector<bool> unused;  // results the graph drops
  for (int id : outs) {
    unused.push_back(id < 0 || !types.at(id));
    n.outputs.push_back(unused.back() ? hlo::TensorType{hlo::DType::F32, {0}} : *types[id]);
  }
  bool draws = def->random;
  n.args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    ops::Operand& operand = n.args[i];
    operand.attr = a.attr;
    draws |= a.kind == ArgKind::Generator;
    bool single = a.kind == ArgKind::Tensor || a.kind == ArgKind::Scalar;
    std::vector<std::optional<hlo::Value>> vs;
    for (int id : a.ids)
      vs.push_back(id >= 0 ? std::optional<hlo::Value>(value(id, name)) : std::nullopt);
    for (const c10::Scalar& s : a.scalars) vs.push_back(scalar_constant(b, s, scalar_type));
    // A graph's numbers are known when it compiles: lowerings may read them as
    // attributes too (addmm skips a bias that beta == 0 multiplies).
    if (a.kind == ArgKind::Scalar && a.scalars.size() == 1) {
      const c10::Scalar& s = a.scalars[0];
      if (s.isBoolean())
        operand.attr = s.toBool();
      else if (s.isIntegral(false))
        operand.attr = s.toLong();
      else
        operand.attr = s.toDouble();
    }
    if (single) {
      if (!vs.empty()) operand.value = vs[0];
    } else {
      operand.values = std::move(vs);
    }
  }
  if (draws) {
    TORCH_CHECK_NOT_IMPLEMENTED(seed.has_value(), "torch_tpu: aten::", name,
                                " draws random "
                                "numbers inside a control-flow body, which compiled graphs do not "
                                "support yet");
    // The offsets eager mode would use for this draw: the same numbers for a seed.
    hlo::Value at_offset =
        b.binary(hlo::Binary::Add, *offset,
                 b.constant_int(static_cast<int64_t>(rng_advance), hlo::DType::S64));
    n.rng = aten::rng_state(b, *seed, at_offset);
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == ArgKind::Generator) n.args[i].value = n.rng;
    rng_advance += aten::rng_counters(n.outputs);
  }

  std::vector<std::optional<hlo::Value>> results;
  try {
    results = aten::lower_node(*def, n, name, unused);
  } catch (const ops::Unsupported& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: aten::", name, ": ", e.what());
  }
  for (size_t k = 0; k < outs.size(); ++k)
    if (results[k]) vals[outs[k]] = std::move(results[k]);
}

bool draws(const std::string& name) {
  const ops::OpDef* def = ops::find_lowering(name);
  if (def == nullptr) return false;
  bool random = def->random;
  for (ArgKind k : schema_info(name).kinds) random |= k == ArgKind::Generator;
  return random;
}

std::vector<hlo::Value> lower_subgraph(hlo::Builder& b, const py::handle& spec_handle,
                                       const std::vector<hlo::Value>& inputs) {
  auto spec = spec_handle.cast<py::tuple>();
  py::list spec_inputs = spec[0], values = spec[1], nodes = spec[2], outputs = spec[3],
           constants = spec[5];
  std::vector<std::optional<hlo::TensorType>> types = value_types(values);
  TORCH_CHECK(py::len(spec_inputs) == inputs.size(), "torch_tpu: a control-flow body takes ",
              py::len(spec_inputs), " inputs, it is given ", inputs.size());
  Lowerer lw{b, types, std::vector<std::optional<hlo::Value>>(types.size())};
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(types.at(i) == inputs[i].type, "torch_tpu: input ", i,
                " of a control-flow body "
                "is ",
                types.at(i).value().str(), ", it is given ", inputs[i].type.str());
    lw.vals[i] = inputs[i];
  }
  for (py::handle c : constants) {
    auto pair = c.cast<std::pair<int, std::string>>();
    lw.vals.at(pair.first) = tensor_constant(b, types.at(pair.first).value(), pair.second);
  }
  for (py::handle node : nodes) {
    TORCH_CHECK_NOT_IMPLEMENTED(node.cast<py::tuple>()[0].cast<std::string>() != "@collective",
                                "torch_tpu: collectives inside a control-flow body are not "
                                "supported in compiled graphs");
    lw.lower(node);
  }
  std::vector<hlo::Value> out;
  for (py::handle o : outputs)
    out.push_back(lw.value(o.cast<int>(), "a control-flow body's output"));
  return out;
}

}  // namespace torch_tpu::compile
