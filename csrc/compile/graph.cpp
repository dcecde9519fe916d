#include "compile/graph.h"

#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <optional>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/node_builder.h"
#include "aten/op_call.h"
#include "aten/precision.h"
#include "compile/lowerer.h"
#include "distributed/graph_launch.h"
#include "hlo/builder.h"
#include "ops/bounded.h"
#include "python/without_gil.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::compile {

namespace {

// A write-back that replaces the whole storage: the storage adopts the result buffer.
bool whole_write(const at::Tensor& t, const runtime::DeviceBuffer& db,
                 const hlo::TensorType& type) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         db.nbytes == static_cast<size_t>(type.numel() * hlo::byte_width(type.dtype));
}

// `t` holds its whole buffer, with its dimensions laid out in `order` (outermost first;
// empty: row-major).
bool is_dense(const at::Tensor& t, const runtime::DeviceBuffer& db, hlo::DType dtype,
              const std::vector<int64_t>& order) {
  if (!db.buffer || db.padding || db.dtype != dtype || t.storage_offset() != 0 ||
      db.numel != t.numel())
    return false;
  if (order.empty()) return t.is_contiguous();
  int64_t stride = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (t.stride(*d) != stride) return false;
    stride *= t.size(*d);
  }
  return true;
}

// The order of an input's dimensions in memory from its spec entry (dtype, shape[,
// order]): empty for row-major.
std::vector<int64_t> order_of(const py::handle& input, size_t rank) {
  auto entry = input.cast<py::tuple>();
  if (entry.size() < 3 || entry[2].is_none()) return {};
  auto order = entry[2].cast<std::vector<int64_t>>();
  std::vector<bool> seen(rank, false);
  bool permutation = order.size() == rank;
  for (int64_t d : order) {
    permutation = permutation && d >= 0 && d < static_cast<int64_t>(rank) && !seen[d];
    if (permutation) seen[d] = true;
  }
  TORCH_CHECK(permutation, "torch_tpu: the graph spec gives an input of rank ", rank,
              " the dimension order ", c10::IntArrayRef(order));
  return order;
}

}  // namespace

Graph::Graph(const py::handle& spec_handle)
    : precision_(aten::matmul_precision()), spec_(py::reinterpret_borrow<py::object>(spec_handle)) {
  auto start = std::chrono::steady_clock::now();
  auto spec = spec_handle.cast<py::tuple>();
  py::list inputs = spec[0], values = spec[1], nodes = spec[2], outputs = spec[3],
           mutations = spec[4], constants = spec[5];

  std::vector<std::optional<hlo::TensorType>> types = value_types(values);

  hlo::Builder b;
  b.set_matmul_precision(precision_);
  Lowerer lw{b, types, std::vector<std::optional<hlo::Value>>(types.size())};
  std::vector<std::optional<hlo::Value>> params;  // per input: its program argument
  for (py::handle in : inputs) {
    hlo::TensorType type = type_of(in);
    inputs_.push_back(type);
    bool param = type.numel() > 0;
    input_is_param_.push_back(param);
    orders_.push_back(order_of(in, type.shape.size()));
    const std::vector<int64_t>& order = orders_.back();
    if (param)
      params.push_back(b.parameter({type.dtype, {type.numel()}}));
    else
      params.emplace_back();
    std::optional<hlo::Value> value;
    if (!param) {
      value = b.full(0, type);
    } else if (order.empty()) {
      value = b.reshape(*params.back(), type.shape);
    } else {  // the buffer as laid out, then its logical dimensions
      std::vector<int64_t> laid_out, logical(order.size());
      for (size_t k = 0; k < order.size(); ++k) {
        laid_out.push_back(type.shape[order[k]]);
        logical[order[k]] = static_cast<int64_t>(k);
      }
      value = b.transpose(b.reshape(*params.back(), laid_out), logical);
    }
    lw.vals[inputs_.size() - 1] = value;
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
    auto t = node.cast<py::tuple>();
    const std::string name = t[0].cast<std::string>();
    if (name == "@collective") {
      py::list args = t[1];
      TORCH_CHECK(py::len(args) == 6,
                  "torch_tpu: a collective node of the graph spec is malformed");
      const std::string group = args[4].cast<std::string>();
      TORCH_CHECK_NOT_IMPLEMENTED(group_.empty() || group == group_,
                                  "torch_tpu: a compiled graph with collectives on two groups ('",
                                  group_, "' and '", group, "')");
      group_ = group;
      devices_ = args[5].cast<std::vector<int>>();
      continue;
    }
    random_ |= draws(name);
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
      TORCH_CHECK(k >= 0 && static_cast<size_t>(k) < sizes.size(),
                  "torch_tpu: the graph spec "
                  "marks value ",
                  id, " with dynamic size ", k, " of ", sizes.size());
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
    if (params.at(pair.first) && runtime::Runtime::donation_enabled() && group_.empty())
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
    auto build = [&] {
      return runtime::Program{mlir, results_,
                              "graph (" + std::to_string(num_nodes_) + " ops" +
                                  (dynamic_.empty() ? ")" : ", bucketed)"),
                              donations, inputs_};
    };
    program_ = python::without_gil([&] {
      return group_.empty() ? rt.cache().get(key, build)
                            : distributed::compile_replicated(devices_, key, build);
    });
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: compiling a graph of ", num_nodes_, " ops failed: ", e.what());
  }
  runtime::metrics().graphs++;
  runtime::metrics().graph_build_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
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
                  "devices, tpu:",
                  static_cast<int>(device), " and ", t.device(), "!");
      device = t.device().index();
    }
  return device < 0 ? aten::current_device() : device;
}

}  // namespace

std::vector<std::shared_ptr<pjrt::Buffer>> Graph::arguments(const std::vector<at::Tensor>& inputs,
                                                            const std::vector<int64_t>& sizes,
                                                            c10::DeviceIndex device) const {
  std::vector<std::shared_ptr<pjrt::Buffer>> args;
  args.reserve(inputs.size() + sizes.size() + (random_ ? 2 : 0));
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
      const at::Tensor laid_out = orders_[i].empty() ? t : t.permute(orders_[i]);
      args.push_back(aten::device_buffer(aten::from_host(laid_out, device)).buffer);
      continue;
    }
    runtime::DeviceBuffer& db = aten::device_buffer(t);
    if (is_dense(t, db, want.dtype, orders_[i])) {
      args.push_back(db.buffer);
    } else {  // a dense copy, laid out as the program takes it
      const std::vector<int64_t>& order = orders_[i];
      at::Tensor dense = aten::OpCall("graph_input")
                             .input(t)
                             .key(order)
                             .run([order](hlo::Builder& b, const std::vector<hlo::Value>& in) {
                               if (order.empty()) return in;
                               return std::vector<hlo::Value>{b.transpose(in[0], order)};
                             })[0];
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
  if (mutations_.empty()) return keep;
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
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  try {
    if (!group_.empty()) {
      // Every rank's thread calls its graph; the last to come launches all of them.
      results = python::without_gil([&] {
        return distributed::run_replicated(group_, devices_, device, program_,
                                           "graph " + program_->fingerprint, std::move(args));
      });
    } else {
      std::vector<int64_t> keep = vetoed_donations(inputs, args);
      results = runtime::Runtime::get().execute(*program_, args, device, keep);
    }
    runtime::metrics().graph_runs++;
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "torch_tpu: running a compiled graph failed: ", e.what_without_backtrace());
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
    if (o.input >= 0)
      out.push_back(inputs[o.input]);
    else if (o.result >= 0)
      out.push_back(wrap(o.result));
    else
      out.emplace_back();
  }
  return out;
}

}  // namespace torch_tpu::compile
