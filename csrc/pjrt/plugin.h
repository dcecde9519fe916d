// A loaded PJRT plugin: the shared object and its PJRT_Api table.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "pjrt_c_api.h"

namespace torch_tpu::pjrt {

// Zero-initialised argument struct with its struct_size set, as every PJRT call expects.
#define TORCH_TPU_PJRT_ARGS(T) ::torch_tpu::pjrt::detail::zeroed<T>(T##_STRUCT_SIZE)

namespace detail {
template <class T>
T zeroed(size_t size) {
  T value{};
  value.struct_size = size;
  return value;
}
}  // namespace detail

class Plugin {
 public:
  // dlopens `path`, resolves GetPjrtApi, checks the API version and initialises the
  // plugin. Throws pjrt::Error with a message naming the path on any failure.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int major_version() const { return major_; }
  int minor_version() const { return minor_; }

  // Throws pjrt::Error carrying the plugin's message if `error` is set; frees it.
  void check(PJRT_Error* error, std::string_view what) const;

 private:
  Plugin(const PJRT_Api* api, std::string path);
  const PJRT_Api* api_;
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
};

}  // namespace torch_tpu::pjrt
