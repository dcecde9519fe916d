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
// Buffers the group alone still holds (an in-place op's old contents, an optimizer's old
// parameters) are donated to the program: XLA reuses them for outputs of the same type.
#pragma once

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

// What a recorded op reads: a real buffer, or a value recorded earlier in the group.
struct GroupOperand {
  std::shared_ptr<pjrt::Buffer> buffer;
  int64_t value = -1;
  hlo::TensorType type;
};

class FusedGroup {
 public:
  static FusedGroup& get();

  // Whether ops are being recorded now (fused mode, or an op-mode optimizer step).
  bool recording() const { return depth_.load() > 0; }
  // Nested: recording lasts until every begin() has had its end(); end() flushes.
  void begin() { depth_++; }
  void end();

  // Records one op on `device` (flushing first if the group is on another device).
  // Returns the value ids of its outputs, in the order `outputs` lists their types.
  std::vector<int64_t> record(int device, const ProgramKey& key, std::vector<GroupOperand> in,
                              const std::vector<hlo::TensorType>& outputs, Emit emit);
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

 private:
  FusedGroup() = default;
  struct Op {
    ProgramKey key;
    std::vector<int64_t> inputs;  // per operand: a value id, or -1 for the next external
    int64_t first_value;
    Emit emit;
  };
  void flush_locked();
  ProgramKey group_key(const std::vector<int64_t>& live, const std::vector<bool>& donate) const;
  Program build(const std::vector<int64_t>& live, const std::vector<bool>& donate) const;

  std::atomic<int> depth_{0};
  mutable std::recursive_mutex mutex_;
  int device_ = -1;
  std::vector<Op> ops_;
  std::vector<hlo::TensorType> value_types_;
  std::vector<std::shared_ptr<pjrt::Buffer>> externals_;
  std::vector<hlo::TensorType> external_types_;
  std::unordered_map<DeviceBuffer*, int64_t> bound_;
};

}  // namespace torch_tpu::runtime
