#include "distributed/in_program_backend.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "aten/allocator.h"
#include "aten/dtype.h"
#include "aten/op_call.h"
#include "distributed/coalescing.h"
#include "distributed/host_staged_backend.h"
#include "hlo/builder.h"
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
using Tensors = std::vector<at::Tensor>;
using FuturePtr = c10::intrusive_ptr<c10::ivalue::Future>;
using BufferPtr = std::shared_ptr<pjrt::Buffer>;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------
// What one collective computes: every rank of the group must describe the same one.

enum class Kind : int64_t { AllReduce, Broadcast, AllGather, ReduceScatter, AllToAll, Barrier };

struct Spec {
  Kind kind = Kind::Barrier;
  const char* name = "barrier";  // the c10d op, for messages
  ReduceOp::RedOpType reduce = ReduceOp::SUM;
  double premul = 1.0;  // PREMUL_SUM's factor
  hlo::DType dtype = hlo::DType::F32;
  // Element counts of the program's arguments (flat 1-d buffers), per rank.
  std::vector<int64_t> inputs;
  // Element counts of the program's outputs, per rank, in delivery order.
  std::vector<int64_t> outputs;
  // AllGather: whether each gathered input is split into one output per rank (the list
  // forms) or stays one output. ReduceScatter/AllToAll: arguments joined per output.
  bool split = false;
  int64_t group = 1;
  int64_t root = -1;  // Broadcast
  std::string shapes;  // the tensors as the caller passed them, for messages

  // What must be equal across ranks, as text (compared exactly, shown on a mismatch).
  std::string signature() const {
    std::string s = std::string(name) + "(";
    if (kind == Kind::AllReduce || kind == Kind::ReduceScatter) {
      s += "op=" + std::to_string(static_cast<int>(reduce));
      if (reduce == ReduceOp::PREMUL_SUM) s += "*" + std::to_string(premul);
      s += ", ";
    }
    if (kind == Kind::Broadcast) s += "root=" + std::to_string(root) + ", ";
    s += std::string("dtype=") + hlo::mlir_name(dtype) + ", in=[";
    for (size_t i = 0; i < inputs.size(); ++i) s += (i ? "," : "") + std::to_string(inputs[i]);
    s += "], out=[";
    for (size_t i = 0; i < outputs.size(); ++i) s += (i ? "," : "") + std::to_string(outputs[i]);
    return s + "])";
  }
};

// The cache key of a collective's program. Everything that changes the program: the op,
// reduce op and factor, dtype, every argument's and output's element count, the layout
// flags, the world size and the device ids (the compile's device assignment). The root
// of a broadcast is not in it: it enters as each rank's runtime mask.
runtime::ProgramKey program_key(const Spec& s, const std::vector<int64_t>& device_ids) {
  runtime::ProgramKey key;
  key.add("tpu_dist.in_program");
  key.add(static_cast<int64_t>(s.kind));
  key.add(static_cast<int64_t>(s.reduce));
  int64_t bits = 0;
  std::memcpy(&bits, &s.premul, sizeof(bits));
  key.add(bits);
  key.add(static_cast<int64_t>(s.dtype));
  key.add(s.inputs);
  key.add(s.outputs);
  key.add(static_cast<int64_t>(s.split));
  key.add(s.group);
  key.add(device_ids);
  return key;
}

std::string replica_groups(int n) {
  std::string ids;
  for (int i = 0; i < n; ++i) ids += (i ? ", " : "") + std::to_string(i);
  return "replica_groups = dense<[[" + ids + "]]> : tensor<1x" + std::to_string(n) + "xi64>";
}

// The scalar combiner of a reduction on `dtype` (bool runs as u8, see reduce_value).
// XLA:CPU's collectives combine with add, multiply, minimum and maximum only: the
// bitwise ops ("stablehlo.and", "or", "xor") are folded after an all_gather instead.
const char* combiner(ReduceOp::RedOpType op, hlo::DType dtype) {
  const bool pred = dtype == hlo::DType::Pred;
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
    case ReduceOp::PREMUL_SUM:
      return pred ? "stablehlo.maximum" : "stablehlo.add";
    case ReduceOp::PRODUCT:
      return pred ? "stablehlo.minimum" : "stablehlo.multiply";
    case ReduceOp::MIN:
      return "stablehlo.minimum";
    case ReduceOp::MAX:
      return "stablehlo.maximum";
    case ReduceOp::BAND:
      return pred ? "stablehlo.minimum" : "stablehlo.and";
    case ReduceOp::BOR:
      return pred ? "stablehlo.maximum" : "stablehlo.or";
    case ReduceOp::BXOR:
      return "stablehlo.xor";
    default:
      return nullptr;
  }
}

bool is_bitwise(const char* op) {
  return std::strcmp(op, "stablehlo.and") == 0 || std::strcmp(op, "stablehlo.or") == 0 ||
         std::strcmp(op, "stablehlo.xor") == 0;
}

// The all-reduction of 1-d `x` over the n replicas with `op` (s.reduce on s.dtype).
hlo::Value reduce_value(hlo::Builder& b, hlo::Value x, const char* op, const std::string& groups,
                        int n) {
  using hlo::TensorType;
  const hlo::DType dtype = x.type.dtype;
  if (dtype == hlo::DType::Pred) {
    hlo::Value y = reduce_value(b, b.convert(x, hlo::DType::U8), op, groups, n);
    return b.convert(y, hlo::DType::Pred);
  }
  if (!is_bitwise(op))
    return b.emit("stablehlo.all_reduce", {x}, groups, x.type, {b.binary_region(op, dtype)});
  const int64_t m = x.type.shape[0];
  hlo::Value g = b.emit("stablehlo.all_gather", {x}, "all_gather_dim = 0 : i64, " + groups,
                        TensorType{dtype, {m * n}});
  g = b.reshape(g, {n, m});
  hlo::Value init = b.constant_int(std::strcmp(op, "stablehlo.and") == 0 ? -1 : 0, dtype);
  return b.emit("stablehlo.reduce", {g, init}, "dimensions = " + hlo::i64_array({0}),
                TensorType{dtype, {m}}, {b.binary_region(op, dtype)});
}

// The unsigned integer of the same width, to move any dtype's bits unchanged.
hlo::DType bits_type(hlo::DType dtype) {
  switch (hlo::byte_width(dtype)) {
    case 1: return hlo::DType::U8;
    case 2: return hlo::DType::U16;
    case 4: return hlo::DType::U32;
    default: return hlo::DType::U64;
  }
}

runtime::Program build_program(const Spec& s, int n) {
  using hlo::TensorType;
  using hlo::Value;
  hlo::Builder b;
  const std::string groups = replica_groups(n);
  auto flat = [&](int64_t numel) { return TensorType{s.dtype, {numel}}; };
  auto pre = [&](Value x) {
    if (s.reduce == ReduceOp::PREMUL_SUM) x = b.binary("multiply", x, b.full(s.premul, x.type));
    return x;
  };
  auto post = [&](Value y) {
    if (s.reduce == ReduceOp::AVG) y = b.binary("divide", y, b.full(n, y.type));
    return y;
  };
  std::vector<Value> outs;
  std::vector<Value> params;
  Value mask;
  if (s.kind == Kind::Broadcast) mask = b.parameter(TensorType{hlo::DType::Pred, {}});
  for (int64_t numel : s.inputs) params.push_back(b.parameter(flat(numel)));
  // Joins `group` consecutive arguments starting at `i` (the list forms).
  auto joined = [&](size_t i) {
    if (s.group == 1) return params[i];
    std::vector<Value> parts(params.begin() + i, params.begin() + i + s.group);
    return b.concatenate(parts, 0);
  };
  switch (s.kind) {
    case Kind::AllReduce:
      for (const Value& x : params) {
        outs.push_back(post(reduce_value(b, pre(x), combiner(s.reduce, s.dtype), groups, n)));
      }
      break;
    case Kind::Broadcast:
      // No collective_broadcast on XLA:CPU: the value's bits as an unsigned integer,
      // zero on every rank but the root, summed: the root's bits, exactly, for any dtype
      // (negative zero and NaN payloads included).
      for (const Value& x : params) {
        const bool pred = s.dtype == hlo::DType::Pred;
        const TensorType bits{bits_type(s.dtype), x.type.shape};
        Value v = pred ? b.convert(x, hlo::DType::U8) : b.bitcast_convert(x, bits);
        Value m = b.broadcast_in_dim(mask, v.type.shape, {});
        v = b.select(m, v, b.full(0, v.type));
        Value y = b.emit("stablehlo.all_reduce", {v}, groups, v.type,
                         {b.binary_region("stablehlo.add", v.type.dtype)});
        outs.push_back(pred ? b.convert(y, hlo::DType::Pred) : b.bitcast_convert(y, x.type));
      }
      break;
    case Kind::AllGather:
      for (const Value& x : params) {
        int64_t m = x.type.shape[0];
        Value g = b.emit("stablehlo.all_gather", {x}, "all_gather_dim = 0 : i64, " + groups,
                         flat(m * n));
        if (!s.split) {
          outs.push_back(g);
          continue;
        }
        for (int r = 0; r < n; ++r) outs.push_back(b.slice(g, {r * m}, {(r + 1) * m}, {1}));
      }
      break;
    case Kind::ReduceScatter:
      for (size_t i = 0; i < params.size(); i += s.group) {
        Value x = pre(joined(i));
        int64_t m = x.type.shape[0] / n;
        const bool pred = s.dtype == hlo::DType::Pred;
        if (pred) x = b.convert(x, hlo::DType::U8);
        Value y = b.emit("stablehlo.reduce_scatter", {x}, "scatter_dimension = 0 : i64, " + groups,
                         TensorType{x.type.dtype, {m}},
                         {b.binary_region(combiner(s.reduce, s.dtype), x.type.dtype)});
        if (pred) y = b.convert(y, hlo::DType::Pred);
        outs.push_back(post(y));
      }
      break;
    case Kind::AllToAll:
      for (size_t i = 0; i < params.size(); i += s.group) {
        Value x = joined(i);
        Value y = b.emit("stablehlo.all_to_all", {x},
                         "split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = " +
                             std::to_string(n) + " : i64, " + groups,
                         x.type);
        if (!s.split) {
          outs.push_back(y);
          continue;
        }
        int64_t m = x.type.shape[0] / n;
        for (int r = 0; r < n; ++r) outs.push_back(b.slice(y, {r * m}, {(r + 1) * m}, {1}));
      }
      break;
    case Kind::Barrier:
      break;
  }
  runtime::Program program;
  for (const Value& v : outs) program.outputs.push_back(v.type);
  program.mlir = b.module(outs);
  program.label = std::string("tpu_dist ") + s.name;
  return program;
}

// One executable cache per device assignment: its programs are compiled for those
// replicas (the runtime's own cache compiles portable one-device programs).
std::shared_ptr<const runtime::CompiledProgram> compiled(const Spec& s,
                                                         const std::vector<int64_t>& ids) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::unique_ptr<runtime::ExecutableCache>> caches;
  runtime::ExecutableCache* cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = caches[ids];
    if (!slot) {
      std::string options = pjrt::encode_replicated_options(ids);
      slot = std::make_unique<runtime::ExecutableCache>([options](const std::string& mlir) {
        return runtime::Runtime::get().client().compile(mlir, options);
      });
    }
    cache = slot.get();
  }
  const int n = static_cast<int>(ids.size());
  return cache->get(program_key(s, ids), [&] { return build_program(s, n); });
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
  if (dst.numel() == 0 || aten::adopt_buffer(dst, buffer)) return;  // adopted: no program
  dst.copy_(aten::wrap_buffer(std::move(buffer), aten::to_hlo(dst.scalar_type()), dst.sizes(),
                              dst.device().index()));
}

// ---------------------------------------------------------------------------------------
// The rendezvous of one group's ranks.

struct Contribution {
  Spec spec;
  std::vector<BufferPtr> args;  // the program's arguments, on this rank's device
  Tensors targets;              // receive the outputs, in order
  Tensors result;               // what the Work's result() is
  FuturePtr future;
  int device = -1;
};

struct Slot {
  std::vector<std::optional<Contribution>> ranks;
  int arrived = 0;
  Clock::time_point deadline;
  std::string error;  // set once the slot failed: late arrivals fail at once
};

std::string describe_missing(const Slot& slot) {
  std::string missing, present;
  for (size_t r = 0; r < slot.ranks.size(); ++r)
    (slot.ranks[r] ? present : missing) +=
        ((slot.ranks[r] ? present : missing).empty() ? "" : ", ") + std::to_string(r);
  return "rank(s) " + missing + " never joined (rank(s) " + present + " did)";
}

class Rendezvous {
 public:
  Rendezvous(int size, std::vector<int> devices, std::chrono::milliseconds timeout)
      : size_(size), devices_(std::move(devices)), timeout_(timeout) {
    runtime::Runtime& rt = runtime::Runtime::get();
    for (int d : devices_) ids_.push_back(rt.device_id(d));
    watchdog_ = std::thread([this] { watch(); });
  }
  ~Rendezvous() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }

  void set_timeout(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mutex_);
    timeout_ = timeout;
  }

  // Deposits rank `rank`'s part of collective number `seq`; the last rank runs it.
  void arrive(int rank, uint64_t seq, Contribution c) {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& slot = slots_[seq];
    if (slot.ranks.empty()) {
      slot.ranks.resize(size_);
      slot.deadline = Clock::now() + timeout_;
      cv_.notify_all();  // the watchdog learns the new deadline
    }
    if (!slot.error.empty()) {
      std::string error = slot.error;
      if (++slot.arrived == size_) slots_.erase(seq);
      lock.unlock();
      fail(c.future, error);
      return;
    }
    slot.ranks[rank] = std::move(c);
    if (++slot.arrived < size_) return;
    Slot ready = std::move(slot);
    slots_.erase(seq);
    lock.unlock();
    run(ready);
  }

 private:
  static void fail(const FuturePtr& f, const std::string& message) {
    if (f->completed()) return;
    f->setError(std::make_exception_ptr(c10::DistBackendError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message)));
  }

  void run(Slot& slot) {
    const Spec& spec = slot.ranks[0]->spec;
    std::string sig = spec.signature();
    bool agree = true;
    for (const auto& c : slot.ranks) agree &= c->spec.signature() == sig;
    if (!agree) {
      std::string message = std::string("tpu_dist: ") + spec.name +
                            ": the ranks of the group disagree on the collective, its shapes, "
                            "dtypes or root; every rank must make the same call. The ranks "
                            "passed:";
      for (size_t r = 0; r < slot.ranks.size(); ++r)
        message += "\n  rank " + std::to_string(r) + ": " + slot.ranks[r]->spec.signature() +
                   " with " + slot.ranks[r]->spec.shapes;
      for (auto& c : slot.ranks) fail(c->future, message);
      return;
    }
    try {
      if (spec.kind != Kind::Barrier) {
        auto program = compiled(spec, ids_);
        std::vector<std::vector<PJRT_Buffer*>> args(size_);
        for (int r = 0; r < size_; ++r) {
          if (spec.kind == Kind::Broadcast) {
            bool is_root = r == spec.root;
            auto mask = runtime::Runtime::get().scalar(devices_[r], hlo::DType::Pred, is_root);
            mask->await_ready();
            args[r].push_back(mask->raw());
          }
          for (const auto& b : slot.ranks[r]->args) {
            b->await_ready();  // see Runtime::execute_replicated: all replicas start at once
            args[r].push_back(b->raw());
          }
        }
        runtime::trace::Scope traced("tpu_dist::in_program_collective");
        traced.text("transport", "in-program");
        traced.text("program", program->fingerprint);
        traced.number("ranks", size_);
        auto outputs = runtime::Runtime::get().execute_replicated(*program->executable, args);
        runtime::metrics().in_program_collectives++;
        for (int r = 0; r < size_; ++r) {
          Contribution& c = *slot.ranks[r];
          c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, c.device));
          at::NoGradGuard no_grad;
          for (size_t i = 0; i < c.targets.size(); ++i) deliver(c.targets[i], outputs[r].at(i));
        }
      }
    } catch (const std::exception& e) {
      std::string message = std::string("tpu_dist: ") + spec.name + " failed: " + e.what();
      for (auto& c : slot.ranks) fail(c->future, message);
      return;
    }
    for (auto& c : slot.ranks) c->future->markCompleted(c10::IValue(c->result));
  }

  // Fails the slots whose deadline passed: their ranks' Works raise instead of waiting.
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      Clock::time_point next = Clock::time_point::max();
      std::vector<FuturePtr> expired;
      std::string message;
      for (auto& [seq, slot] : slots_) {
        if (!slot.error.empty()) continue;
        if (slot.deadline <= Clock::now()) {
          const Spec* spec = nullptr;
          for (auto& c : slot.ranks)
            if (c) spec = &c->spec;
          slot.error = std::string("tpu_dist: ") + (spec ? spec->name : "collective") +
                       " (collective #" + std::to_string(seq) + " of the group) timed out after " +
                       std::to_string(timeout_.count()) + " ms: " + describe_missing(slot);
          for (auto& c : slot.ranks)
            if (c) expired.push_back(c->future);
          message = slot.error;
          // Drop the buffers now; the late ranks only need the error.
          for (auto& c : slot.ranks) c.reset();
        } else {
          next = std::min(next, slot.deadline);
        }
      }
      if (!expired.empty()) {
        lock.unlock();
        for (const auto& f : expired) fail(f, message);
        lock.lock();
        continue;
      }
      if (next == Clock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, next);
    }
  }

  const int size_;
  const std::vector<int> devices_;
  std::vector<int64_t> ids_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint64_t, Slot> slots_;
  bool stop_ = false;
  std::thread watchdog_;
};

// The process's rendezvous objects, by group key: the first rank creates it.
std::shared_ptr<Rendezvous> rendezvous_for(const std::string& key, int size,
                                           const std::vector<int>& devices,
                                           std::chrono::milliseconds timeout) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::weak_ptr<Rendezvous>> groups;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = groups.begin(); it != groups.end();)
    it = it->second.expired() ? groups.erase(it) : std::next(it);
  auto& weak = groups[key];
  if (auto existing = weak.lock()) return existing;
  auto created = std::make_shared<Rendezvous>(size, devices, timeout);
  weak = created;
  return created;
}

class InProgramWork : public Work {
 public:
  InProgramWork(OpType type, FuturePtr future) : Work(-1, type), future_(std::move(future)) {}
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  // Completes by the group's timeout at the latest (the rendezvous's watchdog).
  bool wait(std::chrono::milliseconds) override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
  FuturePtr getFuture() override { return future_; }

 private:
  FuturePtr future_;
};

void check_tpu(const at::Tensor& t, const char* op, int device) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "tpu_dist: ", op,
              " got a tensor on ", t.device(),
              ", but tpu_dist moves tpu tensors only. Create the process group with "
              "init_process_group(backend=\"cpu:gloo,tpu:tpu_dist\") to run CPU tensors "
              "on gloo and tpu tensors on tpu_dist, or move the tensor to tpu.");
  TORCH_CHECK(!t.is_sparse(), "tpu_dist: ", op, " does not support sparse tensors");
  TORCH_CHECK(t.device().index() == device, "tpu_dist: ", op, " got a tensor on ", t.device(),
              ", but this rank's device in the in-program transport is tpu:", device,
              " (rank r of the process uses tpu:r)");
}

class InProgramBackend final : public c10d::Backend {
 public:
  InProgramBackend(int rank, int size, std::vector<int> devices, const std::string& key,
                   std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> fallback)
      : Backend(rank, size),
        device_(devices.at(rank)),
        rendezvous_(rendezvous_for(key, size, devices, timeout)),
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
      check_list(outputs[i], inputs[i], "all_gather");
      for (const auto& t : outputs[i]) {
        targets.push_back(t);
        s.outputs.push_back(t.numel());
      }
    }
    return submit(OpType::ALLGATHER, std::move(s), inputs, targets, targets);
  }

  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) override {
    Tensors outs{output}, ins{input};
    return allgather_into_tensor_coalesced(outs, ins, opts);
  }

  WorkPtr allgather_into_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::AllgatherOptions&) override {
    check_whole(outputs, inputs, "all_gather_into_tensor", "output", "input");
    Spec s = spec(Kind::AllGather, "all_gather_into_tensor", inputs);
    for (const auto& t : outputs) s.outputs.push_back(t.numel());
    return submit(OpType::_ALLGATHER_BASE, std::move(s), inputs, outputs, outputs);
  }

  WorkPtr reduce_scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
                "tpu_dist: reduce_scatter takes one output tensor and one input list");
    check_list(inputs[0], outputs[0], "reduce_scatter");
    Spec s = spec(Kind::ReduceScatter, "reduce_scatter", inputs[0]);
    set_reduce(s, opts.reduceOp);
    check_scatter_reduce(s);
    s.group = getSize();
    s.outputs.push_back(outputs[0].numel());
    return submit(OpType::REDUCE_SCATTER, std::move(s), inputs[0], outputs, outputs);
  }

  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override {
    Tensors outs{output}, ins{input};
    return reduce_scatter_tensor_coalesced(outs, ins, opts);
  }

  WorkPtr reduce_scatter_tensor_coalesced(Tensors& outputs, Tensors& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    check_whole(inputs, outputs, "reduce_scatter_tensor", "input", "output");
    Spec s = spec(Kind::ReduceScatter, "reduce_scatter_tensor", inputs);
    set_reduce(s, opts.reduceOp);
    check_scatter_reduce(s);
    for (const auto& t : outputs) s.outputs.push_back(t.numel());
    return submit(OpType::_REDUCE_SCATTER_BASE, std::move(s), inputs, outputs, outputs);
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                        std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
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
      return coalescing_.record(fallback("all_to_all_single with uneven splits")
                                    ->alltoall_base(output, input, output_splits,
                                                    input_splits, opts));
    }
    Tensors ins{input}, outs{output};
    Spec s = spec(Kind::AllToAll, "all_to_all_single", ins);
    s.outputs.push_back(output.numel());
    return submit(OpType::ALLTOALL_BASE, std::move(s), ins, outs, outs);
  }

  WorkPtr alltoall(Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()) &&
                    inputs.size() == static_cast<size_t>(getSize()),
                "tpu_dist: all_to_all takes world_size (", getSize(),
                ") input and output tensors");
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
    return coalescing_.record(c10::make_intrusive<InProgramWork>(OpType::BARRIER, done));
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
    for (const auto& t : inputs) {
      check_tpu(t, name, device_);
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "tpu_dist: ", name,
                  " got tensors of different dtypes (", inputs[0].scalar_type(), " and ",
                  t.scalar_type(), ")");
      s.inputs.push_back(t.numel());
      s.shapes += (s.shapes.empty() ? "" : ", ") + std::string(c10::toString(t.scalar_type())) +
                  c10::str(t.sizes());
    }
    if (!inputs.empty()) s.dtype = aten::to_hlo(inputs[0].scalar_type());
    return s;
  }

  void set_reduce(Spec& s, const ReduceOp& op) {
    s.reduce = op.op_;
    if (op.op_ == ReduceOp::PREMUL_SUM) {
      auto* factor = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(factor != nullptr, "tpu_dist: PREMUL_SUM without a factor");
      TORCH_CHECK_NOT_IMPLEMENTED(!factor->tensor_factor.defined(),
                                  "tpu_dist (in-program): PREMUL_SUM with a tensor factor is "
                                  "not implemented; use a Python number");
      TORCH_CHECK(hlo::is_float(s.dtype), "tpu_dist: PREMUL_SUM needs a floating dtype");
      s.premul = factor->double_factor;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(combiner(s.reduce, s.dtype) != nullptr, "tpu_dist: ", s.name,
                                " does not support reduce op ", static_cast<int>(s.reduce));
    const bool bitwise = s.reduce == ReduceOp::BAND || s.reduce == ReduceOp::BOR ||
                         s.reduce == ReduceOp::BXOR;
    TORCH_CHECK(!bitwise || !hlo::is_float(s.dtype), "tpu_dist: ", s.name,
                ": bitwise reductions need an integer or bool dtype, got ",
                hlo::mlir_name(s.dtype));
  }

  static void check_scatter_reduce(const Spec& s) {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_bitwise(combiner(s.reduce, s.dtype)), "tpu_dist: ", s.name,
                                " with a bitwise reduce op is not implemented by the "
                                "in-program transport (TORCH_TPU_DIST_TRANSPORT=host has it)");
  }

  void check_list(const Tensors& list, const at::Tensor& piece, const char* op) {
    TORCH_CHECK(list.size() == static_cast<size_t>(getSize()), "tpu_dist: ", op,
                " needs a list of world_size (", getSize(), ") tensors, got ", list.size());
    for (const auto& t : list) {
      check_tpu(t, op, device_);
      TORCH_CHECK(t.numel() == piece.numel() && t.scalar_type() == piece.scalar_type(),
                  "tpu_dist: ", op, ": every tensor in the list must have the single tensor's "
                  "dtype and element count (", piece.scalar_type(), ", ", piece.numel(),
                  "), got ", t.scalar_type(), t.sizes());
    }
  }

  void check_whole(const Tensors& whole, const Tensors& part, const char* op,
                   const char* whole_name, const char* part_name) {
    TORCH_CHECK(whole.size() == part.size(), "tpu_dist: ", op, " needs one ", whole_name,
                " per ", part_name);
    for (size_t i = 0; i < whole.size(); ++i) {
      check_tpu(whole[i], op, device_);
      TORCH_CHECK(whole[i].scalar_type() == part[i].scalar_type(), "tpu_dist: ", op,
                  ": the ", whole_name, " and ", part_name, " dtypes differ");
      TORCH_CHECK(whole[i].numel() == part[i].numel() * getSize(), "tpu_dist: ", op, ": the ",
                  whole_name, " must have world_size (", getSize(), ") times the ", part_name,
                  "'s elements, got ", whole[i].sizes(), " for ", part_name, " ",
                  part[i].sizes());
    }
  }

  WorkPtr submit(OpType type, Spec s, const Tensors& inputs, const Tensors& targets,
                 const Tensors& result) {
    flush();
    Contribution c;
    for (const auto& t : inputs) c.args.push_back(dense_buffer(t));
    c.spec = std::move(s);
    c.targets = targets;
    c.result = result;
    c.device = device_;
    c.future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    FuturePtr future = c.future;
    rendezvous_->arrive(getRank(), seq_++, std::move(c));
    return coalescing_.record(c10::make_intrusive<InProgramWork>(type, std::move(future)));
  }

  const int device_;
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
    TORCH_CHECK(devices[i] >= 0 && devices[i] < count, "tpu_dist: rank ", i, " would use tpu:",
                devices[i], " but this process has ", count, " tpu device(s)");
    for (size_t j = 0; j < i; ++j)
      TORCH_CHECK(devices[i] != devices[j], "tpu_dist: ranks ", j, " and ", i,
                  " would share tpu:", devices[i], "; the in-program transport needs one "
                  "device per rank");
  }
  return c10::make_intrusive<InProgramBackend>(rank, size, std::move(devices), group_key, timeout,
                                               std::move(fallback));
}

std::string transport_of(const c10::intrusive_ptr<c10d::Backend>& backend) {
  if (dynamic_cast<InProgramBackend*>(backend.get()) != nullptr) return "in_program";
  if (backend && backend->getBackendName() == "tpu_dist") return "host_staged";
  return "";
}

}  // namespace torch_tpu::distributed
