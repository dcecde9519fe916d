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
  // Arguments the program donates are consumed, except those listed in `keep`.
  std::vector<std::unique_ptr<Buffer>> execute(PJRT_Buffer* const* args, size_t num_args,
                                               PJRT_Device* device,
                                               std::unique_ptr<Event>* done = nullptr,
                                               const std::vector<int64_t>& keep = {}) const;

  // Bytes that Client::deserialize turns back into an executable for the same plugin.
  std::string serialize() const;

 private:
  const Plugin* plugin_;
  PJRT_LoadedExecutable* executable_;
  PJRT_Executable* unloaded_ = nullptr;
  size_t num_outputs_ = 0;
};

}  // namespace torch_tpu::pjrt
