#include "compile/graph.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/node_builder.h"
#include "aten/op_call.h"
#include "aten/precision.h"
#include "aten/schema_args.h"
#include "hlo/builder.h"
#include "ops/bounded.h"
#include "ops/registry.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::compile {

namespace {

using aten::ArgKind;

c10::ScalarType dtype_of(const py::handle& h) {
  TORCH_CHECK(THPDtype_Check(h.ptr()), "torch_tpu: expected a torch.dtype in the graph spec");
  return reinterpret_cast<THPDtype*>(h.ptr())->scalar_type;
}

hlo::TensorType type_of(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  c10::ScalarType dtype = dtype_of(t[0]);
  aten::check_supported(dtype);
  return {aten::to_hlo(dtype), t[1].cast<std::vector<int64_t>>()};
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
    for (py::handle e : h) ints.push_back(py::isinstance<py::bool_>(e) ? e.cast<bool>() : e.cast<int64_t>());
    return ints;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu: ", op, ": argument ", i, " has an unsupported type ",
              std::string(py::str(h.get_type())));
}

// One schema argument of a node, as the spec gives it.
struct Arg {
  ArgKind kind = ArgKind::Static;
  std::vector<int> ids;                      // tensors (-1: None)
  std::vector<c10::Scalar> scalars;          // Python numbers, in scalar or tensor positions
  bool wrapped = false;                      // a number where the schema wants a tensor
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
      TORCH_CHECK_NOT_IMPLEMENTED(h.is_none(), "torch_tpu: ", op, ": explicit generators are not supported in "
                  "compiled graphs");
      break;
    case ArgKind::Static:
      arg.attr = static_attr(h, op, i);
      break;
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
  return b.emit("stablehlo.constant", {}, std::string("value = dense<") + literal + "> : " + t.str(),
                t);
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
  hlo::Value v = b.emit("stablehlo.constant", {}, "value = dense<\"" + hex + "\"> : " + stored.str(),
                        stored);
  return pred ? b.compare(hlo::Compare::NE, v, b.full(0, stored)) : v;
}

at::Tensor meta_of(const hlo::TensorType& type) {
  return at::empty(type.shape, at::TensorOptions().dtype(aten::to_torch(type.dtype)).device(c10::kMeta));
}

// A write-back that replaces the whole storage: the storage adopts the result buffer.
bool whole_write(const at::Tensor& t, const runtime::DeviceBuffer& db, const hlo::TensorType& type) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         db.nbytes == static_cast<size_t>(type.numel() * hlo::byte_width(type.dtype));
}

bool is_dense(const at::Tensor& t, const runtime::DeviceBuffer& db, hlo::DType dtype) {
  return db.buffer && !db.padding && db.dtype == dtype && t.is_contiguous() && t.storage_offset() == 0 &&
         db.numel == t.numel();
}

// Lowers the graph's nodes one by one into a builder, keeping every value it made.
struct Lowerer {
  hlo::Builder& b;
  const std::vector<std::optional<hlo::TensorType>>& types;  // of each value id
  std::vector<std::optional<hlo::Value>> vals;                // each value id's value
  // The generator's (seed, offset) as runtime scalars, when some node draws, and how far
  // the nodes lowered so far have advanced the offset.
  std::optional<hlo::Value> seed, offset;
  uint64_t rng_advance = 0;

  const hlo::Value& value(int id, const std::string& op) const {
    TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < vals.size() && vals[id].has_value(),
                "torch_tpu: ", op, " reads a value the graph has not produced (", id, ")");
    return *vals[id];
  }

  void lower(const py::handle& node_handle) {
    auto node = node_handle.cast<py::tuple>();
    std::string name = node[0].cast<std::string>();
    py::list py_args = node[1];
    std::vector<int> outs = node[2].cast<std::vector<int>>();
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
      for (int id : a.ids)
        if (id >= 0) promotion.add(meta_of(value(id, name).type));
      for (const c10::Scalar& s : a.scalars) promotion.add(s);
    }
    c10::ScalarType scalar_type = promotion.scalar_type();

    ops::Node n{b};
    n.compute = aten::to_hlo(promotion.compute());
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
      for (int id : a.ids) vs.push_back(id >= 0 ? std::optional<hlo::Value>(value(id, name)) : std::nullopt);
      for (const c10::Scalar& s : a.scalars) vs.push_back(scalar_constant(b, s, scalar_type));
      // A graph's numbers are known when it compiles: lowerings may read them as
      // attributes too (addmm skips a bias that beta == 0 multiplies).
      if (a.kind == ArgKind::Scalar && a.scalars.size() == 1) {
        const c10::Scalar& s = a.scalars[0];
        if (s.isBoolean()) operand.attr = s.toBool();
        else if (s.isIntegral(false)) operand.attr = s.toLong();
        else operand.attr = s.toDouble();
      }
      if (single) {
        if (!vs.empty()) operand.value = vs[0];
      } else {
        operand.values = std::move(vs);
      }
    }
    if (draws) {
      // The offsets eager mode would use for this draw: the same numbers for a seed.
      hlo::Value at_offset = b.binary(
          "add", *offset, b.constant_int(static_cast<int64_t>(rng_advance), hlo::DType::S64));
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
};

}  // namespace

Graph::Graph(const py::handle& spec_handle)
    : precision_(aten::matmul_precision()), spec_(py::reinterpret_borrow<py::object>(spec_handle)) {
  auto start = std::chrono::steady_clock::now();
  auto spec = spec_handle.cast<py::tuple>();
  py::list inputs = spec[0], values = spec[1], nodes = spec[2], outputs = spec[3],
           mutations = spec[4], constants = spec[5];

  std::vector<std::optional<hlo::TensorType>> types;
  for (py::handle v : values) {
    if (v.is_none()) types.emplace_back();
    else types.push_back(type_of(v));
  }

  hlo::Builder b;
  b.set_matmul_precision(precision_);
  Lowerer lw{b, types, std::vector<std::optional<hlo::Value>>(types.size())};
  std::vector<std::optional<hlo::Value>> params;  // per input: its program argument
  for (py::handle in : inputs) {
    hlo::TensorType type = type_of(in);
    inputs_.push_back(type);
    bool param = type.numel() > 0;
    input_is_param_.push_back(param);
    if (param) params.push_back(b.parameter({type.dtype, {type.numel()}}));
    else params.emplace_back();
    lw.vals[inputs_.size() - 1] = param ? b.reshape(*params.back(), type.shape) : b.full(0, type);
  }
  // Bounded dynamic dimensions: a runtime s32 size each, right after the inputs.
  std::vector<hlo::Value> sizes;
  if (spec.size() > 6) {
    for (py::handle d : spec[6].cast<py::list>()) {
      auto [input, dim] = d.cast<std::pair<int, int>>();
      TORCH_CHECK(input >= 0 && static_cast<size_t>(input) < inputs_.size() &&
                      input_is_param_[input] && dim >= 0 && dim < inputs_[input].rank(),
                  "torch_tpu: the graph spec marks dimension ", dim, " of input ", input,
                  " dynamic, which it does not have");
      hlo::Value size = b.parameter({hlo::DType::S32, {}});
      sizes.push_back(size);
      const hlo::Value& x = *lw.vals[input];
      lw.vals[input] = ops::set_dimension_size(b, x, size, dim);
      dynamic_.emplace_back(input, dim);
    }
  }
  for (py::handle c : constants) {
    auto pair = c.cast<std::pair<int, std::string>>();
    lw.vals.at(pair.first) = tensor_constant(b, types.at(pair.first).value(), pair.second);
  }
  // The generator's (seed, offset) enter as two runtime scalars when any node draws.
  for (py::handle node : nodes) {
    std::string name = node.cast<py::tuple>()[0].cast<std::string>();
    const ops::OpDef* def = ops::find_lowering(name);
    if (def == nullptr) continue;  // lower() reports it
    random_ |= def->random;
    for (ArgKind k : schema_info(name).kinds) random_ |= k == ArgKind::Generator;
  }
  if (random_) {
    lw.seed = b.parameter({hlo::DType::S64, {}});
    lw.offset = b.parameter({hlo::DType::S64, {}});
  }
  // Values created with a dynamic size (a full or arange of n): marked after their node
  // with the real size, as the inputs are. value id -> [(dim, index into sizes)].
  std::map<int, std::vector<std::pair<int, int>>> marks;
  if (spec.size() > 8)
    for (py::handle m : spec[8].cast<py::list>()) {
      auto [id, dim, k] = m.cast<std::tuple<int, int, int>>();
      TORCH_CHECK(k >= 0 && static_cast<size_t>(k) < sizes.size(), "torch_tpu: the graph spec "
                  "marks value ", id, " with dynamic size ", k, " of ", sizes.size());
      marks[id].emplace_back(dim, k);
    }
  for (py::handle node : nodes) {
    lw.lower(node);
    ++num_nodes_;
    if (marks.empty()) continue;
    for (py::handle out : node.cast<py::tuple>()[2].cast<py::list>()) {
      auto it = marks.find(out.cast<int>());
      if (it == marks.end()) continue;
      for (const auto& [dim, k] : it->second) {
        const hlo::Value& x = *lw.vals.at(it->first);
        lw.vals[it->first] = ops::set_dimension_size(b, x, sizes.at(k), dim);
      }
    }
  }
  rng_advance_ = lw.rng_advance;

  // Outputs with dynamic dimensions leave the program as plain buffers of the bound.
  std::map<int, std::vector<int>> dynamic_outputs;
  if (spec.size() > 7)
    for (py::handle o : spec[7].cast<py::list>()) {
      auto [index, dims] = o.cast<std::pair<int, std::vector<int>>>();
      dynamic_outputs[index] = dims;
    }
  std::vector<hlo::Value> program_outputs;
  for (py::handle o : outputs) {
    int id = o.cast<int>();
    Output out;
    if (id >= 0 && static_cast<size_t>(id) < inputs_.size()) {
      out.input = id;
    } else if (id >= 0) {
      hlo::Value v = lw.value(id, "the graph output");
      auto dims = dynamic_outputs.find(static_cast<int>(outputs_.size()));
      if (dims != dynamic_outputs.end())
        for (int d : dims->second) v = ops::static_along(b, v, d, v.type.shape.at(d));
      out.result = static_cast<int>(program_outputs.size());
      results_.push_back(v.type);
      program_outputs.push_back(b.reshape(v, {v.type.numel()}));
    }
    outputs_.push_back(out);
  }
  for (py::handle m : mutations) {
    auto pair = m.cast<std::pair<int, int>>();
    const hlo::Value& v = lw.value(pair.second, "an input write-back");
    TORCH_CHECK(v.type == inputs_.at(pair.first), "torch_tpu: the graph writes a ", v.type.str(),
                " into input ", pair.first, " of type ", inputs_[pair.first].str());
    mutations_.emplace_back(pair.first, static_cast<int>(program_outputs.size()));
    // The input's old contents die with the write-back: donated, unless a run vetoes it.
    if (params.at(pair.first) && runtime::Runtime::donation_enabled())
      b.alias_output(*params[pair.first], static_cast<int>(program_outputs.size()));
    results_.push_back(v.type);
    program_outputs.push_back(b.reshape(v, {v.type.numel()}));
  }

  std::string mlir = b.module(program_outputs);
  std::vector<std::pair<int, int64_t>> donations = b.donations();
  std::string fp = hlo::fingerprint(mlir);
  runtime::ProgramKey key;
  key.add("graph");
  key.add(fp.c_str());
  key.add(static_cast<int64_t>(mlir.size()));
  runtime::Runtime& rt = runtime::Runtime::get();
  try {
    // Other Python threads run while XLA compiles (async_compile compiles several graphs
    // at once); nothing below touches Python.
    py::gil_scoped_release no_gil;
    program_ = rt.cache().get(key, [&] {
      return runtime::Program{mlir, results_,
                              "graph (" + std::to_string(num_nodes_) + " ops" +
                                  (dynamic_.empty() ? ")" : ", bucketed)"),
                              donations, inputs_};
    });
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: compiling a graph of ", num_nodes_, " ops failed: ", e.what());
  }
  runtime::metrics().graphs++;
  runtime::metrics().graph_build_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count();
}

namespace {

// The tpu device the inputs are on (they must agree), else the current one.
c10::DeviceIndex device_of(const std::vector<at::Tensor>& inputs) {
  c10::DeviceIndex device = -1;
  for (const at::Tensor& t : inputs)
    if (t.defined() && t.device().is_privateuseone()) {
      TORCH_CHECK(device < 0 || device == t.device().index(),
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, tpu:", static_cast<int>(device), " and ", t.device(), "!");
      device = t.device().index();
    }
  return device < 0 ? aten::current_device() : device;
}

}  // namespace

std::vector<std::shared_ptr<pjrt::Buffer>> Graph::arguments(const std::vector<at::Tensor>& inputs,
                                                            const std::vector<int64_t>& sizes,
                                                            c10::DeviceIndex device) const {
  std::vector<std::shared_ptr<pjrt::Buffer>> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    const hlo::TensorType& want = inputs_[i];
    TORCH_CHECK(t.defined(), "torch_tpu: input ", i, " of the compiled graph is None");
    TORCH_CHECK(aten::to_hlo(t.scalar_type()) == want.dtype && t.sizes().equals(want.shape),
                "torch_tpu: input ", i, " of the compiled graph is ", t.scalar_type(), t.sizes(),
                ", it was compiled for ", want.str());
    if (!input_is_param_[i]) continue;
    if (!t.device().is_privateuseone()) {
      // A CPU tensor the graph moves to the device itself (`cpu_tensor.to("tpu")`).
      TORCH_CHECK(t.device().is_cpu(), "torch_tpu: input ", i, " of the compiled graph is on ",
                  t.device());
      args.push_back(aten::device_buffer(aten::from_host(t, device)).buffer);
      continue;
    }
    runtime::DeviceBuffer& db = aten::device_buffer(t);
    if (is_dense(t, db, want.dtype)) {
      args.push_back(db.buffer);
    } else {
      at::Tensor dense = aten::OpCall("graph_input").input(t).run(
          [](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; })[0];
      args.push_back(runtime::FusedGroup::get().ready(aten::device_buffer(dense)));
    }
  }
  for (int64_t n : sizes)
    args.push_back(runtime::Runtime::get().scalar(device, hlo::DType::S32,
                                                  static_cast<uint64_t>(static_cast<uint32_t>(n))));
  if (random_) {
    runtime::Runtime& rt = runtime::Runtime::get();
    aten::RngDraw draw = aten::take_counters(aten::default_generator(device), rng_advance_);
    args.push_back(rt.scalar(device, hlo::DType::S64, draw.seed));
    args.push_back(rt.scalar(device, hlo::DType::S64, draw.offset));
  }
  return args;
}

// A mutated input's buffer is donated only when nothing can read it after the run: the
// arguments hold it once, and its storage (if it is the storage's buffer) takes the
// written-back buffer in its place.
std::vector<int64_t> Graph::vetoed_donations(
    const std::vector<at::Tensor>& inputs,
    const std::vector<std::shared_ptr<pjrt::Buffer>>& args) const {
  std::vector<int64_t> keep;
  std::vector<int64_t> arg_of(inputs_.size(), -1);
  int64_t next = 0;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (input_is_param_[i]) arg_of[i] = next++;
  for (const auto& [input, r] : mutations_) {
    const int64_t a = arg_of[input];
    if (a < 0) continue;
    const at::Tensor& t = inputs[input];
    const std::shared_ptr<pjrt::Buffer>& buffer = args[a];
    long holders = 1;
    if (t.device().is_privateuseone()) {
      runtime::DeviceBuffer& db = aten::device_buffer(t);
      if (db.buffer == buffer) {
        if (!whole_write(t, db, inputs_[input])) {  // the storage keeps reading it
          keep.push_back(a);
          continue;
        }
        holders = 2;
      }
    }
    if (buffer.use_count() != holders) keep.push_back(a);
  }
  return keep;
}

const Graph& Graph::for_current_precision() const {
  hlo::Precision now = aten::matmul_precision();
  if (now == precision_) return *this;
  auto& sibling = siblings_[now];
  if (!sibling) sibling = std::make_shared<const Graph>(spec_);
  return *sibling;
}

std::vector<at::Tensor> Graph::run(const std::vector<at::Tensor>& inputs,
                                   const std::vector<int64_t>& sizes) const {
  TORCH_CHECK(inputs.size() == inputs_.size(), "torch_tpu: the compiled graph takes ",
              inputs_.size(), " inputs, got ", inputs.size());
  TORCH_CHECK(sizes.size() == dynamic_.size(), "torch_tpu: the compiled graph takes ",
              dynamic_.size(), " dynamic sizes, got ", sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto& [input, dim] = dynamic_[i];
    const int64_t bound = inputs_[input].shape[dim];
    TORCH_CHECK(sizes[i] >= 0 && sizes[i] <= bound, "torch_tpu: dynamic size ", sizes[i],
                " of dimension ", dim, " of input ", input, " is outside [0, ", bound, "]");
  }
  c10::DeviceIndex device = device_of(inputs);
  // A compiled graph reads real buffers: the eager work recorded before it runs first.
  runtime::FusedGroup::get().flush();
  std::vector<std::shared_ptr<pjrt::Buffer>> args = arguments(inputs, sizes, device);
  std::vector<int64_t> keep = vetoed_donations(inputs, args);
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  try {
    results = runtime::Runtime::get().execute(*program_, args, device, keep);
    runtime::metrics().graph_runs++;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: running a compiled graph failed: ", e.what());
  }

  auto wrap = [&](int r) {
    const hlo::TensorType& type = results_.at(r);
    return aten::wrap_buffer(type.numel() > 0 ? results.at(r) : nullptr, type.dtype, type.shape,
                             device);
  };
  // Mutated inputs: a dense one adopts the new buffer (every alias sees it), a view gets
  // a copy.
  for (const auto& [input, r] : mutations_) {
    const at::Tensor& target = inputs[input];
    const hlo::TensorType& type = inputs_[input];
    if (type.numel() == 0) continue;
    if (target.device().is_privateuseone() &&
        whole_write(target, aten::device_buffer(target), type)) {
      runtime::DeviceBuffer& db = aten::device_buffer(target);
      db.assign(results.at(r), type.dtype, type.numel());
      target.unsafeGetTensorImpl()->bump_version();
    } else {
      at::Tensor(target).copy_(wrap(r));
    }
  }
  std::vector<at::Tensor> out;
  out.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    if (o.input >= 0) out.push_back(inputs[o.input]);
    else if (o.result >= 0) out.push_back(wrap(o.result));
    else out.emplace_back();
  }
  return out;
}

}  // namespace torch_tpu::compile
