// Op mode's shortcut from an op's arguments straight to its compiled program.
//
// The full path of an eager op (aten/lowered_kernel -> OpCall) promotes dtypes, builds
// the program key from every argument, asks the meta kernel's cache for the result types
// and the executable cache for the program. For the common call (every tensor an
// unpadded storage on one device, whole or viewed with a runtime offset; fresh results,
// or a whole `self` written in place) all of that is a function of a cheaper signature
// of the arguments: dtypes, sizes (and a view's strides and layout), which tensors share
// a storage, the kind of each scalar (and its value where it is one of the literals
// programs build in), the static arguments, and the settings the program key reads
// (matmul precision, compile overrides, default dtype, current device).
//
// The lowered kernel computes that signature (MemoKey) first. A hit runs the recorded
// CallPlan: the program, where each input (and a view's offset) goes among its parameters
// and which storages its last results replace. A miss, or a call not of that form, takes
// the full path, which records the plan for the next call. The memo holds programs only
// while the executable cache does: it forgets everything when a program leaves that cache
// (ExecutableCache::generation), and marks what it runs as used, for the cache's
// eviction order. Fused mode's counterpart (ReplayCall) goes with the ops a fused group
// records: a step that repeats a trace records the trace's op from the same signature.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "hlo/types.h"
#include "runtime/device_buffer.h"
#include "runtime/executable_cache.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

// The signature of a call: a flat list of words, as ProgramKey, kept inline (no
// allocation for the usual call).
class MemoKey {
 public:
  void add(int64_t word) {
    words_.push_back(word);
    hash_ = runtime::mix_key_hash(hash_, word);
  }
  uint64_t hash() const { return hash_; }
  bool operator==(const MemoKey& other) const { return words_ == other.words_; }

 private:
  c10::SmallVector<int64_t, 24> words_;
  uint64_t hash_ = runtime::kKeyHashSeed;
};

struct MemoKeyHash {
  size_t operator()(const MemoKey& key) const { return key.hash(); }
};

// What a full-path call found, for calls with its signature: the program, and per input
// of the call (tensors and scalars, in the order they entered the OpCall) the parameter
// it is (-1: a scalar built into the program) and its dtype; a view of part of a storage
// also has the parameter its offset goes to. The program's last results, one per write,
// become the contents of an input's storage (an in-place op's `self`); the others are
// fresh tensors.
struct CallPlan {
  struct Input {
    int param;
    hlo::DType dtype;
    int offset_param = -1;  // a view's storage offset (s64), or -1
  };
  struct Write {
    size_t input;  // whose storage takes the result
    hlo::DType dtype;
    int64_t numel;
  };
  std::shared_ptr<const runtime::CompiledProgram> program;
  std::vector<Input> inputs;
  std::vector<Write> writes;
  size_t num_params = 0;
};

// One input of a memoized call: a tpu tensor's storage (its buffer is the parameter; for
// a view of part of it, also its offset), or a scalar value (a Python number, a 0-d CPU
// tensor's value).
struct MemoInput {
  runtime::DeviceBuffer* storage = nullptr;
  c10::Scalar scalar;
  bool view = false;
  int64_t offset = 0;
};

// A call's signature and inputs, as the lowered kernel reads them off the stack.
struct MemoCall {
  MemoKey key;
  c10::SmallVector<MemoInput, 4> inputs;
  int device = -1;
  c10::TensorImpl* target = nullptr;  // an in-place op's self
  uint64_t generation = 0;            // the executable cache's, for CallMemo::add
};

// Fused mode's counterpart, kept with the op a call recorded (runtime::RecordedOp::call).
// A step that repeats a trace calls the same kernel with the same signature (there with
// each input's pending-ness, and a pending view's offset, which the recorded program
// builds in): the trace's op is then what the call would record, and the plan (no
// program: the group's) says which storage or scalar each of its parameters reads, so the
// call records it without promotion, meta kernel or program key.
struct ReplayCall {
  const void* kernel = nullptr;       // the lowered kernel that recorded it
  MemoKey key;
  CallPlan plan;                      // program: null
  std::shared_ptr<const void> extra;  // the kernel's result metadata
};

// Runs `plan` on `inputs` (on `device`), makes the storages it writes take their new
// contents, and returns its other results as new tensors. `name`: the op, for errors.
std::vector<at::Tensor> run_plan(const CallPlan& plan, c10::ArrayRef<MemoInput> inputs,
                                 int device, const char* name);

// Signature -> plan and `Extra` (what the caller needs besides: the op's result
// metadata), bounded, thread-safe.
template <class Extra>
class CallMemo {
 public:
  struct Entry {
    CallPlan plan;
    std::shared_ptr<const Extra> extra;
  };
  static constexpr size_t kMaxEntries = 256;  // per op; more, and it starts over

  std::shared_ptr<const Entry> find(const MemoKey& key) {
    const uint64_t generation = runtime::Runtime::get().cache().generation();
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation != generation_) {
      entries_.clear();
      generation_ = generation;
      return nullptr;
    }
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    const runtime::CompiledProgram& program = *it->second->plan.program;
    program.hits.fetch_add(1, std::memory_order_relaxed);
    if (!program.memo_used.load(std::memory_order_relaxed))
      program.memo_used.store(true, std::memory_order_relaxed);
    return it->second;
  }

  // `generation`: the executable cache's before the full path looked the program up.
  void add(MemoKey key, CallPlan plan, std::shared_ptr<const Extra> extra, uint64_t generation) {
    auto entry = std::make_shared<const Entry>(Entry{std::move(plan), std::move(extra)});
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation < generation_) return;  // a program may have left the cache since
    if (generation > generation_) {
      entries_.clear();
      generation_ = generation;
    }
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(std::move(key), std::move(entry));
  }

 private:
  std::mutex mutex_;
  uint64_t generation_ = 0;
  std::unordered_map<MemoKey, std::shared_ptr<const Entry>, MemoKeyHash> entries_;
};

}  // namespace torch_tpu::aten
