// Tier-2 compilation cache: serialized executables on disk, shared by every process on
// the host (and by eager and compiled programs).
//
// An entry is one file named by a hash of the program fingerprint and the cache
// identity (torch_tpu version, PJRT API version, plugin, compile options), so a new
// plugin or release never reads an old entry. Writes are atomic (temp file + rename);
// a per-entry file lock makes N processes that miss on one program compile it once.
// A corrupt, truncated or incompatible entry is counted, deleted and rewritten. The
// directory is kept under a byte cap by evicting the least recently used entries.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace torch_tpu::runtime {

struct DiskCacheConfig {
  bool enabled = true;
  std::string dir;
  int64_t max_bytes = 0;
};

// TORCH_TPU_CACHE_DIR (default ~/.cache/torch_tpu), TORCH_TPU_CACHE_MAX_BYTES
// (default 4 GiB), TORCH_TPU_DISK_CACHE=0 disables it.
DiskCacheConfig disk_cache_config_from_env();

// What the tier had for a fingerprint: off (disabled), hit (loaded), miss (absent), or a
// bad entry (corrupt, truncated or rejected by the plugin), rebuilt.
enum class DiskOutcome { off, hit, miss, bad_entry };

// The disk tier's counters, named once: X(field, doc); torch_tpu.metrics reports them
// as disk_<field>.
#define TORCH_TPU_DISK_METRICS(X)                                                   \
  X(hits, "programs loaded from the disk cache")                                    \
  X(misses, "programs the disk cache lacked")                                       \
  X(writes, "programs written to the disk cache")                                   \
  X(bad_entries, "disk entries corrupt, truncated or rejected by the plugin")       \
  X(evictions, "disk entries removed to stay under the size limit")                 \
  X(unserializable, "programs the plugin could not serialize: kept in memory only")

struct DiskCacheStats {
#define TORCH_TPU_DISK_METRIC_FIELD(name, doc) std::atomic<int64_t> name{0};
  TORCH_TPU_DISK_METRICS(TORCH_TPU_DISK_METRIC_FIELD)
#undef TORCH_TPU_DISK_METRIC_FIELD
};

class DiskCache {
 public:
  DiskCache(DiskCacheConfig config, std::string identity);

  // The entry for `fingerprint`: loaded with `load` (bytes -> T) when present and valid,
  // otherwise produced by `compile` (which returns T and its bytes) and stored. `compile`
  // is told what the tier found.
  template <typename T>
  std::unique_ptr<T> get(
      const std::string& fingerprint,
      const std::function<std::unique_ptr<T>(const std::string&)>& load,
      const std::function<std::unique_ptr<T>(std::string*, DiskOutcome)>& compile) {
    std::unique_ptr<T> result;
    lookup(
        fingerprint,
        [&](const std::string& bytes) {
          result = load(bytes);
          return result != nullptr;
        },
        [&](std::string* bytes, DiskOutcome outcome) { result = compile(bytes, outcome); });
    return result;
  }

  // The entry for `fingerprint` if present and valid, loaded with `load`; null otherwise
  // (nothing is compiled or written). `outcome` says what the tier found.
  template <typename T>
  std::unique_ptr<T> find(const std::string& fingerprint,
                          const std::function<std::unique_ptr<T>(const std::string&)>& load,
                          DiskOutcome* outcome) {
    std::unique_ptr<T> result;
    *outcome = find(fingerprint, [&](const std::string& bytes) {
      result = load(bytes);
      return result != nullptr;
    });
    return result;
  }

  bool enabled() const { return config_.enabled; }
  const std::string& dir() const { return config_.dir; }
  const DiskCacheStats& stats() const { return stats_; }
  void reset_stats();
  // Bytes the cache's entries take on disk now.
  int64_t bytes_on_disk() const;
  // Deletes every entry.
  void clear();

 private:
  void lookup(const std::string& fingerprint, const std::function<bool(const std::string&)>& load,
              const std::function<void(std::string*, DiskOutcome)>& compile);
  DiskOutcome find(const std::string& fingerprint,
                   const std::function<bool(const std::string&)>& load);
  // Reads the entry at `path` and loads it: a hit, a miss, or a bad entry (deleted).
  DiskOutcome read_and_load(const std::string& path,
                            const std::function<bool(const std::string&)>& load);
  std::string entry_path(const std::string& fingerprint) const;
  DiskOutcome read_entry(const std::string& path, std::string* payload);
  void write_entry(const std::string& path, const std::string& payload);
  void evict();

  DiskCacheConfig config_;
  std::string identity_;
  DiskCacheStats stats_;
};

}  // namespace torch_tpu::runtime
