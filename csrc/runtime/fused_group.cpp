#include "runtime/fused_group.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/settings.h"
#include "runtime/trace.h"

namespace torch_tpu::runtime {

FusedGroup& FusedGroup::get() {
  static FusedGroup* group = new FusedGroup();  // never destroyed: buffers outlive exit
  return *group;
}

size_t FusedGroup::max_ops() {
  static const size_t limit = static_cast<size_t>(*settings::integer("TORCH_TPU_FUSED_MAX_OPS"));
  return limit;
}

void FusedGroup::end() {
  if (--depth_ == 0) flush();
}

size_t FusedGroup::pending_ops() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return ops_.size();
}

std::vector<int64_t> FusedGroup::record(int device, const ProgramKey& key,
                                        std::vector<GroupOperand> in,
                                        const std::vector<hlo::TensorType>& outputs, Emit emit) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (device_ != device && !ops_.empty()) flush_locked();
  device_ = device;
  Op op{key, {}, static_cast<int64_t>(value_types_.size()), std::move(emit)};
  op.inputs.reserve(in.size());
  for (GroupOperand& operand : in) {
    if (operand.value >= static_cast<int64_t>(value_types_.size()))
      throw std::logic_error("torch_tpu: a recorded op reads value " +
                             std::to_string(operand.value) + " of a fused group that has " +
                             std::to_string(value_types_.size()));
    op.inputs.push_back(operand.value);
    if (operand.value >= 0) continue;
    externals_.push_back(std::move(operand.buffer));
    external_types_.push_back(std::move(operand.type));
  }
  ops_.push_back(std::move(op));
  std::vector<int64_t> ids;
  for (const hlo::TensorType& type : outputs) {
    ids.push_back(static_cast<int64_t>(value_types_.size()));
    value_types_.push_back(type);
  }
  metrics().fused_ops++;
  return ids;
}

void FusedGroup::bind(DeviceBuffer& db, int64_t value, hlo::DType dtype, int64_t numel) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  db.buffer.reset();
  db.pending = value;
  db.dtype = dtype;
  db.numel = numel;
  db.padding.reset();  // the recording op sets it again when its result is padded
  bound_[&db] = value;
}

void FusedGroup::flush_if_full() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (ops_.size() >= max_ops()) flush_locked();
}

void FusedGroup::forget(DeviceBuffer& db) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  bound_.erase(&db);
}

const std::shared_ptr<pjrt::Buffer>& FusedGroup::ready(DeviceBuffer& db) {
  if (db.pending >= 0) flush();
  return db.buffer;
}

void FusedGroup::flush() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  flush_locked();
}

ProgramKey FusedGroup::group_key(const std::vector<int64_t>& live,
                                 const std::vector<bool>& donate) const {
  ProgramKey key;
  key.add("fused");
  key.add(static_cast<int64_t>(ops_.size()));
  for (const Op& op : ops_) {
    key.append(op.key);
    key.add(op.inputs);
  }
  key.add(live);
  for (bool d : donate) key.add(static_cast<int64_t>(d));
  return key;
}

Program FusedGroup::build(const std::vector<int64_t>& live, const std::vector<bool>& donate) const {
  hlo::Builder b;
  std::vector<hlo::Value> params;
  for (const hlo::TensorType& type : external_types_) params.push_back(b.parameter(type));
  std::vector<hlo::Value> values;
  values.reserve(value_types_.size());
  size_t next_external = 0;
  for (const Op& op : ops_) {
    std::vector<hlo::Value> in;
    in.reserve(op.inputs.size());
    for (int64_t v : op.inputs) in.push_back(v >= 0 ? values.at(v) : params.at(next_external++));
    for (hlo::Value& out : op.emit(b, in)) values.push_back(std::move(out));
  }
  Program program;
  std::vector<hlo::Value> outputs;
  for (int64_t v : live) {
    outputs.push_back(values.at(v));
    program.outputs.push_back(values.at(v).type);
  }
  // A donated buffer becomes the storage of the first live output of its type.
  std::vector<bool> taken(outputs.size(), false);
  for (size_t p = 0; p < params.size(); ++p) {
    if (!donate[p]) continue;
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (taken[o] || !(outputs[o].type == params[p].type)) continue;
      b.alias_output(params[p], static_cast<int>(o));
      taken[o] = true;
      break;
    }
  }
  program.mlir = b.module(outputs);
  program.donations = b.donations();
  program.label = "fused (" + std::to_string(ops_.size()) + " ops)";
  return program;
}

void FusedGroup::flush_locked() {
  if (ops_.empty()) return;
  std::vector<int64_t> live;
  std::vector<DeviceBuffer*> targets;
  std::vector<std::pair<int64_t, DeviceBuffer*>> bound;
  for (const auto& [db, value] : bound_)
    if (db->pending == value) bound.emplace_back(value, db);
  std::sort(bound.begin(), bound.end());
  for (const auto& [value, db] : bound) {
    live.push_back(value);
    targets.push_back(db);
  }
  // Only buffers no tensor can reach any more are donated: the group holds the last
  // reference (a buffer read twice, or still cached as a scalar, is not).
  std::vector<bool> donate(externals_.size());
  for (size_t i = 0; i < externals_.size(); ++i)
    donate[i] = Runtime::donation_enabled() && externals_[i].use_count() == 1 &&
                !external_types_[i].shape.empty();

  std::vector<Op> ops;
  std::vector<std::shared_ptr<pjrt::Buffer>> externals;
  auto reset = [&] {
    ops.swap(ops_);
    externals.swap(externals_);
    value_types_.clear();
    external_types_.clear();
    bound_.clear();
    for (DeviceBuffer* db : targets) db->pending = -1;
  };
  Runtime& rt = Runtime::get();
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  trace::Scope traced("tpu::fused_flush");
  traced.number("ops", static_cast<double>(ops_.size()));
  traced.number("outputs", static_cast<double>(live.size()));
  try {
    ProgramKey key = group_key(live, donate);
    auto program = rt.cache().get(key, [&] { return build(live, donate); });
    metrics().fused_groups++;
    results = rt.execute(*program, externals_, device_);
  } catch (...) {
    reset();
    throw;
  }
  for (size_t i = 0; i < targets.size(); ++i)
    targets[i]->assign(std::move(results[i]), targets[i]->dtype, targets[i]->numel,
                       targets[i]->padding);
  reset();
}

}  // namespace torch_tpu::runtime
