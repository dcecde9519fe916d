#include "aten/generator.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "aten/device.h"

namespace torch_tpu::aten {

TpuGenerator::TpuGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGenerator::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom());
  return seed_;
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void TpuGenerator::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK_TYPE(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.device().is_cpu() &&
                       state.numel() == 16,
                   "RNG state must be a torch.ByteTensor of 16 bytes on the CPU");
  const auto* bytes = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, bytes, 8);
  std::memcpy(&offset_, bytes + 8, 8);
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* copy = new TpuGenerator(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

namespace {
std::mutex generators_mutex;
std::deque<at::Generator> generators;  // a deque: references stay valid as it grows
std::optional<uint64_t> pending_seed;  // from manual_seed_all before a generator existed
}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  std::lock_guard<std::mutex> lock(generators_mutex);
  while (static_cast<c10::DeviceIndex>(generators.size()) <= device) {
    generators.push_back(
        at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(generators.size())));
    if (pending_seed) generators.back().set_current_seed(*pending_seed);
  }
  return generators[device];
}

void manual_seed_all(uint64_t seed) {
  std::lock_guard<std::mutex> lock(generators_mutex);
  pending_seed = seed;
  for (at::Generator& g : generators) g.set_current_seed(seed);
}

}  // namespace torch_tpu::aten
