#include "aten/op_call.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/DispatchKeySet.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/device_asserts.h"
#include "aten/dtype.h"
#include "aten/precision.h"
#include "ops/common.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace torch_tpu::aten {

namespace {

enum KeyTag : int64_t {
  kView = 1,
  kScalar = 2,
  kTarget = 3,
  kPadded = 4,
  kPaddedBase = 5,
  kPads = 6,
  kConstant = 7,
  kStaticOffset = 8
};

std::vector<int64_t> vec(c10::IntArrayRef a) { return std::vector<int64_t>(a.begin(), a.end()); }

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Fills a never-written storage with zeros so it can be read or partly written.
void materialize(runtime::DeviceBuffer& db, hlo::DType dtype, int64_t numel) {
  if (db.padding) numel = numel_of(db.padding->physical);  // empty_like of a padded value
  runtime::ProgramKey key;
  key.add("zeros");
  key.add(static_cast<int64_t>(dtype));
  key.add(numel);
  runtime::Runtime& rt = runtime::Runtime::get();
  auto program = rt.cache().get(key, [&] {
    hlo::Builder b;
    hlo::Value zeros = b.full(0, {dtype, {numel}});
    return runtime::Program{b.module({zeros}), {zeros.type}, "zeros"};
  });
  db.assign(rt.execute(*program, {}, db.device).at(0), dtype, numel, db.padding);
}

// A result written into a target must broadcast to the target's shape, not beyond it.
hlo::Value broadcast_to_target(hlo::Builder& b, const hlo::Value& v,
                               const std::vector<int64_t>& sizes) {
  int64_t lead = static_cast<int64_t>(sizes.size()) - v.type.rank();
  bool fits = lead >= 0;
  for (int64_t i = 0; fits && i < v.type.rank(); ++i)
    fits = v.type.shape[i] == 1 || v.type.shape[i] == sizes[lead + i];
  TORCH_CHECK(fits, "output with shape ", c10::IntArrayRef(sizes),
              " doesn't match the broadcast shape ", c10::IntArrayRef(v.type.shape));
  return ops::broadcast_to(b, v, sizes);
}

// Fused mode needs an op's output types when it is recorded, before any program exists:
// they come from building its program once per key (which also raises the lowering's
// errors at the op, as op mode does).
std::shared_ptr<const std::vector<hlo::TensorType>> cached_signature(
    const runtime::ProgramKey& key, const std::function<runtime::Program()>& build) {
  static std::mutex mutex;
  static std::unordered_map<runtime::ProgramKey,
                            std::shared_ptr<const std::vector<hlo::TensorType>>,
                            runtime::ProgramKeyHash>
      signatures;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = signatures.find(key);
    if (it != signatures.end()) return it->second;
  }
  auto types = std::make_shared<const std::vector<hlo::TensorType>>(build().outputs);
  std::lock_guard<std::mutex> lock(mutex);
  return signatures.emplace(key, std::move(types)).first->second;
}

// The literal scalar values built into programs as constants: those XLA's simplifier turns
// into cheaper code (x ** 2 -> x * x, x ** 0.5 -> sqrt, x * 1 -> x, x + 0 -> x, x * -1 ->
// -x). A handful of values, so an op compiles at most a few more programs for them; every
// other value stays a runtime operand. nullopt for a value that is not one of them in
// `dtype` (complex scalars always are operands).
constexpr double kConstantScalars[] = {0.0, 1.0, -1.0, 2.0, 0.5, -0.5};

std::optional<double> constant_scalar(const c10::Scalar& value, hlo::DType dtype) {
  if (hlo::is_complex(dtype) || value.isComplex()) return std::nullopt;
  const double v = value.toDouble();
  const bool is_float = hlo::is_float(dtype);
  for (double special : kConstantScalars) {
    if (v != special) continue;
    if (!is_float && v != std::trunc(v)) return std::nullopt;
    if (dtype == hlo::DType::Pred && v != 0 && v != 1) return std::nullopt;
    if (hlo::is_unsigned_int(dtype) && v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace

OpCall::OpCall(const char* name) : name_(name), precision_(matmul_precision()) {
  key_.add(name);
  key_.add(static_cast<int64_t>(precision_));
  runtime::FusedGroup& group = runtime::FusedGroup::get();
  if (group.recording()) group.flush_if_full();
}

bool OpCall::constant_candidate(const c10::Scalar& value) {
  if (value.isComplex()) return false;
  const double v = value.toDouble();
  for (double special : kConstantScalars)
    if (v == special) return true;
  return false;
}

OpCall& OpCall::key(int64_t word) {
  key_.add(word);
  return *this;
}

OpCall& OpCall::key(c10::IntArrayRef words) {
  key_.add(static_cast<int64_t>(words.size()));
  for (int64_t w : words) key_.add(w);
  return *this;
}

void OpCall::use_device(const at::Tensor& tensor) {
  int device = tensor.device().index();
  if (device_ < 0) {
    device_ = device;
    return;
  }
  TORCH_CHECK(device_ == device,
              "Expected all tensors to be on the same device, but found at least two devices, "
              "tpu:",
              device_, " and tpu:", device, "!");
}

int OpCall::add_param(hlo::DType dtype, std::vector<int64_t> shape,
                      std::shared_ptr<pjrt::Buffer> buffer, uint64_t bits, int64_t pending) {
  params_.push_back({dtype, std::move(shape)});
  args_.push_back({std::move(buffer), dtype, bits, pending});
  return static_cast<int>(params_.size()) - 1;
}

OpCall& OpCall::scalar(const c10::Scalar& value, c10::ScalarType dtype, bool literal) {
  Operand op{Operand::Kind::Scalar};
  op.dtype = to_hlo(dtype);
  if (std::optional<double> constant = literal ? constant_scalar(value, op.dtype) : std::nullopt) {
    op.constant = *constant;
    key_.add(kConstant);
    key_.add(static_cast<int64_t>(op.dtype));
    key_.add(static_cast<int64_t>(scalar_bits(value, dtype)));
  } else if (hlo::is_complex(op.dtype)) {
    // No PJRT scalar upload takes 16 bytes: the parts travel as two operands.
    const c10::ScalarType part = c10::toRealValueType(dtype);
    const c10::complex<double> z = value.toComplexDouble();
    op.param = add_param(hlo::component(op.dtype), {}, nullptr, scalar_bits(z.real(), part));
    op.imag_param = add_param(hlo::component(op.dtype), {}, nullptr, scalar_bits(z.imag(), part));
  } else {
    op.param = add_param(op.dtype, {}, nullptr, scalar_bits(value, dtype));
  }
  if (op.param >= 0) {
    key_.add(kScalar);
    key_.add(static_cast<int64_t>(op.dtype));
  }
  inputs_.push_back(std::move(op));
  return *this;
}

OpCall& OpCall::input(const at::Tensor& tensor) {
  if (!tensor.device().is_privateuseone()) {
    TORCH_CHECK(tensor.device().is_cpu() && tensor.dim() == 0,
                "Expected all tensors to be on the same device, but found at least two devices, "
                "tpu:",
                std::max(device_, 0), " and ", tensor.device(), "!");
    return scalar(tensor.item(), tensor.scalar_type(),
                  tensor.unsafeGetTensorImpl()->is_wrapped_number());
  }
  use_device(tensor);
  inputs_.push_back(view_operand(tensor, /*needs_base=*/true));
  return *this;
}

OpCall& OpCall::buckets() {
  allow_buckets_ = ops::bucket_rule() != 0;
  return *this;
}

int OpCall::base_of(runtime::DeviceBuffer& db) {
  for (size_t i = 0; i < bases_.size(); ++i)
    if (bases_[i].buffer == &db) return static_cast<int>(i);
  bases_.push_back({&db, add_param(db.dtype, {db.numel}, db.buffer, 0, db.pending), db.padding});
  return static_cast<int>(bases_.size()) - 1;
}

OpCall::Operand OpCall::view_operand(const at::Tensor& tensor, bool needs_base) {
  check_supported(tensor.scalar_type());
  Operand op{Operand::Kind::View};
  op.dtype = to_hlo(tensor.scalar_type());
  op.sizes = vec(tensor.sizes());
  op.strides = vec(tensor.strides());
  runtime::DeviceBuffer& db = device_buffer(tensor);
  int64_t storage_numel = static_cast<int64_t>(db.nbytes) / hlo::byte_width(op.dtype);
  op.layout = ops::classify(op.sizes, op.strides, tensor.storage_offset(), storage_numel);
  runtime::FusedGroup& group = runtime::FusedGroup::get();
  const bool empty = op.layout.kind == ops::StridedLayout::Kind::Empty;
  if (needs_base && !empty && !db.written()) materialize(db, op.dtype, storage_numel);
  // A whole target stored padded (empty_like of a padded value) is written at its bound.
  if (!needs_base && allow_buckets_ && db.padding &&
      op.layout.kind == ops::StridedLayout::Kind::Dense && op.sizes == db.padding->logical) {
    op.sizes = db.padding->physical;
    op.target_padding = db.padding;
    key_.add(kPadded);
    key_.add(static_cast<int64_t>(op.dtype));
    key_.add(op.sizes);
    key_.add(db.padding->dynamic);
    return op;
  }
  // A value stored padded, read at its bound: the program does not depend on its sizes.
  if (needs_base && allow_buckets_ && !empty && db.padding && db.dtype == op.dtype) {
    const runtime::Padding& pad = *db.padding;
    auto plan = ops::plan_padded_read(pad.logical, pad.physical, pad.dynamic, op.sizes, op.strides,
                                      tensor.storage_offset());
    if (plan && !plan->dynamic.empty()) {
      if (db.pending >= 0 && !group.recording()) group.flush();
      op.kind = Operand::Kind::Padded;
      op.base = base_of(db);
      for (int64_t n : plan->real) {
        op.size_params.push_back(add_param(hlo::DType::S32, {}, nullptr, static_cast<uint64_t>(n)));
        dynamic_sizes_.push_back(n);
      }
      key_.add(kPadded);
      key_.add(static_cast<int64_t>(op.dtype));
      key_.add(op.base);
      for (const auto* v : {&plan->physical, &plan->dynamic, &plan->permutation, &plan->merged,
                            &plan->bound, &plan->broadcast_dims})
        key_.add(*v);
      op.sizes = plan->bound;
      op.padded = std::make_shared<const ops::PaddedRead>(std::move(*plan));
      bound_of_[tensor.unsafeGetTensorImpl()] = op.padded;
      return op;
    }
  }
  // An input view of a padded storage that steps along one of its dimensions at a time
  // is read in place from the padded buffer: its program does not depend on real sizes.
  int64_t offset = tensor.storage_offset();
  if (needs_base && !empty && db.padding && db.dtype == op.dtype) {
    if (auto v = ops::physical_view(db.padding->logical, db.padding->physical, op.sizes, op.strides,
                                    offset)) {
      op.strides = std::move(v->strides);
      offset = v->offset;
      op.physical = true;
      op.layout = ops::classify(op.sizes, op.strides, offset, db.numel);
    }
  }
  key_.add(needs_base ? kView : kTarget);
  key_.add(static_cast<int64_t>(op.dtype));
  key_.add(static_cast<int64_t>(op.layout.kind));
  key_.add(op.sizes);
  if (empty) return op;
  // A dense write replaces the whole storage: it needs no old contents.
  if (op.layout.kind == ops::StridedLayout::Kind::Dense && !needs_base) return op;
  // Op mode runs on real buffers: a value still pending from a fused group is computed.
  if (db.pending >= 0 && !group.recording()) group.flush();
  if (!db.written()) materialize(db, op.dtype, storage_numel);
  op.base = base_of(db);
  key_.add(op.base);
  key_.add(static_cast<int64_t>(db.dtype));
  key_.add(db.numel);
  if (const auto& padding = bases_[op.base].padding) {
    key_.add(kPaddedBase);
    key_.add(op.physical);
    key_.add(padding->physical);
    // Read as plain values: the program slices the real box out of the padded one.
    if (!op.physical) {
      bases_[op.base].unpad = true;
      key_.add(padding->logical);
    }
  }
  if (op.layout.kind != ops::StridedLayout::Kind::Dense) {
    key_.add(op.strides);
    key_.add(op.layout.pad);
    // A view read from a value computed earlier in the same fused group (a slice of an
    // intermediate: rotate_half, chunk, split) has its offset in the key and the program,
    // so that XLA slices statically and fuses the read into its consumers. Views of real
    // buffers (a batch of a dataset, a cache), of values stored padded (a growing cache:
    // a decode step reads it where it ends) and written views keep a runtime offset:
    // theirs move from step to step, and must not recompile.
    if (needs_base && db.pending >= 0 && group.recording() && !db.padding) {
      op.static_offset = offset;
      key_.add(kStaticOffset);
      key_.add(offset);
    } else {
      op.param = add_param(hlo::DType::S64, {}, nullptr, static_cast<uint64_t>(offset));
    }
  }
  return op;
}

std::vector<int64_t> OpCall::bound_sizes(const at::Tensor& tensor) const {
  auto it = bound_of_.find(tensor.unsafeGetTensorImpl());
  return it != bound_of_.end() ? it->second->bound : vec(tensor.sizes());
}

std::vector<int64_t> OpCall::probe_sizes(const at::Tensor& tensor) const {
  auto it = bound_of_.find(tensor.unsafeGetTensorImpl());
  return it != bound_of_.end() ? it->second->probe : vec(tensor.sizes());
}

std::vector<std::vector<bool>> OpCall::differ(const std::vector<std::vector<int64_t>>& bound,
                                              const std::vector<std::vector<int64_t>>& probe) {
  std::vector<std::vector<bool>> out(bound.size());
  for (size_t i = 0; i < bound.size() && i < probe.size(); ++i) {
    out[i].assign(bound[i].size(), false);
    for (size_t d = 0; d < bound[i].size() && bound[i].size() == probe[i].size(); ++d)
      out[i][d] = bound[i][d] != probe[i][d];
  }
  return out;
}

runtime::ProgramKey OpCall::sized_key() const {
  runtime::ProgramKey key = key_;
  key.add(dynamic_sizes_);
  return key;
}

void OpCall::pad_outputs(const std::vector<std::vector<int64_t>>& real,
                         const std::vector<std::vector<int64_t>>& bound,
                         const std::vector<std::vector<bool>>& varying) {
  out_real_ = real;
  out_lengths_.assign(real.size(), {});
  out_dynamic_.assign(real.size(), {});
  key_.add(kPads);
  for (size_t i = 0; i < real.size(); ++i) {
    std::vector<int64_t>& lengths = out_lengths_[i];
    lengths.assign(real[i].size(), -1);
    // An empty result stays as it is; a size below 2 is not padded (a padded read needs a
    // run of real elements), but a dynamic one is made static at its real size.
    if (numel_of(real[i]) == 0 || bound.at(i).size() != real[i].size()) continue;
    for (size_t d = 0; d < real[i].size(); ++d) {
      const bool varies = i < varying.size() && d < varying[i].size() && varying[i][d];
      if (bound[i][d] == real[i][d] && !varies) continue;
      lengths[d] = real[i][d] < 2 ? real[i][d] : ops::bucket(real[i][d]);
      if (real[i][d] >= 2) out_dynamic_[i].push_back(static_cast<int64_t>(d));
    }
    key_.add(lengths);
  }
}

std::vector<at::Tensor> OpCall::run(const runtime::Emit& lower) {
  return execute(lower, static_cast<size_t>(-1), {});
}

void OpCall::write(const runtime::Emit& lower, const std::vector<at::Tensor>& targets) {
  execute(lower, 0, targets);
}

std::vector<at::Tensor> OpCall::run_and_write(const runtime::Emit& lower, size_t fresh,
                                              const std::vector<at::Tensor>& targets) {
  return execute(lower, fresh, targets);
}

std::vector<at::Tensor> OpCall::execute(const runtime::Emit& lower, size_t fresh,
                                        const std::vector<at::Tensor>& targets) {
  std::vector<Operand> outs;
  for (const at::Tensor& t : targets) {
    TORCH_CHECK(t.device().is_privateuseone(), name_, ": expected a tpu output tensor, got ",
                t.device());
    use_device(t);
    TORCH_CHECK(at::has_internal_overlap(t) != at::MemOverlap::Yes,
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.");
    outs.push_back(view_operand(t, /*needs_base=*/false));
  }
  if (device_ < 0) device_ = current_device();
  runtime::Runtime& rt = runtime::Runtime::get();
  for (Arg& arg : args_)
    if (!arg.buffer && arg.pending < 0) arg.buffer = rt.scalar(device_, arg.dtype, arg.bits);

  WritePlan plan = plan_writes(outs, targets);
  if (runtime::FusedGroup::get().recording()) return record(lower, fresh, targets, outs, plan);
  key_.add(static_cast<int64_t>(plan.donations.size()));
  for (const auto& [param, assignment] : plan.donations) key_.add({param, assignment});
  std::shared_ptr<const runtime::CompiledProgram> program;
  try {
    program = rt.cache().get(key_, [&] { return build(lower, fresh, outs, plan); });
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: compiling ", name_, " failed: ", e.what());
  }
  if (want_plan_) make_plan(program, plan);
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  buffers.reserve(args_.size());
  for (const Arg& arg : args_) buffers.push_back(arg.buffer);
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  try {
    results = rt.execute(*program, buffers, device_);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: running ", name_, " failed: ", e.what());
  }

  // The program's own record of how many results are fresh: a cache hit skips the
  // lowering, so `fresh` may still be the "all results" marker here.
  const std::vector<Assignment>& assignments = plan.assignments;
  size_t n_fresh = results.size() - assignments.size();
  std::vector<at::Tensor> out = wrap_fresh(program->outputs, n_fresh, results);
  for (size_t i = 0; i < assignments.size(); ++i)
    assignments[i].buffer->assign(results[n_fresh + i], assignments[i].dtype, assignments[i].numel,
                                  assignments[i].padding);
  for (const at::Tensor& t : targets) t.unsafeGetTensorImpl()->bump_version();
  return out;
}

void OpCall::make_plan(std::shared_ptr<const runtime::CompiledProgram> program,
                       const WritePlan& writes) {
  std::optional<CallPlan> plan = input_plan(writes);
  if (!plan) return;
  plan->program = std::move(program);
  plan_ = std::move(plan);
}

std::optional<CallPlan> OpCall::input_plan(const WritePlan& writes) const {
  if (!dynamic_sizes_.empty()) return std::nullopt;
  for (const auto& dims : out_dynamic_)
    if (!dims.empty()) return std::nullopt;
  CallPlan plan;
  std::vector<bool> covered(args_.size(), false);
  for (const Operand& in : inputs_) {
    int param = in.param, offset_param = -1;
    if (in.kind == Operand::Kind::View) {
      // A storage read as it is, whole (its buffer is the parameter), or in part at a
      // runtime offset (also a parameter) or, in fused mode, at a static one (a view of a
      // pending value: the signature has its offset).
      if (in.base < 0 || in.physical || bases_[in.base].padding) return std::nullopt;
      if (in.layout.kind == ops::StridedLayout::Kind::Dense) {
        if (in.param >= 0 || in.static_offset >= 0) return std::nullopt;
      } else if ((in.param < 0) == (in.static_offset < 0)) {
        return std::nullopt;
      }
      offset_param = in.param;
      param = bases_[in.base].param;
    } else if (in.kind != Operand::Kind::Scalar || in.imag_param >= 0) {
      return std::nullopt;
    }
    if (param >= 0) covered[param] = true;
    if (offset_param >= 0) covered[offset_param] = true;
    plan.inputs.push_back({param, in.dtype, offset_param});
  }
  for (bool c : covered)
    if (!c) return std::nullopt;  // a parameter the inputs do not give (a size, an offset)
  // Each write replaces the whole storage of an input (an in-place op's self).
  for (const Assignment& a : writes.assignments) {
    if (a.padding) return std::nullopt;
    size_t input = 0;
    while (input < inputs_.size() && (inputs_[input].kind != Operand::Kind::View ||
                                      bases_[inputs_[input].base].buffer != a.buffer))
      ++input;
    if (input == inputs_.size()) return std::nullopt;
    plan.writes.push_back({input, a.dtype, a.numel});
  }
  plan.num_params = args_.size();
  return plan;
}

OpCall::WritePlan OpCall::plan_writes(const std::vector<Operand>& outs,
                                      const std::vector<at::Tensor>& targets) const {
  WritePlan plan;
  plan.base_writer.assign(bases_.size(), -1);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Operand& op = outs[i];
    if (op.layout.kind == ops::StridedLayout::Kind::Empty) continue;
    runtime::DeviceBuffer& db = device_buffer(targets[i]);
    if (op.target_padding) {
      plan.assignments.push_back({&db, op.dtype, numel_of(op.sizes), op.target_padding});
    } else if (op.base < 0) {
      plan.assignments.push_back(
          {&db, op.dtype, static_cast<int64_t>(db.nbytes) / hlo::byte_width(op.dtype)});
    } else {
      plan.base_writer[op.base] = static_cast<int>(i);
    }
  }
  for (size_t base = 0; base < bases_.size(); ++base) {
    if (plan.base_writer[base] < 0) continue;
    hlo::DType dtype = outs[plan.base_writer[base]].dtype;
    runtime::DeviceBuffer* db = bases_[base].buffer;
    plan.assignments.push_back(
        {db, dtype, static_cast<int64_t>(db->nbytes) / hlo::byte_width(dtype)});
  }
  // The storage's own reference and this call's are the only ones: once the storage
  // takes the new buffer, no tensor can read the old one.
  for (size_t j = 0; j < plan.assignments.size() && runtime::Runtime::donation_enabled(); ++j) {
    const Assignment& a = plan.assignments[j];
    for (const Base& base : bases_) {
      const Arg& arg = args_[base.param];
      if (base.buffer == a.buffer && arg.buffer && arg.buffer.use_count() == 2 &&
          params_[base.param] == hlo::TensorType{a.dtype, {a.numel}})
        plan.donations.emplace_back(base.param, static_cast<int>(j));
    }
  }
  return plan;
}

runtime::Program OpCall::build(const runtime::Emit& lower, size_t fresh,
                               const std::vector<Operand>& outs, const WritePlan& plan) const {
  hlo::Builder b;
  std::vector<hlo::Value> params;
  for (const hlo::TensorType& t : params_) params.push_back(b.parameter(t));
  runtime::Program program;
  std::vector<hlo::Value> outputs =
      emit(b, params, lower, fresh, outs, plan.base_writer, &program.outputs);
  const size_t n_fresh = outputs.size() - plan.assignments.size();
  for (const auto& [param, assignment] : plan.donations)
    b.alias_output(params[param], static_cast<int>(n_fresh) + assignment);
  program.mlir = b.module(outputs);
  program.donations = b.donations();
  program.label = name_;
  for (const Operand& in : inputs_) program.arguments.push_back({in.dtype, in.sizes});
  return program;
}

std::vector<hlo::Value> OpCall::emit(hlo::Builder& b, const std::vector<hlo::Value>& params,
                                     const runtime::Emit& lower, size_t fresh,
                                     const std::vector<Operand>& outs,
                                     const std::vector<int>& base_writer,
                                     std::vector<hlo::TensorType>* types) const {
  std::vector<hlo::Value> current;
  for (const Base& base : bases_) {
    const hlo::Value& p = params[base.param];
    current.push_back(
        base.unpad ? ops::unpad_flat(b, p, base.padding->logical, base.padding->physical) : p);
  }
  auto read = [&](const Operand& op) -> hlo::Value {
    if (op.kind == Operand::Kind::Scalar && op.param < 0) return b.constant(op.constant, op.dtype);
    if (op.kind == Operand::Kind::Scalar)
      return op.imag_param < 0 ? params[op.param]
                               : b.complex(params[op.param], params[op.imag_param]);
    if (op.kind == Operand::Kind::Padded) {
      std::vector<hlo::Value> sizes;
      for (int p : op.size_params) sizes.push_back(params[p]);
      return ops::lower_padded_read(b, params[bases_[op.base].param], sizes, *op.padded);
    }
    if (op.layout.kind == ops::StridedLayout::Kind::Empty) return b.full(0, {op.dtype, op.sizes});
    hlo::Value offset = op.param >= 0          ? params[op.param]
                        : op.static_offset >= 0 ? b.constant_int(op.static_offset, hlo::DType::S64)
                                                : hlo::Value{};
    const hlo::Value& flat = op.physical ? params[bases_[op.base].param] : current[op.base];
    return ops::lower_strided_read(b, ops::reinterpret_flat(b, flat, op.dtype), offset, op.sizes,
                                   op.strides, op.layout);
  };
  std::vector<hlo::Value> values;
  for (const Operand& op : inputs_) values.push_back(read(op));
  // The precision in effect when the op was called, also when a fused group emits it later.
  const hlo::Precision outer = b.matmul_precision();
  b.set_matmul_precision(precision_);
  std::vector<hlo::Value> results = lower(b, values);
  b.set_matmul_precision(outer);
  if (fresh == static_cast<size_t>(-1)) fresh = results.size() - outs.size();
  TORCH_CHECK(results.size() == fresh + outs.size(), name_, ": lowering gave ", results.size(),
              " results for ", fresh + outs.size(), " outputs");

  std::vector<hlo::Value> outputs;
  for (size_t i = 0; i < fresh; ++i) {
    hlo::Value r = results[i];
    if (i < out_lengths_.size())
      for (size_t d = 0; d < out_lengths_[i].size(); ++d)
        if (out_lengths_[i][d] >= 0) r = ops::static_along(b, r, d, out_lengths_[i][d]);
    types->push_back(r.type);
    outputs.push_back(b.reshape(r, {r.type.numel()}));
  }
  // Dense targets take their values as program outputs; views rewrite their base.
  for (size_t i = 0; i < outs.size(); ++i) {
    const Operand& op = outs[i];
    if (op.layout.kind == ops::StridedLayout::Kind::Empty) continue;
    hlo::Value v = broadcast_to_target(b, b.convert(results[fresh + i], op.dtype), op.sizes);
    if (op.base < 0) {
      outputs.push_back(b.reshape(v, {v.type.numel()}));
      continue;
    }
    hlo::Value offset = op.param >= 0 ? params[op.param] : hlo::Value{};
    hlo::Value flat = ops::reinterpret_flat(b, current[op.base], op.dtype);
    current[op.base] =
        ops::lower_strided_write(b, flat, offset, op.sizes, op.strides, op.layout, v);
  }
  for (size_t base = 0; base < bases_.size(); ++base)
    if (base_writer[base] >= 0) outputs.push_back(current[base]);
  for (size_t i = types->size(); i < outputs.size(); ++i) types->push_back(outputs[i].type);
  return outputs;
}

std::vector<at::Tensor> OpCall::record(const runtime::Emit& lower, size_t fresh,
                                       const std::vector<at::Tensor>& targets,
                                       std::vector<Operand> outs, const WritePlan& plan) {
  // Read the storages again: a flush since their operands were added (a meta kernel or
  // a Python hook can run one) made their values real.
  for (const Base& base : bases_) {
    Arg& arg = args_[base.param];
    arg.pending = base.buffer->pending;
    arg.buffer = arg.pending >= 0 ? nullptr : base.buffer->buffer;
  }
  std::shared_ptr<ReplayCall> replay = std::move(replay_);
  if (replay) {
    if (std::optional<CallPlan> p = input_plan(plan))
      replay->plan = std::move(*p);
    else
      replay.reset();
  }
  std::vector<int64_t> inputs;
  std::vector<std::shared_ptr<pjrt::Buffer>> externals;
  inputs.reserve(args_.size());
  for (Arg& arg : args_) {
    inputs.push_back(arg.pending);
    if (arg.pending < 0) externals.push_back(std::move(arg.buffer));
  }
  args_.clear();
  runtime::FusedGroup& group = runtime::FusedGroup::get();
  // A step that repeats an earlier group's ops shares their records.
  runtime::OpRecord op = group.repeat(device_, key_, inputs);
  const OpCall* call = this;
  if (!op) {
    auto types = cached_signature(key_, [&] { return build(lower, fresh, outs, plan); });
    auto made = std::make_shared<runtime::RecordedOp>();
    made->key = key_;
    made->inputs = std::move(inputs);
    made->params = std::move(params_);
    made->outputs = *types;
    made->call = std::move(replay);
    // The recorded body keeps what emit() reads; no tensor, so temporaries can die.
    auto self = std::make_shared<const OpCall>(std::move(*this));
    call = self.get();
    made->emit = [self, lower, fresh, outs = std::move(outs), base_writer = plan.base_writer](
                     hlo::Builder& b, const std::vector<hlo::Value>& in) {
      std::vector<hlo::TensorType> unused;
      return self->emit(b, in, lower, fresh, outs, base_writer, &unused);
    };
    op = std::move(made);
  }
  const std::vector<hlo::TensorType>& types = op->outputs;
  const int64_t first = group.record(call->device_, op, std::move(externals));
  const size_t n_fresh = types.size() - plan.assignments.size();
  std::vector<at::Tensor> out = call->wrap_fresh(types, n_fresh, {});
  for (size_t i = 0; i < n_fresh; ++i) {
    const hlo::TensorType& type = types[i];
    if (type.numel() == 0) continue;
    runtime::DeviceBuffer& db = device_buffer(out[i]);
    std::shared_ptr<const runtime::Padding> padding = db.padding;
    group.bind(db, first + static_cast<int64_t>(i), type.dtype, type.numel());
    db.padding = std::move(padding);
  }
  for (size_t i = 0; i < plan.assignments.size(); ++i) {
    const Assignment& a = plan.assignments[i];
    group.bind(*a.buffer, first + static_cast<int64_t>(n_fresh + i), a.dtype, a.numel);
    a.buffer->padding = a.padding;
  }
  for (const at::Tensor& t : targets) t.unsafeGetTensorImpl()->bump_version();
  return out;
}

std::vector<at::Tensor> OpCall::wrap_fresh(
    const std::vector<hlo::TensorType>& types, size_t n,
    const std::vector<std::shared_ptr<pjrt::Buffer>>& buffers) const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    const hlo::TensorType& type = types[i];
    std::shared_ptr<pjrt::Buffer> buffer = buffers.empty() ? nullptr : buffers[i];
    if (i >= out_dynamic_.size() || out_dynamic_[i].empty()) {
      out.push_back(wrap_buffer(std::move(buffer), type.dtype, type.shape, device_));
      continue;
    }
    // Stored padded: the tensor has the real sizes, its buffer the program's shape (also
    // when a size is exactly at its bucket: it is still the one that varies).
    out.push_back(wrap_buffer(nullptr, type.dtype, out_real_[i], device_));
    device_buffer(out.back())
        .assign(std::move(buffer), type.dtype, type.numel(),
                std::make_shared<const runtime::Padding>(
                    runtime::Padding{out_real_[i], type.shape, out_dynamic_[i]}));
  }
  return out;
}

at::Tensor wrap_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::DType dtype,
                       c10::IntArrayRef sizes, c10::DeviceIndex device) {
  c10::ScalarType st = to_torch(dtype);
  int64_t numel = c10::multiply_integers(sizes);
  size_t nbytes = static_cast<size_t>(numel) * hlo::byte_width(dtype);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, allocate_on(device, nbytes),
                       allocator(), /*resizable=*/true);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(st));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  if (buffer) device_buffer(t).assign(std::move(buffer), dtype, numel);
  return t;
}

bool adopt_buffer(const at::Tensor& dst, std::shared_ptr<pjrt::Buffer> buffer) {
  if (!dst.is_contiguous() || dst.storage_offset() != 0 || dst.numel() == 0 ||
      dst.storage().nbytes() != dst.nbytes())
    return false;
  runtime::DeviceBuffer& db = device_buffer(dst);
  if (db.pending >= 0) runtime::FusedGroup::get().forget(db);
  db.assign(std::move(buffer), to_hlo(dst.scalar_type()), dst.numel());
  dst.unsafeGetTensorImpl()->bump_version();
  return true;
}

at::Tensor to_host(const at::Tensor& tensor) {
  at::Tensor host = at::empty(tensor.sizes(), tensor.options().device(c10::kCPU));
  to_host_into(tensor, host);
  return host;
}

namespace {
// Where the device's memory is host memory (XLA:CPU), a ready buffer of `nbytes` is read
// with a plain memcpy on this thread: PJRT's device-to-host copy hands the copy to a
// plugin thread and back (0.25 ms for 1 MiB, against 0.04 ms for the memcpy). Null where
// the plugin cannot give the address or the buffer is laid out otherwise.
const void* host_address(const pjrt::Buffer& buffer, size_t nbytes) {
  const void* src = runtime::Runtime::get().host_address(buffer);
  if (src == nullptr || buffer.on_device_size() != nbytes) return nullptr;
  buffer.await_ready();
  return src;
}
}  // namespace

const void* host_address(const at::Tensor& tensor) {
  if (tensor.numel() == 0 || !tensor.is_contiguous() || tensor.storage_offset() != 0)
    return nullptr;
  runtime::DeviceBuffer& db = device_buffer(tensor);
  runtime::FusedGroup::get().ready(db);
  if (!db.buffer || db.padding || db.dtype != to_hlo(tensor.scalar_type())) return nullptr;
  return host_address(*db.buffer, tensor.nbytes());
}

namespace {
// The buffer holding `tensor`'s values dense row-major (a program makes one where its
// storage holds them otherwise), and `*padding` where that buffer is stored padded (it
// is then copied whole and cut on the host: no program per real size).
std::shared_ptr<pjrt::Buffer> dense_source(const at::Tensor& tensor,
                                           std::shared_ptr<const runtime::Padding>* padding) {
  runtime::DeviceBuffer& db = device_buffer(tensor);
  runtime::FusedGroup& group = runtime::FusedGroup::get();
  group.ready(db);
  hlo::DType dtype = to_hlo(tensor.scalar_type());
  auto layout = ops::classify(vec(tensor.sizes()), vec(tensor.strides()), tensor.storage_offset(),
                              static_cast<int64_t>(db.nbytes) / hlo::byte_width(dtype));
  if (layout.kind == ops::StridedLayout::Kind::Dense && db.buffer && db.dtype == dtype) {
    *padding = db.padding;
    return db.buffer;
  }
  at::Tensor dense = OpCall("to_host").input(tensor).run(
      [](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; })[0];
  return group.ready(device_buffer(dense));
}

void check_host_destination(const at::Tensor& tensor, const at::Tensor& host) {
  TORCH_CHECK(host.device().is_cpu() && host.is_contiguous() &&
                  host.scalar_type() == tensor.scalar_type() && host.numel() == tensor.numel(),
              "torch_tpu: to_host_into needs a contiguous CPU tensor of the same dtype and size");
}
}  // namespace

bool to_host_async_into(const at::Tensor& tensor, const at::Tensor& host) {
  check_host_destination(tensor, host);
  if (tensor.numel() == 0) return true;
  std::shared_ptr<const runtime::Padding> padding;
  std::shared_ptr<pjrt::Buffer> buffer = dense_source(tensor, &padding);
  if (padding) return false;
  runtime::trace::Scope traced("tpu::device_to_host_async");
  traced.number("bytes", static_cast<double>(host.nbytes()));
  traced.number("device", static_cast<double>(tensor.get_device()));
  try {
    runtime::Runtime::get().to_host_async(tensor.get_device(), std::move(buffer), host.data_ptr(),
                                          host.nbytes(),
                                          std::make_shared<c10::Storage>(host.storage()));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: copying a tensor to the host failed: ", e.what());
  }
  runtime::metrics().device_to_host_bytes += static_cast<int64_t>(host.nbytes());
  return true;
}

void to_host_into(const at::Tensor& tensor, const at::Tensor& host) {
  check_device_asserts();  // a synchronizing read: a failed device assert raises first
  check_host_destination(tensor, host);
  if (tensor.numel() == 0) return;
  std::shared_ptr<const runtime::Padding> padding;
  std::shared_ptr<pjrt::Buffer> buffer = dense_source(tensor, &padding);
  runtime::trace::Scope traced("tpu::device_to_host");
  traced.number("bytes", static_cast<double>(host.nbytes()));
  traced.number("device", static_cast<double>(tensor.get_device()));
  try {
    if (padding) {
      at::Tensor physical = at::empty(padding->physical, host.options());
      buffer->to_host(physical.data_ptr(), physical.nbytes());
      at::Tensor box = physical;
      for (size_t d = 0; d < padding->logical.size(); ++d)
        box = box.narrow(static_cast<int64_t>(d), 0, padding->logical[d]);
      host.view(padding->logical).copy_(box);
    } else if (const void* src = host_address(*buffer, host.nbytes())) {
      std::memcpy(host.data_ptr(), src, host.nbytes());
    } else {
      buffer->to_host(host.data_ptr(), host.nbytes());
    }
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "torch_tpu: copying a tensor to the host failed: ", e.what());
  }
  runtime::metrics().device_to_host_bytes += static_cast<int64_t>(host.nbytes());
}

at::Tensor plain_contiguous(const at::Tensor& tensor) {
  return OpCall("plain").input(tensor).run(
      [](hlo::Builder&, const std::vector<hlo::Value>& in) { return in; })[0];
}

at::Tensor from_host(const at::Tensor& host, c10::DeviceIndex device) {
  check_supported(host.scalar_type());
  at::Tensor src = host.contiguous();
  hlo::DType dtype = to_hlo(src.scalar_type());
  std::shared_ptr<pjrt::Buffer> buffer;
  if (src.numel() > 0) {
    try {
      buffer = runtime::Runtime::get().upload(src.data_ptr(), dtype, {src.numel()}, device);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "torch_tpu: copying a tensor to tpu:", static_cast<int>(device),
                  " failed: ", e.what());
    }
  }
  return wrap_buffer(std::move(buffer), dtype, src.sizes(), device);
}

}  // namespace torch_tpu::aten
