// Process-wide counters: what was compiled, run, transferred and sent to the CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace torch_tpu::runtime {

// Every counter, named once: X(field, doc). torch_tpu.metrics.snapshot() reports each
// under its field name, except that a field ending in `_ns` is reported in seconds under
// the name ending in `_seconds`; its docstring lists these docs.
// Counters reset() zeroes:
#define TORCH_TPU_METRICS(X)                                                               \
  X(compiles, "XLA compiles")                                                              \
  X(compile_ns, "time spent in XLA compiles")                                              \
  X(tier_ups, "first-tier programs recompiled optimized once hot, in the background")      \
  X(tier_up_ns, "time spent in those background compiles")                                 \
  X(cache_hits, "programs found in the in-memory cache")                                   \
  X(cache_misses, "programs the in-memory cache lacked")                                   \
  X(cache_evictions, "programs the in-memory cache dropped")                               \
  X(executions, "programs run")                                                            \
  X(host_to_device_bytes, "bytes copied to the devices")                                   \
  X(device_to_host_bytes, "bytes copied from the devices")                                 \
  /* torch.compile: graphs lowered to one program, their runs, graphs that run op by op */ \
  /* (they cannot become programs), graphs split around ops without a lowering */          \
  /* (collectives, custom ops; these run eagerly in between) */                            \
  X(graphs, "compiled graphs lowered to one program")                                      \
  X(graph_runs, "runs of compiled graphs")                                                 \
  X(graph_fallbacks, "compiled graphs that run op by op")                                  \
  X(graph_splits, "compiled graphs split around ops without a lowering")                   \
  X(graph_build_ns, "time lowering graphs and getting their programs")                     \
  X(fused_ops, "ops recorded in fused eager mode")                                         \
  X(fused_groups, "groups of recorded ops run as one program")                             \
  X(fused_reuses, "fused groups that repeated a trace and ran its program as it was")      \
  X(fused_replays, "fused ops recorded from the call's signature alone (a trace's op)")    \
  X(meta_calls, "meta kernel calls for output shapes (the lowered ops' cache missed)")     \
  X(donated_bytes, "argument bytes programs consumed in place (donated)")                  \
  X(host_staged_collectives, "collectives run by tpu_dist's host-staged transport")        \
  X(host_staged_bytes, "bytes that transport copied from the devices")                     \
  X(in_program_collectives, "collectives tpu_dist ran as one replicated program")          \
  X(in_program_graph_runs, "compiled graphs run over an in-program group's devices")
// Counters of the process's life, which reset() leaves:
#define TORCH_TPU_PROCESS_METRICS(X)                                                \
  X(host_staged_groups, "tpu_dist backends created with the host-staged transport") \
  X(in_program_groups, "tpu_dist backends created with the in-program transport")

struct Metrics {
#define TORCH_TPU_METRIC_FIELD(name, doc) std::atomic<int64_t> name{0};
  TORCH_TPU_METRICS(TORCH_TPU_METRIC_FIELD)
  TORCH_TPU_PROCESS_METRICS(TORCH_TPU_METRIC_FIELD)
#undef TORCH_TPU_METRIC_FIELD

  void count_fallback(const std::string& op);
  std::map<std::string, int64_t> fallbacks() const;
  void reset();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> fallbacks_;
};

Metrics& metrics();

}  // namespace torch_tpu::runtime
