#include "runtime/fused_group.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/compile_overrides.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/settings.h"
#include "runtime/trace.h"

namespace torch_tpu::runtime {

FusedGroup& FusedGroup::get() {
  static FusedGroup* group = new FusedGroup();  // never destroyed: buffers outlive exit
  return *group;
}

FusedGroup::FusedGroup() : reuse_(settings::flag("TORCH_TPU_FUSED_REUSE")) {}

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

void FusedGroup::set_reuse(bool on) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  reuse_ = on;
  if (!on) drop_traces();
}

void FusedGroup::drop_traces() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  traces_.clear();
  replaying_.reset();
  repeated_ = 0;
}

OpRecord FusedGroup::repeat(int device, const ProgramKey& key, const std::vector<int64_t>& inputs) {
  return repeat_if(device,
                   [&](const RecordedOp& op) { return op.inputs == inputs && op.key == key; });
}

int64_t FusedGroup::record(int device, OpRecord op,
                           std::vector<std::shared_ptr<pjrt::Buffer>> externals) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (device_ != device && !ops_.empty()) flush_locked();
  device_ = device;
  size_t reads = 0;  // external buffers the op reads
  for (int64_t v : op->inputs) {
    if (v >= values_)
      throw std::logic_error("torch_tpu: a recorded op reads value " + std::to_string(v) +
                             " of a fused group that has " + std::to_string(values_));
    reads += v < 0;
  }
  if (reads != externals.size())
    throw std::logic_error("torch_tpu: a recorded op reads " + std::to_string(reads) +
                           " external buffers but brings " + std::to_string(externals.size()));
  if (replaying_ && repeated_ == ops_.size() && repeated_ < replaying_->ops.size() &&
      replaying_->ops[repeated_] == op)
    ++repeated_;
  size_t next = 0;
  for (size_t i = 0; i < op->inputs.size(); ++i) {
    if (op->inputs[i] >= 0) continue;
    externals_.push_back(std::move(externals[next++]));
    external_scalar_.push_back(op->params[i].shape.empty());
  }
  const int64_t first = values_;
  values_ += static_cast<int64_t>(op->outputs.size());
  ops_.push_back(std::move(op));
  metrics().fused_ops++;
  return first;
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
  for (const OpRecord& op : ops_) {
    key.append(op->key);
    key.add(op->inputs);
  }
  key.add(live);
  for (bool d : donate) key.add(static_cast<int64_t>(d));
  return key;
}

Program FusedGroup::build(const std::vector<int64_t>& live, const std::vector<bool>& donate) const {
  hlo::Builder b;
  std::vector<hlo::Value> params;
  for (const OpRecord& op : ops_)
    for (size_t i = 0; i < op->inputs.size(); ++i)
      if (op->inputs[i] < 0) params.push_back(b.parameter(op->params[i]));
  std::vector<hlo::Value> values;
  values.reserve(static_cast<size_t>(values_));
  size_t next_external = 0;
  for (const OpRecord& op : ops_) {
    std::vector<hlo::Value> in;
    in.reserve(op->inputs.size());
    for (int64_t v : op->inputs) in.push_back(v >= 0 ? values.at(v) : params.at(next_external++));
    for (hlo::Value& out : op->emit(b, in)) values.push_back(std::move(out));
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

void FusedGroup::remember(std::shared_ptr<const Trace> trace) {
  auto it = std::find(traces_.begin(), traces_.end(), trace);
  if (it != traces_.end()) traces_.erase(it);
  traces_.insert(traces_.begin(), std::move(trace));
  if (traces_.size() > kTraces) traces_.pop_back();
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
    donate[i] =
        Runtime::donation_enabled() && externals_[i].use_count() == 1 && !external_scalar_[i];

  std::vector<OpRecord> ops;
  std::vector<std::shared_ptr<pjrt::Buffer>> externals;
  auto reset = [&] {
    ops.swap(ops_);
    externals.swap(externals_);
    external_scalar_.clear();
    values_ = 0;
    bound_.clear();
    replaying_.reset();
    repeated_ = 0;
    for (DeviceBuffer* db : targets) db->pending = -1;
  };
  Runtime& rt = Runtime::get();
  std::vector<std::shared_ptr<pjrt::Buffer>> results;
  trace::Scope traced("tpu::fused_flush");
  traced.number("ops", static_cast<double>(ops_.size()));
  traced.number("outputs", static_cast<double>(live.size()));
  try {
    // A trace of these very ops whose live values and donations are the same: one step
    // can differ from the one before in what it donates alone (a buffer read twice). Its
    // program must have been built under the compile options in effect now, which are
    // part of every program's key but of no op's.
    const int64_t overrides = current_overrides().id;
    auto fits = [&](const Trace& t) {
      return t.device == device_ && t.ops == ops_ && t.live == live && t.donate == donate &&
             t.overrides == overrides;
    };
    std::shared_ptr<const Trace> trace;
    if (replaying_ && repeated_ == ops_.size()) {
      if (fits(*replaying_)) trace = replaying_;
      for (size_t i = 0; !trace && i < traces_.size(); ++i)
        if (fits(*traces_[i])) trace = traces_[i];
    }
    if (trace) {
      metrics().fused_reuses++;
    } else {
      ProgramKey key = group_key(live, donate);
      trace = std::make_shared<const Trace>(
          Trace{device_, reuse_ ? ops_ : std::vector<OpRecord>{}, live, donate, overrides,
                rt.cache().get(key, [&] { return build(live, donate); })});
    }
    metrics().fused_groups++;
    results = rt.execute(*trace->program, externals_, device_);
    if (reuse_) remember(std::move(trace));
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
