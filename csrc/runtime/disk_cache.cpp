#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "hlo/builder.h"
#include "runtime/settings.h"

namespace torch_tpu::runtime {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "torch_tpu executable v1";
constexpr const char* kSuffix = ".xla";

// Holds an exclusive lock on a file for its lifetime; a no-op if the file can't be opened
// (the cache then just risks a duplicate compile, never a wrong result).
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

struct Entry {
  fs::path path;
  int64_t bytes;
  fs::file_time_type used;
};

std::vector<Entry> list_entries(const std::string& dir) {
  std::vector<Entry> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != kSuffix) continue;
    std::error_code ec2;
    int64_t bytes = static_cast<int64_t>(e.file_size(ec2));
    auto used = e.last_write_time(ec2);
    if (!ec2) entries.push_back({e.path(), bytes, used});
  }
  return entries;
}

}  // namespace

DiskCacheConfig disk_cache_config_from_env() {
  DiskCacheConfig c;
  c.enabled = settings::flag("TORCH_TPU_DISK_CACHE");
  if (std::string dir = settings::text("TORCH_TPU_CACHE_DIR"); !dir.empty()) {
    c.dir = dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    c.dir = std::string(xdg) + "/torch_tpu";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    c.dir = std::string(home) + "/.cache/torch_tpu";
  } else {
    c.enabled = false;
  }
  c.max_bytes = *settings::integer("TORCH_TPU_CACHE_MAX_BYTES");
  return c;
}

DiskCache::DiskCache(DiskCacheConfig config, std::string identity)
    : config_(std::move(config)), identity_(std::move(identity)) {
  if (!config_.enabled) return;
  std::error_code ec;
  fs::create_directories(config_.dir, ec);
  // An unusable directory turns the tier off rather than failing every compile.
  if (ec || ::access(config_.dir.c_str(), W_OK) != 0) config_.enabled = false;
}

std::string DiskCache::entry_path(const std::string& fingerprint) const {
  return config_.dir + "/" + hlo::fingerprint(identity_ + "\n" + fingerprint) + kSuffix;
}

DiskOutcome DiskCache::read_entry(const std::string& path, std::string* payload) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return DiskOutcome::miss;
  std::string magic, identity, checksum, size_line;
  bool ok = static_cast<bool>(std::getline(in, magic) && std::getline(in, identity) &&
                              std::getline(in, checksum) && std::getline(in, size_line));
  ok = ok && magic == kMagic && identity == identity_;
  if (ok) {
    char* end = nullptr;
    unsigned long long size = std::strtoull(size_line.c_str(), &end, 10);
    ok = end != size_line.c_str() && *end == '\0' && size < (1ULL << 40);
    if (ok) {
      payload->resize(size);
      in.read(payload->data(), static_cast<std::streamsize>(size));
      ok = static_cast<uint64_t>(in.gcount()) == size && in.peek() == EOF &&
           hlo::fingerprint(*payload) == checksum;
    }
  }
  if (!ok) {
    stats_.bad_entries++;
    std::error_code ec;
    fs::remove(path, ec);
    return DiskOutcome::bad_entry;
  }
  // The modification time is the LRU clock: a hit makes the entry young again.
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return DiskOutcome::hit;
}

void DiskCache::write_entry(const std::string& path, const std::string& payload) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kMagic << '\n'
        << identity_ << '\n'
        << hlo::fingerprint(payload) << '\n'
        << payload.size() << '\n';
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // atomic: readers see the old state or the whole entry
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  stats_.writes++;
}

DiskOutcome DiskCache::read_and_load(const std::string& path,
                                     const std::function<bool(const std::string&)>& load) {
  std::string payload;
  DiskOutcome read = read_entry(path, &payload);
  if (read != DiskOutcome::hit) return read;
  try {
    if (load(payload)) return DiskOutcome::hit;
  } catch (const std::exception&) {
  }
  // The plugin rejected the bytes: treat the entry as bad and rebuild it.
  stats_.bad_entries++;
  std::error_code ec;
  fs::remove(path, ec);
  return DiskOutcome::bad_entry;
}

DiskOutcome DiskCache::find(const std::string& fingerprint,
                            const std::function<bool(const std::string&)>& load) {
  if (!config_.enabled) return DiskOutcome::off;
  DiskOutcome outcome = read_and_load(entry_path(fingerprint), load);
  if (outcome == DiskOutcome::hit) stats_.hits++;
  return outcome;
}

void DiskCache::lookup(const std::string& fingerprint,
                       const std::function<bool(const std::string&)>& load,
                       const std::function<void(std::string*, DiskOutcome)>& compile) {
  if (!config_.enabled) {
    std::string unused;
    compile(&unused, DiskOutcome::off);
    return;
  }
  const std::string path = entry_path(fingerprint);
  DiskOutcome first = read_and_load(path, load);
  if (first == DiskOutcome::hit) {
    stats_.hits++;
    return;
  }
  {
    // Whoever holds the lock compiles; the others wait and then find the entry.
    FileLock lock(path + ".lock");
    DiskOutcome second = read_and_load(path, load);
    if (second == DiskOutcome::hit) {
      stats_.hits++;
      return;
    }
    stats_.misses++;
    std::string bytes;
    compile(&bytes, first == DiskOutcome::bad_entry ? first : second);
    if (!bytes.empty())
      write_entry(path, bytes);
    else
      stats_.unserializable++;
  }
  evict();
}

void DiskCache::evict() {
  if (config_.max_bytes <= 0) return;
  std::vector<Entry> entries = list_entries(config_.dir);
  int64_t total = 0;
  for (const Entry& e : entries) total += e.bytes;
  if (total <= config_.max_bytes) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= config_.max_bytes) break;
    std::error_code ec;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      stats_.evictions++;
      fs::remove(e.path.string() + ".lock", ec);
    }
  }
}

void DiskCache::reset_stats() {
#define TORCH_TPU_DISK_METRIC_RESET(name, doc) stats_.name = 0;
  TORCH_TPU_DISK_METRICS(TORCH_TPU_DISK_METRIC_RESET)
#undef TORCH_TPU_DISK_METRIC_RESET
}

int64_t DiskCache::bytes_on_disk() const {
  if (!config_.enabled) return 0;
  int64_t total = 0;
  for (const Entry& e : list_entries(config_.dir)) total += e.bytes;
  return total;
}

void DiskCache::clear() {
  if (!config_.enabled) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(config_.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(kSuffix) != std::string::npos) fs::remove(e.path(), ec);
  }
}

}  // namespace torch_tpu::runtime
