// Serialized xla.CompileOptionsProto, hand-encoded: we need three fields and do not
// want a protobuf dependency. Empty options make XLA CHECK-fail (0 replicas).
#pragma once

#include <string>

namespace torch_tpu::pjrt {

std::string encode_compile_options(int num_replicas, int num_partitions, bool portable);

}  // namespace torch_tpu::pjrt
