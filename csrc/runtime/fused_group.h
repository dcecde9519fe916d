// Fused eager mode: ops are recorded into one pending group instead of running, and the
// group runs as one program when a result is needed (a flush).
//
// A recorded op brings its program key, its operands (real buffers, or values of ops
// recorded before it) and an `Emit` that writes its body into a builder. A storage whose
// newest contents are a pending value is *bound* to it (DeviceBuffer::pending); the
// values still bound at the flush are the program's outputs, the rest are temporaries
// XLA never materialises. The group's key is the sequence of the ops' keys, how their
// operands connect and which values are live: integers only, so a step that repeats
// finds its program without emitting or hashing any StableHLO text.
//
// A loop records the same group step after step. The group keeps the groups it ran
// (traces) and compares each op as it is recorded with the next op of the trace it
// repeats: equal keys and inputs mean an equal op, so the trace's record (body, types)
// serves again, and a group that repeats a whole trace runs its program as it is. The
// first op that differs, and every op after it, is recorded in full, so a changed step
// runs exactly what it records. An op may also carry its recording call's description
// (RecordedOp::call): the lowered kernels then recognise the trace's next op from the
// call's arguments alone (aten/call_memo.h's ReplayCall), before building a key.
//
// Buffers the group alone still holds (an in-place op's old contents, an optimizer's old
// parameters) are donated to the program: XLA reuses them for outputs of the same type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "hlo/builder.h"
#include "runtime/device_buffer.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::runtime {

// Writes one op's body into `b`, from its operands' values; returns its outputs.
using Emit =
    std::function<std::vector<hlo::Value>(hlo::Builder& b, const std::vector<hlo::Value>&)>;

// One recorded op: immutable once made, so a repeated step shares it with the step it
// repeats.
struct RecordedOp {
  ProgramKey key;
  std::vector<int64_t> inputs;           // per parameter: a value id, or -1 for an external
  std::vector<hlo::TensorType> params;   // the parameters' types
  std::vector<hlo::TensorType> outputs;  // the results' types
  Emit emit;
  // The recording call's own description (aten/call_memo.h's ReplayCall), or null: lets
  // the next step's call recognise this op from its arguments before building a key.
  std::shared_ptr<const void> call;
};
using OpRecord = std::shared_ptr<const RecordedOp>;

class FusedGroup {
 public:
  static FusedGroup& get();

  // Whether ops are being recorded now (fused mode, or an op-mode optimizer step).
  bool recording() const { return depth_.load() > 0; }
  // Nested: recording lasts until every begin() has had its end(); end() flushes.
  void begin() { depth_++; }
  void end();

  // Trace reuse: a training or decode loop records the same ops step after step. The
  // next op of a trace (a group run before) that the pending group has repeated so far,
  // when it is `key` reading `inputs` (per parameter: a value id, or -1 for an external);
  // null otherwise, and from the first op that differs on for the rest of the group.
  // Recording the returned op skips building its record; a group that repeats a whole
  // trace (same values live, same donations) runs the trace's program without building
  // its key.
  OpRecord repeat(int device, const ProgramKey& key, const std::vector<int64_t>& inputs);
  // The same, for a caller that tells an equal op by other means: `same(op)` says whether
  // a trace's op is the one this call would record (called with the group locked).
  template <class Same>
  OpRecord repeat_if(int device, const Same& same);
  // Records `op` on `device` (flushing first if the group is on another device), reading
  // `externals` for its -1 inputs, in order. Returns the id of its first output; the
  // others follow.
  int64_t record(int device, OpRecord op, std::vector<std::shared_ptr<pjrt::Buffer>> externals);
  // `db`'s newest contents are now `value` (of `dtype`, `numel` elements).
  void bind(DeviceBuffer& db, int64_t value, hlo::DType dtype, int64_t numel);
  // `db` is being freed: its value, unless read by a later op, is a temporary.
  void forget(DeviceBuffer& db);
  // Runs the pending group, if any, and binds its live values' buffers.
  void flush();
  // Flushes when the group has reached max_ops(): called before an op reads its operands.
  void flush_if_full();
  // The real buffer behind `db`, flushing first when it is pending.
  const std::shared_ptr<pjrt::Buffer>& ready(DeviceBuffer& db);
  size_t pending_ops() const;

  // Ops recorded per group before it flushes by itself (TORCH_TPU_FUSED_MAX_OPS).
  static size_t max_ops();

  // Whether groups reuse traces (TORCH_TPU_FUSED_REUSE; tests and benchmarks switch it).
  void set_reuse(bool on);
  bool reuse() const { return reuse_; }
  // Forgets the traces (their programs are dropped when the cache is cleared).
  void drop_traces();

 private:
  FusedGroup();
  // A group that ran: its ops, which values were live, which externals were donated, the
  // compile options it was built under (CompileOverrides::id), and its program.
  struct Trace {
    int device;
    std::vector<OpRecord> ops;
    std::vector<int64_t> live;
    std::vector<bool> donate;
    int64_t overrides;
    std::shared_ptr<const CompiledProgram> program;
  };
  // Traces kept: a step that flushes more than once (a host read, an optimizer step)
  // repeats several groups in turn.
  static constexpr size_t kTraces = 8;

  void flush_locked();
  ProgramKey group_key(const std::vector<int64_t>& live, const std::vector<bool>& donate) const;
  Program build(const std::vector<int64_t>& live, const std::vector<bool>& donate) const;
  void remember(std::shared_ptr<const Trace> trace);

  std::atomic<int> depth_{0};
  mutable std::recursive_mutex mutex_;
  int device_ = -1;
  std::vector<OpRecord> ops_;
  int64_t values_ = 0;  // value ids given out so far
  std::vector<std::shared_ptr<pjrt::Buffer>> externals_;
  std::vector<bool> external_scalar_;  // per external: 0-d (a scalar, never donated)
  std::unordered_map<DeviceBuffer*, int64_t> bound_;
  bool reuse_;
  std::vector<std::shared_ptr<const Trace>> traces_;  // most recently run first
  std::shared_ptr<const Trace> replaying_;            // the trace ops_ repeats, or null
  size_t repeated_ = 0;                               // leading ops of ops_ that are replaying_'s
};

template <class Same>
OpRecord FusedGroup::repeat_if(int device, const Same& same_op) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const size_t k = ops_.size();
  if (!reuse_ || repeated_ != k || (k > 0 && device_ != device)) return nullptr;
  auto same = [&](const Trace& t) {
    return t.device == device && t.ops.size() > k && same_op(*t.ops[k]);
  };
  if (replaying_ && same(*replaying_)) return replaying_->ops[k];
  // Another trace that shares this group's ops so far (a step whose groups begin alike).
  for (const auto& t : traces_) {
    if (t == replaying_ || !same(*t) || !std::equal(ops_.begin(), ops_.end(), t->ops.begin()))
      continue;
    replaying_ = t;
    return t->ops[k];
  }
  return nullptr;
}

}  // namespace torch_tpu::runtime
