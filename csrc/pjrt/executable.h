// An owned PJRT_LoadedExecutable: a compiled program ready to run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pjrt/buffer.h"

namespace torch_tpu::pjrt {

class Executable {
 public:
  Executable(const Plugin* plugin, PJRT_LoadedExecutable* executable);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  size_t num_outputs() const { return num_outputs_; }

  // Enqueues one run on `device` and returns its outputs at once; the plugin orders
  // the work after the producers of `args`. Results are flat: one buffer per output.
  // If `done` is given it receives an event that fires when the run completes.
  // Arguments the program donates are consumed, except those listed in `keep`. Shared
  // from the start (one allocation each): the runtime shares every result.
  std::vector<std::shared_ptr<Buffer>> execute(PJRT_Buffer* const* args, size_t num_args,
                                               PJRT_Device* device,
                                               std::shared_ptr<Event>* done = nullptr,
                                               const std::vector<int64_t>& keep = {}) const;

  // Enqueues one run of a program compiled for N replicas (Client::compile with
  // encode_replicated_options): args[i] is replica i's argument list, on the i-th device
  // of the program's device assignment. One call over all N devices (execute_device
  // null): the replicas meet in their collectives within this one launch, never across
  // calls. `launch_id` names the launch in XLA's collective rendezvous (its run id): give
  // each launch its own. Returns each replica's outputs, and in `done` (if given) each
  // one's event.
  std::vector<std::vector<std::unique_ptr<Buffer>>> execute_replicated(
      const std::vector<std::vector<PJRT_Buffer*>>& args, int launch_id,
      std::vector<std::unique_ptr<Event>>* done = nullptr) const;

  // Bytes that Client::deserialize turns back into an executable for the same plugin.
  std::string serialize() const;

 private:
  const Plugin* plugin_;
  PJRT_LoadedExecutable* executable_;
  PJRT_Executable* unloaded_ = nullptr;
  size_t num_outputs_ = 0;
};

}  // namespace torch_tpu::pjrt
