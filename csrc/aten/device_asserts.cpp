#include "aten/device_asserts.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/op_call.h"

namespace torch_tpu::aten {

namespace {

// Each device keeps one int64 0-d tensor: 0 while every assert held, else the code of the
// first one that failed (a message's code is its index in `messages` plus one). Each
// assert updates it in place with one small program (the code a runtime scalar, so one
// program serves every message), run or recorded like any other op.

struct AssertState {
  std::mutex mutex;
  std::unordered_map<std::string, int64_t> codes;
  std::vector<std::string> messages;
  std::unordered_map<c10::DeviceIndex, at::Tensor> failed;  // per device
  std::atomic<bool> unchecked{false};  // an assert ran since the last check
};

AssertState& state() {
  static auto* s = new AssertState;  // never destroyed: tensors outlive exit() otherwise
  return *s;
}

int64_t code_of(AssertState& s, const std::string& message) {
  auto [it, added] = s.codes.try_emplace(message, 0);
  if (added) {
    s.messages.push_back(message);
    it->second = static_cast<int64_t>(s.messages.size());
  }
  return it->second;
}

// CPU's checks on the condition's metadata (at::native::is_nonzero), done on the host.
void check_condition(const at::Tensor& self) {
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
}

void record(const at::Tensor& self, const std::string& message) {
  check_condition(self);
  AssertState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  int64_t code = code_of(s, message);
  c10::DeviceIndex device = self.get_device();
  auto it = s.failed.find(device);
  if (it == s.failed.end())
    it = s.failed.emplace(device, at::zeros({}, self.options().dtype(at::kLong))).first;
  OpCall call("_assert_async");
  call.input(it->second).input(self).scalar(code, at::kLong);
  call.write(
      [](hlo::Builder& b, const std::vector<hlo::Value>& in) {
        // in: the state, the condition, the code. A condition of any dtype fails when 0.
        const hlo::Value& state = in[0];
        hlo::Value cond = b.reshape(in[1], {});
        hlo::Value zero = b.constant(0, cond.type.dtype);
        hlo::Value failed = b.compare(hlo::Compare::EQ, cond, zero);
        hlo::Value first = b.compare(hlo::Compare::EQ, state, b.constant_int(0, hlo::DType::S64));
        return std::vector<hlo::Value>{
            b.select(b.binary(hlo::Binary::And, failed, first), in[2], state)};
      },
      {it->second});
  s.unchecked = true;
}

void assert_async(const at::Tensor& self) {
  record(self, "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_msg(const at::Tensor& self, c10::string_view message) {
  record(self, message.empty() ? std::string("Assertion is failed") : std::string(message));
}

at::Tensor functional_assert_async_msg(const at::Tensor& self, c10::string_view message,
                                       const at::Tensor& dep_token) {
  assert_async_msg(self, message);
  return dep_token.clone();
}

at::Tensor make_dep_token(std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                          std::optional<at::Device> device, std::optional<bool> pin_memory,
                          std::optional<at::MemoryFormat> memory_format) {
  return at::empty({}, at::TensorOptions()
                           .dtype(dtype)
                           .layout(layout)
                           .device(device)
                           .pinned_memory(pin_memory)
                           .memory_format(memory_format));
}

}  // namespace

void check_device_asserts() {
  AssertState& s = state();
  if (!s.unchecked.exchange(false)) return;
  std::vector<std::pair<c10::DeviceIndex, at::Tensor>> pending;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    pending.assign(s.failed.begin(), s.failed.end());
  }
  for (auto& [device, failed] : pending) {
    int64_t code = failed.item<int64_t>();  // a host read: checks nothing (unchecked is false)
    if (code == 0) continue;
    std::string message;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      message = s.messages.at(static_cast<size_t>(code - 1));
      s.failed.erase(device);  // the next assert on this device starts clean
    }
    TORCH_CHECK(false, message);
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", assert_async);
  m.impl("_assert_async.msg", assert_async_msg);
  m.impl("_functional_assert_async.msg", functional_assert_async_msg);
  m.impl("_make_dep_token", make_dep_token);
}

}  // namespace torch_tpu::aten
