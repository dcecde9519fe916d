#include "pjrt/executable.h"

#include "pjrt/error.h"

namespace torch_tpu::pjrt {

Executable::Executable(const Plugin* plugin, PJRT_LoadedExecutable* executable)
    : plugin_(plugin), executable_(executable) {
  const PJRT_Api* api = plugin_->api();
  auto get = TORCH_TPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = executable_;
  plugin_->check(api->PJRT_LoadedExecutable_GetExecutable(&get),
                 "PJRT_LoadedExecutable_GetExecutable");
  unloaded_ = get.executable;
  auto outputs = TORCH_TPU_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  outputs.executable = unloaded_;
  plugin_->check(api->PJRT_Executable_NumOutputs(&outputs), "PJRT_Executable_NumOutputs");
  num_outputs_ = outputs.num_outputs;
}

Executable::~Executable() {
  const PJRT_Api* api = plugin_->api();
  if (unloaded_ != nullptr) {
    auto args = TORCH_TPU_PJRT_ARGS(PJRT_Executable_Destroy_Args);
    args.executable = unloaded_;
    if (PJRT_Error* e = api->PJRT_Executable_Destroy(&args)) {
      try {
        plugin_->check(e, "PJRT_Executable_Destroy");
      } catch (...) {
      }
    }
  }
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = executable_;
  if (PJRT_Error* e = api->PJRT_LoadedExecutable_Destroy(&args)) {
    try {
      plugin_->check(e, "PJRT_LoadedExecutable_Destroy");
    } catch (...) {
    }
  }
}

std::vector<std::shared_ptr<Buffer>> Executable::execute(PJRT_Buffer* const* args, size_t num_args,
                                                         PJRT_Device* device,
                                                         std::shared_ptr<Event>* done,
                                                         const std::vector<int64_t>& keep) const {
  auto options = TORCH_TPU_PJRT_ARGS(PJRT_ExecuteOptions);
  options.non_donatable_input_indices = keep.data();
  options.num_non_donatable_input_indices = keep.size();
  // The plugin's output list: on the stack for the usual few outputs.
  PJRT_Buffer* few[8] = {};
  std::vector<PJRT_Buffer*> many(num_outputs_ > 8 ? num_outputs_ : 0, nullptr);
  PJRT_Buffer** output_list = num_outputs_ > 8 ? many.data() : few;
  PJRT_Buffer* const* arg_list = args;

  auto exec = TORCH_TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = executable_;
  exec.options = &options;
  exec.argument_lists = &arg_list;
  exec.num_devices = 1;
  exec.num_args = num_args;
  exec.output_lists = &output_list;
  PJRT_Event* complete = nullptr;
  exec.device_complete_events = done != nullptr ? &complete : nullptr;
  exec.execute_device = device;
  plugin_->check(plugin_->api()->PJRT_LoadedExecutable_Execute(&exec),
                 "PJRT_LoadedExecutable_Execute");

  if (done != nullptr) *done = std::make_shared<Event>(plugin_, complete);
  std::vector<std::shared_ptr<Buffer>> result;
  result.reserve(num_outputs_);
  for (size_t i = 0; i < num_outputs_; ++i)
    result.push_back(std::make_shared<Buffer>(plugin_, output_list[i]));
  return result;
}

std::vector<std::vector<std::unique_ptr<Buffer>>> Executable::execute_replicated(
    const std::vector<std::vector<PJRT_Buffer*>>& args, int launch_id,
    std::vector<std::unique_ptr<Event>>* done) const {
  const size_t n = args.size();
  const size_t num_args = n > 0 ? args[0].size() : 0;
  for (const auto& list : args) {
    if (list.size() != num_args) {
      throw Error(PJRT_Error_Code_INVALID_ARGUMENT,
                  "execute_replicated: every replica needs the same number of arguments");
    }
  }
  auto options = TORCH_TPU_PJRT_ARGS(PJRT_ExecuteOptions);
  options.launch_id = launch_id;
  std::vector<PJRT_Buffer* const*> arg_lists(n);
  std::vector<std::vector<PJRT_Buffer*>> outputs(n, std::vector<PJRT_Buffer*>(num_outputs_));
  std::vector<PJRT_Buffer**> output_lists(n);
  for (size_t i = 0; i < n; ++i) {
    arg_lists[i] = args[i].data();
    output_lists[i] = outputs[i].data();
  }
  std::vector<PJRT_Event*> complete(n, nullptr);

  auto exec = TORCH_TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec.executable = executable_;
  exec.options = &options;
  exec.argument_lists = arg_lists.data();
  exec.num_devices = n;
  exec.num_args = num_args;
  exec.output_lists = output_lists.data();
  exec.device_complete_events = done != nullptr ? complete.data() : nullptr;
  exec.execute_device = nullptr;
  plugin_->check(plugin_->api()->PJRT_LoadedExecutable_Execute(&exec),
                 "PJRT_LoadedExecutable_Execute");

  std::vector<std::vector<std::unique_ptr<Buffer>>> result(n);
  for (size_t i = 0; i < n; ++i) {
    if (done != nullptr) done->push_back(std::make_unique<Event>(plugin_, complete[i]));
    for (PJRT_Buffer* b : outputs[i]) result[i].push_back(std::make_unique<Buffer>(plugin_, b));
  }
  return result;
}

std::string Executable::serialize() const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = unloaded_;
  plugin_->check(plugin_->api()->PJRT_Executable_Serialize(&args), "PJRT_Executable_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

}  // namespace torch_tpu::pjrt
