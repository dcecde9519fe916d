// Host staging for tpu_dist's host-staged transport: tpu tensors are read into host
// buffers kept between collectives, and results go back to the device from them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_tpu::distributed {

// Host staging buffers kept between collectives. A fresh host buffer is paid for in page
// faults at every call: on XLA:CPU, reading 64 MiB back into a fresh buffer took 156 ms,
// into one already touched 8 ms, against 220 ms for gloo's all_reduce of it. Buffers of
// equal byte size are interchangeable; at most kMaxBytes are kept (DDP's buckets, FSDP's
// flat parameters: the same few sizes at every step).
class StagingPool {
 public:
  static constexpr int64_t kMaxBytes = int64_t{1} << 30;

  // A flat CPU tensor of `numel` elements of `dtype`, contents unspecified.
  at::Tensor take(int64_t numel, c10::ScalarType dtype);
  // Returns a tensor take() gave; nothing may use it afterwards.
  void give(const at::Tensor& t);

 private:
  std::mutex mu_;
  std::unordered_multimap<int64_t, c10::Storage> free_;  // by size in bytes
  int64_t held_ = 0;
};
using Pool = std::shared_ptr<StagingPool>;

// The device tensor `t` on the host: with a pool, in one of its buffers.
at::Tensor to_host(const at::Tensor& t, StagingPool* pool = nullptr);
// Any number of tensors, joined flat, in one device->host transfer.
at::Tensor to_host_flat(const std::vector<at::Tensor>& ts, StagingPool* pool = nullptr);

// Writes consecutive pieces of `src`, a flat buffer of `pool`, into `dsts`; `src` goes
// back to the pool once nothing reads it (see the .cpp for how results stay in it).
void deliver_staged(const at::Tensor& src, const std::vector<at::Tensor>& dsts, const Pool& pool);

}  // namespace torch_tpu::distributed
