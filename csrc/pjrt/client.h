// An owned PJRT_Client with its addressable devices.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "pjrt/buffer.h"
#include "pjrt/executable.h"

namespace torch_tpu::pjrt {

struct CreateOption {
  std::string name;
  std::variant<int64_t, std::string, bool> value;
};

class Client {
 public:
  Client(std::shared_ptr<Plugin> plugin, const std::vector<CreateOption>& options);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const Plugin& plugin() const { return *plugin_; }
  const std::vector<PJRT_Device*>& devices() const { return devices_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  std::string device_kind(size_t index) const;
  // The device's global id (what a compile's device assignment names).
  int64_t device_id(size_t index) const;
  // Bytes in use and limit as the plugin reports them; false if it does not.
  bool memory_stats(size_t index, int64_t* in_use, int64_t* limit) const;

  // Compiles StableHLO (MLIR text or bytecode) with serialized CompileOptionsProto.
  std::unique_ptr<Executable> compile(const std::string& mlir, const std::string& options) const;
  std::unique_ptr<Executable> deserialize(const std::string& bytes) const;

  // Copies dense row-major host data to a new buffer on device `index`. The host
  // memory may be reused when this returns.
  std::unique_ptr<Buffer> buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                           const std::vector<int64_t>& dims, size_t index) const;
  // A buffer on device `index` that may use the host memory in place (XLA:CPU does when
  // it is aligned; other plugins copy it). The caller keeps the memory valid and
  // unchanged for as long as any program may read the buffer: XLA:CPU reports it free at
  // once, so no plugin event says when that is.
  std::unique_ptr<Buffer> buffer_on_host_memory(const void* data, PJRT_Buffer_Type type,
                                                const std::vector<int64_t>& dims,
                                                size_t index) const;
  // A buffer on device `index` whose contents are the memory at `data`, in place, for as
  // long as the buffer lives; `on_delete` runs (on any thread) once PJRT is done with
  // the memory. Only where device memory is host memory (XLA:CPU); null when the plugin
  // lacks PJRT_Client_CreateViewOfDeviceBuffer.
  std::unique_ptr<Buffer> view_of_memory(void* data, PJRT_Buffer_Type type,
                                         const std::vector<int64_t>& dims, size_t index,
                                         std::function<void()> on_delete) const;

 private:
  std::unique_ptr<Buffer> from_host(const void* data, PJRT_Buffer_Type type,
                                    const std::vector<int64_t>& dims, size_t index,
                                    PJRT_HostBufferSemantics semantics) const;
  PJRT_Device* device(size_t index) const;
  PJRT_DeviceDescription* description(size_t index) const;  // of device(index)
  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::string platform_name_;
  std::string platform_version_;
};

}  // namespace torch_tpu::pjrt
