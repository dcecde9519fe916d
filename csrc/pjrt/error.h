// Errors raised by the PJRT layer. Every PJRT_Error becomes a pjrt::Error that
// carries the plugin's message and the call that failed.
#pragma once

#include <stdexcept>
#include <string>

#include "pjrt_c_api.h"

namespace torch_tpu::pjrt {

class Error : public std::runtime_error {
 public:
  Error(PJRT_Error_Code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  PJRT_Error_Code code() const { return code_; }
  bool is_resource_exhausted() const { return code_ == PJRT_Error_Code_RESOURCE_EXHAUSTED; }

 private:
  PJRT_Error_Code code_;
};

}  // namespace torch_tpu::pjrt
