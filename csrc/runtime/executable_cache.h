// Tier-1 compilation cache: program key -> compiled executable and its output types.
// Concurrent requests for one key wait on one compile.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hlo/types.h"
#include "runtime/disk_cache.h"
#include "pjrt/compile_options.h"
#include "pjrt/executable.h"

namespace torch_tpu::runtime {

class ExecutableCache;
struct CompileOverrides;

// The hash of a key's words so far, with `word` added (FNV-1a-like, one word at a time).
inline uint64_t mix_key_hash(uint64_t hash, int64_t word) {
  hash = (hash ^ static_cast<uint64_t>(word)) * 0x100000001B3ULL;
  return hash ^ (hash >> 32);
}
constexpr uint64_t kKeyHashSeed = 14695981039346656037ULL;

// Everything that changes the emitted program, as a flat list of words. Built on the
// hot path, so it is cheap: no text is produced until a miss.
class ProgramKey {
 public:
  void add(int64_t word) {
    words_.push_back(word);
    hash_ = mix_key_hash(hash_, word);
  }
  void add(const std::vector<int64_t>& words) {
    add(static_cast<int64_t>(words.size()));
    for (int64_t w : words) add(w);
  }
  void add(const char* text);  // op names: hashed by content
  // Another key's words, as if added one by one.
  void append(const ProgramKey& other) {
    for (int64_t w : other.words_) add(w);
  }
  uint64_t hash() const { return hash_; }
  bool operator==(const ProgramKey& other) const { return words_ == other.words_; }

 private:
  std::vector<int64_t> words_;
  uint64_t hash_ = kKeyHashSeed;
};

struct ProgramKeyHash {
  size_t operator()(const ProgramKey& key) const { return key.hash(); }
};

// What a lowering produces on a cache miss.
struct Program {
  std::string mlir;
  std::vector<hlo::TensorType> outputs;
  std::string label;  // what it is, for per-entry stats: the op name, or "graph (N ops)"
  std::vector<std::pair<int, int64_t>> donations;  // (argument, bytes): Builder::donations()
  // What the compile log shows as its arguments: the op's own tensor types where the
  // program's parameters say less (flat storages); empty: the parameters.
  std::vector<hlo::TensorType> arguments;
};

struct CompiledProgram : std::enable_shared_from_this<CompiledProgram> {
  // The executable runs launch now. Tiered compilation (tiered_compile.h) swaps in the
  // optimized one; a run holds the one it launched.
  std::shared_ptr<pjrt::Executable> executable() const { return executable_.load(); }
  void set_executable(std::shared_ptr<pjrt::Executable> e) const {
    executable_.store(std::move(e));
  }
  std::vector<hlo::TensorType> outputs;
  std::string fingerprint;
  std::string label;
  std::vector<std::pair<int, int64_t>> donations;
  double compile_seconds = 0;  // XLA compile time, 0 when it came from the disk tier
  bool from_disk = false;

  // A first-tier program: what its optimized compile needs, and its runs so far. The
  // runtime counts runs while `first_tier` holds, and asks the cache for the tier-up at
  // `tier_up_runs` (ExecutableCache::tier_up_later).
  struct FirstTier {
    ExecutableCache* cache;  // the cache that compiled it, and tiers it up
    std::string mlir;
    std::vector<pjrt::OptionOverride> options;  // the compile overrides it was built under
    std::string signature;                      // for the compile log
    int64_t tier_up_runs = 0;
  };
  std::unique_ptr<const FirstTier> first_tier;  // null: optimized already
  mutable std::atomic<int64_t> runs{0};
  mutable std::atomic<bool> tiered_up{false};
  // Lookups that found it: the cache's own, and op mode's call memo (aten/call_memo.h),
  // which goes to the program without asking the cache. `memo_used`: the memo ran it
  // since the cache last looked (its recency is older than its use; see evict_locked).
  mutable std::atomic<int64_t> hits{0};
  mutable std::atomic<bool> memo_used{false};

 private:
  mutable std::atomic<std::shared_ptr<pjrt::Executable>> executable_;
};

// One tier-1 entry as cache_stats reports it.
struct EntryStats {
  std::string label, fingerprint;
  int64_t hits = 0;
  double compile_seconds = 0;
  bool from_disk = false;
};

class ExecutableCache {
 public:
  using Compiler = std::function<std::unique_ptr<pjrt::Executable>(const std::string& mlir)>;
  using Loader = std::function<std::unique_ptr<pjrt::Executable>(const std::string& bytes)>;
  // At most `capacity` programs stay loaded (TORCH_TPU_CACHE_ENTRIES, default 4096); the
  // least recently used are dropped, and come back from the disk tier if needed again.
  explicit ExecutableCache(Compiler compiler, size_t capacity = default_capacity())
      : compiler_(std::move(compiler)), capacity_(capacity) {}
  ~ExecutableCache();  // waits for the tier-ups it queued
  static size_t default_capacity();

  // Every loaded XLA:CPU executable holds memory mappings of its own (code and data, per
  // compiled module; a fused group's program dozens), and a process may hold at most
  // vm.max_map_count of them (65530 by default). When the plugin's loader cannot map
  // an executable, its failure path leaves the unwinder's frame registry dangling and the
  // next C++ exception crashes the process. So every kMappingCheckInterval misses the
  // cache counts the process's mappings and, above `limit`, drops its least recently
  // used programs in proportion, down to three quarters of the limit.
  struct MappingBudget {
    std::function<int64_t()> count;  // mappings in use now; -1 when unknown
    int64_t limit = 0;               // <= 0: no budget
  };
  static constexpr int kMappingCheckInterval = 16;
  // /proc/self/maps, and TORCH_TPU_MAX_MAPPINGS or half of vm.max_map_count.
  static MappingBudget default_mapping_budget();
  void set_mapping_budget(MappingBudget budget) { budget_ = std::move(budget); }

  // Puts a disk tier under this one: misses look there before compiling, and new
  // compiles are stored there. `disk` must outlive the cache.
  void set_disk_tier(DiskCache* disk, Loader load) {
    disk_ = disk;
    loader_ = std::move(load);
  }

  // Tiered compilation (tiered_compile.h): misses compile with `first_tier` and are
  // recompiled with the cache's compiler after `runs` runs, in the background. `retire`
  // gets each replaced executable, to drop once the runs launched on it are done.
  using Retire = std::function<void(std::shared_ptr<pjrt::Executable>)>;
  void set_tiering(Compiler first_tier, int64_t runs, Retire retire) {
    first_tier_ = std::move(first_tier);
    tier_up_runs_ = runs;
    retire_ = std::move(retire);
  }
  // Queues `program`'s optimized compile on the background compiler.
  void tier_up_later(const CompiledProgram& program);
  // The optimized compile of a first-tier program, swapped in (what the background
  // compiler runs).
  void tier_up(const std::shared_ptr<const CompiledProgram>& program);

  // Returns the cached program for `key`, or builds and compiles it once.
  std::shared_ptr<const CompiledProgram> get(const ProgramKey& key,
                                             const std::function<Program()>& build);
  size_t size() const;
  void clear();
  // Changes whenever a program leaves the cache (evicted or cleared): what holds programs
  // found here (the call memo) drops them then, so that they can be freed.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // The loaded programs, most recently used first (those still compiling are skipped).
  std::vector<EntryStats> entries() const;

 private:
  using Future = std::shared_future<std::shared_ptr<const CompiledProgram>>;
  Compiler compiler_;
  Compiler first_tier_;
  int64_t tier_up_runs_ = 0;
  Retire retire_;
  DiskCache* disk_ = nullptr;
  Loader loader_;
  mutable std::mutex mutex_;
  struct Entry {
    Future future;
    std::list<ProgramKey>::iterator recency;
  };
  void evict_locked(size_t capacity);
  static std::string disk_key(const std::string& fingerprint, bool first_tier);
  bool tiers(const CompileOverrides& overrides) const;
  void keep_within_mapping_budget();
  size_t capacity_;
  MappingBudget budget_ = default_mapping_budget();
  int misses_since_check_ = 0;
  std::list<ProgramKey> recency_;  // most recently used first
  std::unordered_map<ProgramKey, Entry, ProgramKeyHash> entries_;
  // Hashes of keys dropped (evicted or cleared) and not requested since: a compile
  // log reason.
  std::unordered_set<uint64_t> evicted_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace torch_tpu::runtime
