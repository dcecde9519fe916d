// The process's PJRT runtime: the plugin, the client and its devices, created on first
// use so that `import torch` never loads the plugin.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"
#include "pjrt/client.h"
#include "pjrt/compile_options.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::runtime {

struct RuntimeConfig {
  std::string plugin_path;
  int64_t num_devices = 1;  // virtual devices, for plugins that take cpu_device_count
  // XLA:CPU, the only plugin that takes cpu_device_count (others reject unknown options).
  bool virtual_devices() const;
};

class Runtime {
 public:
  // Sets what the first use of get() will load. Has no effect once loaded.
  static void configure(RuntimeConfig config);
  // The runtime, loading the plugin on first call; throws pjrt::Error if it cannot.
  static Runtime& get();
  // Whether get() would succeed, without throwing. Does not start the runtime where
  // device_count() does not.
  static bool available();
  static bool initialized();
  // initialized(), and by this process (not a forked child of the one that started it).
  static bool started_in_this_process();
  // Called once at process exit, before the C exit handlers (the plugin's static
  // destructors) run: stops tiered compilation, lets the compiles and launches under way
  // finish while refusing new ones, and waits for all enqueued work (see exit_gate.h).
  // Pending fused ops are dropped, not compiled. Does nothing where the runtime never
  // started or in a forked child.
  static void quiesce_for_exit();
  // The number of devices get() has or will have. XLA:CPU's is the configured number of
  // virtual devices, known without starting the runtime (so that, as with CUDA, counting
  // devices leaves torch.tpu.is_initialized() False); other plugins are asked, which
  // starts it. Throws get()'s error if the runtime cannot start.
  static int configured_device_count();

  const pjrt::Client& client() const { return *client_; }
  int device_count() const { return static_cast<int>(client_->devices().size()); }
  PJRT_Device* device(int index) const { return client_->devices().at(index); }
  ExecutableCache& cache() { return cache_; }
  DiskCache& disk_cache() { return *disk_; }
  const RuntimeConfig& config() const { return config_; }

  std::unique_ptr<pjrt::Buffer> upload(const void* data, hlo::DType dtype,
                                       const std::vector<int64_t>& dims, int device);
  // A buffer that may read `data` in place; see Client::buffer_on_host_memory.
  std::unique_ptr<pjrt::Buffer> on_host_memory(const void* data, hlo::DType dtype,
                                               const std::vector<int64_t>& dims, int device);
  // A buffer that is the host memory at `data` itself, for as long as it lives, where
  // device memory is host memory (XLA:CPU); null elsewhere. `on_delete` runs, on any
  // thread, once no program can read or write the memory any more. Never donated.
  std::unique_ptr<pjrt::Buffer> view_host_memory(void* data, hlo::DType dtype,
                                                 const std::vector<int64_t>& dims, int device,
                                                 std::function<void()> on_delete);
  // The host address of `buffer`'s memory where device memory is host memory (XLA:CPU)
  // and the plugin says it; null elsewhere. Read it only once the buffer is ready.
  const void* host_address(const pjrt::Buffer& buffer) const;
  // A 0-d buffer holding `bits` (the value's bytes, little-endian) as `dtype`. Cached:
  // loops over Python scalars reuse one buffer per distinct value.
  std::shared_ptr<pjrt::Buffer> scalar(int device, hlo::DType dtype, uint64_t bits);

  // Enqueues `program` on `device` and returns its outputs at once. With
  // TORCH_TPU_LAUNCH_BLOCKING=1 it waits for them. Arguments the program donates are
  // consumed, except those listed in `keep`; the runtime holds a consumed argument's
  // handle until the run completes (see Pending::retired).
  std::vector<std::shared_ptr<pjrt::Buffer>> execute(
      const CompiledProgram& program, const std::vector<std::shared_ptr<pjrt::Buffer>>& args,
      int device, const std::vector<int64_t>& keep = {});
  // Starts copying `buffer` (on `device`) into the host memory at `dst` (`nbytes`, dense
  // row-major) and returns at once. The copy is work on `device` like a run: synchronize()
  // and in_flight() include it. The buffer and `hold` (the owner of `dst`) are kept until
  // it completes. With TORCH_TPU_LAUNCH_BLOCKING=1 it waits.
  void to_host_async(int device, std::shared_ptr<pjrt::Buffer> buffer, void* dst, size_t nbytes,
                     std::shared_ptr<void> hold);
  // In-program collectives: runs `executable` (compiled for N replicas, replica i on
  // the i-th device of its device assignment) with args[i], as one launch over all of them,
  // and returns each replica's outputs once it has completed. Launches are serialized
  // process-wide and synchronous (see the .cpp: XLA:CPU deadlocks on queued collective
  // launches); every argument must be ready (computed) before the call.
  std::vector<std::vector<std::shared_ptr<pjrt::Buffer>>> execute_replicated(
      const pjrt::Executable& executable, const std::vector<std::vector<PJRT_Buffer*>>& args);
  // The global id of device `index` (what a device assignment names).
  int64_t device_id(int index) const { return client_->device_id(index); }

  // TORCH_TPU_LAUNCH_BLOCKING=1 at start; torch.tpu.EagerMode switches it later.
  bool launch_blocking() const { return launch_blocking_; }
  void set_launch_blocking(bool on) { launch_blocking_ = on; }
  // Whether programs may donate the buffers they overwrite (TORCH_TPU_DONATE=0: never,
  // to measure what donation saves).
  static bool donation_enabled();
  // Waits for all work enqueued on `device` so far.
  void synchronize(int device);
  // Completion events of the work enqueued on `device` so far that may still be running:
  // what a torch Event records.
  std::vector<std::shared_ptr<pjrt::Event>> in_flight(int device);

  // Bytes a device may hold: the plugin's limit, or the host's memory for XLA:CPU.
  int64_t memory_capacity(int device) const;

 private:
  explicit Runtime(RuntimeConfig config);
  std::string cache_identity() const;
  // Adds `event` to the work synchronize(device) waits for, and holds the handles of the
  // arguments that run consumed (`donated`) until it completes.
  // `replaced`: an executable the run (tracked already) launched on and that tiered
  // compilation has replaced since, held until the run completes. `hold`: anything else
  // the work uses until it completes (a host copy's destination).
  void track(int device, std::shared_ptr<pjrt::Event> event,
             std::vector<std::shared_ptr<pjrt::Buffer>> donated = {},
             std::shared_ptr<pjrt::Executable> replaced = nullptr,
             std::shared_ptr<void> hold = nullptr);
  // Compiles `mlir` with this thread's compile overrides at backend optimization `level`
  // (-1: XLA's default) unless they set one.
  std::unique_ptr<pjrt::Executable> compile(const std::string& mlir, int64_t level);
  RuntimeConfig config_;
  std::unique_ptr<pjrt::Client> client_;
  ExecutableCache cache_;
  std::string compile_options_;
  std::string fast_compile_options_;  // small programs: runtime/compile_policy.h
  std::string first_tier_options_;    // tiered compilation: runtime/tiered_compile.h
  std::vector<pjrt::OptionOverride> fast_overrides_, first_tier_overrides_;  // (the same)
  std::unique_ptr<DiskCache> disk_;
  struct ScalarCache;
  std::unique_ptr<ScalarCache> scalars_;
  struct Pending;
  std::unique_ptr<Pending> pending_;
  bool launch_blocking_ = false;
  int64_t owner_pid_ = 0;  // the process that started the plugin
  std::vector<int64_t> capacity_;
};

}  // namespace torch_tpu::runtime
