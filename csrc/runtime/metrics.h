// Process-wide counters: what was compiled, run, transferred and sent to the CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace torch_tpu::runtime {

struct Metrics {
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  std::atomic<int64_t> cache_evictions{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> host_to_device_bytes{0};
  std::atomic<int64_t> device_to_host_bytes{0};
  // torch.compile: graphs lowered to one program, their runs, graphs that run op by op
  // because they cannot become programs, and graphs split into programs around the ops
  // that have no lowering (collectives, custom ops), which run eagerly in between.
  std::atomic<int64_t> graphs{0};
  std::atomic<int64_t> graph_runs{0};
  std::atomic<int64_t> graph_fallbacks{0};
  std::atomic<int64_t> graph_splits{0};
  std::atomic<int64_t> graph_build_ns{0};  // lowering graphs and getting their programs
  // Fused eager mode: ops recorded, and the groups of them run as one program each.
  std::atomic<int64_t> fused_ops{0};
  std::atomic<int64_t> fused_groups{0};
  // Bytes of argument buffers programs consumed in place (donated to their outputs).
  std::atomic<int64_t> donated_bytes{0};
  // tpu_dist: collectives (and point-to-point ops) run by the host-staged transport, and
  // the bytes it copied from the devices to stage them.
  std::atomic<int64_t> host_staged_collectives{0};
  std::atomic<int64_t> host_staged_bytes{0};
  // tpu_dist's in-program transport: collectives run as one replicated program each.
  std::atomic<int64_t> in_program_collectives{0};
  // tpu_dist process groups (backends of this process) created per transport; reset()
  // leaves them.
  std::atomic<int64_t> host_staged_groups{0};
  std::atomic<int64_t> in_program_groups{0};

  void count_fallback(const std::string& op);
  std::map<std::string, int64_t> fallbacks() const;
  void reset();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> fallbacks_;
};

Metrics& metrics();

}  // namespace torch_tpu::runtime
