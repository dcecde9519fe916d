// The dispatcher kernel behind every op in the lowering table (ops/registry.h).
//
// One boxed kernel serves all of them. It reads the op's schema once, then on each call
// feeds tensors and scalars to an OpCall, hashes every other argument into the program
// key, asks PyTorch's meta kernel for the output shapes and dtypes (once per key, or on
// every call for out= forms, whose result shape may depend on scalar values), and runs
// the lowering. Results are fresh tensors, or are written into self / out.
#include "aten/lowered_kernel.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "aten/allocator.h"
#include "aten/call_memo.h"
#include "aten/cpu_checks.h"
#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/node_builder.h"
#include "aten/op_call.h"
#include "aten/precision.h"
#include "aten/schema_args.h"
#include "ops/bounded.h"
#include "ops/registry.h"
#include "ops/strided.h"
#include "runtime/compile_overrides.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

// What ops without a lowering get (aten/fallback.cpp): the CPU fallback, or a
// NotImplementedError saying that torch_tpu has no lowering for `missing`.
void tpu_fallback_because(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          const char* missing);

namespace {

struct ArgInfo {
  ArgKind kind = ArgKind::Static;
  bool mutated = false;  // written by the op (self of an in-place op, out=, running stats)
  bool out = false;      // an out= argument: its old contents are not read
  std::optional<std::unordered_set<c10::Symbol>> alias;
};

int64_t bits_of(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

void add_attr_key(OpCall& call, const ops::Attr& attr) {
  call.key(static_cast<int64_t>(attr.index()));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t>) {
          call.key(static_cast<int64_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          call.key(bits_of(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          call.key(static_cast<int64_t>(std::hash<std::string>{}(x)));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          call.key(static_cast<int64_t>(x.size()));
          for (int64_t w : x) call.key(w);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          call.key(static_cast<int64_t>(x.size()));
          for (double d : x) call.key(bits_of(d));
        }
      },
      attr);
}

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().is_privateuseone(); }

// Tpu tensors and 0-d CPU tensors (which ops accept next to tpu ones) become meta
// tensors: some meta kernels insist on one device. Wrapped Python numbers stay on the
// CPU: Python meta kernels receive them as numbers, and that conversion needs a CPU
// tensor.
// With `bound`, an input it reads at its bound gets its bound sizes (or, with `probe`,
// its probe sizes).
at::Tensor meta_like(const at::Tensor& t, const OpCall* bound, bool probe) {
  bool cpu_scalar = t.defined() && t.device().is_cpu() && t.dim() == 0 &&
                    !t.unsafeGetTensorImpl()->is_wrapped_number();
  if (!is_tpu(t) && !cpu_scalar) return t;
  if (bound && is_tpu(t)) {
    std::vector<int64_t> sizes = probe ? bound->probe_sizes(t) : bound->bound_sizes(t);
    if (sizes != t.sizes()) return at::empty(sizes, t.options().device(c10::kMeta));
  }
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

c10::IValue meta_value(const c10::IValue& v, const OpCall* bound, bool probe) {
  if (v.isTensor()) return meta_like(v.toTensor(), bound, probe);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(meta_like(t, bound, probe));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
      out.push_back(t ? std::optional<at::Tensor>(meta_like(*t, bound, probe)) : std::nullopt);
    return out;
  }
  if (v.isGenerator()) return c10::IValue();
  // A factory's device argument: the meta kernel must not dispatch back to tpu.
  if (v.isDevice()) return c10::Device(c10::kMeta);
  return v;
}

std::vector<at::Tensor> tensors_of(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  if (v.isTensor())
    out.push_back(v.toTensor());
  else if (v.isTensorList())
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
  else if (v.isOptionalTensorList())
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
      out.push_back(t ? *t : at::Tensor());
  return out;
}

// A meta tensor standing for a binary op's operand: a tensor (a Python number stays a
// wrapped number, which promotes by category only), or a scalar argument as one.
at::Tensor binary_operand(const c10::IValue& v) {
  at::Tensor t = v.isTensor() ? v.toTensor() : at::Tensor();
  bool wrapped = !t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number();
  at::Tensor m =
      t.defined()
          ? at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta))
          : at::scalar_tensor(v.toScalar(), at::device(c10::kMeta).dtype(v.toScalar().type()));
  if (wrapped) m.unsafeGetTensorImpl()->set_wrapped_number(true);
  return m;
}

// CPU's checks of a binary op (ops::Promote), in CPU's order and words, on meta tensors:
// PyTorch's own TensorIterator decides broadcasting, the result type and whether it can be
// written into `self` (in-place) or `out`. `alpha` is the alpha argument's index, or -1.
void check_binary(ops::Promote rule, const std::vector<c10::IValue>& args, bool in_place, int out,
                  int alpha) {
  at::Tensor a = binary_operand(args[0]), b = binary_operand(args[1]);
  if (rule == ops::Promote::Subtract) at::native::sub_check(a, b);
  bool to_float = rule == ops::Promote::TrueDivide;
  if (to_float && args.size() > 2 && args[2].isString()) {
    std::string mode = args[2].toStringRef();
    TORCH_CHECK(mode == "trunc" || mode == "floor",
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                mode, "'");
    to_float = false;
  }
  at::Tensor target;
  if (in_place) {
    target = a;
  } else if (out >= 0) {
    // Only its dtype: an out= tensor of another shape is resized (with its warning, once).
    target = at::empty({0}, args[out].toTensor().options().device(c10::kMeta));
  }
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_output(target)
                                .add_const_input(a)
                                .add_const_input(b)
                                .allow_cpu_scalars(true)
                                .promote_inputs_to_common_dtype(true)
                                .promote_integer_inputs_to_float(to_float)
                                .cast_common_dtype_to_outputs(true)
                                .enforce_safe_casting_to_output(true)
                                .build();
  if (alpha >= 0) at::native::alpha_check(iter.common_dtype(), args[alpha].toScalar());
  if (rule == ops::Promote::TrueDivide && !to_float && c10::isComplexType(iter.common_dtype())) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"div_", args[2].toStringRef(), "\" not implemented for '",
                                c10::toString(iter.common_dtype()), "'");
  }
}

struct MetaResult {
  std::vector<hlo::TensorType> outputs;     // fresh results, then mutated arguments
  std::vector<std::vector<int64_t>> sizes;  // of each output, for out= resizing
  std::vector<int64_t> fresh_list_lengths;  // per fresh return: -1 for a plain tensor
  // Results the meta kernel leaves undefined (a backward's output_mask entry that is
  // false): the lowering sees an empty f32 type for them and its value is dropped.
  std::vector<bool> undefined;
};

class LoweredKernel final : public c10::OperatorKernel {
 public:
  LoweredKernel(const ops::OpDef* def, std::string name)
      : def_(def),
        name_(std::move(name)),
        complex_ok_(ops::complex_ok(name_)),
        cpu_check_(cpu_check(name_)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::call_once(schema_once_, [&] { read_schema(op); });
    MemoCall memo;
    MemoCall* memoized = nullptr;
    std::shared_ptr<ReplayCall> replay;
    runtime::FusedGroup& group = runtime::FusedGroup::get();
    if (group.recording()) {
      // A full group flushes before the call reads which of its inputs are pending.
      group.flush_if_full();
      if (memo_ok_ && group.reuse() && signature(*stack, memo, /*fused=*/true)) {
        if (replayed(group, memo, stack)) return;
        replay = std::make_shared<ReplayCall>();
        replay->kernel = this;
        replay->key = std::move(memo.key);
      }
    } else if (memo_ok_ && signature(*stack, memo, /*fused=*/false)) {
      if (auto entry = memo_.find(memo.key)) {
        // What the results return of the arguments (self), kept past their drop.
        c10::SmallVector<c10::IValue, 1> self;
        if (memo.target != nullptr) self.push_back(*(stack->end() - infos_.size()));
        std::vector<at::Tensor> fresh =
            run_plan(entry->plan, memo.inputs, memo.device, name_.c_str());
        if (memo.target != nullptr) memo.target->bump_version();
        push_results(self, *entry->extra, fresh, stack);
        return;
      }
      memo.generation = runtime::Runtime::get().cache().generation();
      memoized = &memo;
    }
    std::vector<c10::IValue> args(stack->end() - infos_.size(), stack->end());
    if (checks_overlap_) check_overlap(args);
    if (bucket_safe_ && ops::bucket_rule() != 0) {
      try {
        return run(op, args, stack, /*buckets=*/true, memoized, replay);
      } catch (const NoBound&) {
        // Inputs whose bounds do not fit together (a padded size against the same size
        // unpadded): the op runs at the real sizes.
      }
    }
    run(op, args, stack, /*buckets=*/false, memoized, replay);
  }

 private:
  struct NoBound {};

  // TensorIterator's refusal of a written tensor that shares some, not all, of its
  // elements with an input (`a.add_(a.t())`), in CPU's words; a foreach op's lists pair
  // up by position. The memo needs no check: whether an input overlaps the whole-storage
  // `self` it takes only partially follows from the sizes and strides in its signature,
  // and a call this refuses records no plan.
  void check_overlap(const std::vector<c10::IValue>& args) const {
    auto check = [](const at::Tensor& written, const at::Tensor& read) {
      if (written.defined() && read.defined()) at::assert_no_partial_overlap(written, read);
    };
    for (size_t w = 0; w < infos_.size(); ++w) {
      if (!infos_[w].mutated) continue;
      const std::vector<at::Tensor> written = tensors_of(args[w]);
      for (size_t i = 0; i < infos_.size(); ++i) {
        if (infos_[i].mutated) continue;
        const std::vector<at::Tensor> read = tensors_of(args[i]);
        if (args[w].isTensorList() && args[i].isTensorList()) {
          for (size_t k = 0; k < written.size() && k < read.size(); ++k)
            check(written[k], read[k]);
        } else {
          for (const at::Tensor& a : written)
            for (const at::Tensor& b : read) check(a, b);
        }
      }
    }
  }

  // Fused mode's shortcut: when the group is repeating a trace whose next op this kernel
  // recorded from a call with `m`'s signature, and the storages it reads hold the same
  // values of the group (or real buffers) as then, that op is recorded again as it is.
  bool replayed(runtime::FusedGroup& group, const MemoCall& m, torch::jit::Stack* stack) {
    // Per parameter of the op: a pending value id or -1 (an external), and which input
    // gives it (kOffset added: that input's view offset).
    constexpr size_t kOffset = size_t{1} << 32;
    c10::SmallVector<int64_t, 8> ids;
    c10::SmallVector<size_t, 8> source;
    const ReplayCall* found = nullptr;
    runtime::OpRecord op = group.repeat_if(m.device, [&](const runtime::RecordedOp& r) {
      const auto* call = static_cast<const ReplayCall*>(r.call.get());
      if (call == nullptr || call->kernel != this || !(call->key == m.key)) return false;
      const CallPlan& plan = call->plan;
      ids.assign(plan.num_params, -1);
      source.assign(plan.num_params, 0);
      for (size_t k = 0; k < plan.inputs.size(); ++k) {
        const CallPlan::Input& in = plan.inputs[k];
        if (in.param < 0) continue;
        const runtime::DeviceBuffer* storage = m.inputs[k].storage;
        ids[in.param] = storage != nullptr ? storage->pending : -1;
        source[in.param] = k;
        if (in.offset_param >= 0) source[in.offset_param] = k | kOffset;
      }
      if (!std::equal(ids.begin(), ids.end(), r.inputs.begin(), r.inputs.end())) return false;
      found = call;
      return true;
    });
    if (!op) return false;
    const CallPlan& plan = found->plan;
    runtime::Runtime& rt = runtime::Runtime::get();
    std::vector<std::shared_ptr<pjrt::Buffer>> externals;
    for (size_t p = 0; p < ids.size(); ++p) {
      if (ids[p] >= 0) continue;
      const MemoInput& in = m.inputs[source[p] & ~kOffset];
      if (source[p] & kOffset)
        externals.push_back(
            rt.scalar(m.device, hlo::DType::S64, static_cast<uint64_t>(in.offset)));
      else if (in.storage != nullptr)
        externals.push_back(in.storage->buffer);
      else
        externals.push_back(rt.scalar(m.device, plan.inputs[source[p]].dtype,
                                      scalar_bits(in.scalar,
                                                  to_torch(plan.inputs[source[p]].dtype))));
    }
    const int64_t first = group.record(m.device, op, std::move(externals));
    runtime::metrics().fused_replays++;
    const std::vector<hlo::TensorType>& types = op->outputs;
    const size_t n_fresh = types.size() - plan.writes.size();
    std::vector<at::Tensor> fresh;
    fresh.reserve(n_fresh);
    for (size_t i = 0; i < n_fresh; ++i) {
      const hlo::TensorType& type = types[i];
      fresh.push_back(
          wrap_buffer(nullptr, type.dtype, type.shape, static_cast<c10::DeviceIndex>(m.device)));
      if (type.numel() > 0)
        group.bind(device_buffer(fresh.back()), first + static_cast<int64_t>(i), type.dtype,
                   type.numel());
    }
    for (size_t i = 0; i < plan.writes.size(); ++i) {
      const CallPlan::Write& w = plan.writes[i];
      group.bind(*m.inputs[w.input].storage, first + static_cast<int64_t>(n_fresh + i), w.dtype,
                 w.numel);
    }
    c10::SmallVector<c10::IValue, 1> self;
    if (m.target != nullptr) {
      self.push_back(*(stack->end() - infos_.size()));
      m.target->bump_version();
    }
    push_results(self, *static_cast<const MetaResult*>(found->extra.get()), fresh, stack);
    return true;
  }

  // The full path. `memo`: the call's signature, to record what it finds under (or null);
  // `replay`: fused mode's (the op it records keeps it).
  void run(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
           torch::jit::Stack* stack, bool buckets, MemoCall* memo,
           const std::shared_ptr<ReplayCall>& replay) {
    Promotion promotion = promote(args);
    c10::ScalarType compute = compute_type(*def_, promotion, args.size() > 2 && args[2].isString());

    OpCall call(name_.c_str());
    if (buckets) call.buckets();
    if (memo != nullptr) call.want_plan();
    call.key(static_cast<int64_t>(compute));
    Operands operands = add_operands(call, args, promotion.scalar_type());
    // The binary checks (ops::Promote) run once per key, and a scalar's kind (bool, int,
    // float) decides them where the dtype it enters in does not (alpha, sub's bool refusal).
    if (def_->promote != ops::Promote::Any)
      for (size_t i = 0; i < infos_.size(); ++i)
        if (infos_[i].kind == ArgKind::Scalar && !args[i].isNone())
          call.key(static_cast<int64_t>(args[i].toScalar().type()));
    // Output shapes at the real sizes; the lowering sees them at the bound.
    std::shared_ptr<const MetaResult> meta_ptr, bound_ptr;
    if (call.bucketed()) {
      meta_ptr = infer(op, args, call.sized_key());
      std::shared_ptr<const MetaResult> probe_ptr;
      // The meta kernel's answer at the bound depends on the key alone, a refusal too: a
      // key refused once is not asked again (a Python meta kernel's error costs tens of µs).
      {
        std::lock_guard<std::mutex> lock(meta_mutex_);
        if (no_bound_.count(call.program_key())) throw NoBound{};
      }
      try {
        bound_ptr = infer(op, args, call.program_key(), &call);
        runtime::ProgramKey probe_key = call.program_key();
        probe_key.add("probe");
        probe_ptr = infer(op, args, probe_key, &call, /*probe=*/true);
      } catch (const std::exception&) {  // c10::Error, or a Python meta kernel's error
        std::lock_guard<std::mutex> lock(meta_mutex_);
        no_bound_.insert(call.program_key());
        throw NoBound{};
      }
      std::vector<std::vector<int64_t>> bound = fresh_sizes(*bound_ptr);
      call.pad_outputs(fresh_sizes(*meta_ptr), bound,
                       OpCall::differ(bound, fresh_sizes(*probe_ptr)));
    } else {
      meta_ptr = bound_ptr = infer(op, args, call.program_key());
      if (buckets && grows_) {
        std::vector<std::vector<bool>> varying = varying_dims(args, *meta_ptr, call.program_key());
        if (!varying.empty()) {
          std::vector<std::vector<int64_t>> real = fresh_sizes(*meta_ptr);
          call.pad_outputs(real, real, varying);
        }
      }
    }
    const MetaResult& meta = *meta_ptr;
    if (replay) {
      replay->extra = meta_ptr;
      call.replay_as(replay);
    }
    // A lowering written for real types only: complex values go where an op without a
    // lowering goes (node_builder's lower_node refuses them too).
    if (!complex_ok_) {
      bool complex = c10::isComplexType(compute);
      for (const hlo::TensorType& t : meta.outputs) complex |= hlo::is_complex(t.dtype);
      if (complex) return tpu_fallback_because(op, stack, "it on complex dtypes");
    }
    const size_t n_fresh = fresh_count(meta);
    for (size_t t = 0; t < operands.targets.size(); ++t) {
      const at::Tensor& target = operands.targets[t];
      TORCH_CHECK(is_tpu(target), name_, ": expected a tpu output tensor, got ", target.device());
      if (operands.target_out[t]) at::native::resize_output(target, meta.sizes.at(n_fresh + t));
    }
    int rng_slot = -1;
    if (def_->random || !operands.generators.empty()) {
      RngDraw draw = take_counters(generator_of(args, operands), rng_counters(meta.outputs));
      call.scalar(c10::Scalar(static_cast<int64_t>(draw.seed)), at::kLong);
      call.scalar(c10::Scalar(static_cast<int64_t>(draw.offset)), at::kLong);
      rng_slot = static_cast<int>(call.num_inputs()) - 2;
    }

    // By value (fused mode runs it later), and without the target tensors, which the
    // program must not keep alive.
    std::vector<at::Tensor> targets = std::move(operands.targets);
    runtime::Emit lowering = [this, operands = std::move(operands), bound_ptr, rng_slot, compute](
                                 hlo::Builder& b, const std::vector<hlo::Value>& in) {
      ops::Node node = make_node(b, in, operands, *bound_ptr, rng_slot);
      node.compute = to_hlo(compute);
      std::vector<hlo::Value> kept;
      try {
        for (std::optional<hlo::Value>& v : lower_node(*def_, node, name_, bound_ptr->undefined))
          if (v) kept.push_back(std::move(*v));
      } catch (const ops::NotImplemented& e) {
        TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
      } catch (const ops::Refused& e) {
        TORCH_CHECK(false, e.what());
      }
      return kept;
    };
    std::vector<at::Tensor> fresh =
        targets.empty() ? call.run(lowering) : call.run_and_write(lowering, n_fresh, targets);
    if (memo != nullptr && call.plan())
      memo_.add(std::move(memo->key), *call.plan(), meta_ptr, memo->generation);
    push_results(args, meta, fresh, stack);
  }

  enum MemoTag : int64_t {
    kMemoTensor = 1,
    kMemoView,
    kMemoCpuScalar,
    kMemoScalar,
    kMemoStatic,
    kMemoPlain
  };

  // The call's memo signature and inputs (aten/call_memo.h), read off the stack; false
  // where the call is not of the memo's form.
  // `fused`: fused mode's form (ReplayCall), where inputs may be pending values.
  bool signature(const torch::jit::Stack& stack, MemoCall& m, bool fused) const {
    const c10::IValue* args = stack.data() + (stack.size() - infos_.size());
    MemoKey& key = m.key;
    // The settings the program key reads.
    key.add(static_cast<int64_t>(matmul_precision()));
    key.add(runtime::current_overrides().id);
    key.add(static_cast<int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
    key.add(bucket_safe_ ? ops::bucket_rule() : 0);
    for (size_t i = 0; i < infos_.size(); ++i) {
      const c10::IValue& v = args[i];
      switch (infos_[i].kind) {
        case ArgKind::Tensor:
        case ArgKind::TensorList:
          if (v.isNone()) {
            key.add(-2);
          } else if (v.isTensor()) {
            if (!memo_tensor(v.toTensor(), m, fused)) return false;
            if (i == 0 && writes_self_ && !memo_target(v.toTensor(), m, fused)) return false;
          } else if (v.isTensorList()) {
            key.add(static_cast<int64_t>(v.toTensorList().size()));
            for (const at::Tensor& t : v.toTensorList())
              if (!memo_tensor(t, m, fused)) return false;
          } else if (v.isOptionalTensorList()) {
            key.add(static_cast<int64_t>(v.toOptionalTensorList().size()));
            for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
              if (!memo_tensor(t ? *t : at::Tensor(), m, fused)) return false;
          } else {
            return false;
          }
          break;
        case ArgKind::Scalar:
          if (v.isNone()) {
            key.add(-1);
          } else if (!memo_scalar(v.toScalar(), /*literal=*/true, m)) {
            return false;
          }
          break;
        case ArgKind::ScalarList:
          key.add(static_cast<int64_t>(v.toListRef().size()));
          for (const c10::IValue& s : v.toListRef())
            if (!memo_scalar(s.toScalar(), /*literal=*/true, m)) return false;
          break;
        case ArgKind::Generator: return false;
        case ArgKind::Static:
          key.add(kMemoStatic);
          if (!memo_static(v, key)) return false;
          break;
      }
    }
    if (m.device < 0) m.device = current_device();
    key.add(m.device);
    return true;
  }

  // A static argument's value as words, kind first, without copying it out of the
  // IValue (to_attr would allocate for lists and strings). Kinds to_attr ignores (device,
  // generator) add their tag only; others take the full path, which reports them.
  static bool memo_static(const c10::IValue& v, MemoKey& key) {
    if (v.isNone() || v.isDevice() || v.isGenerator()) {
      key.add(0);
    } else if (v.isBool() || v.isInt()) {
      key.add(1);
      key.add(v.isBool() ? static_cast<int64_t>(v.toBool()) : v.toInt());
    } else if (v.isDouble()) {
      key.add(2);
      key.add(bits_of(v.toDouble()));
    } else if (v.isString()) {
      key.add(3);
      key.add(static_cast<int64_t>(std::hash<std::string_view>{}(v.toStringView())));
    } else if (v.isIntList() || v.isBoolList() || v.isDoubleList()) {
      const bool doubles = v.isDoubleList();
      c10::ArrayRef<c10::IValue> list = v.toListRef();
      key.add(doubles ? 5 : 4);
      key.add(static_cast<int64_t>(list.size()));
      for (const c10::IValue& e : list)
        key.add(doubles ? bits_of(e.toDouble())
                        : e.isBool() ? static_cast<int64_t>(e.toBool()) : e.toInt());
    } else {
      return false;
    }
    return true;
  }

  // A tensor input: an unpadded, computed storage of its own dtype on the call's device,
  // whole or viewed in part (as OpCall::view_operand reads it: its layout in the
  // signature, its offset a parameter), or a 0-d CPU tensor (a scalar, as OpCall::input
  // takes it). `fused`: the storage may be a pending value instead (whether it is, and a
  // pending view's offset, which the program builds in, are then in the signature).
  static bool memo_tensor(const at::Tensor& t, MemoCall& m, bool fused) {
    MemoKey& key = m.key;
    if (!t.defined()) {
      key.add(-1);
      return true;
    }
    const c10::ScalarType dtype = t.scalar_type();
    if (t.device().is_cpu()) {
      if (t.dim() != 0 || c10::isComplexType(dtype)) return false;
      const bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
      key.add(kMemoCpuScalar);
      key.add(static_cast<int64_t>(dtype));
      key.add(wrapped);
      return memo_scalar(t.item(), wrapped, m);
    }
    if (!t.device().is_privateuseone() || t.layout() != c10::kStrided || t.is_conj() ||
        t.is_neg() || !is_supported(dtype))
      return false;
    const int64_t numel = t.numel();
    if (numel == 0) return false;
    runtime::DeviceBuffer& db = device_buffer(t);
    const bool pending = db.pending >= 0;
    if ((pending ? !fused : !db.buffer) || db.padding || db.dtype != to_hlo(dtype)) return false;
    const int device = t.device().index();
    if (m.device < 0) m.device = device;
    if (device != m.device) return false;  // the full path says which devices
    const bool whole = t.storage_offset() == 0 && t.is_contiguous() && db.numel == numel &&
                       db.nbytes == t.nbytes();
    key.add(whole ? kMemoTensor : kMemoView);
    key.add(static_cast<int64_t>(dtype));
    key.add(static_cast<int64_t>(t.dim()));
    for (int64_t n : t.sizes()) key.add(n);
    if (!whole) {
      // The program reads the view as view_operand lays it out; only the offset may vary.
      const int64_t storage_numel =
          static_cast<int64_t>(db.nbytes) / hlo::byte_width(to_hlo(dtype));
      ops::StridedLayout layout = ops::classify({t.sizes().begin(), t.sizes().end()},
                                                {t.strides().begin(), t.strides().end()},
                                                t.storage_offset(), storage_numel);
      if (layout.kind == ops::StridedLayout::Kind::Dense ||
          layout.kind == ops::StridedLayout::Kind::Empty)
        return false;
      for (int64_t s : t.strides()) key.add(s);
      key.add(static_cast<int64_t>(layout.kind));
      key.add(layout.pad);
      key.add(storage_numel);
      key.add(db.numel);
      if (pending) key.add(t.storage_offset());
    }
    if (fused) key.add(pending);
    int64_t same = -1;  // an earlier input of the same storage: one parameter for both
    for (size_t k = 0; k < m.inputs.size() && same < 0; ++k)
      if (m.inputs[k].storage == &db) same = static_cast<int64_t>(k);
    key.add(same);
    m.inputs.push_back({&db, c10::Scalar(), !whole, whole ? 0 : t.storage_offset()});
    return true;
  }

  // An in-place op's `self` (an input already): a tpu storage, whose old buffer the
  // program may take over (donation) where nothing but the storage holds it
  // (OpCall::plan_writes decides the same way; a fused group decides when it runs).
  static bool memo_target(const at::Tensor& t, MemoCall& m, bool fused) {
    if (m.inputs.size() != 1 || m.inputs[0].storage == nullptr || m.inputs[0].view) return false;
    const MemoInput& in = m.inputs[0];
    if (!fused) m.key.add(in.storage->buffer.use_count() == 1);
    m.target = t.unsafeGetTensorImpl();
    return true;
  }

  // A scalar input: its kind, and its value where it is `literal` and may be built into
  // the program (OpCall::scalar).
  static bool memo_scalar(const c10::Scalar& value, bool literal, MemoCall& m) {
    if (value.isComplex() || value.isSymbolic()) return false;
    MemoKey& key = m.key;
    key.add(kMemoScalar);
    key.add(static_cast<int64_t>(value.type()));
    key.add(literal && OpCall::constant_candidate(value) ? bits_of(value.toDouble()) : kMemoPlain);
    m.inputs.push_back({nullptr, value});
    return true;
  }

  // The defined results' shapes (bucketed ops write no argument: all results are fresh).
  static std::vector<std::vector<int64_t>> fresh_sizes(const MetaResult& meta) {
    std::vector<std::vector<int64_t>> sizes;
    for (size_t k = 0; k < meta.outputs.size(); ++k)
      if (!meta.undefined[k]) sizes.push_back(meta.outputs[k].shape);
    return sizes;
  }

  // A concatenation whose result size keeps changing between calls (a growing cache):
  // from the second size in one bucket on, the dimension it joins along comes back padded
  // at bucket sizes, so the ops that read the result next compile once per bucket. Decided
  // once per program key. Calls belong together (a family) where their inputs differ only
  // within one bucket along that dimension: the other dimensions must be equal, or two
  // unrelated calls of one step (rotate_half's cat of the query's 4 heads, then of the
  // key's 2) would look like a size that keeps changing.
  std::vector<std::vector<bool>> varying_dims(const std::vector<c10::IValue>& args,
                                              const MetaResult& meta,
                                              const runtime::ProgramKey& key) {
    std::lock_guard<std::mutex> lock(meta_mutex_);
    auto known = varying_.find(key);
    if (known != varying_.end()) return known->second;
    const int64_t along = args.size() > 1 && args[1].isInt() ? args[1].toInt() : 0;
    runtime::ProgramKey family;
    family.add(along);
    for (const at::Tensor& t : tensors_of(args.at(0))) {
      family.add(t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1);
      if (!t.defined()) continue;
      const int64_t rank = t.dim(), joined = along < 0 ? along + rank : along;
      family.add(rank);
      for (int64_t d = 0; d < rank; ++d)
        family.add(d == joined ? ops::bucket(t.size(d)) : t.size(d));
    }
    std::vector<std::vector<int64_t>> now = fresh_sizes(meta);
    std::vector<std::vector<std::vector<int64_t>>>& seen = seen_sizes_[family];
    std::vector<std::vector<bool>> varying;
    if (!seen.empty()) {
      bool any = false;
      varying.resize(now.size());
      for (size_t i = 0; i < now.size(); ++i) {
        varying[i].assign(now[i].size(), false);
        for (const auto& earlier : seen)
          for (size_t d = 0; d < now[i].size(); ++d)
            if (earlier.at(i).size() == now[i].size() && earlier[i][d] != now[i][d])
              any = varying[i][d] = true;
      }
      if (!any) varying.clear();
    }
    if (seen.size() < 4) seen.push_back(now);
    return varying_.emplace(key, std::move(varying)).first->second;
  }

  // Where each argument went: its lowering inputs, static attributes, write targets.
  struct Operands {
    std::vector<std::vector<int>> slots;  // per argument, its lowering input indices (-1: None)
    std::vector<ops::Attr> attrs;
    std::vector<at::Tensor> targets;  // tensors the op writes, in argument order
    std::vector<bool> target_out;     // ... and whether each is an out= argument
    std::vector<size_t> generators;   // Generator? arguments
  };

  Promotion promote(const std::vector<c10::IValue>& args) const {
    Promotion promotion;
    for (size_t i = 0; i < infos_.size(); ++i) {
      const ArgInfo& info = infos_[i];
      if (info.out || !promotes(*def_, i)) continue;
      if (info.kind == ArgKind::Tensor || info.kind == ArgKind::TensorList) {
        for (const at::Tensor& t : tensors_of(args[i]))
          if (t.defined()) promotion.add(t);
      } else if (info.kind == ArgKind::Scalar && !args[i].isNone()) {
        promotion.add(args[i].toScalar());
      } else if (info.kind == ArgKind::ScalarList) {
        for (const c10::IValue& s : args[i].toListRef()) promotion.add(s.toScalar());
      }
    }
    return promotion;
  }

  // Feeds tensors and scalars to `call` and hashes every other argument into its key.
  Operands add_operands(OpCall& call, const std::vector<c10::IValue>& args,
                        c10::ScalarType scalar_type) const {
    const size_t n = infos_.size();
    Operands o;
    o.slots.resize(n);
    o.attrs.resize(n);
    int next = 0;
    for (size_t i = 0; i < n; ++i) {
      const ArgInfo& info = infos_[i];
      const c10::IValue& v = args[i];
      switch (info.kind) {
        case ArgKind::Tensor:
        case ArgKind::TensorList: {
          std::vector<at::Tensor> ts = tensors_of(v);
          call.key(static_cast<int64_t>(ts.size()));
          for (const at::Tensor& t : ts) {
            if (info.mutated && t.defined()) {
              o.targets.push_back(t);
              o.target_out.push_back(info.out);
            }
            if (!t.defined() || info.out) {
              call.key(-1);
              o.slots[i].push_back(-1);
              continue;
            }
            call.input(t);
            o.slots[i].push_back(next++);
          }
          if (v.isNone()) call.key(-2);
          break;
        }
        case ArgKind::Scalar:
          if (v.isNone()) {
            call.key(-1);
            break;
          }
          call.scalar(v.toScalar(), scalar_type, /*literal=*/true);
          o.slots[i].push_back(next++);
          break;
        case ArgKind::ScalarList:
          call.key(static_cast<int64_t>(v.toListRef().size()));
          for (const c10::IValue& s : v.toListRef()) {
            call.scalar(s.toScalar(), scalar_type, /*literal=*/true);
            o.slots[i].push_back(next++);
          }
          break;
        case ArgKind::Generator: o.generators.push_back(i); break;
        case ArgKind::Static:
          o.attrs[i] = to_attr(v);
          add_attr_key(call, o.attrs[i]);
          break;
      }
    }
    return o;
  }

  // The op's explicit generator, else the default one of the device its tensors are on.
  at::Generator generator_of(const std::vector<c10::IValue>& args, const Operands& o) const {
    if (!o.generators.empty() && !args[o.generators[0]].isNone())
      return args[o.generators[0]].toGenerator();
    c10::DeviceIndex device = current_device();
    for (const c10::IValue& v : args)
      for (const at::Tensor& t : tensors_of(v))
        if (is_tpu(t)) device = t.device().index();
    return default_generator(device);
  }

  // The Node the lowering sees, from the program's inputs `in`.
  ops::Node make_node(hlo::Builder& b, const std::vector<hlo::Value>& in, const Operands& o,
                      const MetaResult& meta, int rng_slot) const {
    ops::Node node{b};
    node.outputs = meta.outputs;
    node.args.resize(infos_.size());
    if (rng_slot >= 0) node.rng = rng_state(b, in[rng_slot], in[rng_slot + 1]);
    for (size_t i = 0; i < infos_.size(); ++i) {
      ops::Operand& operand = node.args[i];
      const ArgInfo& info = infos_[i];
      operand.attr = o.attrs[i];
      if (info.kind == ArgKind::Generator) {
        operand.value = node.rng;
        continue;
      }
      bool single = info.kind == ArgKind::Tensor || info.kind == ArgKind::Scalar;
      for (int slot : o.slots[i]) {
        std::optional<hlo::Value> v;
        if (slot >= 0) v = in[slot];
        if (single)
          operand.value = v;
        else
          operand.values.push_back(v);
      }
    }
    return node;
  }

  void read_schema(const c10::OperatorHandle& op) {
    const c10::FunctionSchema& schema = op.schema();
    for (const c10::Argument& a : schema.arguments()) {
      ArgInfo info;
      info.kind = classify(a.type());
      if (a.alias_info() && a.alias_info()->isWrite()) {
        info.mutated = true;
        info.out = a.kwarg_only();
        info.alias = a.alias_info()->beforeSets();
        if (info.out)
          out_arg_ = static_cast<int>(infos_.size());
        else
          in_place_ |= infos_.empty();
      }
      if (a.name() == "alpha") alpha_arg_ = static_cast<int>(infos_.size());
      infos_.push_back(std::move(info));
    }
    for (const c10::Argument& r : schema.returns()) {
      ReturnInfo ret;
      ret.list = classify(r.type()) == ArgKind::TensorList;
      if (r.alias_info()) {
        for (size_t i = 0; i < infos_.size(); ++i)
          if (infos_[i].alias && *infos_[i].alias == r.alias_info()->beforeSets()) ret.alias = i;
        TORCH_CHECK(ret.alias >= 0, name_, ": cannot match the returned alias to an argument");
      }
      returns_.push_back(ret);
    }
    bool writes = false;
    for (const ArgInfo& info : infos_) writes |= info.mutated;
    bucket_safe_ = ops::bucket_safe(name_) && !def_->random && !writes;
    checks_overlap_ =
        writes && (op.hasTag(at::Tag::pointwise) || name_.rfind("_foreach_", 0) == 0);
    grows_ = bucket_safe_ && name_ == "cat";
    bool generator = false;
    for (const ArgInfo& info : infos_) generator |= info.kind == ArgKind::Generator;
    // Fresh results, or `self` written in place (and returned).
    writes_self_ = writes && in_place_ && infos_[0].kind == ArgKind::Tensor;
    bool others = false;  // written or returned arguments other than a written self
    for (size_t i = 1; i < infos_.size(); ++i) others |= infos_[i].mutated;
    for (const ReturnInfo& ret : returns_)
      others |= ret.alias > 0 || (ret.alias == 0 && !writes_self_);
    memo_ok_ = !def_->random && !generator && !grows_ && !others && (!writes || writes_self_);
  }

  // Defined fresh results: the tensors the program makes.
  size_t fresh_count(const MetaResult& meta) const {
    size_t count = 0, next = 0;
    for (size_t r = 0; r < returns_.size(); ++r) {
      if (returns_[r].alias >= 0) continue;
      int64_t list_len = meta.fresh_list_lengths[r];
      size_t len = list_len < 0 ? 1 : static_cast<size_t>(list_len);
      for (size_t k = 0; k < len; ++k) count += !meta.undefined[next++];
    }
    return count;
  }

  // Output shapes and dtypes from the meta kernel, cached by program key except for out=
  // forms (their result shape may depend on scalar values, as arange's does).
  // With `bound`, inputs it reads at their bound have their bound sizes.
  std::shared_ptr<const MetaResult> infer(const c10::OperatorHandle& op,
                                          const std::vector<c10::IValue>& args,
                                          const runtime::ProgramKey& key,
                                          const OpCall* bound = nullptr, bool probe = false) {
    bool has_out = false;
    for (const ArgInfo& info : infos_) has_out |= info.out;
    if (!has_out) {
      std::lock_guard<std::mutex> lock(meta_mutex_);
      auto it = meta_cache_.find(key);
      if (it != meta_cache_.end()) return it->second;
    }
    if (bound == nullptr && def_->promote != ops::Promote::Any)
      check_binary(def_->promote, args, in_place_, out_arg_, alpha_arg_);
    if (bound == nullptr && cpu_check_ != nullptr) cpu_check_(args);
    torch::jit::Stack meta_stack;
    std::vector<c10::IValue> meta_args;
    for (const c10::IValue& v : args) meta_args.push_back(meta_value(v, bound, probe));
    meta_stack = meta_args;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      runtime::metrics().meta_calls++;
      op.callBoxed(meta_stack);
    }
    auto shared = std::make_shared<MetaResult>();
    MetaResult& result = *shared;
    result.fresh_list_lengths.assign(returns_.size(), -1);
    auto add = [&](const at::Tensor& t) {
      result.undefined.push_back(!t.defined());
      if (!t.defined()) {
        result.outputs.push_back({hlo::DType::F32, {0}});
        result.sizes.push_back({0});
        return;
      }
      result.outputs.push_back({to_hlo(t.scalar_type()), t.sizes().vec()});
      result.sizes.push_back(t.sizes().vec());
    };
    for (size_t r = 0; r < returns_.size(); ++r) {
      if (returns_[r].alias >= 0) continue;
      const c10::IValue& v = meta_stack.at(r);
      if (returns_[r].list) {
        auto list = v.toTensorList();
        result.fresh_list_lengths[r] = static_cast<int64_t>(list.size());
        for (const at::Tensor& t : list) add(t);
      } else {
        add(v.isNone() ? at::Tensor() : v.toTensor());
      }
    }
    for (size_t i = 0; i < infos_.size(); ++i) {
      if (!infos_[i].mutated) continue;
      for (const at::Tensor& t : tensors_of(meta_args[i]))
        if (t.defined()) add(t);  // an absent optional target (None) gets no result
    }
    if (!has_out) {
      std::lock_guard<std::mutex> lock(meta_mutex_);
      meta_cache_.emplace(key, shared);
    }
    return shared;
  }

  void push_results(c10::ArrayRef<c10::IValue> args, const MetaResult& meta,
                    const std::vector<at::Tensor>& fresh, torch::jit::Stack* stack) const {
    torch::jit::drop(*stack, infos_.size());
    size_t next = 0, output = 0;
    auto take = [&] { return meta.undefined.at(output++) ? at::Tensor() : fresh.at(next++); };
    for (size_t r = 0; r < returns_.size(); ++r) {
      const ReturnInfo& ret = returns_[r];
      if (ret.alias >= 0) {
        stack->push_back(args[ret.alias]);
      } else if (ret.list) {
        c10::List<at::Tensor> list;
        for (int64_t k = 0; k < meta.fresh_list_lengths[r]; ++k) list.push_back(take());
        stack->push_back(std::move(list));
      } else {
        stack->push_back(take());
      }
    }
  }

  struct ReturnInfo {
    bool list = false;
    int64_t alias = -1;  // the argument this return is, or -1 for a fresh result
  };

  const ops::OpDef* def_;
  std::string name_;
  bool complex_ok_;  // ops::complex_ok(name_), looked up once, not per call
  std::once_flag schema_once_;
  std::vector<ArgInfo> infos_;
  std::vector<ReturnInfo> returns_;
  std::mutex meta_mutex_;
  std::unordered_map<runtime::ProgramKey, std::shared_ptr<const MetaResult>,
                     runtime::ProgramKeyHash>
      meta_cache_;
  // For the binary checks (ops::Promote): whether `self` is written, the out= argument
  // and the alpha argument (-1: none).
  bool in_place_ = false;
  int out_arg_ = -1, alpha_arg_ = -1;
  const CpuCheck cpu_check_;  // CPU's own checks where the meta kernel's differ
  bool bucket_safe_ = false;  // ops/bounded.h lists it, and it writes no argument
  bool grows_ = false;        // cat: results padded when their size keeps changing
  // Calls may take the memo (aten/call_memo.h): fresh results or `self` written, no
  // randomness.
  bool memo_ok_ = false;
  bool writes_self_ = false;  // an in-place op: `self` is written (and returned)
  // A pointwise (TensorIterator) or foreach op: written tensors may not partly overlap
  // an input (check_overlap).
  bool checks_overlap_ = false;
  CallMemo<MetaResult> memo_;
  std::unordered_map<runtime::ProgramKey, std::vector<std::vector<bool>>, runtime::ProgramKeyHash>
      varying_;
  std::unordered_map<runtime::ProgramKey, std::vector<std::vector<std::vector<int64_t>>>,
                     runtime::ProgramKeyHash>
      seen_sizes_;
  // Bucketed program keys whose meta kernel refused the inputs at their bound (NoBound).
  std::unordered_set<runtime::ProgramKey, runtime::ProgramKeyHash> no_bound_;
};

}  // namespace

void register_lowered_ops() {
  static torch::Library* library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                   __FILE__, __LINE__);
    for (const std::string& name : ops::lowering_names()) {
      const ops::OpDef* def = ops::find_lowering(name);
      if (def->graph_only) continue;
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                  std::make_unique<LoweredKernel>(def, name)));
    }
    return lib;
  }();
  (void)library;
}

}  // namespace torch_tpu::aten
