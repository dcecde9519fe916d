#include "pjrt/plugin.h"

#include <dlfcn.h>

#include "pjrt/error.h"

namespace torch_tpu::pjrt {

namespace {
using GetPjrtApiFn = const PJRT_Api* (*)();
}

Plugin::Plugin(const PJRT_Api* api, std::string path)
    : api_(api),
      path_(std::move(path)),
      major_(api->pjrt_api_version.major_version),
      minor_(api->pjrt_api_version.minor_version) {}

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  // RTLD_LOCAL keeps the plugin's own copies of LLVM/absl/protobuf away from torch's.
  // The handle is never closed: plugins do not support being unloaded.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(PJRT_Error_Code_NOT_FOUND,
                "cannot load PJRT plugin '" + path + "': " + (why ? why : "unknown error"));
  }
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw Error(PJRT_Error_Code_NOT_FOUND,
                "'" + path + "' is not a PJRT plugin: it does not export GetPjrtApi");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    throw Error(PJRT_Error_Code_INTERNAL, "PJRT plugin '" + path + "' returned no API table");
  }
  const int major = api->pjrt_api_version.major_version;
  const int minor = api->pjrt_api_version.minor_version;
  if (major != PJRT_API_MAJOR) {
    throw Error(PJRT_Error_Code_FAILED_PRECONDITION,
                "PJRT plugin '" + path + "' has API version " + std::to_string(major) + "." +
                    std::to_string(minor) + " but torch_tpu was built against " +
                    std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                    "; the major versions must match");
  }
  std::shared_ptr<Plugin> plugin(new Plugin(api, path));
  if (api->PJRT_Plugin_Initialize != nullptr) {
    auto args = TORCH_TPU_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
    plugin->check(api->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize");
  }
  return plugin;
}

void Plugin::check(PJRT_Error* error, std::string_view what) const {
  if (error == nullptr) return;
  auto msg = TORCH_TPU_PJRT_ARGS(PJRT_Error_Message_Args);
  msg.error = error;
  api_->PJRT_Error_Message(&msg);
  std::string message(msg.message, msg.message_size);
  auto code_args = TORCH_TPU_PJRT_ARGS(PJRT_Error_GetCode_Args);
  code_args.error = error;
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  if (api_->PJRT_Error_GetCode(&code_args) == nullptr) code = code_args.code;
  auto destroy = TORCH_TPU_PJRT_ARGS(PJRT_Error_Destroy_Args);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  throw Error(code, std::string(what) + " failed: " + message);
}

}  // namespace torch_tpu::pjrt
