// Serialized xla.CompileOptionsProto, hand-encoded: we need three fields and do not
// want a protobuf dependency. Empty options make XLA CHECK-fail (0 replicas).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace torch_tpu::pjrt {

// One XLA option set for a compile (CompileOptionsProto.env_option_overrides): a
// DebugOptions flag such as "xla_dump_to", or a build option XLA knows by name.
struct OptionOverride {
  std::string name;
  std::variant<std::string, bool, int64_t, double> value;
};

std::string encode_compile_options(int num_replicas, int num_partitions, bool portable,
                                   const std::vector<OptionOverride>& overrides = {});
// A program of `device_ids.size()` replicas (one partition), replica i on the device of
// global id device_ids[i] (build options' device_assignment): in-program collectives.
std::string encode_replicated_options(const std::vector<int64_t>& device_ids);

}  // namespace torch_tpu::pjrt
