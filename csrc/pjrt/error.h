// Errors raised by the PJRT layer. Every PJRT_Error becomes a pjrt::Error that
// carries the plugin's message and the call that failed.
#pragma once

#include <stdexcept>
#include <string>

namespace torch_tpu::pjrt {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  // PJRT_Error_Code (absl status code numbering); 8 = RESOURCE_EXHAUSTED.
  int code() const { return code_; }
  bool is_resource_exhausted() const { return code_ == 8; }

 private:
  int code_;
};

}  // namespace torch_tpu::pjrt
