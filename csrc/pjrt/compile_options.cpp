#include "pjrt/compile_options.h"

#include <cstdint>
#include <cstring>

namespace torch_tpu::pjrt {

namespace {

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_int_field(std::string& out, int field, int64_t value) {
  put_varint(out, static_cast<uint64_t>(field) << 3);  // wire type 0: varint
  put_varint(out, static_cast<uint64_t>(value));
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);  // wire type 2: length-delimited
  put_varint(out, bytes.size());
  out += bytes;
}

// Field numbers from xla/pjrt/proto/compile_options.proto.
constexpr int kBuildDeviceOrdinal = 1;
constexpr int kBuildNumReplicas = 4;
constexpr int kBuildNumPartitions = 5;
constexpr int kBuildDeviceAssignment = 9;
// xla.DeviceAssignmentProto and its ComputationDevice.
constexpr int kAssignmentReplicaCount = 1;
constexpr int kAssignmentComputationCount = 2;
constexpr int kAssignmentComputationDevices = 3;
constexpr int kComputationReplicaDeviceIds = 1;
constexpr int kOptionsExecutableBuildOptions = 3;
constexpr int kOptionsCompilePortableExecutable = 4;
constexpr int kOptionsEnvOptionOverrides = 7;  // map<string, OptionOverrideProto>
constexpr int kMapKey = 1;
constexpr int kMapValue = 2;
// xla.OptionOverrideProto's oneof.
constexpr int kOverrideString = 1;
constexpr int kOverrideBool = 2;
constexpr int kOverrideInt = 3;
constexpr int kOverrideDouble = 4;

std::string encode_override(const OptionOverride& o) {
  std::string value;
  if (const auto* b = std::get_if<bool>(&o.value)) {
    put_int_field(value, kOverrideBool, *b ? 1 : 0);
  } else if (const auto* i = std::get_if<int64_t>(&o.value)) {
    put_int_field(value, kOverrideInt, *i);
  } else if (const auto* d = std::get_if<double>(&o.value)) {
    uint64_t bits;
    std::memcpy(&bits, d, sizeof bits);
    put_varint(value, (static_cast<uint64_t>(kOverrideDouble) << 3) | 1);  // wire type 1: 64-bit
    for (int i = 0; i < 8; ++i) value.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  } else {
    put_bytes_field(value, kOverrideString, std::get<std::string>(o.value));
  }
  std::string entry;
  put_bytes_field(entry, kMapKey, o.name);
  put_bytes_field(entry, kMapValue, value);
  return entry;
}

}  // namespace

std::string encode_compile_options(int num_replicas, int num_partitions, bool portable,
                                   const std::vector<OptionOverride>& overrides) {
  std::string build;
  put_int_field(build, kBuildDeviceOrdinal, -1);
  put_int_field(build, kBuildNumReplicas, num_replicas);
  put_int_field(build, kBuildNumPartitions, num_partitions);
  std::string options;
  put_bytes_field(options, kOptionsExecutableBuildOptions, build);
  if (portable) put_int_field(options, kOptionsCompilePortableExecutable, 1);
  for (const OptionOverride& o : overrides)
    put_bytes_field(options, kOptionsEnvOptionOverrides, encode_override(o));
  return options;
}

std::string encode_replicated_options(const std::vector<int64_t>& device_ids) {
  const int n = static_cast<int>(device_ids.size());
  std::string computation;  // one computation (partition), its device per replica
  for (int64_t id : device_ids) put_int_field(computation, kComputationReplicaDeviceIds, id);
  std::string assignment;
  put_int_field(assignment, kAssignmentReplicaCount, n);
  put_int_field(assignment, kAssignmentComputationCount, 1);
  put_bytes_field(assignment, kAssignmentComputationDevices, computation);
  std::string build;
  put_int_field(build, kBuildDeviceOrdinal, -1);
  put_int_field(build, kBuildNumReplicas, n);
  put_int_field(build, kBuildNumPartitions, 1);
  put_bytes_field(build, kBuildDeviceAssignment, assignment);
  std::string options;
  put_bytes_field(options, kOptionsExecutableBuildOptions, build);
  return options;
}

}  // namespace torch_tpu::pjrt
