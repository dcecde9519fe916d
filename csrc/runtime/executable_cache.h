// Tier-1 compilation cache: program key -> compiled executable and its output types.
// Concurrent requests for one key wait on one compile.
#pragma once

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
#include "pjrt/executable.h"

namespace torch_tpu::runtime {

// Everything that changes the emitted program, as a flat list of words. Built on the
// hot path, so it is cheap: no text is produced until a miss.
class ProgramKey {
 public:
  void add(int64_t word) {
    words_.push_back(word);
    hash_ = (hash_ ^ static_cast<uint64_t>(word)) * 0x100000001B3ULL;
    hash_ ^= hash_ >> 32;
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
  uint64_t hash_ = 14695981039346656037ULL;
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

struct CompiledProgram {
  std::unique_ptr<pjrt::Executable> executable;
  std::vector<hlo::TensorType> outputs;
  std::string fingerprint;
  std::string label;
  std::vector<std::pair<int, int64_t>> donations;
  double compile_seconds = 0;  // XLA compile time, 0 when it came from the disk tier
  bool from_disk = false;
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

  // Returns the cached program for `key`, or builds and compiles it once.
  std::shared_ptr<const CompiledProgram> get(const ProgramKey& key,
                                             const std::function<Program()>& build);
  size_t size() const;
  void clear();
  // The loaded programs, most recently used first (those still compiling are skipped).
  std::vector<EntryStats> entries() const;

 private:
  using Future = std::shared_future<std::shared_ptr<const CompiledProgram>>;
  Compiler compiler_;
  DiskCache* disk_ = nullptr;
  Loader loader_;
  mutable std::mutex mutex_;
  struct Entry {
    Future future;
    std::list<ProgramKey>::iterator recency;
    int64_t hits = 0;
  };
  void evict_locked(size_t capacity);
  void keep_within_mapping_budget();
  size_t capacity_;
  MappingBudget budget_ = default_mapping_budget();
  int misses_since_check_ = 0;
  std::list<ProgramKey> recency_;  // most recently used first
  std::unordered_map<ProgramKey, Entry, ProgramKeyHash> entries_;
  // Hashes of keys dropped (evicted or cleared) and not requested since: a compile
  // log reason.
  std::unordered_set<uint64_t> evicted_;
};

}  // namespace torch_tpu::runtime
