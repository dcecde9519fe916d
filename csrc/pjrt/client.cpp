#include "pjrt/client.h"

#include <cstddef>

#include "pjrt/error.h"

namespace torch_tpu::pjrt {

Client::Client(std::shared_ptr<Plugin> plugin, const std::vector<CreateOption>& options)
    : plugin_(std::move(plugin)) {
  const PJRT_Api* api = plugin_->api();
  std::vector<PJRT_NamedValue> values;
  for (const CreateOption& option : options) {
    auto value = TORCH_TPU_PJRT_ARGS(PJRT_NamedValue);
    value.name = option.name.c_str();
    value.name_size = option.name.size();
    if (const auto* i = std::get_if<int64_t>(&option.value)) {
      value.type = PJRT_NamedValue_kInt64;
      value.int64_value = *i;
      value.value_size = 1;
    } else if (const auto* s = std::get_if<std::string>(&option.value)) {
      value.type = PJRT_NamedValue_kString;
      value.string_value = s->c_str();
      value.value_size = s->size();
    } else {
      value.type = PJRT_NamedValue_kBool;
      value.bool_value = std::get<bool>(option.value);
      value.value_size = 1;
    }
    values.push_back(value);
  }
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Client_Create_Args);
  args.create_options = values.data();
  args.num_options = values.size();
  plugin_->check(api->PJRT_Client_Create(&args), "PJRT_Client_Create");
  client_ = args.client;

  auto devs = TORCH_TPU_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devs.client = client_;
  plugin_->check(api->PJRT_Client_AddressableDevices(&devs), "PJRT_Client_AddressableDevices");
  devices_.assign(devs.addressable_devices,
                  devs.addressable_devices + devs.num_addressable_devices);

  auto name = TORCH_TPU_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = client_;
  plugin_->check(api->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
  platform_name_.assign(name.platform_name, name.platform_name_size);

  auto version = TORCH_TPU_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = client_;
  plugin_->check(api->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
  platform_version_.assign(version.platform_version, version.platform_version_size);
}

Client::~Client() {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  if (PJRT_Error* e = plugin_->api()->PJRT_Client_Destroy(&args)) {
    try {
      plugin_->check(e, "PJRT_Client_Destroy");
    } catch (...) {
    }
  }
}

PJRT_Device* Client::device(size_t index) const {
  if (index >= devices_.size()) {
    throw Error(PJRT_Error_Code_INVALID_ARGUMENT,
                "device index " + std::to_string(index) + " is out of range: the " +
                    platform_name_ + " client has " + std::to_string(devices_.size()) +
                    " device(s)");
  }
  return devices_[index];
}

PJRT_DeviceDescription* Client::description(size_t index) const {
  auto desc = TORCH_TPU_PJRT_ARGS(PJRT_Device_GetDescription_Args);
  desc.device = device(index);
  plugin_->check(plugin_->api()->PJRT_Device_GetDescription(&desc), "PJRT_Device_GetDescription");
  return desc.device_description;
}

std::string Client::device_kind(size_t index) const {
  const PJRT_Api* api = plugin_->api();
  auto kind = TORCH_TPU_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
  kind.device_description = description(index);
  plugin_->check(api->PJRT_DeviceDescription_Kind(&kind), "PJRT_DeviceDescription_Kind");
  return std::string(kind.device_kind, kind.device_kind_size);
}

int64_t Client::device_id(size_t index) const {
  const PJRT_Api* api = plugin_->api();
  auto id = TORCH_TPU_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
  id.device_description = description(index);
  plugin_->check(api->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
  return id.id;
}

bool Client::memory_stats(size_t index, int64_t* in_use, int64_t* limit) const {
  const PJRT_Api* api = plugin_->api();
  // An older plugin's table may end before this entry.
  if (api->struct_size <= offsetof(PJRT_Api, PJRT_Device_MemoryStats) ||
      api->PJRT_Device_MemoryStats == nullptr) {
    return false;
  }
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = device(index);
  if (PJRT_Error* e = api->PJRT_Device_MemoryStats(&args)) {
    try {
      plugin_->check(e, "PJRT_Device_MemoryStats");
    } catch (const Error&) {
    }
    return false;  // XLA:CPU does not implement it: callers fall back to their own accounting
  }
  *in_use = args.bytes_in_use;
  *limit = args.bytes_limit_is_set ? args.bytes_limit : -1;
  return true;
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir,
                                            const std::string& options) const {
  if (options.empty()) {
    // XLA's defaults (0 replicas) abort the process inside the plugin.
    throw Error(PJRT_Error_Code_INVALID_ARGUMENT, "PJRT compile needs non-empty compile options");
  }
  auto program = TORCH_TPU_PJRT_ARGS(PJRT_Program);
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  static constexpr char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  plugin_->check(plugin_->api()->PJRT_Client_Compile(&args), "PJRT_Client_Compile");
  return std::make_unique<Executable>(plugin_.get(), args.executable);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes) const {
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  plugin_->check(plugin_->api()->PJRT_Executable_DeserializeAndLoad(&args),
                 "PJRT_Executable_DeserializeAndLoad");
  return std::make_unique<Executable>(plugin_.get(), args.loaded_executable);
}

std::unique_ptr<Buffer> Client::buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                                 const std::vector<int64_t>& dims,
                                                 size_t index) const {
  // With kImmutableOnlyDuringCall the host data is copied before the call returns.
  return from_host(data, type, dims, index, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall);
}

std::unique_ptr<Buffer> Client::buffer_on_host_memory(const void* data, PJRT_Buffer_Type type,
                                                      const std::vector<int64_t>& dims,
                                                      size_t index) const {
  return from_host(data, type, dims, index, PJRT_HostBufferSemantics_kImmutableZeroCopy);
}

namespace {
void check_element_type(PJRT_Buffer_Type type) {
  if (type == PJRT_Buffer_Type_INVALID || type == PJRT_Buffer_Type_TOKEN) {
    // An invalid element type aborts the CPU plugin instead of returning an error.
    throw Error(PJRT_Error_Code_INVALID_ARGUMENT, "invalid element type for a device buffer");
  }
}
}  // namespace

std::unique_ptr<Buffer> Client::view_of_memory(void* data, PJRT_Buffer_Type type,
                                               const std::vector<int64_t>& dims, size_t index,
                                               std::function<void()> on_delete) const {
  const PJRT_Api* api = plugin_->api();
  if (api->struct_size <= offsetof(PJRT_Api, PJRT_Client_CreateViewOfDeviceBuffer) ||
      api->PJRT_Client_CreateViewOfDeviceBuffer == nullptr)
    return nullptr;
  check_element_type(type);
  auto* done = new std::function<void()>(std::move(on_delete));
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Client_CreateViewOfDeviceBuffer_Args);
  args.client = client_;
  args.device_buffer_ptr = data;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.element_type = type;
  args.device = device(index);
  args.on_delete_callback = [](void*, void* arg) {
    auto* callback = static_cast<std::function<void()>*>(arg);
    (*callback)();
    delete callback;
  };
  args.on_delete_callback_arg = done;
  PJRT_Error* error = api->PJRT_Client_CreateViewOfDeviceBuffer(&args);
  if (error != nullptr) delete done;  // no view, so no callback
  plugin_->check(error, "PJRT_Client_CreateViewOfDeviceBuffer");
  return std::make_unique<Buffer>(plugin_.get(), args.buffer, /*borrowed=*/true);
}

std::unique_ptr<Buffer> Client::from_host(const void* data, PJRT_Buffer_Type type,
                                          const std::vector<int64_t>& dims, size_t index,
                                          PJRT_HostBufferSemantics semantics) const {
  check_element_type(type);
  auto args = TORCH_TPU_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client_;
  args.data = data;
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = semantics;
  args.device = device(index);
  plugin_->check(plugin_->api()->PJRT_Client_BufferFromHostBuffer(&args),
                 "PJRT_Client_BufferFromHostBuffer");
  // The done-with-host-buffer event is not waited for: the copy semantics finish the
  // copy in the call, and for zero-copy XLA:CPU fires it at once (see the header).
  Event(plugin_.get(), args.done_with_host_buffer);
  return std::make_unique<Buffer>(plugin_.get(), args.buffer);
}

}  // namespace torch_tpu::pjrt
