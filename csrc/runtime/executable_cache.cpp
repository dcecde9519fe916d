#include "runtime/executable_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "hlo/builder.h"
#include "pjrt/error.h"
#include "runtime/compile_log.h"
#include "runtime/compile_overrides.h"
#include "runtime/compile_policy.h"
#include "runtime/metrics.h"
#include "runtime/settings.h"
#include "runtime/tiered_compile.h"
#include "runtime/trace.h"

namespace torch_tpu::runtime {

void ProgramKey::add(const char* text) {
  uint64_t h = 14695981039346656037ULL;
  for (const char* p = text; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ULL;
  add(static_cast<int64_t>(h));
}

namespace {

void dump(const std::string& fingerprint, const std::string& mlir) {
  static const std::string dir = settings::text("TORCH_TPU_DUMP_DIR");
  if (dir.empty()) return;
  std::ofstream(dir + "/" + fingerprint + ".mlir") << mlir;
}

// Lines of /proc/self/maps: one per mapping. -1 where there is no such file.
int64_t process_mappings() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int64_t lines = 0;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
  ::close(fd);
  return lines;
}

// The bytes the disk tier stores for `executable`; empty (nothing is written, the program
// lives in memory only) when the plugin cannot serialize it: XLA:CPU's oneDNN fusions
// (`XLA_FLAGS=--xla_cpu_use_onednn=true ...`) answer "ToProto is not implemented". The
// executable itself is fine, so its compile must not fail.
std::string serialized(const pjrt::Executable& executable) {
  try {
    return executable.serialize();
  } catch (const pjrt::Error&) {
    return {};
  }
}

}  // namespace

ExecutableCache::MappingBudget ExecutableCache::default_mapping_budget() {
  int64_t limit = 0;
  if (auto set = settings::integer("TORCH_TPU_MAX_MAPPINGS")) {
    limit = *set;
  } else {
    int64_t max_map_count = 0;
    if (!(std::ifstream("/proc/sys/vm/max_map_count") >> max_map_count) || max_map_count <= 0)
      max_map_count = 65530;  // Linux's default
    limit = max_map_count / 2;
  }
  return {process_mappings, limit};
}

void ExecutableCache::keep_within_mapping_budget() {
  if (budget_.limit <= 0 || !budget_.count) return;
  int64_t in_use = budget_.count();
  if (in_use <= budget_.limit) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Programs held elsewhere too (a compiled graph's) keep their mappings when dropped
  // here; the next check then drops more.
  size_t target = static_cast<size_t>(static_cast<double>(entries_.size()) * 0.75 *
                                      static_cast<double>(budget_.limit) / in_use);
  evict_locked(target);
}

std::shared_ptr<const CompiledProgram> ExecutableCache::get(const ProgramKey& program_key,
                                                            const std::function<Program()>& build) {
  // Compile options set for this block (compile_overrides.h) make another program.
  const CompileOverrides& overrides = current_overrides();
  ProgramKey with_overrides;
  if (overrides.id != 0) {
    with_overrides = program_key;
    with_overrides.add(overrides.id);
  }
  const ProgramKey& key = overrides.id != 0 ? with_overrides : program_key;
  std::promise<std::shared_ptr<const CompiledProgram>> promise;
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    Future future = it->second.future;
    recency_.splice(recency_.begin(), recency_, it->second.recency);
    lock.unlock();  // other keys proceed while this one may still be compiling
    metrics().cache_hits++;
    std::shared_ptr<const CompiledProgram> found = future.get();
    found->hits.fetch_add(1, std::memory_order_relaxed);
    return found;
  }
  const bool evicted = evicted_.erase(key.hash()) > 0;
  recency_.push_front(key);
  entries_.emplace(key, Entry{promise.get_future().share(), recency_.begin()});
  evict_locked(capacity_);
  bool check = ++misses_since_check_ >= kMappingCheckInterval;
  if (check) misses_since_check_ = 0;
  lock.unlock();
  metrics().cache_misses++;
  if (check) keep_within_mapping_budget();
  trace::Scope traced("tpu::compile");
  try {
    auto start = std::chrono::steady_clock::now();
    Program program = build();
    if (overrides.id != 0) program.mlir += "\n// XLA options: " + overrides.text + "\n";
    auto compiled = std::make_shared<CompiledProgram>();
    compiled->fingerprint = hlo::fingerprint(program.mlir);
    compiled->label = std::move(program.label);
    compiled->donations = std::move(program.donations);
    dump(compiled->fingerprint, program.mlir);
    CompileLog& log = CompileLog::get();
    CompileRecord record{compiled->label,
                         (program.arguments.empty() ? CompileLog::signature(program.mlir)
                                                    : CompileLog::signature(program.arguments)) +
                             " -> " + CompileLog::signature(program.outputs)};
    record.reason = log.reason(record.what, record.signature, evicted);
    bool compiled_here = false;
    const bool disk_on = disk_ != nullptr && disk_->enabled();
    auto compile = [&](std::string* bytes, DiskOutcome disk) {
      record.disk = disk;
      log.check_allowed(record.what, record.signature, record.reason, disk);
      auto executable = (record.first_tier ? first_tier_ : compiler_)(program.mlir);
      compiled_here = true;
      if (bytes != nullptr) *bytes = serialized(*executable);
      return executable;
    };
    // Tiered: the optimized executable if the disk tier has it, else the first tier
    // (loaded from its own disk entry, or compiled and stored there).
    const bool tiered = tiers(overrides);
    if (tiered && disk_on) {
      DiskOutcome disk = DiskOutcome::off;
      compiled->set_executable(disk_->find<pjrt::Executable>(
          disk_key(compiled->fingerprint, /*first_tier=*/false), loader_, &disk));
    }
    if (compiled->executable() == nullptr) {
      record.first_tier = tiered;
      compiled->set_executable(disk_on
                                   ? disk_->get<pjrt::Executable>(
                                         disk_key(compiled->fingerprint, tiered), loader_, compile)
                                   : compile(nullptr, DiskOutcome::off));
      if (tiered)
        compiled->first_tier =
            std::make_unique<const CompiledProgram::FirstTier>(CompiledProgram::FirstTier{
                this, std::move(program.mlir), overrides.options, record.signature, tier_up_runs_});
    }
    compiled->outputs = std::move(program.outputs);
    compiled->from_disk = !compiled_here;
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    if (compiled_here) {
      compiled->compile_seconds = ns / 1e9;
      metrics().compiles++;
      metrics().compile_ns += ns;
    } else {
      record.disk = DiskOutcome::hit;
    }
    traced.name("tpu::compile " + compiled->label);
    traced.text("program", compiled->fingerprint);
    traced.text("cache", compiled_here ? "miss: compiled" : "miss: loaded from disk");
    traced.number("seconds",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    record.seconds = ns / 1e9;
    log.add(std::move(record));
    promise.set_value(compiled);
    return compiled;
  } catch (...) {
    // A failed compile is not cached: the next call reports the error again.
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    auto failed = entries_.find(key);
    if (failed != entries_.end()) {
      recency_.erase(failed->second.recency);
      entries_.erase(failed);
    }
    if (evicted) evicted_.insert(key.hash());
    throw;
  }
}

ExecutableCache::~ExecutableCache() {
  if (first_tier_) BackgroundCompiler::get().wait_idle();
}

// A disk entry holds one tier, and its key says which.
std::string ExecutableCache::disk_key(const std::string& fingerprint, bool first_tier) {
  return fingerprint + (first_tier ? " first tier" : " optimized");
}

bool ExecutableCache::tiers(const CompileOverrides& overrides) const {
  // A block that sets the optimization level itself gets exactly that level.
  return first_tier_ && std::none_of(overrides.options.begin(), overrides.options.end(),
                                     [](const auto& o) { return o.name == kOptimizationLevel; });
}

void ExecutableCache::tier_up_later(const CompiledProgram& program) {
  std::weak_ptr<const CompiledProgram> weak = program.weak_from_this();
  // A program dropped meanwhile (evicted and no longer held) is not compiled again.
  BackgroundCompiler::get().post([this, weak] {
    if (auto held = weak.lock()) tier_up(held);
  });
}

void ExecutableCache::tier_up(const std::shared_ptr<const CompiledProgram>& program) {
  const CompiledProgram::FirstTier& first = *program->first_tier;
  if (program->tiered_up.exchange(true)) return;
  trace::Scope traced("tpu::tier_up");
  traced.name("tpu::tier_up " + program->label);
  auto start = std::chrono::steady_clock::now();
  // The compile options the program was built under (they are per thread).
  push_overrides(first.options);
  struct Pop {
    ~Pop() { pop_overrides(); }
  } pop;
  CompileRecord record{program->label, first.signature,
                       "tier-up after " + std::to_string(first.tier_up_runs) + " runs"};
  bool compiled_here = false;
  auto compile = [&](std::string* bytes, DiskOutcome disk) {
    record.disk = disk;
    auto executable = compiler_(first.mlir);
    compiled_here = true;
    if (bytes != nullptr) *bytes = serialized(*executable);
    return executable;
  };
  std::shared_ptr<pjrt::Executable> optimized =
      disk_ != nullptr && disk_->enabled()
          ? disk_->get<pjrt::Executable>(disk_key(program->fingerprint, false), loader_, compile)
          : compile(nullptr, DiskOutcome::off);
  std::shared_ptr<pjrt::Executable> replaced = program->executable();
  program->set_executable(std::move(optimized));
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  metrics().tier_ups++;
  metrics().tier_up_ns += ns;
  if (!compiled_here) record.disk = DiskOutcome::hit;
  record.seconds = ns / 1e9;
  traced.text("program", program->fingerprint);
  CompileLog::get().add(std::move(record));
  if (retire_) retire_(std::move(replaced));
}

size_t ExecutableCache::default_capacity() {
  return static_cast<size_t>(*settings::integer("TORCH_TPU_CACHE_ENTRIES"));
}

// Drops least recently used programs beyond `capacity`. Programs still compiling stay:
// their waiters hold the future, and dropping them would only compile them twice.
void ExecutableCache::evict_locked(size_t capacity) {
  // Least recently used first. A program the call memo ran since the last look (which
  // recency_ does not see) is moved to the front instead, once: the second pass evicts
  // without that chance, so that the cache always gets down to `capacity`.
  for (int pass = 0; pass < 2 && entries_.size() > capacity; ++pass) {
    auto it = recency_.end();
    while (entries_.size() > capacity && it != recency_.begin()) {
      --it;
      auto entry = entries_.find(*it);
      if (entry->second.future.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        continue;
      if (pass == 0) {
        std::shared_ptr<const CompiledProgram> program;
        try {
          program = entry->second.future.get();
        } catch (...) {  // a failed compile, about to be dropped by its caller
          continue;
        }
        if (program->memo_used.exchange(false, std::memory_order_relaxed)) {
          auto next = std::next(it);
          recency_.splice(recency_.begin(), recency_, it);
          it = next;
          continue;
        }
      }
      evicted_.insert(entry->first.hash());
      entries_.erase(entry);
      it = recency_.erase(it);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      metrics().cache_evictions++;
    }
  }
}

size_t ExecutableCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

std::vector<EntryStats> ExecutableCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<EntryStats> out;
  for (const ProgramKey& key : recency_) {
    const Entry& e = entries_.at(key);
    if (e.future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
    std::shared_ptr<const CompiledProgram> p;
    try {
      p = e.future.get();
    } catch (...) {
      continue;  // a failed compile, about to be dropped
    }
    out.push_back({p->label, p->fingerprint, p->hits.load(std::memory_order_relaxed),
                   p->compile_seconds, p->from_disk});
  }
  return out;
}

void ExecutableCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& entry : entries_) evicted_.insert(entry.first.hash());
  entries_.clear();
  recency_.clear();
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace torch_tpu::runtime
