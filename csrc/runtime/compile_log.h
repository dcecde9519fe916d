// Every compile has a reason: the executable cache records each program it had to
// produce (compiled by XLA, or loaded from the disk tier) with what it is, its argument
// types, why tier 1 missed, what the disk tier said and how long it took. The log line
// (TORCH_TPU_LOG=compiles), torch_tpu.metrics.compile_log() and no_compile() all read
// this one record.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/types.h"
#include "runtime/disk_cache.h"

namespace torch_tpu::runtime {

const char* disk_outcome_name(DiskOutcome outcome);  // "off", "hit", "miss", "corrupt entry"

struct CompileRecord {
  std::string what;       // the op, "fused (N ops)", "graph (N ops)", ...
  std::string signature;  // argument and result types: "f32[3,4], i64[] -> f32[3,4]"
  std::string reason;     // why tier 1 missed: see CompileLog::reason
  DiskOutcome disk = DiskOutcome::off;
  double seconds = 0;  // building, compiling or loading, and serializing
  // Compiled at the first tier (tiered_compile.h); a tier-up's reason starts "tier-up".
  bool first_tier = false;
  bool from_disk() const { return disk == DiskOutcome::hit; }
};

// Raised instead of compiling while compiles are forbidden (no_compile()).
class CompileForbidden : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CompileLog {
 public:
  static CompileLog& get();

  // The argument types of a StableHLO module's @main, short: "f32[3,4], i1[]".
  static std::string signature(const std::string& mlir);
  static std::string signature(const std::vector<hlo::TensorType>& types);

  // Why a program of `what` with `signature` was not in tier 1: "evicted" (it was, and
  // was dropped), "new program" (nothing of that name was built before), "new shape"
  // ("new bucket" for a bucketed graph), "new dtype", or "new attributes" (same argument
  // types, other parameters).
  std::string reason(const std::string& what, const std::string& signature, bool evicted);

  // Appends `record` (the oldest go beyond kMaxRecords) and prints it when
  // TORCH_TPU_LOG names "compiles".
  void add(CompileRecord record);
  std::vector<CompileRecord> records() const;
  void clear();  // the records; what was built before still decides reasons

  // Compiles are forbidden while forbid_depth() > 0: no_compile() nests, and
  // TORCH_TPU_NO_COMPILE=1 forbids them from the start. Loads from disk stay allowed.
  void forbid() { forbid_depth_++; }
  void allow() { forbid_depth_--; }
  int forbid_depth() const { return forbid_depth_.load(); }
  // Throws CompileForbidden naming the program and the reason if compiles are forbidden.
  void check_allowed(const std::string& what, const std::string& signature,
                     const std::string& reason, DiskOutcome disk) const;

  static constexpr size_t kMaxRecords = 10000;

 private:
  CompileLog();
  mutable std::mutex mutex_;
  std::deque<CompileRecord> records_;
  // Per name, the signatures built so far, and their dtypes alone.
  struct Seen {
    std::unordered_set<std::string> signatures, dtypes;
  };
  std::unordered_map<std::string, Seen> seen_;
  std::atomic<int> forbid_depth_{0};
  bool print_ = false;
};

}  // namespace torch_tpu::runtime
