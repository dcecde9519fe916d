#include "runtime/runtime.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <unordered_map>

#include "hlo/builder.h"
#include "pjrt/compile_options.h"
#include "pjrt/error.h"
#include "runtime/compile_policy.h"
#include "runtime/compile_overrides.h"
#include "runtime/element_type.h"
#include "runtime/exit_gate.h"
#include "runtime/metrics.h"
#include "runtime/settings.h"
#include "runtime/tiered_compile.h"
#include "runtime/trace.h"

namespace torch_tpu::runtime {

namespace {

std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}
RuntimeConfig& pending_config() {
  static RuntimeConfig c;
  return c;
}
std::atomic<Runtime*> instance{nullptr};
std::string* init_error = nullptr;

}  // namespace

struct Runtime::ScalarCache {
  static constexpr size_t kCapacity = 4096;
  struct Key {
    int device;
    hlo::DType dtype;
    uint64_t bits;
    bool operator==(const Key& o) const {
      return device == o.device && dtype == o.dtype && bits == o.bits;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return (k.bits * 0x9E3779B97F4A7C15ULL) ^ (static_cast<size_t>(k.dtype) << 8) ^ k.device;
    }
  };
  using Entry = std::pair<Key, std::shared_ptr<pjrt::Buffer>>;
  std::mutex mutex;
  std::list<Entry> lru;
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index;
};

// Completion events of runs not yet known to be finished, per device; synchronize()
// waits on them. Events, not output buffers: they hold no device memory.
struct Runtime::Pending {
  static constexpr size_t kMaxTracked = 1024;
  std::mutex mutex;
  std::vector<std::vector<std::shared_ptr<pjrt::Event>>> per_device;
  // Handles of donated arguments, each with the completion event of the run that consumed
  // it. Destroying a PJRT buffer waits for the donation to be confirmed, which XLA:CPU
  // does only when the run starts: dropped on the host thread right after the launch, a
  // donated handle would make the host wait for the device. Released once the run is done.
  // Also an executable tiered compilation replaced while the run was being launched, and
  // the source and destination of a host copy in flight.
  struct Retired {
    std::shared_ptr<pjrt::Event> done;
    std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
    std::shared_ptr<pjrt::Executable> executable;
    std::shared_ptr<void> hold;
  };
  std::vector<std::deque<Retired>> retired;

  // Pops the retired handles whose runs are done (in launch order). Called with `mutex`
  // held; the handles are returned to be destroyed after it is released.
  std::vector<Retired> reap(int device) {
    std::vector<Retired> done;
    auto& queue = retired[device];
    while (!queue.empty() && queue.front().done->is_ready()) {
      done.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    return done;
  }
};

void Runtime::configure(RuntimeConfig config) {
  std::lock_guard<std::mutex> lock(init_mutex());
  if (instance == nullptr) {
    pending_config() = std::move(config);
    delete init_error;
    init_error = nullptr;
  }
}

Runtime& Runtime::get() {
  if (Runtime* r = instance.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(init_mutex());
  if (Runtime* r = instance.load(std::memory_order_acquire)) return *r;
  // A failed load is remembered: every later use reports the same clear error.
  if (init_error != nullptr) throw pjrt::Error(PJRT_Error_Code_FAILED_PRECONDITION, *init_error);
  try {
    instance.store(new Runtime(pending_config()), std::memory_order_release);
  } catch (const std::exception& e) {
    init_error = new std::string(e.what());
    throw pjrt::Error(PJRT_Error_Code_FAILED_PRECONDITION, *init_error);
  }
  return *instance.load(std::memory_order_acquire);
}

bool RuntimeConfig::virtual_devices() const {
  const std::string file = plugin_path.substr(plugin_path.rfind('/') + 1);
  return file.find("cpu") != std::string::npos;
}

bool Runtime::available() {
  try {
    return configured_device_count() > 0;
  } catch (const std::exception&) {
    return false;
  }
}

int Runtime::configured_device_count() {
  if (Runtime* r = instance.load(std::memory_order_acquire)) return r->device_count();
  {
    std::lock_guard<std::mutex> lock(init_mutex());
    if (init_error != nullptr) throw pjrt::Error(PJRT_Error_Code_FAILED_PRECONDITION, *init_error);
    const RuntimeConfig& config = pending_config();
    struct stat st {};
    // A plugin file that is not there cannot start: get() reports why.
    if (config.virtual_devices() && ::stat(config.plugin_path.c_str(), &st) == 0)
      return static_cast<int>(config.num_devices);
  }
  return get().device_count();
}

bool Runtime::initialized() { return instance.load(std::memory_order_acquire) != nullptr; }

bool Runtime::started_in_this_process() {
  Runtime* r = instance.load(std::memory_order_acquire);
  return r != nullptr && r->owner_pid_ == ::getpid();
}

// What a serialized executable depends on besides its program: any change starts a
// fresh set of disk entries.
std::string Runtime::cache_identity() const {
  const pjrt::Plugin& plugin = client_->plugin();
  std::string id = "torch_tpu " TORCH_TPU_VERSION "; pjrt " +
                   std::to_string(plugin.major_version()) + "." +
                   std::to_string(plugin.minor_version()) + "; " + client_->platform_name() + " " +
                   client_->platform_version() + "; " + config_.plugin_path;
  struct stat st {};
  if (::stat(config_.plugin_path.c_str(), &st) == 0)
    id += " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
  // Each entry's key names its tier (ExecutableCache::disk_key).
  id += "; devices " + std::to_string(config_.num_devices) + "; options " +
        hlo::fingerprint(compile_options_) + ", " + hlo::fingerprint(fast_compile_options_) +
        " up to " + std::to_string(fast_compile_elements()) + " elements";
  // The plugins read their debug options from these at start: a program compiled under
  // other flags (fast math, a oneDNN fusion, a dump) must not be loaded under these.
  for (const char* flags : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"})
    if (const char* value = std::getenv(flags)) id += std::string("; ") + flags + " " + value;
  for (char& c : id)
    if (c == '\n' || c == '\r') c = ' ';
  return id;
}

Runtime::Runtime(RuntimeConfig config)
    : config_(std::move(config)),
      cache_([this](const std::string& mlir) {
        const int64_t fast = fast_compile_elements();
        return compile(mlir,
                       fast > 0 && largest_tensor(mlir) <= fast ? kFastOptimizationLevel : -1);
      }),
      compile_options_(pjrt::encode_compile_options(1, 1, /*portable=*/true)),
      scalars_(std::make_unique<ScalarCache>()),
      pending_(std::make_unique<Pending>()) {
  settings::check_all();
  owner_pid_ = ::getpid();
  launch_blocking_ = settings::flag("TORCH_TPU_LAUNCH_BLOCKING");
  if (config_.plugin_path.empty()) {
    throw pjrt::Error(PJRT_Error_Code_NOT_FOUND,
                      "no PJRT plugin found: install xla-cpu-pjrt, or set "
                      "TORCH_TPU_PJRT_PLUGIN to the path of a PJRT plugin .so");
  }
  // XLA's plugins log informational lines to stderr (its TF_CPP_MIN_LOG_LEVEL, read when
  // they first log). Quiet unless the user asks: TORCH_TPU_VERBOSE=1, or their own level.
  if (!settings::flag("TORCH_TPU_VERBOSE")) setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
  auto plugin = pjrt::Plugin::load(config_.plugin_path);
  std::vector<pjrt::CreateOption> options;
  if (config_.virtual_devices()) options.push_back({"cpu_device_count", config_.num_devices});
  client_ = std::make_unique<pjrt::Client>(std::move(plugin), options);
  const bool cpu = client_->platform_name() == "cpu";
  fast_overrides_ = fast_compile_overrides(kFastOptimizationLevel, cpu);
  first_tier_overrides_ = fast_compile_overrides(kFirstTierOptimizationLevel, cpu);
  fast_compile_options_ = pjrt::encode_compile_options(1, 1, /*portable=*/true, fast_overrides_);
  first_tier_options_ =
      pjrt::encode_compile_options(1, 1, /*portable=*/true, first_tier_overrides_);
  disk_ = std::make_unique<DiskCache>(disk_cache_config_from_env(), cache_identity());
  cache_.set_disk_tier(disk_.get(), [this](const std::string& bytes) {
    ExitGate::Pass pass;
    return client_->deserialize(bytes);
  });
  if (tier_up_runs() > 0) {
    cache_.set_tiering(
        [this](const std::string& mlir) { return compile(mlir, kFirstTierOptimizationLevel); },
        tier_up_runs(),
        [this](std::shared_ptr<pjrt::Executable> replaced) {
          // Runs launched on it before the swap hold no reference: wait for them (this is
          // the background compiler's thread). Later launches retire it themselves.
          for (int d = 0; d < device_count(); ++d)
            for (const auto& event : in_flight(d)) event->await();
          replaced.reset();
        });
  }
  pending_->per_device.resize(client_->devices().size());
  pending_->retired.resize(client_->devices().size());
  for (size_t i = 0; i < client_->devices().size(); ++i) {
    int64_t in_use = 0, limit = -1;
    if (!client_->memory_stats(i, &in_use, &limit) || limit <= 0) {
      // XLA:CPU reports no limit: its memory is the host's.
      limit = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    }
    capacity_.push_back(limit);
  }
}

// The overrides on this thread, plus the options of `level` (-1: XLA's default; the
// small-program or first-tier level: compile_policy.h) that they do not set themselves.
std::unique_ptr<pjrt::Executable> Runtime::compile(const std::string& mlir, int64_t level) {
  ExitGate::Pass pass;
  std::vector<pjrt::OptionOverride> options = current_overrides().options;
  if (options.empty()) {
    return client_->compile(mlir, level < 0                              ? compile_options_
                                  : level == kFirstTierOptimizationLevel ? first_tier_options_
                                  : level == kFastOptimizationLevel      ? fast_compile_options_
                                                                         : compile_options_);
  }
  const std::vector<pjrt::OptionOverride> policy =
      level < 0                                ? std::vector<pjrt::OptionOverride>{}
      : level == kFirstTierOptimizationLevel ? first_tier_overrides_
      : level == kFastOptimizationLevel      ? fast_overrides_
                                             : std::vector<pjrt::OptionOverride>{
                                                   {kOptimizationLevel, level}};
  for (const auto& option : policy) {
    if (std::none_of(options.begin(), options.end(),
                     [&](const auto& o) { return o.name == option.name; }))
      options.push_back(option);
  }
  return client_->compile(mlir, pjrt::encode_compile_options(1, 1, /*portable=*/true, options));
}

std::unique_ptr<pjrt::Buffer> Runtime::upload(const void* data, hlo::DType dtype,
                                              const std::vector<int64_t>& dims, int device) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  metrics().host_to_device_bytes += n * hlo::byte_width(dtype);
  trace::Scope traced("tpu::host_to_device");
  traced.number("bytes", static_cast<double>(n * hlo::byte_width(dtype)));
  traced.number("device", device);
  ExitGate::Pass pass;
  return client_->buffer_from_host(data, to_pjrt(dtype), dims, device);
}

std::unique_ptr<pjrt::Buffer> Runtime::on_host_memory(const void* data, hlo::DType dtype,
                                                      const std::vector<int64_t>& dims,
                                                      int device) {
  ExitGate::Pass pass;
  return client_->buffer_on_host_memory(data, to_pjrt(dtype), dims, device);
}

std::unique_ptr<pjrt::Buffer> Runtime::view_host_memory(void* data, hlo::DType dtype,
                                                        const std::vector<int64_t>& dims,
                                                        int device,
                                                        std::function<void()> on_delete) {
  if (client_->platform_name() != "cpu") return nullptr;
  ExitGate::Pass pass;
  return client_->view_of_memory(data, to_pjrt(dtype), dims, device, std::move(on_delete));
}

const void* Runtime::host_address(const pjrt::Buffer& buffer) const {
  if (client_->platform_name() != "cpu") return nullptr;
  return buffer.unsafe_pointer();
}

std::shared_ptr<pjrt::Buffer> Runtime::scalar(int device, hlo::DType dtype, uint64_t bits) {
  ScalarCache& c = *scalars_;
  ScalarCache::Key key{device, dtype, bits};
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.index.find(key);
  if (it != c.index.end()) {
    c.lru.splice(c.lru.begin(), c.lru, it->second);
    return it->second->second;
  }
  std::shared_ptr<pjrt::Buffer> buffer = upload(&bits, dtype, {}, device);
  c.lru.emplace_front(key, buffer);
  c.index[key] = c.lru.begin();
  if (c.lru.size() > ScalarCache::kCapacity) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return buffer;
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::execute(
    const CompiledProgram& program, const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
    int device, const std::vector<int64_t>& keep) {
  ExitGate::Pass pass;
  metrics().executions++;
  // The PJRT argument list: on the stack for the usual few arguments.
  PJRT_Buffer* few[8];
  std::vector<PJRT_Buffer*> many(args.size() > 8 ? args.size() : 0);
  PJRT_Buffer** raw = args.size() > 8 ? many.data() : few;
  for (size_t i = 0; i < args.size(); ++i) raw[i] = args[i]->raw();
  // Donated arguments still being computed are fine: the run waits for them on the
  // device. Their handles are retired, not destroyed here (see Pending::retired).
  std::vector<int64_t> kept;
  if (!program.donations.empty()) kept = keep;
  std::vector<std::shared_ptr<pjrt::Buffer>> donated;
  for (const auto& [arg, bytes] : program.donations) {
    if (std::find(kept.begin(), kept.end(), arg) != kept.end()) continue;
    if (args[arg]->borrowed()) {  // memory we do not own (view_host_memory): keep it
      kept.push_back(arg);
      continue;
    }
    metrics().donated_bytes += bytes;
    donated.push_back(args[arg]);
  }
  const int64_t launch_ns = trace::enabled() ? trace::now_ns() : 0;
  std::shared_ptr<pjrt::Event> done;
  std::shared_ptr<pjrt::Executable> executable = program.executable();
  std::vector<std::shared_ptr<pjrt::Buffer>> outputs = executable->execute(
      raw, args.size(), this->device(device), &done, program.donations.empty() ? keep : kept);
  if (launch_ns != 0) {
    auto run = trace::device_run(program.label, program.fingerprint, device, launch_ns);
    done->on_ready([run] { run->end_ns = trace::now_ns(); });
  }
  if (program.first_tier != nullptr) {  // the run may make it hot
    const CompiledProgram::FirstTier& first = *program.first_tier;
    if (program.runs.fetch_add(1, std::memory_order_relaxed) + 1 == first.tier_up_runs)
      first.cache->tier_up_later(program);
  }
  if (launch_blocking_) {
    done->await();
    return outputs;
  }
  track(device, done, std::move(donated));
  // Tiered compilation waits for the runs tracked when it replaces an executable; one
  // replaced since this run was launched is held by the run until it completes.
  if (program.first_tier != nullptr && program.executable() != executable)
    track(device, std::move(done), {}, std::move(executable));
  return outputs;
}

void Runtime::to_host_async(int device, std::shared_ptr<pjrt::Buffer> buffer, void* dst,
                            size_t nbytes, std::shared_ptr<void> hold) {
  std::shared_ptr<pjrt::Event> done = buffer->to_host_async(dst, nbytes);
  if (launch_blocking_) {
    done->await();
    return;
  }
  track(device, std::move(done), {std::move(buffer)}, nullptr, std::move(hold));
}

void Runtime::track(int device, std::shared_ptr<pjrt::Event> done,
                    std::vector<std::shared_ptr<pjrt::Buffer>> donated,
                    std::shared_ptr<pjrt::Executable> replaced, std::shared_ptr<void> hold) {
  std::vector<std::shared_ptr<pjrt::Event>> to_wait;
  std::vector<Pending::Retired> released;
  {
    std::lock_guard<std::mutex> lock(pending_->mutex);
    auto& list = pending_->per_device.at(device);
    if (!replaced) list.push_back(done);  // (else it was tracked already)
    if (list.size() > Pending::kMaxTracked) {
      // Bound the queue of in-flight work: wait for the older half.
      size_t half = list.size() / 2;
      std::move(list.begin(), list.begin() + half, std::back_inserter(to_wait));
      list.erase(list.begin(), list.begin() + half);
    }
    released = pending_->reap(device);
    if (!donated.empty() || replaced || hold)
      pending_->retired[device].push_back(
          {done, std::move(donated), std::move(replaced), std::move(hold)});
  }
  for (const auto& event : to_wait) event->await();
}

std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> Runtime::execute_replicated(
    const pjrt::Executable& executable, const std::vector<std::vector<PJRT_Buffer*>>& args) {
  // One launch at a time: two replicated programs over overlapping devices, enqueued in
  // different orders on different devices, could each wait for the other in their
  // collectives.
  // Each launch gets its own id: XLA keys a collective's rendezvous by it.
  static std::mutex launch_mutex;
  static int next_launch_id = 0;
  std::vector<std::unique_ptr<pjrt::Event>> done;
  std::vector<std::vector<std::unique_ptr<pjrt::Buffer>>> raw;
  {
    ExitGate::Pass pass;
    std::lock_guard<std::mutex> lock(launch_mutex);
    metrics().executions++;
    next_launch_id = next_launch_id == INT32_MAX ? 1 : next_launch_id + 1;
    raw = executable.execute_replicated(args, next_launch_id, &done);
    // Synchronous, one at a time: XLA:CPU runs each replica on a thread of its pool, where
    // it blocks until all replicas reach the collective. With launches queued behind each
    // other (measured: 50 pipelined 1 MiB all_reduces over 2 devices), the pool's threads
    // can all be taken by waiting replicas while a partner replica has none to run on,
    // and the plugin aborts the process after 40 s. So the caller makes every argument
    // ready first (all replicas can start at once), and the launch completes before the
    // next one may start.
    for (auto& event : done) event->await();
  }
  std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> outputs(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    for (auto& b : raw[i]) outputs[i].push_back(std::move(b));
  return outputs;
}

void Runtime::synchronize(int device) {
  // The events stay tracked while they are awaited: quiesce_for_exit() must see them
  // even when a thread is waiting here.
  for (const auto& event : in_flight(device)) event->await();
  std::vector<Pending::Retired> released;
  {
    std::lock_guard<std::mutex> lock(pending_->mutex);
    auto& list = pending_->per_device.at(device);
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const auto& event) { return event->is_ready(); }),
               list.end());
    released = pending_->reap(device);
  }
}

void Runtime::quiesce_for_exit() {
  if (!started_in_this_process()) return;
  Runtime* r = instance.load(std::memory_order_acquire);
  // First: a tier-up job may still launch work and compile; stop() waits for it.
  BackgroundCompiler::get().stop();
  // A compile can take a while; one stuck far longer is given up on (the exit then risks
  // what it risked before).
  ExitGate::close(std::chrono::seconds(120));
  for (int d = 0; d < r->device_count(); ++d)
    for (const auto& event : r->in_flight(d)) event->await();
}

std::vector<std::shared_ptr<pjrt::Event>> Runtime::in_flight(int device) {
  std::lock_guard<std::mutex> lock(pending_->mutex);
  return pending_->per_device.at(device);
}

int64_t Runtime::memory_capacity(int device) const { return capacity_.at(device); }

bool Runtime::donation_enabled() {
  static const bool enabled = settings::flag("TORCH_TPU_DONATE");
  return enabled;
}

}  // namespace torch_tpu::runtime
