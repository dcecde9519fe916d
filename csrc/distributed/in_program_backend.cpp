#include "distributed/in_program_backend.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <any>
#include <map>
#include <memory>
#include <mutex>

#include "aten/allocator.h"
#include "aten/dtype.h"
#include "aten/op_call.h"
#include "distributed/backend.h"
#include "distributed/checks.h"
#include "distributed/coalescing.h"
#include "distributed/collective_program.h"
#include "distributed/host_staged_backend.h"
#include "distributed/rendezvous.h"
#include "distributed/work.h"
#include "hlo/types.h"
#include "ops/strided.h"
#include "pjrt/compile_options.h"
#include "runtime/executable_cache.h"
#include "runtime/fused_group.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"

namespace torch_tpu::distributed {

namespace {

using c10d::OpType;
using c10d::ReduceOp;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;
using BufferPtr = std::shared_ptr<pjrt::Buffer>;

using Kind = Collective;
using Spec = CollectiveSpec;

std::shared_ptr<const runtime::CompiledProgram> compiled(const Spec& s,
                                                         const std::vector<int64_t>& ids) {
  const int n = static_cast<int>(ids.size());
  return replicated_cache(ids).get(program_key(s, ids),
                                   [&] { return build_collective_program(s, n); });
}

// ---------------------------------------------------------------------------------------
// Reading inputs and delivering outputs.

// The tensor's elements as a dense 1-d buffer of its dtype (the storage's own buffer when
// the tensor covers it; otherwise a contiguous copy). Flushes fused work it depends on.
BufferPtr dense_buffer(const at::Tensor& t) {
  runtime::FusedGroup& group = runtime::FusedGroup::get();
  hlo::DType dtype = aten::to_hlo(t.scalar_type());
  if (t.numel() == 0) {
    uint64_t unused = 0;
    return runtime::Runtime::get().upload(&unused, dtype, {0}, t.device().index());
  }
  runtime::DeviceBuffer& db = aten::device_buffer(t);
  group.ready(db);
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  auto layout = ops::classify(sizes, strides, t.storage_offset(),
                              static_cast<int64_t>(db.nbytes) / hlo::byte_width(dtype));
  if (layout.kind == ops::StridedLayout::Kind::Dense && db.buffer && !db.padding &&
      db.dtype == dtype)
    return db.buffer;
  at::Tensor dense = db.written() ? aten::plain_contiguous(t) : at::zeros_like(t);
  return group.ready(aten::device_buffer(dense));
}

// Makes `buffer` (1-d, dst's dtype and element count) the contents of `dst`.
void deliver(const at::Tensor& dst, BufferPtr buffer) {
  SameVersions same(std::vector<at::Tensor>{dst});
  if (dst.numel() == 0 || aten::adopt_buffer(dst, buffer)) return;  // adopted: no program
  dst.copy_(aten::wrap_buffer(std::move(buffer), aten::to_hlo(dst.scalar_type()), dst.sizes(),
                              dst.device().index()));
}

// ---------------------------------------------------------------------------------------
// Running a collective once every rank arrived (see rendezvous.h).

// One rank's part of a collective: the rendezvous's Arrival payload.
struct Contribution {
  Spec spec;
  std::vector<BufferPtr> args;  // the program's arguments, on this rank's device
  Tensors targets;              // receive the outputs, in order
  Tensors result;               // what the Work's result() is
  int device = -1;
};

// Launches ONE PJRT_LoadedExecutable_Execute over the group's devices with one argument
// list per rank (never one launch per device, which would need a shared launch id and
// deadlocks from one thread) and waits for it (Runtime::execute_replicated); each rank's
// outputs become its tensors' new buffers.
Rendezvous::Run collective_runner(const std::vector<int>& devices) {
  std::vector<int64_t> ids;
  runtime::Runtime& rt = runtime::Runtime::get();
  for (int d : devices) ids.push_back(rt.device_id(d));
  return [devices, ids](std::vector<Arrival>& ranks) {
    const int size = static_cast<int>(ranks.size());
    std::vector<Contribution*> parts;
    for (auto& a : ranks) parts.push_back(std::any_cast<Contribution>(&a.payload));
    const Spec& spec = parts[0]->spec;
    if (spec.kind != Kind::Barrier) {
      auto program = compiled(spec, ids);
      std::vector<std::vector<PJRT_Buffer*>> args(size);
      std::vector<BufferPtr> masks;
      for (int r = 0; r < size; ++r) {
        if (spec.kind == Kind::Broadcast) {
          masks.push_back(
              runtime::Runtime::get().scalar(devices[r], hlo::DType::Pred, r == spec.root));
          masks.back()->await_ready();
          args[r].push_back(masks.back()->raw());
        }
        for (const auto& b : parts[r]->args) {
          b->await_ready();  // see Runtime::execute_replicated: all replicas start at once
          args[r].push_back(b->raw());
        }
      }
      runtime::trace::Scope traced("tpu_dist::in_program_collective");
      traced.text("transport", "in-program");
      traced.text("program", program->fingerprint);
      traced.number("ranks", size);
      auto outputs = runtime::Runtime::get().execute_replicated(*program->executable(), args);
      runtime::metrics().in_program_collectives++;
      for (int r = 0; r < size; ++r) {
        Contribution& c = *parts[r];
        c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, c.device));
        at::NoGradGuard no_grad;
        for (size_t i = 0; i < c.targets.size(); ++i) deliver(c.targets[i], outputs[r].at(i));
      }
    }
    for (int r = 0; r < size; ++r) ranks[r].future->markCompleted(c10::IValue(parts[r]->result));
  };
}

class InProgramBackend final : public Backend {
 public:
  InProgramBackend(int rank, int size, std::vector<int> devices, const std::string& key,
                   std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> fallback)
      : Backend(rank, size),
        device_(devices.at(rank)),
        devices_(devices),
        rendezvous_(Rendezvous::shared(key, size, timeout, collective_runner(devices))),
        fallback_(std::move(fallback)) {
    runtime::metrics().in_program_groups++;
  }

  const std::string getBackendName() const override { return "tpu_dist"; }

  WorkPtr allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override {
    Spec s = spec(Kind::AllReduce, "all_reduce", tensors);
    set_reduce(s, opts.reduceOp);
    for (const auto& t : tensors) s.outputs.push_back(t.numel());
    return submit(OpType::ALLREDUCE, std::move(s), tensors, tensors, tensors);
  }

  WorkPtr allreduce_coalesced(Tensors& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce(tensors, opts);
  }

  WorkPtr broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override {
    TORCH_CHECK(opts.rootTensor == 0, "tpu_dist: broadcast takes its root tensor at index 0");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "tpu_dist: broadcast root ",
                opts.rootRank, " is not a rank of the group of ", getSize());
    Spec s = spec(Kind::Broadcast, "broadcast", tensors);
    s.root = opts.rootRank;
    for (const auto& t : tensors) s.outputs.push_back(t.numel());
    return submit(OpType::BROADCAST, std::move(s), tensors, tensors, tensors);
  }

  WorkPtr allgather(std::vector<Tensors>& outputs, Tensors& inputs,
                    const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
                "tpu_dist: all_gather takes one input tensor and one output list");
    return allgather_coalesced(outputs, inputs, opts);
  }

  WorkPtr allgather_coalesced(std::vector<Tensors>& outputs, Tensors& inputs,
                              const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "tpu_dist: all_gather_coalesced needs one output list per input");
    Spec s = spec(Kind::AllGather, "all_gather", inputs);
    s.split = true;
    Tensors targets;
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_list(outputs[i], inputs[i], "all_gather", getSize(), device_);
      for (const auto& t : outputs[i]) {
        targets.push_back(t);
        s.outputs.push_back(t.numel());
      }
    }
    return submit(OpType::ALLGATHER, std::move(s), inputs, targets, targets);
  }

  WorkPtr allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::AllgatherOptions&) override {
    check_whole(outputs, inputs, "all_gather_into_tensor", "output", "input", getSize(), device_);
    Spec s = spec(Kind::AllGather, "all_gather_into_tensor", inputs);
    for (const auto& t : outputs) s.outputs.push_back(t.numel());
    return submit(OpType::_ALLGATHER_BASE, std::move(s), inputs, outputs, outputs);
  }

  WorkPtr reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "tpu_dist: reduce_scatter takes one output tensor and one input list");
    check_list(inputs[0], outputs[0], "reduce_scatter", getSize(), device_);
    Spec s = spec(Kind::ReduceScatter, "reduce_scatter", inputs[0]);
    set_reduce(s, opts.reduceOp);
    check_scatter_reduce(s);
    s.group = getSize();
    s.outputs.push_back(outputs[0].numel());
    return submit(OpType::REDUCE_SCATTER, std::move(s), inputs[0], outputs, outputs);
  }

  WorkPtr reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    check_whole(inputs, outputs, "reduce_scatter_tensor", "input", "output", getSize(), device_);
    Spec s = spec(Kind::ReduceScatter, "reduce_scatter_tensor", inputs);
    set_reduce(s, opts.reduceOp);
    check_scatter_reduce(s);
    for (const auto& t : outputs) s.outputs.push_back(t.numel());
    return submit(OpType::_REDUCE_SCATTER_BASE, std::move(s), inputs, outputs, outputs);
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits,
                        const c10d::AllToAllOptions& opts) override {
    const int n = getSize();
    auto even = [&](const std::vector<int64_t>& splits, const at::Tensor& t) {
      if (t.dim() == 0 || t.size(0) % n != 0) return false;
      for (int64_t s : splits)
        if (s != t.size(0) / n) return false;
      return splits.empty() || splits.size() == static_cast<size_t>(n);
    };
    if (!even(input_splits, input) || !even(output_splits, output) ||
        input.numel() != output.numel()) {
      return coalescing_.record(
          fallback("all_to_all_single with uneven splits")
              ->alltoall_base(output, input, output_splits, input_splits, opts));
    }
    Tensors ins{input}, outs{output};
    Spec s = spec(Kind::AllToAll, "all_to_all_single", ins);
    s.outputs.push_back(output.numel());
    return submit(OpType::ALLTOALL_BASE, std::move(s), ins, outs, outs);
  }

  WorkPtr alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()) &&
                    inputs.size() == static_cast<size_t>(getSize()),
                "tpu_dist: all_to_all takes world_size (", getSize(), ") input and output tensors");
    bool even = true;
    for (size_t i = 0; i < inputs.size(); ++i)
      even &= inputs[i].numel() == inputs[0].numel() && outputs[i].numel() == inputs[0].numel();
    if (!even)
      return coalescing_.record(
          fallback("all_to_all with tensors of different sizes")->alltoall(outputs, inputs, opts));
    Spec s = spec(Kind::AllToAll, "all_to_all", inputs);
    s.group = getSize();
    s.split = true;
    for (const auto& t : outputs) s.outputs.push_back(t.numel());
    return submit(OpType::ALLTOALL, std::move(s), inputs, outputs, outputs);
  }

  WorkPtr barrier(const c10d::BarrierOptions&) override {
    // Every rank has reached it once the rendezvous completes; then this rank's device
    // work so far is waited for, as a device barrier does.
    Tensors none;
    Spec s = spec(Kind::Barrier, "barrier", none);
    WorkPtr work = submit(OpType::BARRIER, std::move(s), none, none, none);
    int device = device_;
    auto done = work->getFuture()->then(
        [device](c10::ivalue::Future& f) {
          f.value();
          runtime::Runtime::get().synchronize(device);
          return c10::IValue(Tensors());
        },
        c10::ListType::ofTensors());
    return coalescing_.record(c10::make_intrusive<FutureWork>(OpType::BARRIER, done));
  }

  // What the in-program transport does not run goes through the host-staged one.
  WorkPtr reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override {
    flush();
    return coalescing_.record(fallback("reduce")->reduce(tensors, opts));
  }
  WorkPtr gather(std::vector<Tensors>& outputs, Tensors& inputs,
                 const c10d::GatherOptions& opts) override {
    flush();
    return coalescing_.record(fallback("gather")->gather(outputs, inputs, opts));
  }
  WorkPtr scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                  const c10d::ScatterOptions& opts) override {
    flush();
    return coalescing_.record(fallback("scatter")->scatter(outputs, inputs, opts));
  }
  WorkPtr send(Tensors& tensors, int dst, int tag) override {
    flush();
    return coalescing_.record(fallback("send")->send(tensors, dst, tag));
  }
  WorkPtr recv(Tensors& tensors, int src, int tag) override {
    flush();
    return coalescing_.record(fallback("recv")->recv(tensors, src, tag));
  }
  WorkPtr recvAnysource(Tensors& tensors, int tag) override {
    flush();
    return coalescing_.record(fallback("recv")->recvAnysource(tensors, tag));
  }
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override {
    fallback("monitored_barrier")->monitoredBarrier(opts, wait_all_ranks);
  }

  // c10d's _coalescing_manager(device=...) and batch_isend_irecv: see coalescing.h.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override { coalescing_.start(); }
  WorkPtr endCoalescing() override { return coalescing_.end(); }

  const std::vector<int>& devices() const { return devices_; }

  // A collective the caller runs itself (Arrival::run): the group's next in sequence.
  void arrive(Arrival a) {
    flush();
    rendezvous_->arrive(getRank(), seq_++, std::move(a));
  }

  void setTimeout(std::chrono::milliseconds timeout) override {
    rendezvous_->set_timeout(timeout);
    if (fallback_) fallback_->setTimeout(timeout);
  }
  void abort() override {
    if (fallback_) fallback_->abort();
  }
  void shutdown() override {
    if (fallback_) fallback_->shutdown();
  }

 private:
  static void flush() {
    runtime::FusedGroup& group = runtime::FusedGroup::get();
    if (group.pending_ops() > 0) group.flush();
  }

  c10d::Backend* fallback(const char* what) {
    TORCH_CHECK_NOT_IMPLEMENTED(fallback_, "tpu_dist: ", what,
                                " is not implemented by the in-program transport and this "
                                "group has no host-staged fallback; set "
                                "TORCH_TPU_DIST_TRANSPORT=host to use the host-staged one");
    return fallback_.get();
  }

  // A spec over `inputs` (all on this rank's device, one dtype).
  Spec spec(Kind kind, const char* name, const Tensors& inputs) {
    Spec s;
    s.kind = kind;
    s.name = name;
    if (kind != Kind::Barrier) check_tensors(inputs, name, device_);
    for (const auto& t : inputs) s.inputs.push_back(t.numel());
    if (!inputs.empty()) s.dtype = aten::to_hlo(inputs[0].scalar_type());
    return s;
  }

  void set_reduce(Spec& s, const ReduceOp& op) {
    static const std::map<ReduceOp::RedOpType, Reduce> reduces{
        {ReduceOp::SUM, Reduce::Sum},
        {ReduceOp::AVG, Reduce::Avg},
        {ReduceOp::PRODUCT, Reduce::Product},
        {ReduceOp::MIN, Reduce::Min},
        {ReduceOp::MAX, Reduce::Max},
        {ReduceOp::BAND, Reduce::BitAnd},
        {ReduceOp::BOR, Reduce::BitOr},
        {ReduceOp::BXOR, Reduce::BitXor},
        {ReduceOp::PREMUL_SUM, Reduce::PremulSum}};
    auto it = reduces.find(op.op_);
    TORCH_CHECK_NOT_IMPLEMENTED(it != reduces.end(), "tpu_dist: ", s.name,
                                " does not support reduce op ", static_cast<int>(op.op_));
    s.reduce = it->second;
    if (s.reduce == Reduce::PremulSum) {
      const c10d::PreMulSumSupplement& factor = premul_factor(op);
      TORCH_CHECK_NOT_IMPLEMENTED(!factor.tensor_factor.defined(),
                                  "tpu_dist (in-program): PREMUL_SUM with a tensor factor is "
                                  "not implemented; use a Python number");
      TORCH_CHECK(hlo::is_float(s.dtype), "tpu_dist: PREMUL_SUM needs a floating dtype");
      s.premul = factor.double_factor;
    }
    TORCH_CHECK(can_reduce(s.reduce, s.dtype), "tpu_dist: ", s.name,
                ": bitwise reductions need an integer or bool dtype, got ",
                hlo::mlir_name(s.dtype));
  }

  static void check_scatter_reduce(const Spec& s) {
    TORCH_CHECK_NOT_IMPLEMENTED(!reduces_bitwise(s.reduce, s.dtype), "tpu_dist: ", s.name,
                                " with a bitwise reduce op is not implemented by the "
                                "in-program transport (TORCH_TPU_DIST_TRANSPORT=host has it)");
  }

  WorkPtr submit(OpType type, Spec s, const Tensors& inputs, const Tensors& targets,
                 const Tensors& result) {
    flush();
    Contribution c;
    for (const auto& t : inputs) c.args.push_back(dense_buffer(t));
    c.targets = targets;
    c.result = result;
    c.device = device_;
    Arrival a;
    a.op = s.name;
    a.signature = signature(s);
    a.shapes = describe(inputs);
    a.future = FutureWork::pending();
    FuturePtr future = a.future;
    c.spec = std::move(s);
    a.payload = std::move(c);
    rendezvous_->arrive(getRank(), seq_++, std::move(a));
    return coalescing_.record(c10::make_intrusive<FutureWork>(type, std::move(future)));
  }

  const int device_;
  const std::vector<int> devices_;
  std::shared_ptr<Rendezvous> rendezvous_;
  c10::intrusive_ptr<c10d::Backend> fallback_;
  Coalescing coalescing_;
  uint64_t seq_ = 0;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_in_program_backend(
    int rank, int size, std::vector<int> devices, const std::string& group_key,
    std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> fallback) {
  TORCH_CHECK(static_cast<int>(devices.size()) == size, "tpu_dist: in-program transport needs ",
              "one device per rank (", size, "), got ", devices.size());
  int count = runtime::Runtime::get().device_count();
  for (size_t i = 0; i < devices.size(); ++i) {
    TORCH_CHECK(devices[i] >= 0 && devices[i] < count, "tpu_dist: rank ", i,
                " would use tpu:", devices[i], " but this process has ", count, " tpu device(s)");
    for (size_t j = 0; j < i; ++j)
      TORCH_CHECK(devices[i] != devices[j], "tpu_dist: ranks ", j, " and ", i,
                  " would share tpu:", devices[i],
                  "; the in-program transport needs one "
                  "device per rank");
  }
  return c10::make_intrusive<InProgramBackend>(rank, size, std::move(devices), group_key, timeout,
                                               std::move(fallback));
}

runtime::ExecutableCache& replicated_cache(const std::vector<int64_t>& ids) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::unique_ptr<runtime::ExecutableCache>> caches;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = caches[ids];
  if (!slot) {
    std::string options = pjrt::encode_replicated_options(ids);
    slot = std::make_unique<runtime::ExecutableCache>([options](const std::string& mlir) {
      return runtime::Runtime::get().client().compile(mlir, options);
    });
  }
  return *slot;
}

std::vector<int> in_program_devices(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* b = dynamic_cast<InProgramBackend*>(backend.get());
  return b ? b->devices() : std::vector<int>{};
}

int in_program_rank(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* b = dynamic_cast<InProgramBackend*>(backend.get());
  return b ? b->getRank() : -1;
}

void arrive_in_program(const c10::intrusive_ptr<c10d::Backend>& backend, Arrival arrival) {
  auto* b = dynamic_cast<InProgramBackend*>(backend.get());
  TORCH_CHECK(b != nullptr, "tpu_dist: ", arrival.op, " needs a group of the in-program transport");
  b->arrive(std::move(arrival));
}

std::string transport_of(const c10::intrusive_ptr<c10d::Backend>& backend) {
  if (dynamic_cast<InProgramBackend*>(backend.get()) != nullptr) return "in_program";
  if (backend && backend->getBackendName() == "tpu_dist") return "host_staged";
  return "";
}

}  // namespace torch_tpu::distributed
